# Set-up is part of every target: a fresh clone needs only `make run` or `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test test-fast bench clean chromium slurm

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -e ".[test]"
	touch $(STAMP)

run: $(STAMP)  ## the main job: logistic regression on a9a on a local Dask cluster
	$(VENV)/bin/dask-ps train lr --dataset a9a

test: $(STAMP) chromium slurm  ## the whole suite, slow tests included (what CI runs)
	$(PY) -m pytest -q

# Headless Chromium draws the dashboard page in tests/diagnostics (Debian's package).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  SUDO=""; [ "$$(id -u)" -eq 0 ] || SUDO="sudo -n"; \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; }

# Debian's Slurm and munge for tests/hpc, which start a private single-node Slurm. Where they
# cannot be installed (not root, no apt-get), the HPC tests are skipped, saying why.
slurm:
	@SUDO=""; [ "$$(id -u)" -eq 0 ] || SUDO="sudo -n"; \
	  $$SUDO bash tools/slurm/start_slurm.sh install || \
	  echo "Slurm not installed: tests/hpc will be skipped (pytest -ra gives the reason)"

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow"

bench: $(STAMP)
	$(PY) benchmarks/ps_core.py

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache
