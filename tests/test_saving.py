"""Model files (dask_ps.saving) that are damaged, hand-edited or crafted: refused with a
DataError naming the file and the field, never running anything the file names."""

import io
import json
import zipfile

import numpy as np
import pytest

from dask_ps import LogisticRegression
from dask_ps.cli import main
from dask_ps.exceptions import DataError
from dask_ps.saving import load_estimator, save_estimator


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 5))
    y = (X[:, 0] > 0).astype(int)
    est = LogisticRegression(client="local", max_iter=2, progress=False).fit(X, y)
    return est, X


def _members(path) -> tuple[dict, dict]:
    arrays = dict(np.load(path, allow_pickle=False))
    return arrays, json.loads(str(arrays["__meta__"][()]))


def _rewrite(path, arrays, meta) -> str:
    np.savez(path, **{**arrays, "__meta__": np.array(json.dumps(meta))})
    return str(path)


def test_a_file_naming_a_function_runs_nothing(fitted, tmp_path):
    """Security (trial 8 F10): a class "dask_ps.saving:os.system" passed the "dask_ps."
    prefix check and its qualname was walked by getattr, so loading ran a shell command."""
    est, _ = fitted
    save_estimator(est, str(tmp_path / "m.npz"))
    arrays, meta = _members(tmp_path / "m.npz")
    marker = tmp_path / "PWNED"
    for name in ("dask_ps.saving:os.system", "dask_ps.saving:_records",
                 "dask_ps.algorithms.logistic:TrainState.__new__", "os:system"):
        meta["attributes"]["zz_"] = {
            "kind": "namedtuple", "class": name,
            "fields": {"command": {"kind": "value", "value": f"touch {marker}"}}}
        evil = _rewrite(tmp_path / "evil.npz", arrays, meta)
        with pytest.raises(DataError, match=f"^{evil}: attribute zz_: refusing to create "
                                            f"'{name}', not a class of fitted state"):
            load_estimator(evil)
        assert not marker.exists()
    meta["attributes"]["zz_"]["class"] = "dask_ps.algorithms.logistic:TrainState"
    with pytest.raises(DataError, match=r"attribute zz_: fields \['command'\] stored, a "
                                        r"TrainState has \['solver', 'W', 'state'\]"):
        load_estimator(_rewrite(tmp_path / "evil.npz", arrays, meta))


def test_only_registered_named_tuples_are_saved(fitted, tmp_path):
    """What saving writes is what loading creates: a named tuple outside _records is refused
    when saving, not written as a file that cannot be loaded."""
    from typing import NamedTuple

    from dask_ps.saving import _records

    class Other(NamedTuple):
        x: int

    est, X = fitted
    assert type(est._ps_state_) in _records().values()
    odd = LogisticRegression(client="local")
    odd.thing_ = Other(1)
    with pytest.raises(TypeError, match=r"^attribute thing_: a \S*test_saving:"
                                        r"\S*Other cannot be saved"):
        save_estimator(odd, str(tmp_path / "o.npz"))
    assert not (tmp_path / "o.npz").exists()
    save_estimator(est, str(tmp_path / "m.npz"))
    again, _ = load_estimator(str(tmp_path / "m.npz"))
    assert type(again._ps_state_) is type(est._ps_state_)
    np.testing.assert_array_equal(again.predict_proba(X), est.predict_proba(X))


def test_a_flipped_byte_is_a_damaged_file(fitted, tmp_path, capsys):
    """Trial 8 F11: a bad CRC in an array member raised a bare BadZipFile (no path) when the
    member was read lazily; dask-ps export exited 1 with a traceback."""
    est, _ = fitted
    path = tmp_path / "m.npz"
    save_estimator(est, str(path))
    raw = bytearray(path.read_bytes())
    info = zipfile.ZipFile(io.BytesIO(bytes(raw))).getinfo("a/coef_.npy")
    raw[info.header_offset + 30 + len(info.filename) + len(info.extra) + 130] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(DataError, match=f"^{path}: damaged model file \\(bad CRC of "
                                        f"a/coef_.npy\\)$"):
        load_estimator(str(path))
    assert main(["export", str(path), str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.startswith(f"dask-ps: error: {path}: damaged model file")
    assert not (tmp_path / "out").exists()


def _edit(key, value):
    def edit(arrays, meta):
        meta[key] = value
    return edit


def _drop(key):
    def edit(arrays, meta):
        del meta[key]
    return edit


def _attr(name, spec):
    def edit(arrays, meta):
        meta["attributes"][name] = spec
    return edit


def _array(key, value):
    def edit(arrays, meta):
        if value is None:
            del arrays[key]
        else:
            arrays[key] = value
    return edit


@pytest.mark.parametrize("edit, message", [
    (_edit("format_version", "9"), "format_version '9' in its metadata is not a whole number"),
    (_drop("estimator"), "field 'estimator' of its metadata is missing, not a str"),
    (_edit("params", [1]), r"field 'params' of its metadata is \[1\], not a dict"),
    (_edit("estimator", "MatrixFactorization"),
     "params: MatrixFactorization takes no parameter C, .*another dask_ps version"),
    (lambda a, m: m["params"].update(frob=1), "params: LogisticRegression takes no "
                                              "parameter frob"),
    (lambda a, m: m["params"].update(C="abc"), "params: The 'C' parameter of "
                                               "LogisticRegression must be"),
    (_attr("coef_", {}), "attribute coef_: no 'kind' in its description"),
    (_attr("coef_", {"kind": "value"}), "attribute coef_: no 'value' in its description"),
    (_attr("coef_", {"kind": "weird"}), "attribute coef_: unknown kind 'weird'"),
    (_attr("__class__", {"kind": "value", "value": 1}), "attributes: '__class__' is not"),
    (_attr("_repr_html_", {"kind": "value", "value": 1}), "attributes: '_repr_html_' cannot be "
                                                            "set"),
    (_array("a/_ps_state_/W", None),
     "attribute _ps_state_.W: array 'a/_ps_state_/W' is not in the file"),
    (_array("a/coef_", np.ones(3)), r"attribute coef_: array 'a/coef_' is <f8 of shape \[3\], "
                                    r"the metadata says <f8 of shape \[1, 5\]"),
    (_array("a/classes_", np.array([0.0, 1.0])), "attribute classes_: array 'a/classes_' is "
                                                 "<f8"),
    # values that pass the CRC (edited, checksum recomputed): refused on loading, not a NaN
    # prediction or an error of scikit-learn's at predict
    (_array("a/coef_", np.full((1, 5), np.nan)),
     r"attribute coef_: array 'a/coef_' holds 5 NaN or infinite value\(s\) of 5"),
    (_array("a/intercept_", np.array([np.inf])),
     r"attribute intercept_: array 'a/intercept_' holds 1 NaN"),
    (_array("a/_ps_state_/state", np.full((6, 2), -np.inf)),
     r"attribute _ps_state_.state: array 'a/_ps_state_/state' holds 12 NaN"),
    (_array("a/classes_", np.array([1, 1])), r"attribute classes_: \[1, 1\] are not distinct"),
    (_attr("n_features_in_", {"kind": "value", "value": "abc"}),
     r"attribute n_features_in_: 'abc' is not a non-negative whole number"),
    (_attr("n_features_in_", {"kind": "value", "value": -1}),
     r"attribute n_features_in_: '-1' is not a non-negative whole number"),
    (_attr("n_features_in_", {"kind": "value", "value": True}),
     r"attribute n_features_in_: 'True' is not a non-negative"),
    (_array("a/n_iter_", np.array([-3])), r"attribute n_iter_: '\[-3\]' is not a non-negative"),
    (_edit("extra", {"data": {"format": "parquetx"}}),
     r"extra.data.format 'parquetx' is not a format LogisticRegression is trained on "
     r"\(libsvm, csv, parquet\)"),
    (_edit("extra", {"data": {"format": "ratings"}}), r"extra.data.format 'ratings' is not"),
    (_edit("extra", {"data": "libsvm"}), r"extra.data is a str, not a JSON object"),
])
def test_edited_metadata_is_named(fitted, tmp_path, edit, message):
    """Trial 8 F12: these escaped as TypeError, KeyError or (a coef_ of the wrong shape) an
    IndexError at predict, without the path."""
    est, _ = fitted
    save_estimator(est, str(tmp_path / "m.npz"))
    arrays, meta = _members(tmp_path / "m.npz")
    edit(arrays, meta)
    path = _rewrite(tmp_path / "e.npz", arrays, meta)
    with pytest.raises(DataError, match=f"^{path}: {message}"):
        load_estimator(path)


def test_edited_values_are_refused_by_evaluate_with_the_field(fitted, tmp_path, capsys):
    """Tester's report: coef_ all NaN, classes_ [1, 1] and an unknown data format in a file
    whose CRCs were recomputed made ``dask-ps evaluate`` exit 1 with scikit-learn's
    traceback ("Input contains NaN"), "needs at least two labels" or ``KeyError:
    'encoder'``: now exit 2 with a DataError naming the file and the field."""
    est, X = fitted
    test = tmp_path / "t.svm"
    test.write_text("".join(f"{int(x[0] > 0)} " + " ".join(f"{j + 1}:{v:.3f}" for j, v in
                                                           enumerate(x)) + "\n" for x in X))
    save_estimator(est, str(tmp_path / "m.npz"),
                   extra={"algorithm": "lr", "data": {"format": "libsvm", "n_features": 5}})
    assert main(["evaluate", str(tmp_path / "m.npz"), "--test", str(test)]) == 0
    for edit, field in [(_array("a/coef_", np.full((1, 5), np.nan)), "attribute coef_"),
                        (_array("a/classes_", np.array([1, 1])), "attribute classes_"),
                        (lambda a, m: m["extra"]["data"].update(format="parquetx"),
                         "extra.data.format")]:
        arrays, meta = _members(tmp_path / "m.npz")
        edit(arrays, meta)
        path = _rewrite(tmp_path / "e.npz", arrays, meta)
        capsys.readouterr()
        assert main(["evaluate", path, "--test", str(test)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"dask-ps: error: {path}: {field}") and "Traceback" not in err


def test_saving_refuses_data_metadata_loading_would_refuse(fitted, tmp_path):
    est, _ = fitted
    with pytest.raises(ValueError, match="extra: extra.data.format 'csvx' is not a format"):
        save_estimator(est, str(tmp_path / "m.npz"), extra={"data": {"format": "csvx"}})
    assert not (tmp_path / "m.npz").exists()


def test_gbdt_thresholds_may_be_non_finite_but_its_leaf_values_may_not(tmp_path):
    """A GBDT's node thresholds are NaN at leaves (and +inf for a split of the last bin):
    they load; a NaN leaf value, base score or gain is refused naming the field."""
    from dask_ps import GBDTClassifier

    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 3))
    X[rng.random(300) < 0.2, 1] = np.nan  # missing values: routed by default_left
    y = (np.nan_to_num(X[:, 1]) + X[:, 0] > 0).astype(int)
    est = GBDTClassifier(client="local", n_estimators=3, min_samples_leaf=5).fit(X, y)
    assert not np.isfinite(est.booster_.threshold).all()
    save_estimator(est, str(tmp_path / "g.npz"))
    again, _ = load_estimator(str(tmp_path / "g.npz"))
    np.testing.assert_array_equal(again.predict_proba(X), est.predict_proba(X))
    for field in ("value", "base_score", "gain"):
        arrays, meta = _members(tmp_path / "g.npz")
        key = f"a/booster_/{field}"
        arrays[key] = arrays[key].copy()
        arrays[key][-1] = np.nan
        path = _rewrite(tmp_path / "e.npz", arrays, meta)
        with pytest.raises(DataError, match=rf"^{path}: attribute booster_.{field}: array "
                                            rf"'{key}' holds 1 NaN"):
            load_estimator(path)


@pytest.fixture(scope="module")
def gbdt_file(tmp_path_factory):
    from dask_ps import GBDTClassifier

    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 4))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    est = GBDTClassifier(client="local", n_estimators=4, min_samples_leaf=5).fit(X, y)
    path = tmp_path_factory.mktemp("gbdt") / "g.npz"
    save_estimator(est, str(path))
    return path, X


