"""Consistency models: when a pull may be served, and when pushed updates take effect.

Every participant (a worker process of a job) has a clock: the number of times it called
``clock()``. Under SSP with staleness ``s`` (Ho et al., "More Effective Distributed ML via a
Stale Synchronous Parallel Parameter Server", NIPS 2013), a pull from a participant at clock
``c`` is served once every participant has reached clock ``c - s``; BSP is SSP(0) and ASP never
waits.

Under BSP the shards also hold the updates pushed at clock ``c`` back until every participant
has finished clock ``c``, then apply their sum in one optimizer step. A pull at clock ``c`` thus
sees exactly the updates of clocks ``< c``, whatever the timing, and a BSP run gives the same
model on one process or many (up to the order of floating-point additions).

The tasks (threads) of a process share one snapshot of pulled values and send one merged push
per shard when all of them have finished a clock (:mod:`~dask_ps.state.client`). Under SSP(s)
a pull at clock ``c`` is served from that snapshot while the slowest clock it reflects is at
least ``c - s``: it includes every update of clocks ``< c - s``, the task's own later updates
only once the snapshot is fetched again (no read-my-writes, unlike Ho et al.'s: one task at
SSP(1) reading the row it adds 1 to at every clock sees 0, 0, 2, 2, 4, 4, and at SSP(100)
0 throughout a 6-clock job). Under ASP a pull at clock ``c`` includes the task's own updates
of clocks ``< c`` (and whatever else the shards applied): a task ahead of its process's other
tasks sends its buffered pushes, with theirs so far, with that pull instead of waiting for
the process's clock, and the snapshot serves a task only if it was fetched at the task's
clock or later and after the task's pushes left.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

__all__ = ["ASP", "BSP", "SSP", "ClockTable", "Consistency", "get_consistency"]

#: Clock of a participant that has finished: it never holds anybody back again.
DONE = np.iinfo(np.int64).max // 2


def _check_staleness(staleness) -> None:
    if staleness is not None and (not isinstance(staleness, numbers.Integral)
                                  or isinstance(staleness, bool) or staleness < 0):
        raise ValueError(f"staleness must be a non-negative integer or None (unbounded), "
                         f"got {staleness!r}")


@dataclass(frozen=True)
class Consistency:
    """Base of the consistency models; ``staleness`` None means unbounded (ASP).

    Raises
    ------
    ValueError
        A staleness that is not a non-negative integer or None.
    """

    staleness: int | None = 0

    def __post_init__(self):
        _check_staleness(self.staleness)

    @property
    def buffered(self) -> bool:
        """Whether pushes wait for the clock barrier (BSP only)."""
        return self.staleness == 0


@dataclass(frozen=True)
class SSP(Consistency):
    """Stale synchronous parallel: a participant may run ``staleness`` clocks ahead.

    Parameters
    ----------
    staleness : int, default 1
        Largest allowed gap between the clock of a pulling participant and the slowest one.

    Raises
    ------
    ValueError
        If ``staleness`` is negative.
    """

    staleness: int = 1

    def __post_init__(self):
        if self.staleness is None:
            raise ValueError("SSP staleness must be a non-negative integer; use ASP for "
                             "unbounded staleness")
        _check_staleness(self.staleness)


@dataclass(frozen=True)
class BSP(Consistency):
    """Bulk synchronous parallel: SSP(0), with updates applied together at each barrier."""

    staleness: int = 0

    def __post_init__(self):
        if self.staleness != 0:
            raise ValueError(f"BSP has staleness 0; use SSP({self.staleness!r}) for more")


@dataclass(frozen=True)
class ASP(Consistency):
    """Asynchronous parallel: pulls never wait; updates apply as they arrive; a task reads
    its own updates of the clocks before its current one."""

    staleness: None = None

    def __post_init__(self):
        if self.staleness is not None:
            raise ValueError(f"ASP has unbounded staleness; use SSP({self.staleness!r}) for "
                             f"a bound")


def get_consistency(spec, staleness: int | None = None) -> Consistency:
    """A :class:`Consistency` from an instance or a name ("bsp", "ssp", "asp").

    Raises
    ------
    ValueError
        For an unknown name (listing the valid ones) or a bad staleness.
    """
    if isinstance(spec, Consistency):
        if staleness is not None and staleness != spec.staleness:
            raise ValueError(f"staleness={staleness!r} conflicts with {spec!r}")
        return spec
    name = str(spec).lower()
    if name == "ssp":
        return SSP(1 if staleness is None else staleness)
    if name in ("bsp", "asp") and staleness is not None:
        raise ValueError(f"staleness applies to consistency='ssp', not {name!r}")
    if name == "bsp":
        return BSP()
    if name == "asp":
        return ASP()
    raise ValueError(f"unknown consistency {spec!r}; valid names are ['asp', 'bsp', 'ssp']")


class ClockTable:
    """Clocks of a job's participants as one shard knows them.

    Parameters
    ----------
    n_participants : int
    consistency : Consistency
    """

    def __init__(self, n_participants: int, consistency: Consistency) -> None:
        self.clocks = np.zeros(n_participants, np.int64)
        self.consistency = consistency
        self._min = 0

    @property
    def min_clock(self) -> int:
        return self._min

    def ready(self, clock: int) -> bool:
        """Whether a pull from a participant at ``clock`` may be served now."""
        s = self.consistency.staleness
        return s is None or self._min >= clock - s

    def advance(self, participant: int, clock: int) -> bool:
        """Record ``participant`` at ``clock``; True when the slowest clock moved."""
        if clock < self.clocks[participant]:
            raise ValueError(f"participant {participant} clock went back from "
                             f"{self.clocks[participant]} to {clock}")
        self.clocks[participant] = clock
        m = int(self.clocks.min())
        moved, self._min = m != self._min, m
        return moved
