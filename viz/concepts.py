"""Figures for the concept pages: small matrices with numbers, curves, masks.

Pure functions (arrays in, plotly Figure or DataFrame out); every visible string is passed
in by the caller, already translated. Signed values use a diverging scale centred at 0,
probabilities a fixed [0, 1] range, and tokens are escaped with ``token_label``.
"""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from viz.attention import (
    MASKED_GREY,
    MAX_TICK_LABELS,
    PROBABILITY_SCALE,
    SCORE_SCALE,
    _as_array,
    thinned_ticks,
    token_label,
)
from viz.headview import HEAD_COLOURS
from viz.memo import memo_figure

# The head colours' first seven: apart under colour-vision deficiency, 3:1 on white.
SERIES_COLOURS = tuple(HEAD_COLOURS[:7])
# ... and each curve its own line pattern, so no curve is told apart by colour alone
# ("dash" stays for the reference lines named in ``dashed``).
MAX_NUMBER_COLS = 16  # widest matrix whose cells still hold their numbers at half width
SERIES_DASHES = ("solid", "dot", "dashdot", "longdash", "longdashdot", "solid", "dot")
MAX_BAR_LABELS = 16  # rotated token labels that fit a half-width column or a phone
MAX_NAMED_LINES = 8  # more curves than this get no legend of their own (it outgrew the chart)
OTHERS_GREY = "#8c8c8c"  # 3.3:1 on white: the many curves behind the one that is named


def _esc(text: str) -> str:
    return html.escape(text or "", quote=False)


def _titled_with_legend(fig: go.Figure, title: str, height: int) -> go.Figure:
    """A title on the top edge and the legend below it, both above the plot."""
    fig.update_layout(
        title=dict(text=_esc(title), y=1, yref="container", yanchor="top", pad=dict(t=8))
        if title
        else None,
        height=height + (30 if title else 0),
        margin=dict(l=10, r=10, t=85 if title else 20, b=10),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0),
    )
    return fig


@memo_figure
def matrix_heatmap(
    values,
    row_labels: list[str],
    col_labels: list[str] | None = None,
    *,
    title: str = "",
    probability: bool = False,
    numbers: bool = True,
    value_name: str = "value",
    bound: float | None = None,
    height: int | None = None,
    row_title: str = "",
    col_title: str = "",
    digits: int = 2,
) -> go.Figure:
    """A small matrix with its numbers in the cells (``digits`` after the point): diverging
    around 0, or [0, 1].

    Rows are labelled (tokens are escaped); columns default to their index (a vector's
    dimensions). NaN cells (masked) are drawn grey.
    """
    z = _as_array(values)
    if z.ndim == 1:
        z = z[None, :]
    n_rows, n_cols = z.shape
    rows = [token_label(r) for r in row_labels]
    cols = [token_label(c) for c in col_labels] if col_labels else [str(i) for i in range(n_cols)]
    if probability:
        zmin, zmax, zmid, scale = 0.0, 1.0, None, PROBABILITY_SCALE
    else:
        finite = z[np.isfinite(z)]
        b = bound if bound is not None else float(np.abs(finite).max()) if finite.size else 1.0
        zmin, zmax, zmid, scale = -max(b, 1e-9), max(b, 1e-9), 0.0, SCORE_SCALE
    fig = go.Figure()
    masked = ~np.isfinite(z)
    if masked.any():
        fig.add_trace(
            go.Heatmap(
                z=np.where(masked, 1.0, np.nan),
                x=list(range(n_cols)),
                y=list(range(n_rows)),
                colorscale=[[0, MASKED_GREY], [1, MASKED_GREY]],
                showscale=False,
                hoverinfo="skip",
            )
        )
    # More columns leave a half-width chart's cells narrower than "-0.12": the numbers ran
    # into each other (and cost the browser a text node each); hover and the table keep them.
    show_numbers = numbers and n_rows * n_cols <= 400 and n_cols <= MAX_NUMBER_COLS
    fig.add_trace(
        go.Heatmap(
            z=np.where(masked, np.nan, z),
            x=list(range(n_cols)),
            y=list(range(n_rows)),
            zmin=zmin,
            zmax=zmax,
            zmid=zmid,
            colorscale=scale,
            hoverongaps=False,
            texttemplate=f"%{{z:.{digits}f}}" if show_numbers else None,
            textfont=dict(size=10 if n_cols > 12 else 12),
            hovertemplate=f"%{{y}} · %{{x}}<br>{_esc(value_name)}: %{{z:.4f}}<extra></extra>",
            colorbar=dict(thickness=12),
        )
    )
    # A vector's dimensions are numbered 0, 4, 8, ...: every index overlapped at half width.
    # Past MAX_NUMBER_COLS plotly spaces them itself, by the axis's length in pixels: 16 fixed
    # ticks of an FFN's 1,536 ("0 96 192 ... 1440") ran into each other on a phone.
    if col_labels or n_cols <= MAX_NUMBER_COLS:
        col_ticks, col_text = thinned_ticks(
            cols, MAX_TICK_LABELS if col_labels else MAX_NUMBER_COLS
        )
        col_axis = dict(tickmode="array", tickvals=col_ticks, ticktext=col_text)
    else:
        col_axis = dict(tickmode="auto")
    row_ticks, row_text = thinned_ticks(rows)
    fig.update_xaxes(
        **col_axis,
        side="top",
        showgrid=False,
        zeroline=False,
        range=[-0.5, n_cols - 0.5],
        title=dict(text=_esc(col_title)) if col_title else None,
        tickangle=-45 if col_labels else 0,
    )
    fig.update_yaxes(
        tickmode="array",
        tickvals=row_ticks,
        ticktext=row_text,
        showgrid=False,
        zeroline=False,
        range=[n_rows - 0.5, -0.5],
        title=dict(text=_esc(row_title)) if row_title else None,
    )
    fig.update_layout(
        # at the top edge, not centred in the margin (plotly's "auto"): on a phone, where a
        # title spans the width, a centred one sat on the column axis's title
        title=dict(text=_esc(title), y=1, yref="container", yanchor="top") if title else None,
        height=height or min(700, max(170, 110 + 30 * n_rows)),
        margin=dict(l=10, r=10, t=90 if title else 60, b=10),
    )
    return fig