@pytest.mark.parametrize("field, edit, message", [
    ("left", lambda a: np.where(a > 0, np.arange(a.size, dtype=a.dtype), a),  # a cycle
     r"booster_: node 0 \(of tree 0\) has children outside its tree, not after it"),
    ("right", lambda a: np.where(a > 0, 10**6, a).astype(a.dtype),
     r"booster_: node 0 \(of tree 0\) has children outside its tree"),
    ("left", lambda a: np.where(a > 0, -5, a).astype(a.dtype),
     r"booster_: node 0 \(of tree 0\) has children outside its tree, not after it, or only "
     r"one: left -5, right"),
    ("feature", lambda a: np.where(a >= 0, 1000, a).astype(a.dtype),
     r"booster_: node 0 \(of tree 0\) has a feature outside \[0, 4\): .* feature 1000"),
    ("tree_start", lambda a: a[::-1].copy(), r"booster_: tree_start \[\d+, .* does not rise"),
    ("tree_class", lambda a: a + 3, r"booster_: tree_class \[3, 3, 3, 3\] is not one output "
                                    r"in \[0, 1\)"),
])
def test_gbdt_trees_prediction_cannot_walk_are_refused_when_loading(gbdt_file, tmp_path, field,
                                                                    edit, message):
    """An edited model file (checksums recomputed) whose trees point outside themselves or
    back at a parent, or read a feature beyond the model's: predict read other memory
    (segmentation fault), walked forever in a nogil kernel (a hang) or answered from the
    wrong feature; now loading refuses it naming the node (and the unedited file loads)."""
    path, X = gbdt_file
    arrays, meta = _members(path)
    key = f"a/booster_/{field}"
    arrays[key] = edit(arrays[key])
    bad = _rewrite(tmp_path / "e.npz", arrays, meta)
    with pytest.raises(DataError, match=rf"^{bad}: attributes: {message}"):
        load_estimator(bad)
    est, _ = load_estimator(str(path))
    assert est.predict_proba(X).shape == (300, 2)


