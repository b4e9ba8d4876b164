"""The chart renderer's code fetched while the server still works on the first page.

Streamlit's frontend loads plotly.js (its PlotlyChart chunk, ~4.7 MB) only when the first
chart arrives, near the end of a first visit's script run; downloading and compiling it
then held a chart page's first drawing up by seconds. Emitted first in app.py, before the
imports of torch and the models, this asks the browser to fetch and compile that chunk at
once (a dynamic ``import()`` of the same URL, which the frontend's own import then reuses).
Nothing is drawn; where the chunk cannot be found (another Streamlit build) nothing is sent.
"""

from __future__ import annotations

import json
import re
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
