"""How long does a user's first fit in a fresh Python process spend compiling numba kernels?

    python benchmarks/first_fit.py [--only lr-ftrl,gbdt ...]

Each case runs in a new Python process (``python -c``), fits one estimator twice in that
process (``client="local"``) and reports: the first fit's wall time, the seconds numba spent
compiling during it (measured by a listener on numba's ``numba:compile`` events, outermost
events only, so nested compilations are not counted twice) and the second fit's wall time.
With warm on-disk caches (``python -m dask_ps._warm``, which ``make`` runs after installing)
the compile column should be near zero: a kernel loaded from the cache raises no compile
event. Run it once on a cold tree (``find dask_ps -name '*.nb[ic]' -delete``) to see what a
cache saves.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from _common import data_file, data_root

CHILD = r"""
import json, sys, threading, time, warnings
import numba.core.event as ev

class Compiles(ev.Listener):
    def __init__(self):
        self.depth, self.t0, self.total, self.count = 0, 0.0, 0.0, 0
        self.lock = threading.Lock()
    def on_start(self, event):
        with self.lock:
            if self.depth == 0:
                self.t0 = time.perf_counter()
            self.depth += 1
    def on_end(self, event):
        with self.lock:
            self.depth -= 1
            self.count += 1
            if self.depth == 0:
                self.total += time.perf_counter() - self.t0

listener = Compiles()
ev.register("numba:compile", listener)
warnings.simplefilter("ignore")
t = time.perf_counter()
import dask_ps
import_s = time.perf_counter() - t
root = sys.argv[1]
case = sys.argv[2]
SETUP = {setup}
fit = SETUP[case](root)
times = []
for attempt in range(2):
    before = listener.total
    t = time.perf_counter()
    fit()
    times.append((time.perf_counter() - t, listener.total - before))
print(json.dumps(dict(import_s=import_s, first=times[0][0], compile=times[0][1],
                      second=times[1][0], events=listener.count)))
"""

SETUP = r"""{
 "lr-ftrl": lambda root: (lambda d: lambda: dask_ps.LogisticRegression(
     solver="ftrl", client="local", random_state=0, progress=False, checkpoint=None).fit(*d))(
     __import__("sklearn.datasets").datasets.load_svmlight_file(
         root + "/lr_a9a/a9a", n_features=123)),
 "lr-lbfgs": lambda root: (lambda d: lambda: dask_ps.LogisticRegression(
     solver="lbfgs", client="local", random_state=0, progress=False, checkpoint=None).fit(*d))(
     __import__("sklearn.datasets").datasets.load_svmlight_file(
         root + "/lr_a9a/a9a", n_features=123)),
 "mf-sgd": lambda root: (lambda df: lambda: dask_ps.MatrixFactorization(
     client="local", random_state=0, progress=False, checkpoint=None, max_iter=20).fit(df))(
     __import__("pandas").read_csv(root + "/mf_movielens100k/u1.base", sep="\t",
                                   names=["user", "item", "rating", "ts"])),
 "mf-als": lambda root: (lambda df: lambda: dask_ps.MatrixFactorization(
     solver="als", client="local", random_state=0, progress=False, checkpoint=None,
     max_iter=5).fit(df))(
     __import__("pandas").read_csv(root + "/mf_movielens100k/u1.base", sep="\t",
                                   names=["user", "item", "rating", "ts"])),
 "fm": lambda root: (lambda d: lambda: dask_ps.FactorizationMachineClassifier(
     client="local", random_state=0, progress=False, checkpoint=None, max_iter=3).fit(*d))(
     __import__("sklearn.datasets").datasets.load_svmlight_file(
         root + "/lr_a9a/a9a", n_features=123)),
 "lda": lambda root: (lambda X: lambda: dask_ps.LatentDirichletAllocation(
     n_components=20, max_iter=10, client="local", random_state=0, progress=False).fit(X))(
     dask_ps.io.read_ldac(root + "/lda_ap/ap.dat")[0][:300].compute()),
 "gbdt": lambda root: (lambda t: lambda: dask_ps.GBDTClassifier(
     n_estimators=10, client="local", random_state=0, progress=False).fit(t[:, 1:], t[:, 0]))(
     __import__("numpy").loadtxt(root + "/gbdt_lightgbm/binary.train")),
}"""

CASES = ("lr-ftrl", "lr-lbfgs", "mf-sgd", "mf-als", "fm", "lda", "gbdt")
#: The file under ``$DASK_PS_DATA`` each case reads (see SETUP)
CASE_DATA = {"lr-ftrl": ("lr_a9a", "a9a"), "lr-lbfgs": ("lr_a9a", "a9a"),
             "mf-sgd": ("mf_movielens100k", "u1.base"),
             "mf-als": ("mf_movielens100k", "u1.base"), "fm": ("lr_a9a", "a9a"),
             "lda": ("lda_ap", "ap.dat"), "gbdt": ("gbdt_lightgbm", "binary.train")}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default=",".join(CASES), help="comma-separated cases")
    args = p.parse_args(argv)
    for case in args.only.split(","):  # one line, before any run, when a file is not there
        if case not in CASE_DATA:
            p.error(f"unknown case {case!r} in --only; choose from {', '.join(CASES)}")
        data_file(*CASE_DATA[case])
    root = str(data_root())
    code = CHILD.replace("{setup}", SETUP)
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    print(f"{'case':10s} {'import s':>8s} {'1st fit s':>9s} {'compiling s':>11s} "
          f"{'2nd fit s':>9s}")
    worst = 0.0
    for case in args.only.split(","):
        out = subprocess.run([sys.executable, "-c", code, root, case], capture_output=True,
                             text=True)
        if out.returncode:
            print(f"{case:10s} failed:\n{out.stderr[-2000:]}")
            return 1
        r = json.loads(out.stdout.strip().splitlines()[-1])
        worst = max(worst, r["compile"])
        print(f"{case:10s} {r['import_s']:8.2f} {r['first']:9.2f} {r['compile']:11.2f} "
              f"{r['second']:9.2f}", flush=True)
    print(f"most compiling in a first fit: {worst:.2f} s (goal < 0.5 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