@memo_figure
def lines_figure(
    x,
    series: dict[str, list[float]],
    *,
    x_title: str,
    y_title: str,
    title: str = "",
    log_x: bool = False,
    log_y: bool = False,
    dashed: tuple[str, ...] = (),
    markers: bool = False,
    vline: float | None = None,
    vline_label: str = "",
    height: int = 360,
) -> go.Figure:
    """Curves sharing one x axis; names in ``dashed`` are drawn as reference lines."""
    # Plain dicts and float arrays: plotly sends arrays as packed binary, and skips validating
    # thousands of points one by one (a 20,000-step schedule took seconds as lists).
    traces = [
        {
            "type": "scatter",
            "x": np.asarray(list(x) if not isinstance(x, dict) else x[name], dtype=np.float64),
            "y": np.asarray(y, dtype=np.float64),
            "name": _esc(name),
            "mode": "lines+markers" if markers else "lines",
            "line": {
                "color": SERIES_COLOURS[i % len(SERIES_COLOURS)],
                "dash": "dash" if name in dashed else SERIES_DASHES[i % len(SERIES_DASHES)],
            },
        }
        for i, (name, y) in enumerate(series.items())
    ]
    fig = go.Figure({"data": traces})
    if vline is not None:
        # a plain trace in data units: shapes on log axes are placed differently by plotly
        # versions, a scatter line never is
        ys = [value for y in series.values() for value in y if np.isfinite(value)]
        fig.add_trace(
            go.Scatter(
                x=[vline, vline],
                y=[min(ys), max(ys)],
                mode="lines+text",
                showlegend=False,
                line=dict(color="#777", dash="dot"),
                text=["", _esc(vline_label)],
                textposition="top right",
                hoverinfo="skip",
            )
        )
    fig.update_xaxes(title=_esc(x_title), type="log" if log_x else "linear")
    fig.update_yaxes(title=_esc(y_title), type="log" if log_y else "linear")
    return _titled_with_legend(fig, title, height)


LOG_SPREAD = 20  # a peak this many times the median curve's: a log axis keeps both in view


def compact_number(value: float) -> str:
    """A number short enough for a label inside a chart: 24.1k, 1.2M, 698, 0.62."""
    value = float(value)
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:.3g}"


