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
    """A value short enough to say: 0.62, 4,000, 103,562 (a residual stream's length, not
    1.0e+05), 7.0e-4."""
    value = float(value)
    if not np.isfinite(value):
        return str(value)
    if value == int(value) and abs(value) < 1e7:
        return f"{int(value):,}"
    if 1e5 <= abs(value) < 1e7:
        return f"{value:,.0f}"
    if value != 0 and (abs(value) < 1e-2 or abs(value) >= 1e7):
        return f"{value:.1e}"
    return f"{value:.2f}" if abs(value) < 100 else f"{value:,.1f}"


# ---- summaries computed from the data a chart draws ----


def attention_peak(weights, query_tokens: list[str], key_tokens: list[str]) -> dict:
    """The strongest link of an attention map [Lq, Lk]: the query, the key it attends to
    most, and the weight. Masked cells (NaN) never win."""
    z = np.asarray(weights, dtype=float)
    if z.ndim != 2 or z.size == 0 or not np.isfinite(z).any():
        raise ValueError("attention_peak needs a non-empty [queries, keys] map with a value")
    tied = _tied_cells(z)
    q, k = tied[0]
    weight = f"{z[q, k]:.2f}"
    peak = {"query": query_tokens[q], "key": key_tokens[k], "weight": weight, "n": len(tied)}
    if len(tied) > 1:  # a tie is named as a tie, never broken at random
        peak["kind"] = "attention_tie"
        if _whole_diagonal(tied, z.shape, query_tokens, key_tokens):
            peak["kind"] = "attention_self"
    return peak


def _said_alike(top: float) -> float:
    """How far below ``top`` a value still reads the same where it is said (``number``:
    two decimals under 100, one above, two significant digits for tiny values)."""
    size = abs(top)
    if size < 1e-2:
        return size * 0.05
    return 0.005 if size < 100 else 0.05


def _tied_cells(z: np.ndarray) -> list[tuple[int, int]]:
    """Every finite cell that reads the same as the highest one, in reading order."""
    finite = np.where(np.isfinite(z), z, -np.inf)
    top = float(finite.max())
    return [(int(r), int(c)) for r, c in np.argwhere(finite >= top - _said_alike(top))]


def _whole_diagonal(cells, shape, rows, cols) -> bool:
    """The tied cells are every row's own position (each token with itself), and no other."""
    n = min(shape)
    if len(cells) != n or n < 2:
        return False
    offset = shape[1] - shape[0] if shape[1] >= shape[0] else 0  # a causal block's diagonal
    return all(c == r + offset for r, c in cells)


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
    return {float(tick): plain(t) for tick, t in zip(axis.tickvals, axis.ticktext, strict=False)}


def _label(value, ticks: dict) -> str:
    if isinstance(value, (int, float, np.integer, np.floating)):
        return ticks.get(float(value), number(value))
    return plain(value)


def _point_names(fig: go.Figure, trace, xs: list) -> list[str]:
    """Each point's name: its x tick's label, or, where an axis of many tokens labels only
    every k-th (thinned_ticks), the name the point carries in a 1-D ``customdata`` of text."""
    ticks = _tick_names(_axis(fig, trace, "x"))
    names = [_label(x, ticks) for x in xs]
    custom = trace.customdata
    if custom is not None and len(custom) == len(xs) and all(isinstance(c, str) for c in custom):
        names = [
            ticks.get(float(x), plain(c)) if isinstance(x, (int, float)) else n
            for x, c, n in zip(xs, custom, names, strict=True)
        ]
    return names


def _axis_title(axis) -> str:
    return plain(axis.title.text) if axis is not None and axis.title is not None else ""


def _trace_name(fig: go.Figure, trace, index: int) -> str:
    if trace.name:
        return plain(trace.name)
    titles = [plain(a.text) for a in fig.layout.annotations or () if a.text]
    return titles[index] if index < len(titles) else ""


def _is_band(trace) -> bool:
    """A shaded band (min to max over seeds) around a series: part of it, not a series."""
    return trace.type in ("scatter", "scattergl") and (
        trace.fill in ("toself", "tonexty", "tonextx") or trace.hoverinfo == "skip"
    )


def _colorbar_title(fig: go.Figure, trace) -> str:
    bar = getattr(trace, "colorbar", None)
    if bar is not None and bar.title is not None and bar.title.text:
        return plain(bar.title.text)
    axis = fig.layout.coloraxis
    if axis is not None and axis.colorbar is not None and axis.colorbar.title is not None:
        return plain(axis.colorbar.title.text)
    return ""


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
    cols = [_label(x, xt) for x in xs[: z.shape[1]]]
    rows = [_label(y, yt) for y in ys[: z.shape[0]]]
    if custom is not None and custom.shape[:2] == z.shape and custom.ndim == 3:
        rows = [plain(custom[i, 0, 0]) for i in range(z.shape[0])]
        cols = [plain(custom[0, j, 1]) for j in range(z.shape[1])]
    return z, rows, cols


