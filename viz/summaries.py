"""Text alternatives for charts: the facts a one-sentence summary says, and the plotted numbers.

Pure functions, no Streamlit: ``ui.charts.plotly_chart`` turns the facts into a sentence in
the reader's language (catalog keys ``a11y.summary.*``) and shows the table on request.
Facts come from the data itself (the attention weights, the schedule) or, for any chart
without its own summary, from the figure's own traces, so a summary cannot drift from what
is drawn.
"""

from __future__ import annotations

import html
import re
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

MAX_TABLE_ROWS = 5000  # a table longer than this is cut (the chart itself is the overview)
MAX_TRACES_SAID = 3  # a summary names at most this many series; the table has them all

_TAG = re.compile(r"<[^>]+>")


def plain(text: Any) -> str:
    """Plotly label text as a person reads it: tags dropped, entities decoded."""
    if text is None:
        return ""
    return html.unescape(_TAG.sub(" ", str(text))).replace("  ", " ").strip()


def number(value: float) -> str:
    """A value short enough to say: 0.62, 4,000, 7.0e-4."""
    value = float(value)
    if not np.isfinite(value):
        return str(value)
    if value == int(value) and abs(value) < 1e7:
        return f"{int(value):,}"
    if value != 0 and (abs(value) < 1e-2 or abs(value) >= 1e5):
        return f"{value:.1e}"
    return f"{value:.2f}" if abs(value) < 100 else f"{value:,.1f}"


# ---- summaries computed from the data a chart draws ----


def attention_peak(weights, query_tokens: list[str], key_tokens: list[str]) -> dict:
    """The strongest link of an attention map [Lq, Lk]: the query, the key it attends to
    most, and the weight. Masked cells (NaN) never win."""
    z = np.asarray(weights, dtype=float)
    if z.ndim != 2 or z.size == 0 or not np.isfinite(z).any():
        raise ValueError("attention_peak needs a non-empty [queries, keys] map with a value")
    q, k = np.unravel_index(np.nanargmax(np.where(np.isfinite(z), z, np.nan)), z.shape)
    return {"query": query_tokens[q], "key": key_tokens[k], "weight": f"{z[q, k]:.2f}"}


def series_peak(xs, ys) -> dict:
    """Where a curve is highest: {"x", "y"} as text."""
    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    if x.size == 0 or x.shape != y.shape or not np.isfinite(y).any():
        raise ValueError("series_peak needs equally long, non-empty x and y")
    i = int(np.nanargmax(np.where(np.isfinite(y), y, np.nan)))
    return {"x": number(x[i]), "y": number(y[i])}


# ---- what any figure says about itself ----


def _axis(fig: go.Figure, trace, letter: str):
    ref = getattr(trace, f"{letter}axis", None) or letter
    name = ref.replace(letter, f"{letter}axis", 1) if ref != letter else f"{letter}axis"
    try:
        return fig.layout[name]
    except (KeyError, ValueError):
        return None


def _tick_names(axis) -> dict:
    if axis is None or axis.tickvals is None or axis.ticktext is None:
        return {}
    return {float(v): plain(t) for v, t in zip(axis.tickvals, axis.ticktext, strict=False)}


def _label(value, ticks: dict) -> str:
    if isinstance(value, (int, float, np.integer, np.floating)):
        return ticks.get(float(value), number(value))
    return plain(value)


def _axis_title(axis) -> str:
    return plain(axis.title.text) if axis is not None and axis.title is not None else ""


def _trace_name(fig: go.Figure, trace, index: int) -> str:
    if trace.name:
        return plain(trace.name)
    titles = [plain(a.text) for a in fig.layout.annotations or () if a.text]
    return titles[index] if index < len(titles) else ""


def _is_mask_layer(trace) -> bool:
    """The grey 'masked' layer under a heatmap (viz.attention._mask_layer) says nothing."""
    if trace.type != "heatmap" or trace.colorscale is None:
        return False
    colours = {c[1] for c in trace.colorscale} - {"rgba(0,0,0,0)"}  # its gaps are transparent
    return len(colours) == 1


