"""``plot_history``: an estimator's ``history_`` as matplotlib figures (matplotlib optional)."""

from __future__ import annotations

__all__ = ["plot_history"]


def plot_history(estimator, keys: tuple[str, ...] = ("loss", "bytes"), ax=None) -> list:
    """Plot the per-epoch ``history_`` of a fitted estimator.

    Parameters
    ----------
    estimator : fitted dask_ps estimator
        Anything with ``history_``: a list of dicts, one per epoch (or L-BFGS evaluation),
        holding numbers under ``keys``.
    keys : sequence of str, default ("loss", "bytes")
        Entries to plot, one axis each; those missing from the history are skipped.
    ax : matplotlib Axes or sequence of Axes, optional
        Where to draw (one per plotted key). Default: a new figure.

    Returns
    -------
    list of matplotlib.axes.Axes
        One per plotted key, x is the epoch (or evaluation) number.

    Raises
    ------
    ImportError
        When matplotlib is not installed (``pip install matplotlib``).
    ValueError
        When the estimator is not fitted, has an empty history, or none of ``keys``.
    """
    history = getattr(estimator, "history_", None)
    if history is None:
        raise ValueError(f"{type(estimator).__name__} is not fitted: it has no history_")
    if not history:
        raise ValueError(f"{type(estimator).__name__}.history_ is empty")
    present = [k for k in keys if any(k in h for h in history)]
    if not present:
        raise ValueError(f"history_ has none of {list(keys)}; it has "
                         f"{sorted(set().union(*history))}")
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("plot_history needs matplotlib: pip install matplotlib") from None
    if ax is None:
        _, axes = plt.subplots(1, len(present), figsize=(4.5 * len(present), 3.2),
                               squeeze=False)
        axes = list(axes[0])
    else:
        axes = list(ax) if hasattr(ax, "__len__") else [ax]
        if len(axes) != len(present):
            raise ValueError(f"ax holds {len(axes)} axes for the {len(present)} keys "
                             f"{present}")
    xname = next((k for k in ("epoch", "evaluation", "iteration") if k in history[0]), None)
    for a, key in zip(axes, present):
        pts = [(h.get(xname, i + 1), h[key]) for i, h in enumerate(history) if key in h]
        a.plot([p[0] for p in pts], [p[1] for p in pts], marker="o")
        a.set_xlabel(xname or "step")
        a.set_ylabel(key if key != "bytes" else "bytes moved")
        a.set_title(f"{type(estimator).__name__}: {key}")
        a.grid(True, alpha=0.3)
    return axes
