"""asv: one LogisticRegression fit on a9a (from $DASK_PS_DATA) per solver, in-process shards.

The data's path follows the tests: ``$DASK_PS_DATA`` or ``../shared/data`` beside the repo.
"""

import os
from pathlib import Path


def _a9a():
    from sklearn.datasets import load_svmlight_file

    root = Path(os.environ.get("DASK_PS_DATA",
                               Path(__file__).resolve().parents[3] / "shared" / "data"))
    return load_svmlight_file(str(root / "lr_a9a" / "a9a"), n_features=123)


class LogisticEpoch:
    params = ["ftrl", "adagrad", "lbfgs"]
    param_names = ["solver"]
    timeout = 300

    def setup(self, solver):
        from dask_ps import LogisticRegression

        self.X, self.y = _a9a()
        self.model = LogisticRegression(solver=solver, client="local", random_state=0,
                                        max_iter=50 if solver == "lbfgs" else 1)
        self.model.fit(self.X[:1000], self.y[:1000])  # numba compilation outside the timing

    def time_fit(self, solver):
        self.model.fit(self.X, self.y)
