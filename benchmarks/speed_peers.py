#!/usr/bin/env python
"""Every line of the "speed where dask_ps lags its peers" table in one run, as ratios.

    python benchmarks/speed_peers.py [--skip first_fit,lbfgs,mf,ftrl]

Runs four benchmark scripts one after the other on this machine, each beside its peers on the
same data (dask_ps on a LocalCluster of 2 worker processes x 1 thread), and prints one table:

* ``first_fit.py``: seconds numba spends compiling in the first fit of a fresh process, the
  worst estimator (goal < 0.5 s);
* ``lr_lbfgs.py --a9a-C 0.1``: L-BFGS on the 10^6 x 2^22 CTR set (10 iterations; seconds per
  iteration against scikit-learn's lbfgs, bytes moved per loss+gradient evaluation against
  2 x distinct features touched x 4 B x workers, objective to 1e-6 relative) and on a9a to
  convergence (test AUC 0.9025 in <= 0.5 s). The bytes bound counts the distinct features
  of all the rows; the script also prints a tighter estimate, each half of the rows' own
  distinct features (what two tasks holding those halves would need: the moved bytes sit at
  it, within the split's luck, by design);
* ``mf_peers.py --no-spark``: MF SGD on 10^7 generated ratings at rank 100 (seconds per epoch
  against the single-thread numba kernel, <= 1.0 s; RMSE against Surprise's SVD at the same
  settings) and on MovieLens-100k u1 with the defaults (RMSE <= 0.915 in <= 0.5 s);
* ``lr_peers.py --no-dask-ml --skip-a9a``: FTRL on the CTR set, time to SGDClassifier's test
  AUC over SGDClassifier's fit time (<= 0.5).

Each script's own output is saved beside the table (``--out``, default
``benchmarks/results/speed_peers``) so that every figure can be traced. The ratios are measured
in this run; the machine's load average is printed with them.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from _common import data_file
from first_fit import CASE_DATA

HERE = Path(__file__).resolve().parent
RUNS = {
    "first_fit": ["first_fit.py"],
    "lbfgs": ["lr_lbfgs.py", "--a9a-C", "0.1"],
    "mf": ["mf_peers.py", "--no-spark"],
    "ftrl": ["lr_peers.py", "--no-dask-ml", "--skip-a9a"],
}
#: The files under ``$DASK_PS_DATA`` each run reads
DATA = {"first_fit": sorted(set(CASE_DATA.values())),
        "lbfgs": [("lr_a9a", "a9a"), ("lr_a9a", "a9a.t")],
        "mf": [("mf_movielens100k", "u1.base"), ("mf_movielens100k", "u1.test")], "ftrl": []}
NUM = r"([-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?)"


def _run(name: str, out: Path) -> str:
    t0 = time.perf_counter()
    load = os.getloadavg()[0]
    proc = subprocess.run([sys.executable, str(HERE / RUNS[name][0]), *RUNS[name][1:]],
                          capture_output=True, text=True, cwd=HERE)
    text = proc.stdout + proc.stderr
    (out / f"{name}.log").write_text(text)
    print(f"  {name:10s} {time.perf_counter() - t0:6.0f} s  load {load:.1f} -> "
          f"{os.getloadavg()[0]:.1f}  exit {proc.returncode}", flush=True)
    return text


def _find(pattern: str, text: str, what: str) -> tuple:
    m = re.search(pattern, text, re.MULTILINE)
    if m is None:
        raise SystemExit(f"speed_peers: no {what} in the output (pattern {pattern!r}); see "
                         f"the saved log")
    return tuple(float(g) if re.fullmatch(NUM, g) else g for g in m.groups())


def _section(text: str, title: str) -> str:
    start = text.index(title)
    end = text.find("\n\n", start)
    return text[start:] if end < 0 else text[start:end]


def _row(section: str, who: str) -> list[str]:
    line = next(ln for ln in section.splitlines() if ln.startswith(who))
    return line[len(who):].replace(",", " ").split()


def table(logs: dict) -> list[tuple]:
    """Rows ``(work, dask_ps, best peer, ratio, target, met)`` from the scripts' outputs."""
    rows = []
    if "first_fit" in logs:
        (c,) = _find(rf"most compiling in a first fit: {NUM} s", logs["first_fit"], "compile")
        rows.append(("first fit, numba compiling (worst estimator)", f"{c:.2f} s", "-", "-",
                     "< 0.5 s", c < 0.5))
    if "lbfgs" in logs:
        text = logs["lbfgs"]
        ctr = _section(text, "CTR-like, ")
        bound, halves = _find(rf"bytes bound .* = {NUM} MB .* halves of the rows: {NUM} MB",
                              ctr, "bytes bound")
        sk, ps = _row(ctr, "scikit-learn lbfgs"), _row(ctr, "dask_ps lbfgs (2x1)")
        r, rel = _find(rf"ratio dask_ps / scikit-learn: s/iter {NUM}, objective {NUM}",
                       ctr, "ratio")
        first, median = float(ps[3]), float(ps[4])
        rows.append(("L-BFGS, CTR 10^6 x 2^22: s/iteration", f"{float(ps[2]):.3f}",
                     f"{float(sk[2]):.3f} (scikit-learn)", f"{r:.2f}", "<= 1", r <= 1.0))
        rows.append(("L-BFGS, CTR: MB per evaluation (median; first)",
                     f"{median:.3f}; {first:.3f}",
                     f"bound {bound:.3f} (per-half estimate {halves:.3f})",
                     f"{median / bound:.3f}", "<= 1 x bound", median <= bound))
        rows.append(("L-BFGS, CTR: objective, relative to scikit-learn", f"{rel:+.1e}", "-",
                     "-", "|.| <= 1e-6", abs(rel) <= 1e-6))
        a9a = _section(text, "a9a, C=0.1")
        sk, ps = _row(a9a, "scikit-learn lbfgs"), _row(a9a, "dask_ps lbfgs (2x1)")
        wall, auc = float(ps[0]), float(ps[-1])
        rows.append(("L-BFGS, a9a C=0.1: fit s (test AUC)", f"{wall:.2f} ({auc:.4f})",
                     f"{float(sk[0]):.2f} ({float(sk[-1]):.4f}) (scikit-learn)",
                     f"{wall / float(sk[0]):.1f}", "<= 0.5 s, AUC 0.9025",
                     wall <= 0.5 and auc >= 0.9025))
    if "mf" in logs:
        text = logs["mf"]
        gen = _find(r"^(gen-[^:]+):", text, "generated set")[0]
        ps = _find(rf"dask_ps SGD k=100, 2 workers\s+{NUM} s/epoch\s+fit\s+{NUM} s\s+"
                   rf"RMSE {NUM}", text, "MF 10^7 line")
        one = _find(rf"numba SGD k=100, 1 thread\s+{NUM} s/epoch", text, "bound")[0]
        surprise = re.search(rf"Surprise SVD k=100\s+{NUM} s/epoch\s+fit\s+{NUM} s\s+RMSE "
                             rf"{NUM}", text)
        s_rmse = float(surprise.group(3)) if surprise else float("nan")
        rows.append((f"MF SGD, {gen} rank 100: s/epoch", f"{ps[0]:.3f}",
                     f"{one:.3f} (numba, 1 thread)", f"{ps[0] / one:.2f}", "<= 1.0 s, < bound",
                     ps[0] <= 1.0 and ps[0] < one))
        rows.append(("MF SGD, same: test RMSE", f"{ps[2]:.4f}",
                     f"{s_rmse:.4f} (Surprise SVD)" if surprise else "Surprise not installed",
                     f"{ps[2] - s_rmse:+.4f}" if surprise else "-", "<= Surprise's",
                     bool(surprise) and ps[2] <= s_rmse))
        ml = _find(rf"dask_ps SGD defaults, 2 workers\s+{NUM} s/epoch\s+fit\s+{NUM} s\s+"
                   rf"RMSE {NUM}", text, "MovieLens line")
        sml = re.search(rf"Surprise SVD defaults[^\n]*fit\s+{NUM} s\s+RMSE {NUM}", text)
        rows.append(("MF SGD, MovieLens-100k u1 defaults: fit s (RMSE)",
                     f"{ml[1]:.2f} ({ml[2]:.4f})",
                     f"{float(sml.group(1)):.2f} ({float(sml.group(2)):.4f}) (Surprise SVD)"
                     if sml else "-", f"{ml[1] / float(sml.group(1)):.2f}" if sml else "-",
                     "<= 0.5 s, RMSE <= 0.915", ml[1] <= 0.5 and ml[2] <= 0.915))
    if "ftrl" in logs:
        text = logs["ftrl"]
        sgd = _find(rf"target AUC \(SGDClassifier's\): {NUM}", text, "target")[0]
        m = re.search(rf"dask_ps time to target / SGDClassifier time = {NUM}\s+\({NUM} s / "
                      rf"{NUM} s\)", text)
        ps_auc = re.findall(rf"dask_ps FTRL, \d+ epoch\(s\)\s+{NUM} s\s+AUC {NUM}", text)
        auc = float(ps_auc[-1][1]) if ps_auc else float("nan")
        if m:
            r, mine, theirs = (float(g) for g in m.groups())
            rows.append(("FTRL, CTR 10^6 x 2^22: s to SGDClassifier's AUC",
                         f"{mine:.2f} (AUC {auc:.4f})",
                         f"{theirs:.2f} (SGDClassifier, AUC {sgd:.4f})", f"{r:.2f}",
                         "<= 0.5, AUC >= target", r <= 0.5))
        else:
            rows.append(("FTRL, CTR 10^6 x 2^22: s to SGDClassifier's AUC",
                         f"not reached (AUC {auc:.4f})", f"SGDClassifier AUC {sgd:.4f}", "-",
                         "<= 0.5", False))
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--skip", default="", help="comma-separated: " + ",".join(RUNS))
    p.add_argument("--out", default=str(HERE / "results" / "speed_peers"),
                   help="folder for each script's output")
    p.add_argument("--from-logs", action="store_true",
                   help="print the table from the outputs saved in --out by an earlier run")
    args = p.parse_args(argv)
    skip = {s for s in args.skip.split(",") if s}
    unknown = skip - set(RUNS)
    if unknown:
        p.error(f"unknown --skip {sorted(unknown)}; choose from {list(RUNS)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"load average at start: {os.getloadavg()}; outputs in {out}")
    if args.from_logs:
        logs = {name: (out / f"{name}.log").read_text() for name in RUNS
                if name not in skip and (out / f"{name}.log").exists()}
    else:
        for name in RUNS:  # one line, before any run, when a file is not there
            for parts in DATA[name] if name not in skip else ():
                data_file(*parts)
        logs = {name: _run(name, out) for name in RUNS if name not in skip}
    rows = table(logs)
    print(f"\nload average at the end: {os.getloadavg()}")
    head = ("work", "dask_ps", "best peer", "ratio", "target", "met")
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(5)]
    for r in [head] + rows:
        cells = [str(c).ljust(w) for c, w in zip(r[:5], widths)]
        met = r[5] if r is head else ("yes" if r[5] else "NO")
        print("  ".join(cells) + "  " + met)
    return 0


if __name__ == "__main__":
    sys.exit(main())
