# Set-up is part of every target: a fresh clone needs only `make run` or `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test test-fast bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -e ".[test]"
	touch $(STAMP)

run: $(STAMP)  ## the main job: logistic regression on a9a on a local Dask cluster
	$(VENV)/bin/dask-ps train lr --dataset a9a

test: $(STAMP)  ## the whole suite, slow tests included (what CI runs)
	$(PY) -m pytest -q

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow"

bench: $(STAMP)
	$(PY) benchmarks/ps_core.py

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache
