"""Figures for the Mechanisms page: logit lens, patching maps, head scores, head scatter plots.

Pure functions (arrays in, plotly Figure or DataFrame out); every visible string is passed
in already translated; tokens are escaped with ``token_label``.
"""

from __future__ import annotations

import html
import textwrap

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from viz.attention import PROBABILITY_SCALE, SCORE_SCALE, _as_array, token_label
from viz.concepts import SERIES_COLOURS
from viz.memo import memo_figure

LEGEND_BELOW_PX = 90  # room under the chart for a legend of up to four rows


def _esc(text: str) -> str:
    return html.escape(text or "", quote=False)


TITLE_CHARS = 46  # a title line that still fits a 390 px phone screen


def _title(text: str) -> tuple[str, int]:
    """(escaped title wrapped onto lines of at most TITLE_CHARS, how many lines): plotly
    never wraps a title, so a long one (most Korean ones) was cut off at narrow widths."""
    lines = textwrap.wrap(text or "", TITLE_CHARS) or [""]
    return "<br>".join(_esc(line) for line in lines), len(lines)


@memo_figure
def grid_heatmap(
    values,
    row_labels: list[str],
    col_labels: list[str],
    *,
    probability: bool,
    value_name: str,
    x_title: str = "",
    y_title: str = "",
    title: str = "",
    text=None,
    height: int | None = None,
) -> go.Figure:
    """Rows × columns with integer axes (repeated tokens stay apart), numbers in the cells.

    ``probability``: fixed [0, 1] scale; otherwise a diverging scale centred at 0 whose
    range covers at least [-1, 1] (a recovered fraction reads 0 none, 1 all).
    """
    z = _as_array(values).astype(float)
    n_rows, n_cols = z.shape
    if probability:
        scale, zmin, zmax, zmid = PROBABILITY_SCALE, 0.0, 1.0, None
    else:
        bound = max(1.0, float(np.nanmax(np.abs(z))) if z.size else 1.0)
        scale, zmin, zmax, zmid = SCORE_SCALE, -bound, bound, 0.0
    cells = (
        np.vectorize(lambda x: f"{x:.2f}")(z) if text is None else np.asarray(text, dtype=object)
    )
    rows = [token_label(r) for r in row_labels]
    cols = [token_label(c) for c in col_labels]
    hover = np.array([[f"{rows[i]} · {cols[j]}" for j in range(n_cols)] for i in range(n_rows)])
    trace = go.Heatmap(
        z=z,
        x=list(range(n_cols)),
        y=list(range(n_rows)),
        colorscale=scale,
        zmin=zmin,
        zmax=zmax,
        zmid=zmid,
        text=cells,
        texttemplate="%{text}" if n_cols * n_rows <= 600 else None,
        customdata=hover,
        hovertemplate="%{customdata}<br>" + _esc(value_name) + ": %{z:.3f}<extra></extra>",
        colorbar=dict(title=_esc(value_name)),
    )
    fig = go.Figure(trace)
    fig.update_xaxes(
        tickmode="array",
        tickvals=list(range(n_cols)),
        ticktext=cols,
        title=_esc(x_title),
        side="top",
    )
    fig.update_yaxes(
        tickmode="array",
        tickvals=list(range(n_rows)),
        ticktext=rows,
        title=_esc(y_title),
        autorange="reversed",
    )
    text, lines = _title(title)
    extra = 20 * (lines - 1)  # each further title line pushes the plot down
    fig.update_layout(
        title=dict(text=text, y=1, yref="container", yanchor="top", pad=dict(t=8))
        if title
        else None,
        height=(height or min(900, max(220, 130 + 34 * n_rows))) + extra,
        margin=dict(l=10, r=10, t=(100 if title else 70) + extra, b=10),
    )
    return fig


def lens_table(top_tokens, top_probs, layer_labels: list[str], position: int) -> pd.DataFrame:
    """The top-k tokens each layer reads at one position: layers as rows, "token (p)" cells."""
    rows = {}
    for label, toks, probs in zip(layer_labels, top_tokens, _as_array(top_probs)):
        rows[label] = [f"{tok} ({p:.2f})" for tok, p in zip(toks[position], probs[position])]
    k = len(next(iter(rows.values()))) if rows else 0
    return pd.DataFrame.from_dict(rows, orient="index", columns=[str(i + 1) for i in range(k)])