def test_gbdt_outputs_and_rounds_must_agree_with_the_trees(gbdt_file, tmp_path):
    """A base score of 3 outputs for 2 classes (its metadata edited too), or
    ``n_estimators_`` other than the rounds of trees, is refused when loading."""
    path, _ = gbdt_file
    arrays, meta = _members(path)
    arrays["a/booster_/base_score"] = np.zeros(3)
    meta["attributes"]["booster_"]["fields"]["base_score"]["shape"] = [3]
    bad = _rewrite(tmp_path / "e.npz", arrays, meta)
    with pytest.raises(DataError, match=rf"^{bad}: attributes: booster_: base_score has shape "
                                        rf"\(3,\), the model 1 output"):
        load_estimator(bad)
    arrays, meta = _members(path)
    meta["attributes"]["n_estimators_"]["value"] = 9
    bad = _rewrite(tmp_path / "e.npz", arrays, meta)
    with pytest.raises(DataError, match=rf"^{bad}: attributes: n_estimators_ is 9, booster_ "
                                        rf"holds 4 rounds"):
        load_estimator(bad)


def test_lda_topics_of_another_width_or_not_positive_are_refused_when_loading(tmp_path):
    """An edited LDA file whose ``components_`` is narrower than ``n_features_in_`` (or the
    count edited): transform read past the topics' rows (infinite or garbage θ, a NaN
    perplexity); topics that are not positive gave negative "probabilities". Now loading
    refuses them naming the attribute."""
    import scipy.sparse as sp

    from dask_ps import LatentDirichletAllocation

    rng = np.random.default_rng(3)
    X = sp.csr_matrix(rng.poisson(0.5, size=(40, 12)))
    est = LatentDirichletAllocation(n_components=3, max_iter=3, random_state=0,
                                    client="local", progress=False).fit(X)
    save_estimator(est, str(tmp_path / "l.npz"))
    np.testing.assert_array_equal(load_estimator(str(tmp_path / "l.npz"))[0].transform(X),
                                  est.transform(X))
    arrays, meta = _members(tmp_path / "l.npz")
    arrays["a/components_"] = arrays["a/components_"][:, :5].copy()
    meta["attributes"]["components_"]["shape"] = [3, 5]
    bad = _rewrite(tmp_path / "e.npz", arrays, meta)
    with pytest.raises(DataError, match=rf"^{bad}: attributes: components_ has shape \(3, 5\), "
                                        rf"not \(n_topics, n_features_in_=12\)"):
        load_estimator(bad)
    arrays, meta = _members(tmp_path / "l.npz")
    meta["attributes"]["n_features_in_"]["value"] = 40
    bad = _rewrite(tmp_path / "e.npz", arrays, meta)
    with pytest.raises(DataError, match=r"components_ has shape \(3, 12\), not \(n_topics, "
                                        r"n_features_in_=40\)"):
        load_estimator(bad)
    arrays, meta = _members(tmp_path / "l.npz")
    arrays["a/components_"] = -arrays["a/components_"]
    bad = _rewrite(tmp_path / "e.npz", arrays, meta)
    with pytest.raises(DataError, match=rf"^{bad}: attributes: components_ holds 36 value\(s\) "
                                        rf"that are not positive"):
        load_estimator(bad)


