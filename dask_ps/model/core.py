"""PSModel: named tables sharded over Dask actors; the API every algorithm is written in.

The class gathers the model's concepts, each in its own module of this package:
:mod:`~dask_ps.model.placement` (where shards live), :mod:`~dask_ps.model.connection` (how a
process reaches them), :mod:`~dask_ps.model.jobs` (tasks that pull, push and clock),
:mod:`~dask_ps.model.checkpoint` (saving and loading rows), :mod:`~dask_ps.model.format`
(the checkpoint store) and :mod:`~dask_ps.model.recovery` (lost shards and workers).
"""

from __future__ import annotations

import numbers
import uuid
from typing import Callable

import numpy as np

from ..cluster import check_client
from ..state.optimizers import Optimizer, get_optimizer
from ..state.table import Init, TableSpec
from ..state.transport import ShardRef
from . import checkpoint, connection, jobs, placement, recovery
from . import export as exporting
from .table import Table

__all__ = ["PSModel"]

DEFAULT_TIMEOUT = 120.0


class PSModel:
    """A parameter server: named tables, sharded over Dask actors, updated by server-side rules.

    Parameters
    ----------
    client : distributed.Client or "local", optional
        Cluster to place the shards on. Default: the current Dask client if there is one,
        except inside a Dask worker (a fit in a task, e.g. of joblib's "dask" backend);
        otherwise, or with ``"local"``, the shards live in this process (no cluster; same
        results under BSP).
    n_shards : int, optional
        Number of shards. Default: one per worker process (one per ``resources`` worker
        when given), or 1 without a cluster. Shards go round-robin over those workers.
    resources : str, optional
        Place shards only on workers offering this resource (e.g. ``"ps"`` for dedicated
        parameter-server workers started with ``--resources ps=1``).
    timeout : float, default 120
        Seconds before a call to a shard, including a pull waiting for slower clocks, fails
        with :class:`~dask_ps.exceptions.ShardUnavailableError` or ``TimeoutError``.

    Raises
    ------
    ValueError
        ``n_shards`` below 1, a closed ``client``, or no worker offers ``resources``.
    TimeoutError
        The shards were not placed within ``timeout`` (at least 120 s: no free worker
        thread to create them).

    See Also
    --------
    PSModel.add_table, PSModel.fit_partitions, PSModel.run, PSModel.save

    Notes
    -----
    The API follows the parameter servers of Li et al. (OSDI 2014; ps-lite) and Angel (Jiang
    et al., 2018): tables pulled and pushed by key, update rules applied on the servers,
    functions run next to the shards; clocks and bounded staleness follow Ho et al. (NIPS 2013).

    Examples
    --------
    >>> import numpy as np, dask_ps
    >>> model = dask_ps.PSModel("local", n_shards=2)   # no cluster: shards in this process
    >>> w = model.add_table("w", shape=(10,), optimizer="add")
    >>> model.push("w", [1, 1, 7], [1.0, 2.0, 5.0])
    >>> model.pull("w", [1, 7, 0])
    array([3., 5., 0.], dtype=float32)
    >>> model.close()
    """

    def __init__(self, client=None, n_shards: int | None = None, *, resources: str | None = None,
                 timeout: float = DEFAULT_TIMEOUT) -> None:
        if n_shards is not None and (not isinstance(n_shards, numbers.Integral)
                                     or isinstance(n_shards, bool) or n_shards < 1):
            raise ValueError(f"n_shards must be a positive integer, got {n_shards!r}")
        if not (isinstance(timeout, numbers.Real) and timeout > 0):
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        check_client(client)
        self._job: str | None = None
        self.uid = uuid.uuid4().hex[:12]
        self.timeout = float(timeout)
        self.specs: dict[str, TableSpec] = {}
        self._scratch: set[str] = set()  # tables checkpoints do not keep (add_table)
        self._client = None if isinstance(client, str) else (
            client if client is not None else connection.default_cluster())
        self._futures = []
        self._closed = False
        self._resources = resources
        self._generation = 0
        self._seen_workers: set[str] = set()
        self.checkpoint_info = None
        if self._client is None:
            n = int(n_shards or 1)
            connection.local_shards(self.uid, n)
            self.shards = [ShardRef(i, "local", "") for i in range(n)]
        else:
            self.shards = placement.place_shards(self, n_shards)

    @property
    def n_shards(self) -> int:
        """Number of shards holding the tables."""
        return len(self.shards)

    @property
    def client(self):
        """The Dask client the shards live on, or None in-process."""
        return self._client

    @property
    def n_workers(self) -> int:
        """Worker processes that tasks may run on (1 in-process)."""
        if self.is_local:
            return 1
        return len(placement.live_workers(self))

    @property
    def is_local(self) -> bool:
        """Whether the shards live in this process (no Dask client)."""
        return self.shards[0].address == "local"

    # -- tables ---------------------------------------------------------------------------
    def add_table(self, name: str, shape, dtype="float32", *, partitioner: str = "range",
                  optimizer: str | Optimizer | None = None, init="zeros",
                  seed: int = 0, checkpoint: bool = True) -> "Table":
        """Create a table on every shard.

        Parameters
        ----------
        name : str
        shape : int or tuple
            ``(n_rows,)`` for a vector, ``(n_rows, ncols)`` for a matrix. For a sparse table
            (``partitioner="hash"``) ``n_rows`` is ignored: any int64/uint64 key is valid
            (use ``(None, ncols)`` or ``(2**63, ncols)``).
        dtype : {"float32", "float64", "int32", "int64"}, default "float32"
            An integer table refuses a sum past its dtype (a ValueError naming the table,
            shard and key; see :meth:`push`) instead of wrapping.
        partitioner : {"range", "hash"}, default "range"
            "range": dense rows cut into contiguous blocks. "hash": sparse, rows created on
            first touch, by a pull as by a push (a key never seen reads its ``init``
            value, and keeps a row); memory proportional to the keys used. A uint64 key
            and the int64 of the same 64 bits are one key (``2**64 - 1`` is ``-1``), and
            keys come back as int64.
        optimizer : str or Optimizer, optional
            Server-side update rule: "add" (default; pushes are deltas), "sgd", "adagrad",
            "adam", "ftrl", or an instance with hyper-parameters, e.g. ``FTRL(alpha=0.1)``.
        init : "zeros", "ones", float, ("uniform", low, high) or ("normal", mean, std)
            Value of new rows, a pure function of (key, column, seed).
        seed : int, default 0
        checkpoint : bool, default True
            Whether checkpoints keep the table. False: scratch, whose content between jobs
            means nothing (a GBDT fit's histograms): a save skips it, a restore (a resume, a
            recovery) leaves it empty on every shard and compares nothing of it with the
            checkpoint, so its shape may differ from one fit to the next.

        Returns
        -------
        Table

        Raises
        ------
        ValueError
            Duplicate name, bad shape/dtype/partitioner/init, unknown optimizer, or a
            float-only optimizer on an integer table.
        MemoryError
            The model's tables would not fit in its shards' memory: rows x columns x dtype
            with the optimizer's state, on the most loaded worker, above 95% (Dask's
            ``terminate`` fraction) of the smallest shard worker's memory limit, or
            in-process above what this process may use (see
            :func:`~dask_ps.model.placement.check_room`). A hashed table counts its first
            rows only (it grows with its keys). Nothing is created.
        """
        if not isinstance(name, str) or not name:
            raise ValueError(f"a table name must be a non-empty string, got {name!r}")
        self._refuse_in_job(f"add table {name!r}", "add tables before a job, from the driver")
        if name in self.specs:
            raise ValueError(f"the model already has a table {name!r}")
        opt = get_optimizer(optimizer)
        spec = TableSpec.build(name, shape, dtype, partitioner, opt, Init.parse(init, seed),
                               self.n_shards)
        placement.check_room(self, spec)
        connection.call_all(self, "create_table", spec)
        self.specs[name] = spec
        if not checkpoint:
            self._scratch.add(name)
        return Table(self, spec)

    def empty_table(self, name: str) -> None:
        """Make table ``name`` again as :meth:`add_table` made it, every row back to its
        ``init``, from the driver outside a job: each shard drops its part and allocates it
        afresh, so that its memory goes (a dense table of zeros takes memory again only as
        its rows are written). E.g. a table that only carries state into checkpoints, after
        each save.

        Raises
        ------
        UnknownTableError
            No such table.
        RuntimeError
            A job is running.
        """
        spec = connection.process_client(self).spec(name)
        self._refuse_in_job(f"empty table {name!r}", "empty tables between jobs")
        connection.call_all(self, "drop_table", name)
        connection.call_all(self, "create_table", spec)

    @property
    def saved_specs(self) -> dict[str, TableSpec]:
        """The specs of the tables checkpoints keep (all but scratch ones, see
        :meth:`add_table`), in order of creation."""
        return {n: s for n, s in self.specs.items() if n not in self._scratch}

    def table(self, name: str) -> "Table":
        """The handle of table ``name``; raises :class:`UnknownTableError` if absent."""
        return Table(self, connection.process_client(self).spec(name))

    @property
    def tables(self) -> list[str]:
        """Names of the tables, in order of creation."""
        return list(self.specs)

    def pull(self, table: str, keys=None) -> np.ndarray:
        """Values of ``keys`` now, outside any job (no clocks); see :meth:`WorkerView.pull`."""
        return connection.process_client(self).pull(table, keys)

    def push(self, table: str, keys, updates) -> None:
        """Apply ``updates`` for ``keys`` now, outside any job, with the table's optimizer.

        Raises
        ------
        ValueError
            As :meth:`WorkerView.push`; on an integer table, also a sum past its dtype (of
            repeated keys, or with the rows), naming the table, shard and key: nothing of
            the push is applied on that shard.
        RuntimeError
            A job is running (its tasks' clocks order every write: tasks push with
            ``ps.push``).
        """
        self._refuse_in_job(f"push to table {table!r}", "push between jobs; a task pushes "
                            "with ps.push")
        connection.process_client(self).push_now(table, keys, updates)

    def _refuse_in_job(self, doing: str, advice: str) -> None:
        """Raise RuntimeError ``"cannot {doing} while job '...' runs: {advice}"`` if a job
        runs: the driver's writes (tables, rows, checkpoints) wait for its end, or a task
        would see rows change in the middle of its clock (no BSP). Reads stay allowed."""
        if self._job is not None:
            raise RuntimeError(f"cannot {doing} while job {self._job!r} runs: {advice}")

    def stats(self) -> list[dict]:
        """Per-shard counters (calls, keys, bytes pulled and pushed), tables and clocks.

        Each shard's ``tables`` give per table its ``rows`` and ``nbytes``, and for a hashed
        table ``keys_probed`` and ``keys_recalled``: keys whose rows the shard found by
        probing its index, and in its memo of recent lookups (the push of a
        pull-compute-push step, whose keys its pull looked up).
        """
        return connection.call_all(self, "stats")

    # -- jobs (dask_ps.model.jobs) ----------------------------------------------------------
    run = jobs.run
    fit_partitions = jobs.fit_partitions

    # -- functions next to the shards -------------------------------------------------------
    def map_shards(self, table: str, fn: Callable, *args, key_range: bool = False) -> list:
        """``fn(keys, values, slots, *args)`` on each shard's rows of ``table``, in shard order.

        ``keys`` (n,) int64 are global keys (with ``key_range=True``, a dense table's shard
        passes ``(start, stop)`` instead, the range it holds: no array of every key is built);
        ``values`` (n, ncols) and the ``slots`` arrays are the shard's own (a function may
        update them in place). Only the results travel; ``fn`` runs in a thread of the
        shard's worker, off its event loop.

        Raises
        ------
        UnknownTableError
            No such table.
        Exception
            What ``fn`` raised on a shard, as itself (same type and attributes), with a note
            (``add_note``) naming the function, the table, the shard and its worker; a
            result that cannot be pickled back from a remote shard raises pickle's own
            error (e.g. TypeError), with such a note saying so; so does an ``fn`` or an
            argument that cannot be pickled for a remote shard (the note naming the shard
            and which argument), before any shard runs ``fn``.
        """
        return connection.process_client(self).map_shards(table, fn, args,
                                                          key_range=key_range)

    def lost_shards(self) -> list[int]:
        """Indices of the shards whose worker has left the cluster (none in-process)."""
        return placement.lost_shards(self)

    # -- checkpoints (dask_ps.model.checkpoint) and recovery (dask_ps.model.recovery) -------
    save = checkpoint.save
    load = classmethod(checkpoint.load)
    restore = checkpoint.restore
    export = exporting.export
    recover = recovery.recover

    # -- life -----------------------------------------------------------------------------
    def close(self) -> None:
        """Release the shards: their actors and memory go on every worker; later calls raise
        :class:`~dask_ps.exceptions.ClosedModelError`. Idempotent."""
        if self._closed:
            return
        running = self._client is not None and self._client.status == "running"
        if running:
            try:  # a shard whose worker is gone has no channel left to close: skip it
                lost = set(self.lost_shards())
                connection.call_each(self, "close_channel", timeout=2.0,
                                     shards=[i for i in range(self.n_shards) if i not in lost])
                connection.call_each(self, "drop_tables", timeout=2.0,
                                     shards=[i for i in range(self.n_shards) if i not in lost])
            except Exception:  # closing must not fail because a worker is leaving
                pass
        self._closed = True
        connection.forget(self.uid)
        connection.drop_local(self.uid)
        if running:
            try:
                self._client.run(connection.forget, self.uid)
            except Exception:  # closing must not fail because a worker is already gone
                pass
            try:  # forgotten now, whatever else holds them (an actor handle in a
                # reference cycle kept the shards for ~25 s, until a garbage collection)
                self._client.cancel(self._futures, force=True)
            except Exception:  # noqa: BLE001 - closing must not fail on a leaving cluster
                for f in self._futures:
                    f.release()
        self._futures = []

    def __enter__(self) -> "PSModel":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __getstate__(self) -> dict:
        # Tasks get the layout only: the client and the actor futures stay with the driver.
        state = self.__dict__.copy()
        state["_client"], state["_futures"] = None, []
        return state

    def __repr__(self) -> str:
        where = "in-process" if self.is_local else "dask"
        return (f"<PSModel {self.uid}: {self.n_shards} shards ({where}), "
                f"tables {self.tables}{' closed' if self._closed else ''}>")
