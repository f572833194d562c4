# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test demo lint typecheck pytest bench clean java kcat venv

venv: $(STAMP)

$(STAMP): pyproject.toml
	@$(MAKE) --no-print-directory java
	@$(MAKE) --no-print-directory kcat
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	@touch $(STAMP)

# ZooKeeper (and Spark) run on the JVM; install a headless JRE through apt when java is absent.
java:
	@command -v java >/dev/null 2>&1 || { \
	  echo "java not found: installing a headless JRE with apt"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q default-jre-headless; }

# kcat (librdkafka's CLI) for the shim's `kcat -L` test; optional: without sudo or network that test is skipped.
kcat:
	@command -v kcat >/dev/null 2>&1 || { \
	  echo "kcat not found: installing it with apt (optional; its test is skipped without it)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo -n ); \
	  { $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q kcat; } \
	    || echo "could not install kcat; continuing without it"; }

lint: venv
	$(VENV)/bin/ruff check .

typecheck: venv
	$(VENV)/bin/mypy

pytest: venv
	$(VENV)/bin/pytest -q

test: lint typecheck pytest

demo: venv
	$(VENV)/bin/python examples/demo.py

bench: venv
	$(VENV)/bin/python -m bench.run_all

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build *.egg-info