def test_a_damaged_sparse_matrix_is_named(tmp_path):
    """A CSR attribute whose indices point past its columns is refused when loading (not a
    crash or a wrong answer at predict)."""
    import scipy.sparse as sp

    est = LogisticRegression(client="local")  # a keyed model's state, of 3 classes
    est.coef_, est.intercept_ = sp.csr_matrix(np.eye(3)), np.zeros(3)
    est.classes_, est.n_features_in_ = np.arange(3), 3
    save_estimator(est, str(tmp_path / "m.npz"))
    assert (load_estimator(str(tmp_path / "m.npz"))[0].coef_ != est.coef_).nnz == 0
    arrays, meta = _members(tmp_path / "m.npz")
    arrays["a/coef_/indices"] = arrays["a/coef_/indices"] + 5
    path = _rewrite(tmp_path / "e.npz", arrays, meta)
    with pytest.raises(DataError, match=f"^{path}: attribute coef_: csr matrix 'a/coef_' is "
                                        f"damaged"):
        load_estimator(path)
    arrays, meta = _members(tmp_path / "m.npz")
    arrays["a/coef_/data"] = np.array([1.0, np.nan, 1.0])
    path = _rewrite(tmp_path / "e.npz", arrays, meta)
    with pytest.raises(DataError, match=rf"^{path}: attribute coef_: array 'a/coef_/data' "
                                        rf"holds 1 NaN"):
        load_estimator(path)


