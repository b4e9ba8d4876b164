"""Figures for stepping through decoding: the growing mask, the new query, the next token."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from model.analysis.stepping import top_candidates
from viz.attention import attention_heatmap, thinned_ticks, token_label
from viz.memo import memo_figure

CHOSEN = "#ff4b4b"  # the token that was picked, in every chart
OTHER = "#8fb3d9"
BEFORE = "#c7c7c7"
# The step's maps sit in half a column (beside the next-token chart or the cross-attention
# map), about 250 px of plot on a phone: at most this many key labels, every k-th, keep the
# rotated labels apart there; a real model's prompt and output run to 40 keys and more.
HALF_COLUMN_TICKS = 16


def _half_column_keys(fig: go.Figure, key_tokens: list[str]) -> go.Figure:
    tickvals, ticktext = thinned_ticks([token_label(t) for t in key_tokens], HALF_COLUMN_TICKS)
    return fig.update_xaxes(tickvals=tickvals, ticktext=ticktext)


@memo_figure
def growing_mask_figure(
    rows: list,
    query_tokens: list[str],
    key_tokens: list[str],
    *,
    mask,
    title: str,
    labels: tuple[str, str, str],
) -> go.Figure:
    """The decoder's attention so far, one row per generated step, future cells grey.

    ``rows[i]`` is step i's query row over the keys it could see; ``mask`` is the model's
    causal mask for these queries and keys (True = may attend): the future is drawn grey
    (never 0). The newest row is outlined.
    """
    n_q, n_k = len(query_tokens), len(key_tokens)
    z = np.full((n_q, n_k), np.nan, dtype=np.float32)
    for i, row in enumerate(rows):
        row = np.asarray(row.detach().cpu() if hasattr(row, "detach") else row, dtype=np.float32)
        z[i, : len(row)] = row
    fig = attention_heatmap(z, query_tokens, key_tokens, mask=mask, title=title, labels=labels)
    _half_column_keys(fig, key_tokens)
    fig.add_shape(
        type="rect",
        x0=-0.5,
        x1=n_k - 0.5,
        y0=n_q - 1.5,
        y1=n_q - 0.5,
        line=dict(color=CHOSEN, width=3),
        fillcolor="rgba(0,0,0,0)",
    )
    return fig


@memo_figure
def head_rows_figure(
    rows, key_tokens: list[str], *, head_titles: list[str], title: str, labels: tuple[str, str, str]
) -> go.Figure:
    """One query's attention in every head, [H, Lk] -> heads as rows, keys as columns."""
    fig = attention_heatmap(rows, head_titles, key_tokens, title=title, labels=labels)
    _half_column_keys(fig, key_tokens)
    fig.update_layout(height=max(200, 110 + 26 * len(head_titles)))
    return fig


@memo_figure
def next_token_figure(
    before,
    after,
    vocabulary: Sequence[str] | Mapping[int, str],
    chosen: int,
    *,
    k: int = 10,
    names: tuple[str, ...],
    axis: str,
) -> go.Figure:
    """The k most likely next tokens: probability before and after temperature / filtering.

    The chosen token is always shown (even outside the top k), red, hatched and in bold.
    ``vocabulary``: every id's label, or only those of ``top_candidates`` (a real model's
    vocabulary is 49k to 262k tokens; the page labels just the ones shown, in context).
    ``names``: the series before and after, and (optional) the drawn token's legend name.
    """
    before = np.asarray(before, dtype=np.float32)
    after = np.asarray(after, dtype=np.float32)
    top = top_candidates(after, chosen, k)
    labels = [token_label(vocabulary[i]) for i in top]
    ticks = [f"<b>{lab}</b>" if i == chosen else lab for i, lab in zip(top, labels)]
    x = list(range(len(top)))
    hover = "%{customdata}: %{y:.3f}<extra></extra>"
    bars = [
        {
            "type": "bar",
            "x": x,
            "y": before[top],
            "name": html.escape(names[0]),
            "marker": {"color": BEFORE},
            "customdata": labels,
            "hovertemplate": hover,
        },
        {
            "type": "bar",
            "x": x,
            "y": [None if i == chosen else float(after[i]) for i in top],
            "name": html.escape(names[1]),
            "marker": {"color": OTHER},
            "offsetgroup": "after",
            "customdata": labels,
            "hovertemplate": hover,
        },
        {
            # the drawn token: red, hatched and labelled in bold (not by colour alone), in
            # the same slot as the other tokens' bars, with a legend entry of its own (one
            # series' swatch took the first bar's look: hatched only if it was the drawn one)
            "type": "bar",
            "x": [top.index(chosen)],
            "y": [float(after[chosen])],
            "name": html.escape(names[2] if len(names) > 2 else names[1]),
            "marker": {"color": CHOSEN, "pattern": {"shape": "/"}},
            "offsetgroup": "after",
            "customdata": [labels[top.index(chosen)]],
            "hovertemplate": hover,
        },
    ]
    layout = {
        "barmode": "group",
        "height": 320,
        "margin": {"l": 10, "r": 10, "t": 30, "b": 10},
        "legend": {"orientation": "h", "y": 1.12, "x": 0},
        "xaxis": {"tickmode": "array", "tickvals": x, "ticktext": ticks, "tickangle": -30},
        "yaxis": {"range": [0, 1], "title": {"text": html.escape(axis)}},
    }
    fig = go.Figure({"data": bars, "layout": layout})
    return fig