@memo_figure
def token_lines(
    x,
    series: dict[str, list[float]],
    *,
    x_title: str,
    y_title: str,
    others_name: str,
    log_y: bool | None = None,
    height: int = 360,
) -> go.Figure:
    """One curve per token, every point marked. Up to MAX_NAMED_LINES curves each get a
    colour, a dash and a legend entry (lines_figure). More (a real model's sentence): the
    curve that reaches highest is drawn in colour and named, in the legend and by a label
    inside the plot at its peak; the rest are thin grey under one legend entry
    (``others_name``), each still named by its hover and in the chart's table. Where that
    peak is LOG_SPREAD times the median curve's (SmolLM2's first token: 24,101 against
    about 700), the y axis is logarithmic so the others are not flattened onto zero
    (``log_y`` says so instead where the caller has measured it), at any number of curves."""
    xs = np.asarray(list(x), dtype=np.float64)
    values = {name: np.asarray(y, dtype=np.float64) for name, y in series.items()}
    peaks = {name: np.nanmax(y) for name, y in values.items()}
    top = max(peaks, key=peaks.get)
    positive = all(np.nanmin(y) > 0 for y in values.values())
    if log_y is None:
        log_y = peaks[top] > LOG_SPREAD * float(np.median(list(peaks.values())))
    log_y = bool(log_y and positive)
    if len(series) <= MAX_NAMED_LINES:
        fig = lines_figure(
            xs, values, x_title=x_title, y_title=y_title, markers=True, log_y=log_y, height=height
        )
        return fig.update_yaxes(tickformat="~s") if log_y else fig  # 20k, not a bare "2"
    traces = [  # the named curve first, so the summary names it; zorder draws it on top
        {
            "type": "scatter",
            "x": xs,
            "y": values[top],
            "name": _esc(top),
            "mode": "lines+markers",
            "line": {"color": SERIES_COLOURS[0], "width": 3},
            "marker": {"size": 6},
            "zorder": 1,
        },
        {  # a legend entry for the grey curves, not a series (no hover, no points)
            "type": "scatter",
            "x": [None],
            "y": [None],
            "name": _esc(others_name),
            "mode": "lines",
            "line": {"color": OTHERS_GREY, "width": 1},
            "hoverinfo": "skip",
        },
    ]
    traces += [
        {
            "type": "scatter",
            "x": xs,
            "y": y,
            "name": _esc(name),
            "mode": "lines+markers",
            "line": {"color": OTHERS_GREY, "width": 1},
            "marker": {"size": 3},
            "showlegend": False,
        }
        for name, y in values.items()
        if name != top
    ]
    fig = go.Figure({"data": traces})
    i = int(np.nanargmax(values[top]))
    left = i < len(xs) / 2
    fig.add_annotation(  # inside the plot, under the peak, leaning away from the nearer edge
        x=xs[i],
        y=np.log10(peaks[top]) if log_y else peaks[top],
        text=f"{_esc(top)} · {compact_number(peaks[top])}",
        showarrow=False,
        xanchor="left" if left else "right",
        yanchor="top",
        yshift=-6,
        bgcolor="rgba(255,255,255,0.85)",
        font={"color": SERIES_COLOURS[0]},
    )
    fig.update_xaxes(title=_esc(x_title))
    fig.update_yaxes(title=_esc(y_title), type="log" if log_y else "linear", tickformat="~s")
    return _titled_with_legend(fig, "", height)


@memo_figure
def histogram_pair(
    a, b, *, names: tuple[str, str], x_title: str, y_title: str, bins: int = 60
) -> go.Figure:
    """Two distributions overlaid on one shared x axis (e.g. q·k before and after /√d_k)."""
    fig = go.Figure()
    for i, (name, data) in enumerate(zip(names, (a, b))):
        fig.add_trace(
            go.Histogram(
                x=_as_array(data),
                name=_esc(name),
                nbinsx=bins,
                opacity=0.6,
                marker_color=SERIES_COLOURS[i],
                histnorm="probability density",
            )
        )
    fig.update_layout(
        barmode="overlay",
        height=320,
        margin=dict(l=10, r=10, t=20, b=10),
        xaxis_title=_esc(x_title),
        yaxis_title=_esc(y_title),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0),
    )
    return fig


@memo_figure
def grouped_bars(
    categories: list[str],
    series: dict[str, list[float]],
    *,
    y_title: str,
    probability: bool = False,
    height: int = 320,
) -> go.Figure:
    """Bars per category (tokens, keys), one colour per series."""
    labels = [token_label(c) for c in categories]
    fig = go.Figure()
    for i, (name, y) in enumerate(series.items()):
        fig.add_trace(
            go.Bar(
                x=list(range(len(categories))),
                y=list(y),
                name=_esc(name),
                marker_color=SERIES_COLOURS[i % len(SERIES_COLOURS)],
                customdata=labels,
                hovertemplate="%{customdata}: %{y:.4f}<extra>" + _esc(name) + "</extra>",
            )
        )
    # Every k-th token labelled, so a real model's 60 tokens do not pile up at half width on
    # a phone; the hover and the summary's table name every bar (customdata).
    tickvals, ticktext = thinned_ticks(labels, MAX_BAR_LABELS)
    fig.update_xaxes(tickmode="array", tickvals=tickvals, ticktext=ticktext)
    fig.update_yaxes(title=_esc(y_title), range=[0, 1] if probability else None)
    fig.update_layout(
        barmode="group",
        height=height,
        margin=dict(l=10, r=10, t=20, b=10),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0),
    )
    return fig