@memo_figure
def head_lines_figure(
    steps: list[int],
    scores,
    *,
    head_label: str,
    x_title: str,
    y_title: str,
    title: str = "",
    height: int = 320,
) -> go.Figure:
    """One line per head over training, scores [steps, layers, heads]; ``head_label`` is a
    format string with {layer} and {head} (1-based)."""
    z = _as_array(scores)
    fig = go.Figure()
    n_layers, n_heads = z.shape[1], z.shape[2]
    for layer in range(n_layers):
        for head in range(n_heads):
            fig.add_trace(
                go.Scatter(
                    x=np.asarray(steps, dtype=float),
                    y=z[:, layer, head],
                    mode="lines",
                    name=_esc(head_label.format(layer=layer + 1, head=head + 1)),
                    line=dict(
                        color=SERIES_COLOURS[head % len(SERIES_COLOURS)],
                        dash="solid" if layer == n_layers - 1 else "dot",
                    ),
                )
            )
    fig.update_xaxes(title=_esc(x_title))
    fig.update_yaxes(title=_esc(y_title), range=[0, 1])
    fig.update_layout(
        title=dict(text=_esc(title), y=1, yref="container", yanchor="top") if title else None,
        height=height + LEGEND_BELOW_PX,
        margin=dict(l=10, r=10, t=40 if title else 20, b=10),
        # Under the x-axis title, not above the plot: eight heads wrap to three or four rows
        # in a half-width column, and above the plot those rows covered the chart's title.
        legend=dict(orientation="h", yanchor="top", y=-0.3, xanchor="left", x=0),
    )
    return fig


@memo_figure
def head_scatter(
    x,
    y,
    labels: list[str],
    *,
    x_title: str,
    y_title: str,
    title: str = "",
    height: int = 360,
    most_labels: int = 6,
) -> go.Figure:
    """One point per head; a dotted zero line, since effects can have either sign.

    With many heads (en2ko has 24) every label would pile up: only the ``most_labels``
    points that stand out (largest |y|, then largest x) are labelled on the chart; hovering
    names every point."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    names = [_esc(s) for s in labels]
    order = sorted(range(len(xs)), key=lambda i: (-abs(ys[i]), -xs[i]))
    shown = set(order[:most_labels])
    fig = go.Figure(
        go.Scatter(
            x=xs,
            y=ys,
            mode="markers+text",
            text=[n if i in shown else "" for i, n in enumerate(names)],
            customdata=names,
            textposition=["middle right" if xs[i] < 0.6 else "middle left" for i in range(len(xs))],
            textfont=dict(size=11),
            cliponaxis=False,
            marker=dict(size=10, color="#1f77b4"),
            hovertemplate="%{customdata}<br>"
            + _esc(x_title)
            + ": %{x:.3f}<br>"
            + _esc(y_title)
            + ": %{y:.3f}<extra></extra>",
        )
    )
    fig.add_hline(y=0, line=dict(color="#999", dash="dot"))
    fig.update_xaxes(title=_esc(x_title), range=[-0.05, 1.05])
    span = float(np.ptp(ys)) if len(ys) else 1.0
    pad = 0.12 * (span or 1.0)  # room for the labels of the highest and lowest points
    fig.update_yaxes(
        title=_esc(y_title),
        range=[float(ys.min()) - pad, float(ys.max()) + pad] if len(ys) else None,
    )
    fig.update_layout(
        title=dict(text=_esc(title), y=1, yref="container", yanchor="top") if title else None,
        height=height,
        margin=dict(l=10, r=10, t=60 if title else 20, b=10),
        showlegend=False,
    )
    return fig


def prediction_table(predictions, columns: dict[str, str]) -> pd.DataFrame:
    """Teacher-forced predictions of the induction model, one row per position from the
    repeat's first letter on: position, the token read, the reference next token, the
    model's choice and its probability. ``columns`` maps "position", "token", "reference",
    "predicted", "p"; tokens are shown as text (a table does not read HTML)."""
    rows = [
        {
            columns["position"]: p.position,
            columns["token"]: p.token,
            columns["reference"]: p.reference,
            columns["predicted"]: ("✓ " if p.predicted == p.reference else "✗ ") + p.predicted,
            columns["p"]: f"{p.probability:.1%}",
        }
        for p in predictions
        if p.reference is not None
    ]
    return pd.DataFrame(
        rows, columns=[columns[k] for k in ("position", "token", "reference", "predicted", "p")]
    )
