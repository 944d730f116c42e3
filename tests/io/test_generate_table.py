"""PlantedCTR / make_ctr_table / write_ctr_table: synthetic click logs with a header and a
planted model with pairwise interactions."""

from __future__ import annotations

import doctest

import dask
import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression as SkLogistic
from sklearn.metrics import roc_auc_score

import dask_ps.io.generate_table as module
from dask_ps.io import (
    HashingEncoder,
    PlantedCTR,
    encode_ctr,
    infer_encoder,
    make_ctr_table,
    read_ctr,
    write_ctr_table,
)

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(autouse=True)
def _synchronous():
    with dask.config.set(scheduler="synchronous"):
        yield


SMALL = PlantedCTR(n_categorical=6, n_numeric=2, max_cardinality=2000, n_pairs=3, seed=3)


def test_default_design_is_a_click_log_with_twenty_categorical_columns():
    p = PlantedCTR()
    assert p.n_categorical >= 20 and p.n_numeric > 0 and p.label == "click"
    assert p.columns[:2] == ["click", "n1"] and p.columns[-1] == f"c{p.n_categorical}"
    assert len(p.pairs) == p.n_pairs == len(set(p.pairs))
    assert all(0 <= a < b < p.n_categorical for a, b in p.pairs)
    card = p.cardinalities()
    assert card[0] == p.min_cardinality and card[-1] == p.max_cardinality
    assert (np.diff(card) >= 0).all()
    rates = p.missing_rates()
    assert (rates >= 0).all() and (rates <= p.missing).all() and (rates > 0.01).sum() > 10


def test_same_seed_same_rows_in_every_form(tmp_path):
    a = SMALL.chunk(1, 3000).to_pandas()
    assert a.equals(SMALL.chunk(1, 3000).to_pandas())
    assert not a.equals(SMALL.chunk(2, 3000).to_pandas())
    assert not a.equals(PlantedCTR(**{**_args(SMALL), "seed": 4}).chunk(1, 3000).to_pandas())
    csv = pd.read_csv(pd.io.common.BytesIO(SMALL.csv_chunk(1, 3000)),
                      dtype={c: "string" for c in SMALL.categorical_columns})
    for c in SMALL.columns:
        x, y = a[c], csv[c]
        assert (x.isna() == y.isna()).all(), c
        assert (x[x.notna()].astype(str).to_numpy() == y[y.notna()].astype(str).to_numpy()
                ).all() or c.startswith("n"), c
    np.testing.assert_array_equal(a.n1.fillna(-1), csv.n1.fillna(-1))
    # the files and the dask dataframe hold those rows too
    write_ctr_table(str(tmp_path / "csv"), 5000, SMALL, chunk_rows=2000)
    write_ctr_table(str(tmp_path / "pq"), 5000, SMALL, format="parquet", chunk_rows=2000)
    df = make_ctr_table(5000, SMALL, chunk_rows=2000)
    assert df.npartitions == 3
    enc = infer_encoder(str(tmp_path / "csv" / "*.csv"), label="click", n_features=2**16)
    assert enc.numeric == tuple(SMALL.numeric_columns)
    assert enc.categorical == tuple(SMALL.categorical_columns)
    Xc, yc = dask.compute(*read_ctr(str(tmp_path / "csv" / "*.csv"), enc, label="click"))
    Xp, yp = dask.compute(*read_ctr(str(tmp_path / "pq" / "*.parquet"), enc, label="click"))
    Xd, yd = dask.compute(*encode_ctr(df, enc, label="click"))
    assert (Xc != Xp).nnz == 0 and (Xc != Xd).nnz == 0
    assert np.array_equal(yc, yp) and np.array_equal(yc, yd)
    assert Xc[:2000].nnz and (Xc[2000:4000] != enc.transform(SMALL.chunk(1, 2000))).nnz == 0


