"""Shared pytest set-up: the `gpu` marker's skip, tiny local Hugging Face models, and which
tests share a worker when the suite runs in parallel.

Parallel workers (pytest-xdist): `make test` and `make test-fast` run
``pytest -n 2 --dist loadgroup``. Each test goes to whichever worker is free, except where
tests share something expensive; those get an ``xdist_group`` here, from their fixtures
alone, so a new test module is placed correctly without doing anything:

- every test that uses the live app server (``app_url``, and so ``page``) is in the group
  ``app-server`` unless its module names another: the page sweep, the real-model and
  token-cost tests share one `streamlit run` (and its cached real-model results); the other
  browser modules name ``app-server-b`` by hand, so under xdist the two halves run on two
  workers, each with a server and a Chromium of its own (tests/e2e/conftest.py says why);
- the class's browser tests share one class server (group ``class-server``) and the balancer
  and chaos tests one `make serve` deployment (``deployment``), tests/e2e/servers.py;
- every test of a module with a module-scoped fixture (a loaded model, a database) is in a
  group named after its file, so the fixture is built once and the module's tests run in
  their written order;
- a test may name its group by hand (``@pytest.mark.xdist_group("name")``); that wins.

Session-scoped fixtures are built once per worker. A test that changes process-wide state
(environment variables, torch's threads, a cached model) sees only its own worker's, as it
sees only its own process without xdist; without ``-n`` nothing here changes anything.
"""

from __future__ import annotations

import os
import sys
import tempfile

import pytest

# Python's bytecode cache on for the suite, whatever the environment says
# (PYTHONDONTWRITEBYTECODE=1 is set on some machines, this one included): the suite starts
# about 80 Python processes (workers, servers, replicas, trainers), and each would compile the
# lab's modules from source again, and each worker rewrite every test module's asserts. The
# caches go to __pycache__/ folders, which git ignores. Set here, before the workers and
# servers start (they inherit the environment).
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
    sys.dont_write_bytecode = False

# Under xdist each worker gets its share of the cores for torch (and the servers it starts),
# so two workers on two cores do not run four threads. Set before any test imports torch.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT", "").isdigit():
    _share = str(max(1, (os.cpu_count() or 2) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))
    os.environ.setdefault("OMP_NUM_THREADS", _share)
    os.environ.setdefault("ATTENTION_LAB_THREADS", _share)

# AppTests run app.py in this process: no background preloading competing with the tests
# (the servers the browser tests start preload as in production: bench.loadtest.serve).
os.environ.setdefault("ATTENTION_LAB_PRELOAD", "0")
# The class store (classroom/): tests and the servers they start never write into the
# checkout's .data/, and each xdist worker has a store of its own (workers inherit the
# controller's environment: one shared SQLite file made a `make serve` test on one worker
# fail with "database is locked" while another worker's class wrote to it). A store set from
# outside is kept; a test that needs its own store sets these itself.
if os.environ.get("_LAB_TEST_DATA", "") == os.environ.get("ATTENTION_LAB_DATA", ""):
    os.environ["ATTENTION_LAB_DATA"] = tempfile.mkdtemp(prefix="lab-test-data-")
    os.environ["_LAB_TEST_DATA"] = os.environ["ATTENTION_LAB_DATA"]


APP_SERVER_FIXTURES = {"app_url"}  # tests/e2e/conftest.py: one live server per worker
APP_SERVER_GROUP = "app-server"
SHARED_SCOPES = {"module", "package", "class"}


def _shares_a_fixture(item: pytest.Item) -> bool:
    """Whether ``item`` uses a fixture built once for its module (or package, or class)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(defs and defs[-1].scope in SHARED_SCOPES for defs in info.name2fixturedefs.values())


def assign_xdist_groups(items: list[pytest.Item]) -> None:
    """The ``xdist_group`` of each test (see the module's docstring); a hand-set one wins."""
    shared_modules = {item.path for item in items if _shares_a_fixture(item)}
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        if APP_SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.xdist_group(APP_SERVER_GROUP))
        elif item.path in shared_modules:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


