#!/usr/bin/env python
"""Cost of dask_ps's metrics against pull/push time, on a LocalCluster of 2 workers x 1 thread.

Two measurements, in one run:

1. **A/B, same run.** A training-shaped job (2 tasks, 2 shards, dense float32 table of 2**20
   rows; each step pulls K random keys, pushes K updates and ticks the clock, under ASP) runs
   with the metrics collector off, on (the default: every shard read once a second) and on at
   100 times that rate (0.01 s), whose effect stands above the noise and scales back to the
   default's. Each repeat runs the three jobs in a rotated order; each task times every step
   (``time.perf_counter`` around pull + push + clock) and a job gives its median step.
   Overhead = median over repeats of (job with metrics) / (job without, same repeat) - 1.
2. **Always-on counters.** Shards count calls, keys and bytes on every pull and push (six
   integer additions on a dict) whether or not anybody collects them. Their cost is timed here
   directly with ``timeit`` on the same statements, and compared with the median step time.

The verdict compares both against the 5 % bound. The machine may be shared: the A/B figures
carry its noise (a negative overhead means noise larger than the effect).

Usage::

    python benchmarks/metrics_overhead.py            # ~1-2 minutes
    python benchmarks/metrics_overhead.py --quick    # fewer repeats and steps
    python benchmarks/metrics_overhead.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import timeit

import numpy as np

ROWS = 2**20
BOUND = 0.05


def step_task(ps, item):
    """``steps`` pull K / push K / clock steps; returns each step's seconds."""
    k, steps, seed = item
    rng = np.random.default_rng(seed)
    times = []
    for _ in range(steps):
        keys = rng.integers(0, 2**20, k)
        t0 = time.perf_counter()
        w = ps.pull("w", keys)
        ps.push("w", keys, np.full_like(w, 1e-3))
        ps.clock()
        times.append(time.perf_counter() - t0)
    return times


def counter_cost() -> float:
    """Seconds the shard's counting costs per pull plus push (statements of Shard.pull/push)."""
    setup = ("import numpy as np\n"
             "c = dict(pull_calls=0, push_calls=0, keys_pulled=0, keys_pushed=0, "
             "bytes_pulled=0, bytes_pushed=0)\n"
             "keys = np.arange(10); out = np.zeros(10)")
    stmt = ('c["pull_calls"] += 1; c["keys_pulled"] += keys.shape[0]; '
            'c["bytes_pulled"] += out.nbytes + keys.nbytes; '
            'c["keys_pushed"] += keys.shape[0]; c["bytes_pushed"] += keys.nbytes + out.nbytes; '
            'c["push_calls"] += 1')
    n = 200_000
    return min(timeit.repeat(stmt, setup, number=n, repeat=5)) / n


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--keys", type=int, default=10_000, help="K, keys per pull and push")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)
    repeats, steps = (4, 40) if args.quick else (12, 80)

    from distributed import Client, LocalCluster

    import dask_ps
    from dask_ps.diagnostics import PSMetrics

    # 0.01 s polls the shards 100 times as often as the default: an effect 100 times the
    # default's, measurable above the noise of a shared machine, then scaled back
    conditions = {"off": None, "on (1 s)": 1.0, "on (0.01 s)": 0.01}
    medians: dict[str, list[float]] = {c: [] for c in conditions}
    polls = {c: 0 for c in conditions}
    poll_seconds = {c: 0.0 for c in conditions}
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address="127.0.0.1:0",
                      worker_dashboard_address=None) as cluster, Client(cluster) as client:
        with dask_ps.PSModel(client) as model:
            model.add_table("w", shape=(ROWS,), dtype="float32")
            model.run(step_task, [(args.keys, 10, s) for s in range(2)], consistency="asp")
            names = list(conditions)
            for r in range(repeats):
                # rotate the order so that no condition always runs first or last
                for name in names[r % 3:] + names[:r % 3]:
                    interval = conditions[name]
                    if interval is not None:
                        client.register_plugin(PSMetrics(interval), name=PSMetrics.name)
                        time.sleep(max(0.3, 2 * interval))  # polling before timing starts
                    res = model.run(step_task, [(args.keys, steps, 100 * r + s)
                                                for s in range(2)], consistency="asp")
                    medians[name].append(statistics.median(t for task in res for t in task))
                    if interval is not None:
                        plugin = cluster.scheduler.plugins[PSMetrics.name]
                        polls[name] += plugin.polls
                        poll_seconds[name] += plugin.poll_seconds
                        client.unregister_scheduler_plugin(PSMetrics.name)
                print(f"repeat {r + 1}/{repeats}: " + ", ".join(
                    f"{c} {medians[c][-1] * 1e3:.3f}" for c in conditions) + " ms per step",
                      flush=True)
    # paired: each repeat's ratio to the "off" job of the same repeat, then the median
    paired = {c: [a / b - 1.0 for a, b in zip(medians[c], medians["off"])]
              for c in conditions if c != "off"}
    ratio = {c: statistics.median(v) for c, v in paired.items()}
    step = {c: statistics.median(v) for c, v in medians.items()}
    off = step["off"]
    counters = counter_cost()
    poll_ms = {c: poll_seconds[c] / polls[c] * 1e3 for c in conditions if polls[c]}
    scaled = ratio["on (0.01 s)"] / 100.0  # the default's effect, from the 100x run
    print(f"\nK = {args.keys} keys per pull and per push, 2 tasks x {steps} steps per job, "
          f"{repeats} repeats (order rotated).\n"
          f"  step ms: median over the repeats of each job's median step (pull + push + "
          f"clock)\n"
          f"  vs off: step / off's step - 1\n"
          f"  paired overhead: median over the repeats of (step / the same repeat's off step) "
          f"- 1, and its\n    range; the verdict uses it. The two can differ, even in sign, "
          f"when the noise between\n    repeats is larger than the effect.")
    print(f"  {'':12s} {'step ms':>8s} {'vs off':>9s} {'paired overhead':>16s}  "
          f"{'(range over repeats)':22s}")
    for c in conditions:
        extra = "" if c == "off" else (
            f" {(step[c] / off - 1) * 100:+8.2f} % {ratio[c] * 100:+14.2f} %  "
            f"({min(paired[c]) * 100:+.1f} .. {max(paired[c]) * 100:+.1f} %)  {polls[c]} polls, "
            f"{poll_ms.get(c, float('nan')):.2f} ms per poll of both shards")
        print(f"  {c:12s} {step[c] * 1e3:8.3f}{extra}")
    print(f"  default (1 s) estimated from the 100x rate's paired overhead / 100: "
          f"{scaled * 100:+.3f} %")
    print(f"  shard counters (always on): {counters * 1e9:.0f} ns per pull + push = "
          f"{counters / off * 100:.4f} % of a step")
    worst = max(ratio["on (1 s)"], scaled, 0.0) + counters / off
    verdict = "below" if worst < BOUND else "ABOVE"
    print(f"metrics overhead: {worst * 100:.2f} % of pull/push time (default collector + "
          f"counters), {verdict} the {BOUND * 100:.0f} % bound")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(keys=args.keys, steps=steps, repeats=repeats, step_seconds=step,
                           per_repeat=medians, overhead=ratio, overhead_per_repeat=paired,
                           overhead_default_scaled=scaled,
                           polls=polls, poll_ms=poll_ms, counter_seconds=counters,
                           counter_fraction=counters / off, worst=worst), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