def _args(p: PlantedCTR) -> dict:
    return {k: getattr(p, k) for k in ("n_categorical", "n_numeric", "min_cardinality",
                                       "max_cardinality", "zipf", "missing", "factors",
                                       "n_pairs", "linear_scale", "numeric_scale",
                                       "interaction_scale", "intercept", "seed")}


def test_values_follow_zipf_and_columns_their_missing_rates():
    p = PlantedCTR(n_categorical=4, n_numeric=2, min_cardinality=50, max_cardinality=50_000,
                   zipf=1.1, missing=0.3, n_pairs=1, seed=1)
    table = p.chunk(0, 200_000)
    col = table.column("c4").to_pandas()
    counts = col.value_counts().to_numpy()
    # frequency against rank on log-log axes: slope about -zipf at the head
    slope = np.log(counts[100] / counts[10]) / np.log(100 / 10)
    assert -1.3 < slope < -0.9, slope
    rates = p.missing_rates()
    for j, name in enumerate(p.numeric_columns + p.categorical_columns):
        seen = table.column(name).null_count / table.num_rows
        assert abs(seen - rates[j]) < 0.01, (name, seen, rates[j])


def test_planted_logit_is_recovered_from_the_rows_and_draws_the_labels():
    ranks, counts, count_missing, labels, logits = SMALL._draw(0, 40_000)
    table = SMALL.chunk(0, 40_000)
    np.testing.assert_allclose(SMALL.logit(table), logits, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(table.column("click").to_numpy(), labels)
    p = 1 / (1 + np.exp(-logits))
    assert abs(labels.mean() - p.mean()) < 0.01 and 0.1 < labels.mean() < 0.5
    assert roc_auc_score(labels, logits) > 0.8


@pytest.mark.timeout(900)  # four scikit-learn L-BFGS fits: minutes on a loaded machine
def test_interactions_are_what_a_linear_model_misses():
    """The planted pairs carry signal: logistic regression with their crosses (what a
    factorization machine can learn without being told the pairs) beats it without, while
    on a design without interactions the crosses gain nothing."""
    def gap(planted):
        n_train, n_test = 60_000, 20_000
        df = planted.chunk(0, n_train + n_test).to_pandas()
        y = df.pop("click").to_numpy()
        base = HashingEncoder(numeric=planted.numeric_columns,
                              categorical=planted.categorical_columns, n_features=2**18)
        crossed = HashingEncoder(numeric=planted.numeric_columns,
                                 categorical=planted.categorical_columns,
                                 crosses=planted.pair_names, n_features=2**18)
        aucs = []
        for enc in (base, crossed):
            X = enc.transform(df)
            model = SkLogistic(C=0.3, max_iter=300).fit(X[:n_train], y[:n_train])
            aucs.append(roc_auc_score(y[n_train:], model.decision_function(X[n_train:])))
        return aucs

    design = dict(n_categorical=8, n_numeric=2, max_cardinality=300, n_pairs=4, seed=2)
    plain, crossed = gap(PlantedCTR(**design))
    assert crossed > plain + 0.02, (plain, crossed)
    plain0, crossed0 = gap(PlantedCTR(**design, interaction_scale=0.0))
    assert crossed0 < plain0 + 0.005, (plain0, crossed0)  # crosses alone gain nothing


def test_bad_designs_are_named():
    with pytest.raises(ValueError, match="n_categorical must be an integer >= 1"):
        PlantedCTR(n_categorical=0)
    with pytest.raises(ValueError, match="n_pairs=7: 3 categorical columns have only 3"):
        PlantedCTR(n_categorical=3, n_pairs=7)
    with pytest.raises(ValueError, match="min_cardinality <= max_cardinality"):
        PlantedCTR(min_cardinality=10, max_cardinality=5)
    with pytest.raises(ValueError, match="format must be one of"):
        write_ctr_table("memory://x", 10, format="json")
    with pytest.raises(ValueError, match="n_rows must be a positive integer"):
        make_ctr_table(0)


def test_docstring_examples():
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
