# Attention Lab — the everyday commands. GNU make.
#   make run     serve the app on http://localhost:$(PORT)  (PORT defaults to 8501)
#   make test    lint, then the whole test suite
#   make lint    ruff only
#   make bench   speed and memory, written to docs/benchmarks.md + .json (bench/benchreport.py)

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PORT   ?= 8501

# Stamps record the last successful install, so pip runs again only when a requirements
# file is newer than its stamp.
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: run test lint bench clean

run: $(RUN_STAMP)
	$(PY) -m streamlit run app.py --server.headless true --server.port $(PORT)

test: $(DEV_STAMP)
	$(PY) -m ruff check .
	$(PY) -m pytest

lint: $(DEV_STAMP)
	$(PY) -m ruff check .

bench: $(DEV_STAMP)
	$(PY) -m bench.benchreport --report docs/benchmarks.md --json docs/benchmarks.json

$(PY):
	$(PYTHON) -m venv $(VENV)

$(RUN_STAMP): requirements.txt | $(PY)
	$(PY) -m pip install -r requirements.txt
	touch $@

# requirements-dev.txt includes requirements.txt, so this install satisfies both stamps.
$(DEV_STAMP): requirements.txt requirements-dev.txt | $(PY)
	$(PY) -m pip install -r requirements-dev.txt
	touch $@ $(RUN_STAMP)

# Removes caches and test output; the virtual environment stays (it is slow to rebuild).
clean:
	rm -rf .pytest_cache .ruff_cache tests/artifacts
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -exec rm -rf {} +
