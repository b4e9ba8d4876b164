"""Attention heatmaps that tell the truth.

Queries are rows, top to bottom; keys are columns. Axes are integer positions with token
tick labels, so a repeated token keeps its own row. Probabilities use a fixed [0, 1]
colour range; masked cells (a query's future) are drawn grey, never as 0.
"""

from __future__ import annotations

import html
import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

MASKED_GREY = "#bdbdbd"  # the plot background shows through NaN cells
PROBABILITY_SCALE = "Blues"  # white at 0, so grey "masked" can never be mistaken for it
SCORE_SCALE = "RdBu_r"  # diverging around 0 for pre-softmax scores


def token_label(token: str) -> str:
    """A token as plotly should show it: HTML-escaped (plotly reads tags), blanks made visible."""
    if token == "":
        return "∅"
    if token.isspace():
        return "␣" * len(token)
    return html.escape(token, quote=False)


def _as_array(values) -> np.ndarray:
    if hasattr(values, "detach"):
        values = values.detach().cpu().numpy()
    return np.asarray(values, dtype=np.float32)


def future_cells(n_queries: int, n_keys: int) -> np.ndarray:
    """[Lq, Lk] True where a key lies in the query's future (the causal mask forbids it)."""
    return np.triu(np.ones((n_queries, n_keys), dtype=bool), k=1 + n_keys - n_queries)


def _masked(z: np.ndarray, causal: bool) -> np.ndarray:
    if not causal:
        return z
    z = z.copy()
    z[..., future_cells(z.shape[-2], z.shape[-1])] = np.nan
    return z


def _hover(query_tokens: list[str], key_tokens: list[str]) -> np.ndarray:
    q = [token_label(t) for t in query_tokens]
    k = [token_label(t) for t in key_tokens]
    return np.array([[[qi, kj] for kj in k] for qi in q], dtype=object)


def _heatmap(
    z: np.ndarray,
    query_tokens: list[str],
    key_tokens: list[str],
    *,
    scale: str,
    zmin: float | None,
    zmax: float | None,
    zmid: float | None = None,
    hover_names: tuple[str, str, str] = ("query", "key", "weight"),
    showscale: bool = True,
) -> go.Heatmap:
    qn, kn, vn = (html.escape(s) for s in hover_names)
    return go.Heatmap(
        z=z,
        x=list(range(z.shape[1])),
        y=list(range(z.shape[0])),
        zmin=zmin,
        zmax=zmax,
        zmid=zmid,
        colorscale=scale,
        customdata=_hover(query_tokens, key_tokens),
        hovertemplate=(
            f"{qn}: %{{customdata[0]}} (#%{{y}})<br>{kn}: %{{customdata[1]}} (#%{{x}})"
            f"<br>{vn}: %{{z:.3f}}<extra></extra>"
        ),
        hoverongaps=False,
        showscale=showscale,
        xgap=0,
        ygap=0,
    )


def _token_axes(fig: go.Figure, query_tokens, key_tokens, row=None, col=None, ticks=True) -> None:
    def axis(tokens):
        if not ticks:
            return dict(showticklabels=False, ticks="")
        return dict(
            tickmode="array",
            tickvals=list(range(len(tokens))),
            ticktext=[token_label(t) for t in tokens],
        )

    fig.update_xaxes(
        **axis(key_tokens), side="top", tickangle=-45, showgrid=False, row=row, col=col
    )
    fig.update_yaxes(**axis(query_tokens), autorange="reversed", showgrid=False, row=row, col=col)


def attention_heatmap(
    weights,
    query_tokens: list[str],
    key_tokens: list[str],
    *,
    causal: bool = False,
    title: str = "",
    labels: tuple[str, str, str] = ("query", "key", "weight"),
) -> go.Figure:
    """One head's (or an average's) attention, [Lq, Lk], as a probability heatmap."""
    z = _masked(_as_array(weights), causal)
    fig = go.Figure(
        _heatmap(
            z, query_tokens, key_tokens, scale=PROBABILITY_SCALE, zmin=0, zmax=1, hover_names=labels
        )
    )
    _token_axes(fig, query_tokens, key_tokens)
    size = _cell_px(len(query_tokens), len(key_tokens))
    fig.update_layout(
        title=dict(text=html.escape(title)) if title else None,
        plot_bgcolor=MASKED_GREY,
        height=min(900, max(260, 120 + size * len(query_tokens))),
        margin=dict(l=10, r=10, t=90 if title else 70, b=10),
        xaxis_title=html.escape(labels[1]),
        yaxis_title=html.escape(labels[0]),
    )
    return fig


def _cell_px(n_queries: int, n_keys: int) -> int:
    return int(max(6, min(36, 640 / max(1, n_queries, n_keys))))


def heads_figure(
    weights,
    query_tokens: list[str],
    key_tokens: list[str],
    *,
    causal: bool = False,
    titles: list[str] | None = None,
    cols: int | None = None,
    labels: tuple[str, str, str] = ("query", "key", "weight"),
    ticks: bool | None = None,
) -> go.Figure:
    """Small multiples, [H, Lq, Lk] -> one figure, one shared [0, 1] colour bar."""
    z = _masked(_as_array(weights), causal)
    n = z.shape[0]
    cols = cols or min(n, 4)
    rows = math.ceil(n / cols)
    titles = titles or [f"{i}" for i in range(n)]
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=[html.escape(t) for t in titles],
        horizontal_spacing=0.04,
        vertical_spacing=0.08 if rows > 1 else 0.0,
    )
    if ticks is None:
        ticks = max(len(query_tokens), len(key_tokens)) <= 24
    for i in range(n):
        r, c = i // cols + 1, i % cols + 1
        fig.add_trace(
            _heatmap(
                z[i],
                query_tokens,
                key_tokens,
                scale=PROBABILITY_SCALE,
                zmin=0,
                zmax=1,
                hover_names=labels,
                showscale=i == 0,
            ),
            row=r,
            col=c,
        )
        _token_axes(fig, query_tokens, key_tokens, row=r, col=c, ticks=ticks)
    panel = 90 + _cell_px(len(query_tokens), len(key_tokens)) * len(query_tokens) // 2
    fig.update_layout(
        plot_bgcolor=MASKED_GREY,
        height=min(1800, max(240, rows * max(180, panel))),
        margin=dict(l=10, r=10, t=40, b=10),
    )
    return fig


def scores_heatmap(
    values,
    query_tokens: list[str],
    key_tokens: list[str],
    *,
    title: str = "",
    labels: tuple[str, str, str] = ("query", "key", "score"),
) -> go.Figure:
    """Pre-softmax scores on a diverging scale centred at 0; -inf (masked) cells grey."""
    z = _as_array(values).copy()
    z[~np.isfinite(z)] = np.nan
    bound = float(np.nanmax(np.abs(z))) if np.isfinite(z).any() else 1.0
    fig = go.Figure(
        _heatmap(
            z,
            query_tokens,
            key_tokens,
            scale=SCORE_SCALE,
            zmin=-bound,
            zmax=bound,
            zmid=0.0,
            hover_names=labels,
        )
    )
    _token_axes(fig, query_tokens, key_tokens)
    fig.update_layout(
        title=dict(text=html.escape(title)) if title else None,
        plot_bgcolor=MASKED_GREY,
        height=min(
            900, max(260, 120 + _cell_px(len(query_tokens), len(key_tokens)) * len(query_tokens))
        ),
        margin=dict(l=10, r=10, t=90 if title else 70, b=10),
    )
    return fig