def figure_facts(fig: go.Figure) -> list[dict]:
    """One fact per drawn series: heatmaps their highest cell, curves and bars their peak."""
    facts: list[dict] = []
    named: set[str] = set()
    final = isinstance(fig.layout.meta, dict) and fig.layout.meta.get("summary") == "final"
    for i, trace in enumerate(fig.data):
        if _is_mask_layer(trace) or _is_band(trace) or trace.visible is False:
            continue
        name = _trace_name(fig, trace, len(facts))
        if name and name in named:  # a series is named once
            continue
        named.add(name)
        if trace.type == "heatmap" and trace.z is not None:
            z, rows, cols = _heatmap_cells(fig, trace)
            if not np.isfinite(z).any():
                continue
            tied = _tied_cells(z)
            r, c = tied[0]
            fact = {
                "kind": "heatmap",
                "name": name,
                "row": rows[r] if r < len(rows) else number(r),
                "col": cols[c] if c < len(cols) else number(c),
                "value": number(z[r, c]),
                "n": len(tied),
                "quantity": _colorbar_title(fig, trace),
            }
            if len(tied) > 1:  # a tie is named as a tie, never broken at random
                square = rows == cols and _whole_diagonal(tied, z.shape, rows, cols)
                fact["kind"] = "heatmap_diagonal" if square else "heatmap_tie"
            if fact["quantity"]:
                fact["kind"] += "_of"
            facts.append(fact)
        elif trace.type in ("scatter", "scattergl", "bar") and trace.y is not None:
            ys = np.asarray(trace.y, dtype=object)
            xs = list(trace.x) if trace.x is not None else list(range(len(ys)))
            try:
                yv = ys.astype(float)
            except (TypeError, ValueError):
                continue
            if not np.isfinite(yv).any():
                continue
            names = _point_names(fig, trace, xs)
            fact = {
                "kind": "bar" if trace.type == "bar" else "line",
                "name": name,
                "x_title": _axis_title(_axis(fig, trace, "x")),
                "y_title": _axis_title(_axis(fig, trace, "y")) or _meta_quantity(trace),
                "index": i,
            }
            if final and trace.type != "bar":  # where a curve ends: a training run's result
                j = int(np.flatnonzero(np.isfinite(yv))[-1])
                fact["kind"] = "final"
            else:
                j = int(np.nanargmax(np.where(np.isfinite(yv), yv, np.nan)))
                finite = yv[np.isfinite(yv)]
                same = int((finite >= yv[j] - _said_alike(yv[j])).sum())
                if trace.type == "bar" and same == finite.size and same > 1:
                    fact["kind"] = "bar_all"  # every bar the same: said so, none picked
                elif same > 1:
                    fact["kind"] += "_tie"
                fact["n"] = same
            fact["x"] = names[j] if j < len(xs) else number(j)
            fact["y"] = number(yv[j])
            facts.append(fact)
    return facts


def _meta_quantity(trace) -> str:
    """What a series measures when its axis shows no title (small multiples: the focus
    view's bars per head), from ``meta={"quantity": ...}``."""
    meta = trace.meta if isinstance(trace.meta, dict) else {}
    return plain(str(meta.get("quantity", "")))


def figure_title(fig: go.Figure) -> str:
    title = fig.layout.title
    return plain(title.text) if title is not None and title.text else ""


def rounded(value: float, digits: int = 3) -> float:
    """A table's value as the chart reads it: ``digits`` significant digits after the point
    for small numbers, never -0.0 (5.9e-15 is 0.0)."""
    value = float(value)
    if not np.isfinite(value):
        return value
    if abs(value) >= 1e-3 or value == 0:
        value = round(value, max(digits, digits - int(np.floor(np.log10(abs(value) or 1))) - 1))
        value = round(value, 6)
    else:
        value = 0.0 if abs(value) < 1e-6 else float(f"{value:.{digits - 1}e}")
    return value + 0.0  # -0.0 becomes 0.0


TABLE_COLUMNS = ("series", "x", "y", "value")


def figure_table(fig: go.Figure, headers: dict[str, str] | None = None) -> pd.DataFrame:
    """The plotted numbers, one row per point or cell: series, x (column), y (row), value,
    rounded as the chart reads them.

    Columns are headed by the chart's own axis and colour-bar titles where it has them, else
    by ``headers`` (the reader's words for "series", "x", "y", "value")."""
    headers = {**dict(zip(TABLE_COLUMNS, TABLE_COLUMNS, strict=True)), **(headers or {})}
    rows: list[tuple] = []
    titles: dict[str, str] = {}
    for i, trace in enumerate(fig.data):
        if _is_mask_layer(trace) or _is_band(trace) or trace.visible is False:
            continue
        if not titles:
            titles = {
                "x": _axis_title(_axis(fig, trace, "x")),
                "y": _axis_title(_axis(fig, trace, "y")),
                "value": _colorbar_title(fig, trace) if trace.type == "heatmap" else "",
            }
            if trace.type != "heatmap":  # a curve's y is its value
                titles["value"], titles["y"] = titles["y"], ""
        name = _trace_name(fig, trace, i) or str(i + 1)
        if trace.type == "heatmap" and trace.z is not None:
            z, ys, xs = _heatmap_cells(fig, trace)
            for r in range(z.shape[0]):
                for c in range(z.shape[1]):
                    if np.isfinite(z[r, c]):
                        rows.append((name, xs[c], ys[r], rounded(z[r, c])))
        elif trace.y is not None and trace.type in ("scatter", "scattergl", "bar"):
            ys = list(trace.y)
            xs = list(trace.x) if trace.x is not None else list(range(len(ys)))
            for x, y in zip(_point_names(fig, trace, xs), ys, strict=False):
                try:
                    rows.append((name, x, "", rounded(y)))
                except (TypeError, ValueError):
                    continue
        if len(rows) >= MAX_TABLE_ROWS:
            break
    frame = pd.DataFrame(rows[:MAX_TABLE_ROWS], columns=list(TABLE_COLUMNS))
    if (frame["y"] == "").all():
        frame = frame.drop(columns="y")
    if frame["series"].nunique() <= 1:
        frame = frame.drop(columns="series")
    names = {c: titles.get(c) or headers[c] for c in TABLE_COLUMNS}
    if len(set(names[c] for c in frame.columns)) < len(frame.columns):  # two alike: plain
        names = {c: headers[c] for c in TABLE_COLUMNS}
    return frame.rename(columns=names)
