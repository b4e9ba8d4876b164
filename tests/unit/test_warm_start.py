"""The server's warm start (ui.warm, deploy.launch): what a first visitor's page imports is
imported before that visitor arrives, and no script run imports beside the thread doing it."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from ui import warm

ROOT = Path(__file__).resolve().parents[2]


def test_the_warm_up_takes_the_heavy_libraries_first_then_the_frame():
    names = warm.frame_imports()
    # the emoji catalogue that app.py's first line needs, then the longest imports
    assert names[:3] == ["streamlit.emojis", "torch", "pandas"]
    assert {"ui.sidebar", "model.runtime.device", "ui.preload"} <= set(names)  # app.py's
    assert "ui.concepts" not in names  # one page's own module: that page imports it
    assert "__future__" not in names and len(names) == len(set(names))


WARM_AND_COUNT = """
import gc
from ui.warm import warm_imports
before = gc.get_stats()[2]["collections"]
failed = warm_imports()
print(failed, gc.get_stats()[2]["collections"] - before, gc.isenabled(), gc.get_freeze_count())
"""


def test_the_warm_up_imports_everything_it_names_in_a_fresh_interpreter():
    """A frame import that no longer resolves would be found here, not by a first visitor;
    and the imports neither pay for full collections (each one a fraction of a second of a
    first visitor's wait) nor leave the collector off or their objects in its sight."""
    done = subprocess.run(
        [sys.executable, "-c", WARM_AND_COUNT],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    failed, full_collections, collecting, frozen = (
        done.stdout.strip().splitlines()[-1].rsplit(" ", 3)
    )
    assert failed == "[]"
    assert full_collections == "0" and collecting == "True"
    assert int(frozen) > 100_000  # torch, pandas and plotly's objects, out of its sight


def test_a_script_run_waits_for_the_warm_up_thread_before_importing(monkeypatch):
    """Two threads importing the same circle of modules deadlock (Python then fails one of
    the imports, as `make run` once did): app.py's run must start after the thread ends."""
    ended = threading.Event()

    def slow_imports():
        time.sleep(0.3)
        ended.set()

    thread = threading.Thread(target=slow_imports)
    monkeypatch.setattr(warm, "_started", [thread])
    thread.start()
    warm.wait_for_warm_imports()
    assert ended.is_set()


def test_only_the_lab_itself_is_warmed_up(tmp_path, monkeypatch):
    from deploy.launch import serves_the_lab

    monkeypatch.chdir(ROOT)  # a relative script is found from where it is run, as Streamlit does
    assert serves_the_lab(["run", "app.py", "--server.port", "8501"])  # from the checkout
    assert serves_the_lab(["run", str(ROOT / "app.py")])
    assert not serves_the_lab(["run", str(tmp_path / "tiny.py")])  # another app: no lab imports
    assert not serves_the_lab(["hello"])


def test_a_permalink_opened_first_runs_in_the_frame_not_bare(monkeypatch):
    """A page run bare would import beside the warm-up thread (a deadlock, seen in the suite);
    under deploy.launch every run starts in app.py, which waits for that thread."""
    from streamlit.runtime.pages_manager import PagesManager

    from deploy.launch import every_run_in_the_frame

    monkeypatch.setattr(PagesManager, "uses_pages_directory", None)  # a fresh server's state
    every_run_in_the_frame()
    assert PagesManager.uses_pages_directory is False