def name_groups_in_ids(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each grouped test's id ends in ``@group``: what xdist's loadgroup scheduler reads.

    xdist 3.8 appends it by setting ``item._nodeid``, which pytest 9.2 no longer reads (a
    node's id is ``item._id``), so no group held: the balancer tests ran on two workers at
    once, two HAProxies on one admin socket (CI of stop 39: "r1 still UP after its death",
    read from the other worker's balancer). Done here, for the pytest that has ``_id``."""
    # config.option.loadgroup: set in xdist's workers only (the controller collects too)
    if not items or not getattr(config.option, "loadgroup", False):
        return
    if not hasattr(items[0], "_id"):
        return
    from _pytest.nodeid import coerce_node_id

    for item in items:
        names = sorted({str(m.args[0]) for m in item.iter_markers("xdist_group") if m.args})
        if names and "@" not in item.nodeid:
            item._id = coerce_node_id(f"{item.nodeid}@{'_'.join(names)}")


# tryfirst: before xdist's own hook, which reads the marks set here.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip `gpu` tests, with the reason shown, where PyTorch sees no CUDA device; tie tests
    that share an expensive fixture to one worker."""
    assign_xdist_groups(items)
    name_groups_in_ids(config, items)
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    import torch  # only when gpu tests were collected: torch takes a second or two to import

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU; PyTorch sees none")
    for item in gpu_items:
        item.add_marker(skip)


@pytest.fixture(scope="session")
def hf_folders(tmp_path_factory):
    """name -> folder of a tiny random Hugging Face model (bert, distilbert, gpt2, bart, t5)."""
    from tests.hf_folders import build_folders

    return build_folders(tmp_path_factory)


def share_app_test_setup() -> None:
    """What a Streamlit server does once and AppTest does per page or per rerun, done once
    per process: the installed-component scan and the scripts' compiled code.

    - A server scans every installed distribution's metadata for v2 components when it
      starts; AppTest does it for every new AppTest (``_run`` builds a BidiComponentManager
      per instance): with this environment's ~1,000 distributions, about 0.3 s of CPU per
      page a test opened. The installed packages do not change during a run.
    - A server compiles app.py and each page once (its ScriptCache); AppTest builds a new
      ScriptCache for every run, parsing, rewriting (Streamlit's "magic") and compiling
      app.py and the page again on every rerun (the page through the PagesManager's cache,
      app.py through the script runner's own). One cache is kept for both instead, and a script is
      compiled again when its file changes (modification time and size), as a server with
      a file watcher would.
    """
    import os
    import threading

    from streamlit import config
    from streamlit.components.v2 import manifest_scanner
    from streamlit.runtime.scriptrunner.script_cache import ScriptCache
    from streamlit.testing.v1 import app_test, local_script_runner

    if getattr(manifest_scanner.scan_component_manifests, "_scanned_once", False):
        return
    scan = manifest_scanner.scan_component_manifests
    kept: dict[str, list] = {}

    def scan_once(max_workers=None):
        if "found" not in kept:
            kept["found"] = scan(max_workers)
        return list(kept["found"])

    scan_once._scanned_once = True
    manifest_scanner.scan_component_manifests = scan_once

    class KeptScripts(ScriptCache):
        """One process-wide ScriptCache that notices an edited or replaced script."""

        def __init__(self) -> None:
            super().__init__()
            self._stamps: dict[str, tuple] = {}
            self._stamp_lock = threading.Lock()

        def get_bytecode(self, script_path: str):
            path = os.path.abspath(script_path)
            st = os.stat(path)
            stamp = (st.st_mtime_ns, st.st_size, config.get_option("runner.magicEnabled"))
            with self._stamp_lock:
                if self._stamps.get(path) != stamp:
                    with self._lock:
                        self._cache.pop(path, None)
                    self._stamps[path] = stamp
            return super().get_bytecode(path)

    shared = KeptScripts()
    app_test.ScriptCache = lambda: shared  # the pages (PagesManager's cache)
    local_script_runner.ScriptCache = lambda: shared  # app.py itself (the runner's own)


@pytest.fixture(autouse=True)
def _app_test_setup_shared():
    """Where the test's modules imported Streamlit (AppTests), what a server does once is
    done once per process (share_app_test_setup); tests without Streamlit do not import it."""
    import sys

    if "streamlit" in sys.modules:
        share_app_test_setup()
    yield


@pytest.fixture(autouse=True)
def _torch_threads_kept():
    """Each test starts with its worker's torch thread count: a test (or the code it runs)
    that raises it would otherwise leave every later test in the worker at that count, two
    workers then running four threads on two cores, and OpenMP's spin-waits made small-op
    tests ten times slower (a trainer run did this until it restored its caller's count)."""
    import sys

    torch = sys.modules.get("torch")  # not imported here: tests without torch stay light
    before = torch.get_num_threads() if torch is not None else None
    yield
    torch = sys.modules.get("torch")
    if torch is not None and before is not None and torch.get_num_threads() != before:
        torch.set_num_threads(before)
