"""Tests against a real single-node Slurm. A package, so that its conftest.py is not taken
for tests/conftest.py, which other test modules import as ``conftest``."""
