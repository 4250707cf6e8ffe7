# podbench: `make demo` and `make test` are the whole set-up (see README.md).
PYTHON_BIN ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-deps perf reference clean slurm-packages

$(STAMP): setup.cfg pyproject.toml
	@$(PYTHON_BIN) -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "error: podbench needs Python 3.11 (TensorFlow 2.20 pins); set PYTHON_BIN=/path/to/python3.11")'
	$(PYTHON_BIN) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/podbench run

# What `make test` installs from the network (pip, apt): .ci/run makes it first, with the network,
# then runs `make test` in a network namespace of its own, where these are already done.
test-deps: $(STAMP) slurm-packages

test: test-deps
	$(PY) -m pytest

# The Slurm tests run a real one-node cluster (tests/slurm_cluster.py). As root with apt (CI), install its
# packages once; elsewhere, or if apt fails, those tests say why they skipped in pytest's summary.
SLURM_PACKAGES := slurmctld slurmd slurm-client munge
slurm-packages:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && ! command -v slurmd >/dev/null; then \
	  echo "installing $(SLURM_PACKAGES) for the Slurm tests"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    $(SLURM_PACKAGES) >/dev/null) || echo "could not install $(SLURM_PACKAGES): the Slurm tests will skip"; \
	fi

perf: $(STAMP)
	@# --noconftest: the test suite splits the CPU into 2 logical devices; benchmarks run on the plain CPU.
	$(PY) -m pytest tests/perf -s -p no:cacheprovider --noconftest --override-ini addopts=

# The checked-in reference: the comparison table as JSON and its charts (tests check they are current).
reference: $(STAMP)
	$(VENV)/bin/podbench reproduce --json --chart results/charts > results/reference/comparison_2018.json

clean:
	rm -rf $(VENV) build *.egg-info
