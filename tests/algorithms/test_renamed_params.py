"""The factor dimension is ``n_components`` (scikit-learn's name) in MatrixFactorization
(was ``rank``) and FactorizationMachineClassifier (was ``k``). The old keywords still work
for now, as scikit-learn deprecates a parameter: a fit warns (FutureWarning) and uses them,
both names given differently are refused; models and checkpoints written under the old
names load and resume; the command's old options are aliases of the new ones."""

import hashlib
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from dask_ps import FactorizationMachineClassifier, MatrixFactorization
from dask_ps.saving import load_estimator, save_estimator

KW = dict(client="local", checkpoint=None, random_state=0, max_iter=2)


def _ratings():
    rng = np.random.default_rng(0)
    return np.column_stack([rng.integers(0, 20, 300), rng.integers(0, 15, 300),
                            rng.integers(1, 6, 300)]).astype(float)


def _clicks():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 6))
    return X, (X[:, 0] * X[:, 1] > 0).astype(int)


CASES = {  # estimator class, old name, data, predictions
    "mf": (MatrixFactorization, "rank", lambda: (_ratings(),),
           lambda est, data: est.predict(data[0][:, :2])),
    "fm": (FactorizationMachineClassifier, "k", _clicks,
           lambda est, data: est.predict_proba(data[0])),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_new_name_sets_the_factors(name):
    cls, old, data, _ = CASES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # the new name never warns
        est = cls(n_components=3, **KW).fit(*data())
    factors = est.user_factors_ if name == "mf" else est.factors_
    assert factors.shape[1] == 3
    assert est.get_params()[old] == "deprecated"


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_old_name_warns_and_gives_the_same_model(name):
    cls, old, data, predict = CASES[name]
    X = data()
    new = cls(n_components=3, **KW).fit(*X)
    with pytest.warns(FutureWarning, match=rf"^`{old}` was renamed `n_components` in 0\.1 "
                                           rf"and will be removed in 0\.3") as record:
        was = cls(**{old: 3}, **KW).fit(*X)
    assert Path(record[0].filename).resolve() == Path(__file__).resolve()  # the caller's line
    np.testing.assert_array_equal(predict(was, X), predict(new, X))
    # the same value under both names: the old one still warns, and is taken
    with pytest.warns(FutureWarning, match=f"`{old}` was renamed"):
        same = cls(**{old: 3}, n_components=3, **KW).fit(*X)
    np.testing.assert_array_equal(predict(same, X), predict(new, X))


@pytest.mark.parametrize("name", sorted(CASES))
def test_both_names_given_differently_are_refused(name):
    cls, old, data, _ = CASES[name]
    est = cls(**{old: 3}, n_components=4, **KW)
    with pytest.raises(ValueError, match=rf"{old}=3 and n_components=4 were both given; "
                                         rf"{old} is the deprecated name of n_components"):
        est.fit(*data())
    assert not hasattr(est, "n_iter_")


def test_the_old_names_keep_their_constraints():
    with pytest.raises(ValueError, match="'rank' parameter of MatrixFactorization"):
        MatrixFactorization(rank=0, **KW).fit(_ratings())
    with pytest.raises(ValueError, match="'k' parameter of FactorizationMachineClassifier"):
        FactorizationMachineClassifier(k=0, **KW).fit(*_clicks())


def _with_old_name(src: str, dst: str, old: str) -> dict:
    """A copy of model file ``src`` as a version before the renaming wrote it: its
    ``n_components`` stored as ``old``, and no parameter of the new name."""
    arrays = dict(np.load(src, allow_pickle=False))
    meta = json.loads(str(arrays["__meta__"][()]))
    params = meta["params"]
    params[old] = params.pop("n_components")
    np.savez(dst, **{**arrays, "__meta__": np.array(json.dumps(meta))})
    return params


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_model_file_of_the_old_name_loads_and_continues(name, tmp_path):
    cls, old, data, predict = CASES[name]
    X = data()
    est = cls(n_components=3, **KW).fit(*X)
    save_estimator(est, str(tmp_path / "new.npz"))
    params = _with_old_name(str(tmp_path / "new.npz"), str(tmp_path / "old.npz"), old)
    assert params[old] == 3 and "n_components" not in params
    loaded, _ = load_estimator(str(tmp_path / "old.npz"))
    assert loaded.get_params()["n_components"] == 3
    assert loaded.get_params()[old] == "deprecated"
    np.testing.assert_array_equal(predict(loaded, X), predict(est, X))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # mapped: nothing to warn about
        if name == "fm":  # continues from the loaded factors
            loaded.partial_fit(*X)
            assert len(loaded.history_) == 3 and loaded.factors_.shape[1] == 3
        else:
            assert loaded.fit(*X).user_factors_.shape[1] == 3
    # both names stored, differently: the file is refused, naming them
    meta_path = tmp_path / "both.npz"
    arrays = dict(np.load(tmp_path / "old.npz", allow_pickle=False))
    meta = json.loads(str(arrays["__meta__"][()]))
    meta["params"]["n_components"] = 5
    np.savez(meta_path, **{**arrays, "__meta__": np.array(json.dumps(meta))})
    with pytest.raises(ValueError, match=rf"params: {old}=3 \(the deprecated name of "
                                         rf"n_components\) and n_components=5 differ"):
        load_estimator(str(meta_path))


def _fit_key_renamed(url: Path) -> None:
    """Every version of checkpoint ``url`` as a version before the renaming wrote it: the
    fit identity records FM's factors as ``k`` (the manifest's checksum of the edited
    metadata recomputed)."""
    for version in sorted(url.iterdir()):
        meta = json.loads((version / "zarr.json").read_text())
        fit = meta["attributes"]["extra"]["fit"]
        fit["k"] = fit.pop("n_components")
        text = json.dumps(meta)
        (version / "zarr.json").write_text(text)
        manifest = json.loads((version / "manifest.json").read_text())
        manifest["metadata"]["zarr.json"] = hashlib.sha256(text.encode()).hexdigest()
        (version / "manifest.json").write_text(json.dumps(manifest))


def test_a_checkpoint_of_the_old_name_resumes_and_is_checked_under_the_new(tmp_path):
    X, y = _clicks()
    url = tmp_path / "fm"
    kw = dict(client="local", random_state=0, checkpoint=str(url))
    first = FactorizationMachineClassifier(n_components=3, max_iter=2, **kw).fit(X, y)
    _fit_key_renamed(url)
    # another factor dimension: refused, the old key read as n_components
    with pytest.raises(ValueError, match=r"n_components '3' \(this fit's: '2'\)"):
        FactorizationMachineClassifier(n_components=2, max_iter=3, resume=True,
                                       **kw).fit(X, y)
    resumed = FactorizationMachineClassifier(n_components=3, max_iter=3, resume=True,
                                             **kw).fit(X, y)
    assert [h["loss"] for h in resumed.history_[:2]] == [h["loss"] for h in first.history_]
    assert len(resumed.history_) == 3 and resumed.factors_.shape == (6, 3)


@pytest.mark.parametrize("algorithm, old", [("mf", "--rank"), ("fm", "--k")])
def test_the_commands_old_option_is_an_alias_of_the_new(algorithm, old, capsys):
    from dask_ps.cli import _parser

    parser, parsers = _parser()
    for flag in ("--n-components", old):
        args = parser.parse_args(["train", algorithm, "--train", "x", flag, "4"])
        assert args.n_components == 4 and not hasattr(args, old.lstrip("-"))
    with pytest.raises(SystemExit):
        parsers[algorithm].parse_args(["--help"])
    out = capsys.readouterr().out
    assert f"--n-components N_COMPONENTS, {old} N_COMPONENTS" in " ".join(out.split())
