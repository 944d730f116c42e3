"""``python -m dask_ps.cli``: the ``dask-ps`` command."""

from . import main

raise SystemExit(main())
