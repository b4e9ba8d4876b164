"""A real Streamlit server that logs how long each script run took: for `make bench`, and
for the browser tests that check a click reran only a fragment.

    python -m bench.scripttiming LOG [--bare] run app.py [streamlit options]

A Step press in the browser reruns only the decoding page's step fragment; AppTest cannot
rerun a fragment alone (it reruns the whole page), so the benchmark starts the real server
through this module instead. It starts Streamlit as `make run` does (deploy.launch: the pages'
imports begin at process start); ``--bare`` starts it as a plain ``streamlit run``. It wraps Streamlit's ScriptRunner and appends one JSON line per
script run to LOG: ``{"ms": 31.2, "cpu_ms": 28.0, "gc_ms": 0.0, "fragment": true,
"session": "…"}``.
Callbacks, the page code and queuing its elements all run inside that span; sending them over
the websocket does not. ``cpu_ms`` is the CPU time of the run's own thread and ``gc_ms`` the
collector's pauses in the process during the run, so a slow run can be told apart: work
(cpu close to ms), the collector (gc), or waiting for a core that Chromium or another
session holds (ms well above cpu). On Linux ``queued_ms`` splits that wait: the time the
run's thread was ready but queued for a core (the kernel's schedstat run delay); what is
left of ``ms`` after ``cpu_ms`` and ``queued_ms`` the thread spent blocked, in this server
mostly waiting for the GIL that another thread of the process holds.
"""

from __future__ import annotations

import gc
import json
import sys
import threading
import time
from pathlib import Path

_gc_pauses = {"total_s": 0.0, "started": None}


def _time_collections(phase: str, info: dict) -> None:
    # Collections hold the GIL, so they stall every session's script, not just the
    # thread that triggered them.
    if phase == "start":
        _gc_pauses["started"] = time.perf_counter()
    elif _gc_pauses["started"] is not None:
        _gc_pauses["total_s"] += time.perf_counter() - _gc_pauses["started"]
        _gc_pauses["started"] = None


def queued_s() -> float | None:
    """Seconds this thread has spent ready to run but queued for a core, from the kernel's
    per-thread schedstat (Linux); None elsewhere."""
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


def install(log_path: str | Path) -> None:
    """Time every script run of this process into ``log_path`` (one JSON object a line)."""
    from streamlit.runtime.scriptrunner import script_runner

    original = script_runner.ScriptRunner._run_script
    if getattr(original, "_timed", False):
        return
    lock = threading.Lock()  # sessions run their scripts on threads of their own
    path = Path(log_path)
    if _time_collections not in gc.callbacks:
        gc.callbacks.append(_time_collections)

    def timed(self, rerun_data):
        start, cpu, collected = time.perf_counter(), time.thread_time(), _gc_pauses["total_s"]
        queued = queued_s()
        try:
            return original(self, rerun_data)
        finally:
            record = {
                "ms": round((time.perf_counter() - start) * 1000, 2),
                "cpu_ms": round((time.thread_time() - cpu) * 1000, 2),
                "gc_ms": round((_gc_pauses["total_s"] - collected) * 1000, 2),
                "queued_ms": None if queued is None else round((queued_s() - queued) * 1000, 2),
                "start": time.time() - (time.perf_counter() - start),  # to match a client's
                "fragment": bool(rerun_data.fragment_id_queue),
                "session": getattr(
                    self, "_session_id", None
                ),  # a shared server runs other tabs' scripts too
            }
            with lock, path.open("a", encoding="utf-8") as log:
                log.write(json.dumps(record) + "\n")

    timed._timed = True
    script_runner.ScriptRunner._run_script = timed


def read_runs(log_path: str | Path) -> list[dict]:
    """The runs logged so far, oldest first; nothing yet if the file does not exist."""
    path = Path(log_path)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def runs_after(log_path: str | Path, seen: int, timeout_s: float = 10.0) -> list[dict]:
    """The runs logged after the first ``seen``, waiting up to ``timeout_s`` for one: the
    browser can draw a run's elements before the run itself has finished."""
    deadline = time.perf_counter() + timeout_s
    while True:
        runs = read_runs(log_path)[seen:]
        if runs or time.perf_counter() > deadline:
            return runs
        time.sleep(0.02)


def settled(log_path: str | Path, quiet_s: float = 1.0, timeout_s: float = 60.0) -> int:
    """How many runs are logged once none has been added for ``quiet_s``."""
    deadline = time.perf_counter() + timeout_s
    count, since = len(read_runs(log_path)), time.perf_counter()
    while time.perf_counter() - since < quiet_s and time.perf_counter() < deadline:
        time.sleep(0.05)
        now = len(read_runs(log_path))
        if now != count:
            count, since = now, time.perf_counter()
    return count


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    bare = "--bare" in args[1:2]
    if bare:
        args = [args[0], *args[2:]]
    if len(args) < 2:
        raise SystemExit("usage: python -m bench.scripttiming LOG [--bare] run app.py [options]")
    install(args[0])
    from deploy.launch import main as launch

    launch(args[1:], bare=bare)


if __name__ == "__main__":
    main()
