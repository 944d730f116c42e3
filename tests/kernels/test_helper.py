"""The helper thread (dask_ps.kernels.helper) and the kernels that use it: a split run gives
what one thread gives."""

import threading

import dask
import numpy as np
import pytest

from dask_ps.kernels import helper
from dask_ps.state import partition
from dask_ps.state.partition import plan_hashed


def test_run_gives_the_second_half_to_the_helper_thread():
    if not helper.helper_enabled():
        pytest.skip("this process may run on one CPU only: the helper is never used")
    seen = []
    out = helper.run(lambda a, b: seen.append((a, b, threading.current_thread().name))
                     or b - a, helper.halves(100_000))
    assert sum(out) == 100_000 and len(out) == 2
    (a0, b0, t0), (a1, b1, t1) = sorted(seen)
    assert (a0, b0, a1, b1) == (0, out[0], out[0], 100_000)
    assert t0 == threading.current_thread().name and t1.startswith("dask-ps-helper")


def test_a_run_while_the_helper_is_busy_runs_both_parts_here():
    """Several task threads planning at once: the second does not queue behind the first."""
    names = []
    with helper._idle:  # as while another thread's part runs on the helper
        out = helper.run(lambda a, b: names.append(threading.current_thread().name) or b - a,
                         [(0, 60_000), (60_000, 100_000)])
    assert out == [60_000, 40_000] and names == [threading.current_thread().name] * 2


def test_one_part_when_small_or_disabled():
    assert helper.halves(helper.SPLIT_MIN - 1) == [(0, helper.SPLIT_MIN - 1)]
    with dask.config.set({"dask-ps.helper-thread": False}):
        assert not helper.helper_enabled()
        assert helper.run(lambda a, b: (a, b), helper.halves(10**6)) == [(0, 10**6)]


@pytest.mark.parametrize("failing", [0, 1])
def test_a_failing_part_is_raised_once_both_parts_ended(failing):
    if not helper.helper_enabled():
        pytest.skip("this process may run on one CPU only: the helper is never used")
    ended = []

    def part(a, b):
        if (a > 0) == bool(failing):
            raise ValueError(f"part from {a}")
        threading.Event().wait(0.05)  # the other part is slower
        ended.append(a)

    with pytest.raises(ValueError, match="part from"):
        helper.run(part, helper.halves(100_000))
    assert len(ended) == 1  # the other part had ended before the error was raised


def _same_plan(a, b):
    for field in ("local", "offsets", "inverse", "order", "buckets", "runs"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
    assert (a.identity, a.deferred) == (b.identity, b.deferred)


@pytest.mark.parametrize("case", ["random", "repeats", "ascending", "ascending_halves",
                                  "identity"])
@pytest.mark.parametrize("n_shards", [1, 3])
def test_a_plan_in_two_halves_is_the_plan_in_one(case, n_shards):
    """Bucket by bucket, the first half's keys then the second's, as one pass puts them;
    the keys are ascending only if ascending across the halves' boundary too."""
    rng = np.random.default_rng(len(case) + n_shards)
    n = 200_000
    keys = {"random": lambda: rng.integers(-2**62, 2**62, n),
            "repeats": lambda: rng.integers(0, n // 2, n),
            "ascending": lambda: np.unique(rng.integers(-2**62, 2**62, n)),
            "ascending_halves": lambda: np.concatenate(
                [np.arange(n // 2) * 7, np.arange(n // 2) * 7 + 3]),
            "identity": lambda: np.arange(n)}[case]().astype(np.int64)
    for defer_inverse, defer_dedup in ((False, False), (True, False), (True, True)):
        with dask.config.set({"dask-ps.helper-thread": False}):
            one = plan_hashed(keys, n_shards, defer_inverse, defer_dedup)
        two = plan_hashed(keys, n_shards, defer_inverse, defer_dedup)
        _same_plan(one, two)
        done = partition.HashPartitioner(n_shards).complete(two, keys)
        np.testing.assert_array_equal(
            partition.HashPartitioner(n_shards).caller_keys(done), keys)


def test_the_documented_environment_variable_turns_the_helper_off():
    import os
    import re
    import subprocess
    import sys

    var = re.search(r"``(DASK_\w+)=false``", helper.__doc__).group(1)
    code = "from dask_ps.kernels import helper; print(helper.helper_enabled())"
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, **{var: "false"}),
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
