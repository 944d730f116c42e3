"""Prefixes of the Dask keys dask_ps gives its actors and tasks.

The model names its shard actors and job tasks with these prefixes; the dashboard's collector
finds them on the scheduler by the same names (imported from here, never copied).
"""

__all__ = ["SHARD_PREFIX", "TASKS_PREFIX"]

#: ``f"{SHARD_PREFIX}{model uid}-{shard}[-g{generation}]"``: a shard actor.
SHARD_PREFIX = "dask-ps-shard-"
#: ``f"{TASKS_PREFIX}{job}-{participant}"``: the Dask task running a job's tasks on a worker.
TASKS_PREFIX = "dask-ps-tasks-"
