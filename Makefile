# Set-up is part of every target: a fresh clone needs only `make run` or `make test`.
# Installs are pinned by requirements/constraints.txt (the versions the suite last passed
# with); `make test-latest` tries the newest versions in a venv of their own, and
# `make constraints` then pins what that venv holds.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# numba's on-disk caches of the kernels (next to the sources), filled once after installing
# and again whenever a source file changes, so the first fit does not compile (dask_ps._warm)
WARM := $(VENV)/.warm
CONSTRAINTS := requirements/constraints.txt
LATEST := .venv-latest
LATEST_STAMP := $(LATEST)/.installed

.PHONY: run test test-fast test-latest constraints bench clean chromium slurm

$(STAMP): pyproject.toml $(CONSTRAINTS)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip -c $(CONSTRAINTS)
	$(PY) -m pip install -c $(CONSTRAINTS) -e ".[test]"
	touch $(STAMP)

$(WARM): $(STAMP) $(shell find dask_ps -name '*.py')
	$(PY) -m dask_ps._warm
	touch $(WARM)

# The newest release of every dependency (no constraints), upgraded on every run.
$(LATEST_STAMP): pyproject.toml
	$(PYTHON) -m venv $(LATEST)
	$(LATEST)/bin/python -m pip install --upgrade pip
	$(LATEST)/bin/python -m pip install --upgrade --upgrade-strategy eager -e ".[test]"
	touch $(LATEST_STAMP)

test-latest: chromium  ## the whole suite against the newest versions of every dependency
	rm -f $(LATEST_STAMP)
	$(MAKE) $(LATEST_STAMP)
	$(LATEST)/bin/python -m pytest -q

constraints: $(LATEST_STAMP)  ## pin what .venv-latest holds (run after test-latest passes)
	{ echo "# Versions 'make' and '.ci/run' install (pip install -c): the set the suite last passed with."; \
	  echo "# Regenerate with 'make constraints' after 'make test-latest' passes (see the Makefile)."; \
	  $(LATEST)/bin/python -m pip freeze --all --exclude-editable | grep -v '^setuptools=='; \
	} > $(CONSTRAINTS)

run: $(WARM)  ## the main job: logistic regression on a9a on a local Dask cluster
	$(VENV)/bin/dask-ps train lr --dataset a9a

test: $(WARM) chromium slurm  ## the whole suite, slow tests included (what CI runs)
	$(PY) -m pytest -q -n 2 --dist loadgroup

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

test-fast: $(WARM)
	$(PY) -m pytest -q -n 2 --dist loadgroup -m "not slow"

bench: $(WARM)
	$(PY) benchmarks/ps_core.py

clean:
	rm -rf $(VENV) $(LATEST) *.egg-info .pytest_cache