def test_saving_into_a_missing_folder_or_under_a_file_names_the_path(fitted, tmp_path):
    """A model file in a folder that does not exist, or under a file, said "[Errno 2] No
    such file or directory: '.../m.npz.tmp-<pid>'", naming a temporary file the caller
    never gave; now the path given and its folder, nothing left behind."""
    est, _ = fitted
    missing = tmp_path / "none" / "m.npz"
    with pytest.raises(FileNotFoundError, match=f"^{missing}: the model file cannot be "
                                                f"written in '{tmp_path / 'none'}' \\(No "
                                                f"such file or directory\\)$"):
        save_estimator(est, str(missing))
    (tmp_path / "f").write_text("a file")
    under = tmp_path / "f" / "m.npz"
    with pytest.raises(NotADirectoryError, match=f"^{under}: the model file cannot be "
                                                 f"written in '{tmp_path / 'f'}'"):
        save_estimator(est, str(under))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_a_missing_model_file_is_named(tmp_path):
    """Trial 8 F13: "[Errno 2] No such file or directory" now names it as the model file."""
    missing = str(tmp_path / "none.npz")
    with pytest.raises(FileNotFoundError, match=f"^{missing}: no such model file$"):
        load_estimator(missing)


@pytest.mark.parametrize("url", [False, True])
def test_write_tables_into_a_new_local_folder_given_as_a_path_or_a_file_url(tmp_path, url):
    """A ``file://`` folder is made as a path is (it failed: 'no such file or folder', and
    before the fsspec writes, a folder named 'file:' was made in the working directory)."""
    import pandas as pd

    from dask_ps.saving import write_tables

    out = tmp_path / "new" / "export"
    written = write_tables(f"file://{out}" if url else str(out),
                           {"coef": pd.DataFrame({"a": [1.0]})}, {"n": 1})
    assert sorted(p.name for p in out.iterdir()) == ["coef.parquet", "model.json"]
    assert len(written) == 2 and all(w.startswith("file://") == url for w in written)
    assert pd.read_parquet(out / "coef.parquet")["a"].tolist() == [1.0]


def test_write_tables_replaces_an_earlier_export_only(tmp_path):
    """An export into a folder holding an earlier one replaces it, as PSModel.export does
    (dask-ps export run twice said "out is not empty: it holds coef.csv, model.json"): the
    files its model.json lists, or, for an export written before that list, its model.json
    and the tables of the names written. Beside any other file it is refused, naming it,
    and nothing is touched."""
    import pandas as pd

    from dask_ps.saving import EXPORT_KEY, write_tables

    out = tmp_path / "out"
    write_tables(str(out), {"coef": pd.DataFrame({"a": [1.0]}),
                            "factors": pd.DataFrame({"f0": [2.0]})}, {"n": 1}, "csv")
    meta = json.loads((out / "model.json").read_text())
    assert meta[EXPORT_KEY] == {"files": ["coef.csv", "factors.csv"], "complete": True}
    # again, as Parquet and with one table: the earlier CSV tables go
    written = write_tables(str(out), {"coef": pd.DataFrame({"a": [3.0]})}, {"n": 2})
    assert written == [str(out / "coef.parquet"), str(out / "model.json")]
    assert sorted(p.name for p in out.iterdir()) == ["coef.parquet", "model.json"]
    assert pd.read_parquet(out / "coef.parquet")["a"].tolist() == [3.0]
    assert json.loads((out / "model.json").read_text())["n"] == 2
    # a file of the user's beside it: refused, named, nothing touched
    (out / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match=rf"^{out} holds an earlier export \(coef\.parquet"
                                              rf", model\.json\) and also notes\.txt, which "
                                              rf"are not part of it: move them away"):
        write_tables(str(out), {"coef": pd.DataFrame({"a": [4.0]})}, {"n": 3})
    assert pd.read_parquet(out / "coef.parquet")["a"].tolist() == [3.0]
    # an export written before model.json listed its files: known by its description
    old = tmp_path / "old"
    old.mkdir()
    (old / "coef.csv").write_text("feature,coef\n0,1.0\n")
    (old / "model.json").write_text(json.dumps({"model": "logistic regression",
                                                "estimator": "LogisticRegression"}))
    write_tables(str(old), {"coef": pd.DataFrame({"a": [5.0]})}, {"n": 4})
    assert sorted(p.name for p in old.iterdir()) == ["coef.parquet", "model.json"]
    # a folder of other files, a model.json of another program's among them: refused
    other = tmp_path / "other"
    other.mkdir()
    (other / "model.json").write_text('{"layers": 3}')
    (other / "w.csv").write_text("1\n")
    with pytest.raises(FileExistsError, match=rf"^{other} is not empty: it holds model\.json, "
                                              rf"w\.csv, not an earlier export \(no model\.json "
                                              rf"of dask-ps export\); give a new or empty"):
        write_tables(str(other), {"w": pd.DataFrame({"a": [1.0]})}, {}, "csv")
    assert (other / "model.json").read_text() == '{"layers": 3}'
    assert (other / "w.csv").read_text() == "1\n"


def test_a_table_model_without_its_encoder_is_refused_naming_the_file(tmp_path, capsys):
    """New-user pass: ``dask-ps evaluate`` of a model trained on CSV whose file lacks
    ``extra.data.encoder`` (an older or hand-edited file) exited 1 with a bare ``KeyError:
    'encoder'``; now 2, with a DataError naming the model file and the entry, as for a
    null or unreadable encoder."""
    import pandas as pd

    from dask_ps.io import infer_encoder, read_ctr

    rng = np.random.default_rng(0)
    csv = tmp_path / "t.csv"
    pd.DataFrame({"click": rng.integers(0, 2, 60), "a": rng.normal(size=60),
                  "shop": rng.choice(list("abc"), 60)}).to_csv(csv, index=False)
    encoder = infer_encoder(str(csv), label="click")
    X, y = read_ctr(str(csv), encoder, label="click")
    est = LogisticRegression(client="local", max_iter=2, progress=False).fit(
        X.compute(scheduler="threads"), y.compute(scheduler="threads"))
    data = {"format": "csv", "label": "click", "weight": None, "encoder": encoder.to_json(),
            "sep": None, "numeric": None, "categorical": None, "exclude": None,
            "hash_features": None, "n_features": int(X.shape[1])}
    model = tmp_path / "m.npz"
    save_estimator(est, str(model), extra={"algorithm": "lr", "data": data})
    assert main(["evaluate", str(model), "--test", str(csv)]) == 0
    assert capsys.readouterr().out.startswith("test: AUC ")
    what = "the JSON of the HashingEncoder the training table's columns were hashed with"
    for edit, message in [
            (lambda d: d.pop("encoder"), f"extra.data has no 'encoder' ({what}): csv test data "
                                         f"is read with it (dask-ps train --save writes it; "
                                         f"was the file edited?)"),
            (lambda d: d.update(encoder=None), f"extra.data.encoder is None, not str ({what})"),
            (lambda d: d.update(encoder="{}"), f"extra.data.encoder is not {what} (ValueError: "
                                               f"not the JSON of a HashingEncoder)")]:
        arrays, meta = _members(model)
        edit(meta["extra"]["data"])
        path = _rewrite(tmp_path / "e.npz", arrays, meta)
        assert main(["evaluate", path, "--test", str(csv)]) == 2
        out = capsys.readouterr()
        assert out.err == f"dask-ps: error: {path}: {message}\n", out.err
        assert not out.out


@pytest.mark.parametrize("estimator, data, message", [
    ("LogisticRegression", {"format": "libsvm"}, r"extra.data has no 'n_features' \(the "
                                                 r"training data's width\): libsvm test"),
    ("LogisticRegression", {"format": "libsvm", "n_features": True},
     r"extra.data.n_features is True, not int \(the training data's width\)$"),
    ("GBDTClassifier", {"format": "parquet", "label": "y"}, "extra.data has no 'features' "
                                                            r"\(the feature columns, in order\)"),
    ("GBDTRegressor", {"format": "csv", "label": "y", "features": ["a"], "sep": None},
     "extra.data has no 'header'"),
    ("GBDTRegressor", {"format": "csv", "label": "y", "features": ["a"], "sep": 1,
                       "header": True}, r"extra.data.sep is 1, not str or null"),
    # the training file's columns in order (evaluate takes a test file's by position when
    # its header setting differs): optional, but then a list holding label and features
    ("GBDTRegressor", {"format": "parquet", "label": "y", "features": ["a"],
                       "columns": ["a", "b"]},
     r"extra.data.columns is \['a', 'b'\], not the training file's columns in order \(a "
     r"list holding extra.data.label and extra.data.features\)$"),
])
def test_data_entries_test_data_is_read_with_are_required(tmp_path, estimator, data, message):
    """What ``dask-ps evaluate`` reads test data with (KeyErrors there before): refused when
    saving, and when loading a file edited since."""
    import dask_ps

    est = getattr(dask_ps, estimator)()
    with pytest.raises(ValueError, match=f"^extra: {message}"):
        save_estimator(est, str(tmp_path / "m.npz"), extra={"data": data})
    save_estimator(est, str(tmp_path / "m.npz"))
    arrays, meta = _members(tmp_path / "m.npz")
    meta["extra"] = {"data": data}
    path = _rewrite(tmp_path / "e.npz", arrays, meta)
    with pytest.raises(DataError, match=f"^{path}: {message}"):
        load_estimator(path)


def test_gbdt_categories_test_data_is_read_with_must_be_the_model_s(tmp_path, capsys):
    """A GBDT table model whose ``extra.data`` names a categorical column: ``dask-ps
    evaluate`` reads the test file's column with ``extra.data.categories``. Edited to fewer
    categories, a test value of the others was read as missing (accuracy 1.0 -> 0.51 on a
    test file of those, silently); without them, they were taken from the test data. Both
    are refused when loading (and when saving), naming the field."""
    import pandas as pd

    from dask_ps import GBDTClassifier

    rng = np.random.default_rng(4)
    shop = rng.choice(list("abcd"), 200)
    X = pd.DataFrame({"shop": pd.Categorical(shop), "x": rng.normal(size=200)})
    est = GBDTClassifier(client="local", n_estimators=2).fit(X, np.isin(shop, ["b", "d"]))
    assert est.categories_ == {"shop": ["a", "b", "c", "d"]}
    data = {"format": "csv", "label": "y", "weight": None, "categorical": ["shop"],
            "sep": None, "header": True, "features": ["shop", "x"],
            "categories": {"shop": ["a", "b", "c", "d"]}, "n_features": 2}
    save_estimator(est, str(tmp_path / "m.npz"), extra={"algorithm": "gbdt", "data": data})
    load_estimator(str(tmp_path / "m.npz"))
    test = tmp_path / "t.csv"
    test.write_text("shop,x,y\nd,0.5,1\nb,0.1,1\n")
    for cats, message in [
            (None, r"extra.data.categories holds no list of the categories of column 'shop' "
                   r"\(extra.data.categorical\)"),
            (["a", "b", "c"], r"extra.data.categories of column 'shop' are not the model's "
                              r"categories_ of it: \['a', 'b', 'c'\], \['a', 'b', 'c', 'd'\]")]:
        arrays, meta = _members(tmp_path / "m.npz")
        edited = dict(data, categories={} if cats is None else {"shop": cats})
        meta["extra"]["data"] = edited
        path = _rewrite(tmp_path / "e.npz", arrays, meta)
        with pytest.raises(DataError, match=f"^{path}: {message}"):
            load_estimator(path)
        with pytest.raises(ValueError, match=f"^extra: {message}"):
            save_estimator(est, str(tmp_path / "s.npz"), extra={"data": edited})
        capsys.readouterr()
        assert main(["evaluate", path, "--test", str(test)]) == 2
        assert capsys.readouterr().err.startswith(f"dask-ps: error: {path}: extra.data.")
