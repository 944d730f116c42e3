"""Tests against moto's local S3 server. A package, so that its conftest.py is not taken for
tests/conftest.py, which other test modules import as ``conftest``."""