def step_frame(
    key_tokens: list[str],
    scores,
    scaled,
    allowed,
    weights,
    columns: dict[str, str],
) -> pd.DataFrame:
    """One query's row through every step: q·k, /√d_k, the mask, the softmax weight.

    ``columns`` maps "key", "score", "scaled", "allowed", "masked", "weight" to headers.
    Masked scores read -inf, as the softmax sees them.
    """
    scaled = _as_array(scaled)
    ok = np.asarray(allowed, dtype=bool)
    return pd.DataFrame(
        {
            columns["key"]: list(key_tokens),
            columns["score"]: _as_array(scores),
            columns["scaled"]: scaled,
            columns["allowed"]: ok,
            columns["masked"]: np.where(ok, scaled, -np.inf),
            columns["weight"]: _as_array(weights),
        }
    )


BLOCKED_MARK = "×"  # on every masked cell: the mask reads without telling blue from grey


@memo_figure
def mask_figure(
    mask: np.ndarray,
    query_tokens: list[str],
    key_tokens: list[str],
    *,
    name: str,
    allowed_label: str,
    blocked_label: str,
) -> go.Figure:
    """One attention mask: allowed cells blue, blocked ones grey and marked with a ×;
    queries as rows, keys along the top. ``name`` names the trace (summary and table).

    One mask a figure, so that a page can set masks side by side in columns that stack on a
    phone (three subplots in one figure overlap their labels at 390 px)."""
    m = np.asarray(mask, dtype=bool)
    fig = go.Figure(
        go.Heatmap(
            z=m.astype(np.float32),
            x=list(range(m.shape[1])),
            y=list(range(m.shape[0])),
            zmin=0,
            zmax=1,
            colorscale=[[0, MASKED_GREY], [1, "#2b6cb0"]],
            showscale=False,
            name=name,
            text=np.where(m, "", BLOCKED_MARK),
            texttemplate="%{text}",
            textfont=dict(color="#1a202c", size=16),
            customdata=np.where(m, allowed_label, blocked_label),
            hovertemplate="%{customdata}<extra></extra>",
            xgap=2,
            ygap=2,
        )
    )
    fig.update_xaxes(
        tickmode="array",
        tickvals=list(range(len(key_tokens))),
        ticktext=[token_label(t) for t in key_tokens],
        side="top",
        tickangle=-45,
        showgrid=False,
        zeroline=False,
        range=[-0.5, len(key_tokens) - 0.5],
    )
    fig.update_yaxes(
        tickmode="array",
        tickvals=list(range(len(query_tokens))),
        ticktext=[token_label(t) for t in query_tokens],
        showgrid=False,
        zeroline=False,
        range=[len(query_tokens) - 0.5, -0.5],
    )
    # keys lean up and to the right: room above, and on the right for the last one's label
    fig.update_layout(height=340, margin=dict(l=10, r=50, t=90, b=10))
    return fig


def robust_bound(values, percentile: float = 99.0) -> float:
    """A symmetric colour range that a few outliers cannot set: the ``percentile`` of |value|.

    Cells beyond it draw in the end colours (the caption must say so); hover keeps the value.
    """
    z = _as_array(values)
    finite = np.abs(z[np.isfinite(z)])
    if not finite.size:
        return 1.0
    return max(float(np.percentile(finite, percentile)), 1e-9)


@memo_figure
def band_figure(
    bands: dict[str, dict[str, list[float]]],
    *,
    x_title: str,
    y_title: str,
    title: str = "",
    height: int = 360,
) -> go.Figure:
    """One mean line per series with a shaded band from its ``min`` to ``max`` (over seeds).

    ``bands[name]`` holds "step", "mean", "min" and "max" lists (or arrays) of equal length.
    """
    traces = []
    for i, (name, b) in enumerate(bands.items()):
        colour = SERIES_COLOURS[i % len(SERIES_COLOURS)]
        r, g, bl = (int(colour[j : j + 2], 16) for j in (1, 3, 5))
        step = np.asarray(b["step"], dtype=np.float64)
        # plain dicts and float arrays, as lines_figure: no validating point by point
        traces.append(
            {
                "type": "scatter",
                "x": np.concatenate([step, step[::-1]]),
                "y": np.concatenate(
                    [np.asarray(b["max"], dtype=np.float64), np.asarray(b["min"], np.float64)[::-1]]
                ),
                "fill": "toself",
                "fillcolor": f"rgba({r},{g},{bl},0.18)",
                "line": {"width": 0},
                "hoverinfo": "skip",
                "showlegend": False,
                "name": _esc(name),
            }
        )
        traces.append(
            {
                "type": "scatter",
                "x": step,
                "y": np.asarray(b["mean"], dtype=np.float64),
                "name": _esc(name),
                "mode": "lines",
                "line": {"color": colour},
            }
        )
    fig = go.Figure({"data": traces})
    fig.update_xaxes(title=_esc(x_title))
    fig.update_yaxes(title=_esc(y_title))
    # a training run's result is where its curve ends: the summary says each series' last value
    fig.update_layout(meta={"summary": "final"})
    return _titled_with_legend(fig, title, height)
