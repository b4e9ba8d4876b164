"""The first visit after a start, warmed up on both sides: the browser fetches the chart
renderer's code while the server still works on the first page, and the server imports what
the pages need before the first visitor arrives.

Streamlit's frontend loads plotly.js (its PlotlyChart chunk, ~4.7 MB) only when the first
chart arrives, near the end of a first visit's script run; downloading and compiling it
then held a chart page's first drawing up by seconds. Emitted first in app.py, before the
imports of torch and the models, this asks the browser to fetch and compile that chunk at
once (a dynamic ``import()`` of the same URL, which the frontend's own import then reuses).
Nothing is drawn; where the chunk cannot be found (another Streamlit build) nothing is sent.

On the server, deploy.launch (`make run`, `make serve`) starts ``warm_imports`` on a thread
as soon as Streamlit answers: torch, pandas, plotly and the frame's modules, which every
page needs; app.py waits for that thread before its own imports.
"""

from __future__ import annotations

import gc
import json
import logging
import re
import threading
from functools import cache
from pathlib import Path

import streamlit as st

STATIC_JS = Path(st.__file__).parent / "static" / "static" / "js"
CHUNK = re.compile(r"PlotlyChart\.[A-Za-z0-9_-]+\.js")


@cache
def plotly_chunk() -> str | None:
    """The file name of Streamlit's PlotlyChart chunk, or None."""
    found = [p.name for p in STATIC_JS.glob("PlotlyChart.*.js") if CHUNK.fullmatch(p.name)]
    return found[0] if len(found) == 1 else None


def warm_html(chunk: str) -> str:
    """The invisible element: a hidden marker, the rule that takes its box out (so it adds no
    gap above the page) and the script that imports ``chunk`` (a file name Streamlit ships,
    no user text) beside the frontend's own entry script, once per tab."""
    hide = (
        '<div data-lab-warm hidden></div><style>[data-testid="stElementContainer"]'
        ":has([data-lab-warm]) { display: none; }</style>"
    )
    script = (
        "<script>(() => { if (window.__labChartsWarm) return; window.__labChartsWarm = true;"
        " const entry = [...document.scripts].find(s => /static\\/js\\/index\\.[^/]+\\.js$/"
        ".test(s.src)); if (!entry) return;"
        f" import(entry.src.replace(/index\\.[^/]+\\.js$/, {json.dumps(chunk)}))"
        ".catch(() => {}); })();</script>"
    )
    return hide + script


def warm_chart_code() -> None:
    """Start loading plotly.js now; the frontend's later import of it finds it loaded."""
    chunk = plotly_chunk()
    if chunk is not None:
        st.html(warm_html(chunk), unsafe_allow_javascript=True)


# The server side: the first visitor's script run imported torch, pandas, plotly and the lab's
# own modules (~1.3 s of a first run on this 2-core machine) only after the browser had loaded
# Streamlit's frontend and connected.
ROOT = Path(__file__).resolve().parents[1]
log = logging.getLogger(__name__)
_started: list[threading.Thread] = []  # the warm-up thread, once started
# What every page's first run needs: the heavy libraries (torch alone ~1 s here), then the
# frame's own imports (app.py: the sidebar, the model picker, the chart helpers). A page's own
# modules are small and only that page needs them: its script imports them, after the
# thread has ended (importing every page's made the light pages wait ~0.4 s longer).
# First of all Streamlit's emoji catalogue: app.py's first line, set_page_config with an emoji
# favicon, imports it (hundreds of regular expressions, ~0.5 s on the 2-core machine) before the
# page can send anything, plotly.js's early fetch included.
FIRST_IMPORTS = ("streamlit.emojis", "torch", "pandas", "numpy", "plotly.graph_objects")


def frame_imports(root: Path = ROOT) -> list[str]:
    """The heavy libraries, then the absolute top-level imports of app.py, in that order and
    without repeats."""
    import ast

    names: list[str] = list(FIRST_IMPORTS)
    for node in ast.parse((root / "app.py").read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return [n for n in dict.fromkeys(names) if n != "__future__"]


def warm_imports(root: Path = ROOT) -> list[str]:
    """Import what every page's first run needs, and build one plotly figure (its first
    costs ~0.2 s of validator set-up); returns what could not be imported.

    The collector is paused meanwhile and what was imported is then frozen out of its sight:
    imports make modules and functions that live as long as the process, almost no garbage,
    yet their allocations set off ~600 collections, four of them full (0.33 of 1.65 CPU-s
    on the 2-core machine); frozen, a full collection during the first page's run takes
    ~0 ms instead of 0.3-0.7 s (bench.scripttiming's gc_ms counted up to 2.5 s in a first run
    under load). ui.preload freezes again once the models are in."""
    import importlib

    failed = []
    collecting = gc.isenabled()
    gc.disable()
    try:
        for name in frame_imports(root):
            try:
                importlib.import_module(name)
            except Exception:  # the page that imports it shows the error itself
                failed.append(name)
        import plotly.graph_objects as go

        go.Figure(go.Heatmap(z=[[0.0, 1.0]]), layout={"title": {"text": "warm"}}).to_json()
    finally:
        gc.freeze()
        if collecting:
            gc.enable()
    return failed


def _server_started(timeout_s: float = 30.0) -> None:
    """Wait until Streamlit's server is up (the health check answers): imports before then
    would only slow its start down (one interpreter lock), and the browser waits for that."""
    import time

    from streamlit.runtime import Runtime, RuntimeState

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if Runtime.exists() and Runtime.instance().state != RuntimeState.INITIAL:
            return
        time.sleep(0.02)


def _warm_and_report() -> None:
    _server_started()
    failed = warm_imports()
    if failed:  # the page that needs one says why, in the UI language
        log.warning("could not import ahead: %s", ", ".join(failed))


def start_warm_imports() -> threading.Thread:
    """``warm_imports`` on a thread of its own (once per process). Call it after Streamlit
    itself is imported: two threads importing the same circle of modules (streamlit.runtime
    and its pages_manager) deadlock, and Python then fails the import in one of them."""
    if not _started:
        _started.append(threading.Thread(target=_warm_and_report, name="warm-imports", daemon=True))
        _started[0].start()
    return _started[0]


def wait_for_warm_imports(timeout_s: float = 120.0) -> None:
    """app.py, before its own imports: wait for the warm-up thread, if this process has one,
    so a script run never imports beside it (the deadlock above); a no-op under a plain
    ``streamlit run`` and in AppTest."""
    if _started and _started[0] is not threading.current_thread():
        _started[0].join(timeout_s)
