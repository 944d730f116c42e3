"""OWL-QN: L-BFGS for ``f(x) + l1 * ||x * mask||_1`` with smooth ``f`` (Andrew & Gao, ICML 2007).

The driver side of L1-regularised full-batch solvers: ``f`` and its gradient come from the
workers through the parameter server; this module only does vector algebra on the driver.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

__all__ = ["owlqn"]


def _pseudo_gradient(x, g, l1):
    """The minimum-norm subgradient of ``f + l1 |x|`` (``l1`` per coordinate)."""
    pg = np.where(x > 0, g + l1, np.where(x < 0, g - l1, 0.0))
    at_zero = x == 0
    pg = np.where(at_zero & (g + l1 < 0), g + l1, pg)
    return np.where(at_zero & (g - l1 > 0), g - l1, pg)


def _two_loop(q, s_list, y_list):
    """L-BFGS two-loop recursion: an approximation of ``H q`` (Nocedal & Wright, Alg. 7.4)."""
    q = q.copy()
    alphas = []
    for s, y in zip(reversed(s_list), reversed(y_list)):
        a = s @ q / (y @ s)
        alphas.append(a)
        q -= a * y
    if s_list:
        q *= (s_list[-1] @ y_list[-1]) / (y_list[-1] @ y_list[-1])
    for (s, y), a in zip(zip(s_list, y_list), reversed(alphas)):
        q += s * (a - y @ q / (y @ s))
    return q


def owlqn(fun: Callable, x0: np.ndarray, l1: float, mask: np.ndarray | None = None,
          max_iter: int = 500, tol: float = 1e-8, memory: int = 10) -> tuple[np.ndarray, int]:
    """Minimise ``fun(x)[0] + l1 * ||x[mask]||_1``.

    Parameters
    ----------
    fun : callable
        ``x -> (f, grad)`` of the smooth part; ``x`` and ``grad`` float64 of ``x0``'s shape.
    x0 : ndarray (n,)
    l1 : float
        L1 strength (>= 0).
    mask : bool ndarray (n,), optional
        Coordinates that are penalised (default all; e.g. not the intercept).
    max_iter : int
    tol : float
        Stop when the pseudo-gradient's largest entry is below ``tol``, or the objective's
        relative decrease below ``tol * 1e-4``.
    memory : int
        Correction pairs kept.

    Returns
    -------
    x : ndarray (n,)
    n_iter : int
    converged : bool
        False when ``max_iter`` iterations ran without meeting ``tol``.

    References
    ----------
    Andrew & Gao, "Scalable Training of L1-Regularized Log-Linear Models", ICML 2007.
    """
    lam = np.full(x0.shape, float(l1)) if mask is None else np.where(mask, float(l1), 0.0)
    x = x0.astype(np.float64).copy()
    f, g = fun(x)
    F = f + (lam * np.abs(x)).sum()
    s_list: list = []
    y_list: list = []
    it = 0
    for it in range(1, max_iter + 1):
        pg = _pseudo_gradient(x, g, lam)
        if np.abs(pg).max() < tol:
            break
        d = -_two_loop(pg, s_list, y_list)
        d = np.where(d * pg < 0, d, 0.0)  # keep only descent directions of the subgradient
        orthant = np.where(x != 0, np.sign(x), -np.sign(pg))
        t = 1.0 if s_list else 1.0 / max(1.0, np.abs(pg).sum())
        for _ in range(60):  # backtracking, projected onto the orthant
            x_new = x + t * d
            x_new = np.where(np.sign(x_new) == orthant, x_new, 0.0)
            f_new, g_new = fun(x_new)
            F_new = f_new + (lam * np.abs(x_new)).sum()
            if F_new <= F + 1e-4 * (pg @ (x_new - x)):
                break
            t *= 0.5
        else:
            break  # no decrease possible at machine precision
        s, y = x_new - x, g_new - g
        if s @ y > 1e-12:
            s_list.append(s)
            y_list.append(y)
            if len(s_list) > memory:
                s_list.pop(0)
                y_list.pop(0)
        done = F - F_new <= tol * 1e-4 * max(1.0, abs(F_new))
        x, f, g, F = x_new, f_new, g_new, F_new
        if done:
            break
    else:
        return x, it, False
    return x, it, True