def _heatmap_cells(fig, trace) -> tuple[np.ndarray, list[str], list[str]]:
    z = np.asarray(trace.z, dtype=float)
    if z.ndim != 2:
        z = np.atleast_2d(z)
    xt, yt = _tick_names(_axis(fig, trace, "x")), _tick_names(_axis(fig, trace, "y"))
    xs = list(trace.x) if trace.x is not None else list(range(z.shape[1]))
    ys = list(trace.y) if trace.y is not None else list(range(z.shape[0]))
    custom = np.asarray(trace.customdata) if trace.customdata is not None else None
    cols = [_label(v, xt) for v in xs[: z.shape[1]]]
    rows = [_label(v, yt) for v in ys[: z.shape[0]]]
    if custom is not None and custom.shape[:2] == z.shape and custom.ndim == 3:
        rows = [plain(custom[i, 0, 0]) for i in range(z.shape[0])]
        cols = [plain(custom[0, j, 1]) for j in range(z.shape[1])]
    return z, rows, cols


def figure_facts(fig: go.Figure) -> list[dict]:
    """One fact per drawn series: heatmaps their highest cell, curves and bars their peak."""
    facts = []
    for i, trace in enumerate(fig.data):
        if _is_mask_layer(trace) or trace.visible is False:
            continue
        name = _trace_name(fig, trace, len(facts))
        if trace.type == "heatmap" and trace.z is not None:
            z, rows, cols = _heatmap_cells(fig, trace)
            if not np.isfinite(z).any():
                continue
            r, c = np.unravel_index(np.nanargmax(np.where(np.isfinite(z), z, np.nan)), z.shape)
            facts.append(
                {
                    "kind": "heatmap",
                    "name": name,
                    "row": rows[r] if r < len(rows) else number(r),
                    "col": cols[c] if c < len(cols) else number(c),
                    "value": number(z[r, c]),
                }
            )
        elif trace.type in ("scatter", "scattergl", "bar") and trace.y is not None:
            ys = np.asarray(trace.y, dtype=object)
            xs = list(trace.x) if trace.x is not None else list(range(len(ys)))
            try:
                yv = ys.astype(float)
            except (TypeError, ValueError):
                continue
            if not np.isfinite(yv).any():
                continue
            j = int(np.nanargmax(np.where(np.isfinite(yv), yv, np.nan)))
            xt = _tick_names(_axis(fig, trace, "x"))
            facts.append(
                {
                    "kind": "bar" if trace.type == "bar" else "line",
                    "name": name,
                    "x": _label(xs[j], xt) if j < len(xs) else number(j),
                    "y": number(yv[j]),
                    "x_title": _axis_title(_axis(fig, trace, "x")),
                    "y_title": _axis_title(_axis(fig, trace, "y")),
                    "index": i,
                }
            )
    return facts


def figure_title(fig: go.Figure) -> str:
    title = fig.layout.title
    return plain(title.text) if title is not None and title.text else ""


def figure_table(fig: go.Figure) -> pd.DataFrame:
    """The plotted numbers, one row per point or cell: series, x (column), y (row), value."""
    rows: list[tuple] = []
    for i, trace in enumerate(fig.data):
        if _is_mask_layer(trace) or trace.visible is False:
            continue
        name = _trace_name(fig, trace, i) or str(i + 1)
        if trace.type == "heatmap" and trace.z is not None:
            z, ys, xs = _heatmap_cells(fig, trace)
            for r in range(z.shape[0]):
                for c in range(z.shape[1]):
                    if np.isfinite(z[r, c]):
                        rows.append((name, xs[c], ys[r], float(z[r, c])))
        elif trace.y is not None and trace.type in ("scatter", "scattergl", "bar"):
            xt = _tick_names(_axis(fig, trace, "x"))
            ys = list(trace.y)
            xs = list(trace.x) if trace.x is not None else list(range(len(ys)))
            for x, y in zip(xs, ys, strict=False):
                try:
                    rows.append((name, _label(x, xt), "", float(y)))
                except (TypeError, ValueError):
                    continue
        if len(rows) >= MAX_TABLE_ROWS:
            break
    frame = pd.DataFrame(rows[:MAX_TABLE_ROWS], columns=["series", "x", "y", "value"])
    if (frame["y"] == "").all():
        frame = frame.drop(columns="y")
    if frame["series"].nunique() <= 1:
        frame = frame.drop(columns="series")
    return frame
