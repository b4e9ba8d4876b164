"""Attention heatmaps that tell the truth.

Queries are rows, top to bottom; keys are columns. Axes are integer positions with token
tick labels, so a repeated token keeps its own row. Probabilities use a fixed [0, 1]
colour range; cells the model's own mask forbids (True = may attend, as in model.masks:
a query's future, padding) are drawn grey, never as 0.
"""

from __future__ import annotations

import html
import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz.memo import memo_figure

MASKED_GREY = "#bdbdbd"  # drawn as its own layer under the weights (see _mask_layer)
# Perceptually uniform and readable with colour-vision deficiency (WCAG 1.4.11, issue 26);
# no grey in it, so grey "masked" cells can never be mistaken for a weight.
PROBABILITY_SCALE = "Viridis"
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


def _masked(z: np.ndarray, mask) -> np.ndarray:
    """``z`` with NaN (drawn grey) wherever ``mask`` forbids: the model's own mask, bool,
    True = this query may attend this key (model.masks), broadcastable to [..., Lq, Lk]."""
    if mask is None:
        return z
    allowed = np.broadcast_to(_as_array(mask).astype(bool), z.shape)
    return np.where(allowed, z, np.nan).astype(z.dtype)


HOVER_TOKENS_MAX_CELLS = 64 * 64  # above this, per-cell hover text would multiply the bytes
# sent (it is not base64-packed): axes name their positions "token #i" instead (see _positions)
MAX_TICK_LABELS = 40  # more labels than this overlap, and plotly's layout of hundreds of
# rotated labels is what froze a 256-token map for seconds: every k-th is drawn, hover names all


def _mask_layer(z: np.ndarray, x: list | None = None, y: list | None = None) -> dict | None:
    """Grey cells under the weights wherever they are NaN (masked), or None if nothing is.

    A layer of its own rather than the plot background: themes pad the plot area, and a
    grey background would show as a frame around every map. One byte a cell (1 = masked,
    0 = transparent), so a 512 x 512 map's mask adds a quarter of what its weights send.
    """
    masked = np.isnan(z)
    if not masked.any():
        return None
    return {
        "type": "heatmap",
        "z": masked.astype(np.uint8),
        "x": list(range(z.shape[1])) if x is None else x,
        "y": list(range(z.shape[0])) if y is None else y,
        "zmin": 0,
        "zmax": 1,
        "colorscale": [[0, "rgba(0,0,0,0)"], [1, MASKED_GREY]],
        "showscale": False,
        "hoverinfo": "skip",
    }


def _with_mask(heatmap: dict) -> list[dict]:
    """The grey mask layer first, then the weights on top (their NaN gaps let the grey show)."""
    mask = _mask_layer(heatmap["z"], heatmap["x"], heatmap["y"])
    return [heatmap] if mask is None else [mask, heatmap]


def is_large(query_tokens: list[str], key_tokens: list[str]) -> bool:
    """Too many cells to name the tokens cell by cell: the axes carry the names instead."""
    return len(query_tokens) * len(key_tokens) > HOVER_TOKENS_MAX_CELLS


def _positions(tokens: list[str], start: int = 0) -> list[str]:
    """Category values "token #i" for a large map's axis: unique per position, so repeated
    tokens keep their own rows, and the hover names the token without per-cell text.
    ``start``: the first token's position (a zoom window keeps the input's positions)."""
    return [f"{token_label(t)} #{start + i}" for i, t in enumerate(tokens)]


def _hover(query_tokens: list[str], key_tokens: list[str]) -> np.ndarray | None:
    if is_large(query_tokens, key_tokens):
        return None
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
    start: tuple[int, int] = (0, 0),
) -> dict:
    """A heatmap trace as a plain dict: figures are built in one go, which is several times
    faster than plotly's incremental, validating object API (it matters at every step)."""
    qn, kn, vn = (html.escape(s) for s in hover_names)
    custom = _hover(query_tokens, key_tokens)
    large = custom is None and len(query_tokens) == z.shape[0] and len(key_tokens) == z.shape[1]
    if custom is None:
        # Large maps: the axes are "token #i" categories, so %{y} / %{x} name the tokens.
        template = f"{qn}: %{{y}}<br>{kn}: %{{x}}<br>{vn}: %{{z:.3f}}<extra></extra>"
        if not large:
            template = f"{qn}: #%{{y}}<br>{kn}: #%{{x}}<br>{vn}: %{{z:.3f}}<extra></extra>"
    else:
        template = (
            f"{qn}: %{{customdata[0]}} (#%{{y}})<br>{kn}: %{{customdata[1]}} (#%{{x}})"
            f"<br>{vn}: %{{z:.3f}}<extra></extra>"
        )
    trace = {
        "type": "heatmap",
        "z": z,
        "x": _positions(key_tokens, start[1])
        if large
        else list(range(start[1], start[1] + z.shape[1])),
        "y": _positions(query_tokens, start[0])
        if large
        else list(range(start[0], start[0] + z.shape[0])),
        "zmin": zmin,
        "zmax": zmax,
        "colorscale": scale,
        "hovertemplate": template,
        "hoverongaps": False,
        "showscale": showscale,
    }
    if zmid is not None:
        trace["zmid"] = zmid
    if custom is not None:
        trace["customdata"] = custom
    return trace


def thinned_ticks(labels: list[str], most: int = MAX_TICK_LABELS) -> tuple[list[int], list[str]]:
    """(positions, labels) of at most ``most`` ticks: every k-th label, from the first."""
    step = max(1, math.ceil(len(labels) / most))
    shown = list(range(0, len(labels), step))
    return shown, [labels[i] for i in shown]


def _token_axis(tokens: list[str], ticks: bool = True, start: int = 0) -> dict:
    """An axis labelled with tokens by position, its range exactly covering the cells.

    At most MAX_TICK_LABELS labels are drawn (every k-th token, the step said in the axis
    title by the caller if it wants); the hover names every token.
    """
    n = len(tokens)
    axis = {"showgrid": False, "zeroline": False, "range": [start - 0.5, start + n - 0.5]}
    if not ticks:
        return {**axis, "showticklabels": False, "ticks": ""}
    tickvals, ticktext = thinned_ticks([token_label(t) for t in tokens])
    tickvals = [start + tick for tick in tickvals]
    return {**axis, "tickmode": "array", "tickvals": tickvals, "ticktext": ticktext}


def _axes(
    query_tokens, key_tokens, ticks=True, keys_on_top=True, start: tuple[int, int] = (0, 0)
) -> tuple[dict, dict]:
    """(x axis = keys, y axis = queries running top to bottom)."""
    x = {**_token_axis(key_tokens, ticks, start[1]), "side": "top" if keys_on_top else "bottom"}
    x["tickangle"] = -45
    y = _token_axis(query_tokens, ticks, start[0])
    y["range"] = y["range"][::-1]
    y["tickangle"] = 0  # never auto-rotated: tall CJK font metrics fool plotly's overlap check
    return x, y


def _cell_px(n_queries: int, n_keys: int) -> int:
    return int(max(6, min(36, 640 / max(1, n_queries, n_keys))))


def _single_map(
    heatmap: dict,
    query_tokens,
    key_tokens,
    title: str,
    axis_titles: tuple[str, str] | None,
    start: tuple[int, int] = (0, 0),
) -> go.Figure:
    x, y = _axes(query_tokens, key_tokens, start=start)
    if heatmap["x"] and isinstance(heatmap["x"][0], str):  # categories: ticks by index
        x, y = _axes(query_tokens, key_tokens)
    if axis_titles:
        x["title"] = {"text": html.escape(axis_titles[0])}
        y["title"] = {"text": html.escape(axis_titles[1])}
    n_q = len(query_tokens)
    height = min(900, max(260, 150 + _cell_px(n_q, len(key_tokens)) * n_q))
    return _map_figure(heatmap, x, y, title, height)


def _map_figure(heatmap: dict, x: dict, y: dict, title: str, height: int) -> go.Figure:
    """One map (its grey mask layer under it) with its axes and, if any, its title."""
    layout = {
        "xaxis": x,
        "yaxis": y,
        "height": height,
        "margin": {"l": 10, "r": 10, "t": 125 if title else 70, "b": 10},
    }
    if title:
        # Pinned to the top edge, clear of the key labels and axis title above the map.
        layout["title"] = {
            "text": html.escape(title),
            "y": 1,
            "yref": "container",
            "yanchor": "top",
            "pad": {"t": 10},
        }
    return go.Figure({"data": _with_mask(heatmap), "layout": layout})


@memo_figure
def attention_heatmap(
    weights,
    query_tokens: list[str],
    key_tokens: list[str],
    *,
    mask=None,
    title: str = "",
    labels: tuple[str, str, str] = ("query", "key", "weight"),
    start: tuple[int, int] = (0, 0),
) -> go.Figure:
    """One head's (or an average's) attention, [Lq, Lk], as a probability heatmap.

    ``start``: the (query, key) position of its first cell, when it is a zoom window of a
    longer map: the axes and hover keep the input's positions."""
    z = _masked(_as_array(weights), mask)
    heatmap = _heatmap(
        z,
        query_tokens,
        key_tokens,
        scale=PROBABILITY_SCALE,
        zmin=0,
        zmax=1,
        hover_names=labels,
        start=start,
    )
    return _single_map(heatmap, query_tokens, key_tokens, title, (labels[1], labels[0]), start)


HEADS_MAX_SIDE = 64  # all heads at 256 tokens: 12 x 65k cells took the browser ~7 s to draw


def heads_pooled(query_tokens: list[str], key_tokens: list[str], max_side: int | None) -> bool:
    """Whether ``heads_figure`` draws block means rather than every token pair."""
    return max_side is not None and max(len(query_tokens), len(key_tokens)) > max_side


@memo_figure
def heads_figure(
    weights,
    query_tokens: list[str],
    key_tokens: list[str],
    *,
    mask=None,
    titles: list[str] | None = None,
    cols: int | None = None,
    labels: tuple[str, str, str] = ("query", "key", "weight"),
    ticks: bool | None = None,
    max_side: int | None = None,
    edges: tuple[list[int], list[int]] | None = None,
) -> go.Figure:
    """Small multiples, [H, Lq, Lk] -> one figure, one shared [0, 1] colour bar.

    Token labels sit on the outer panels only (queries left, keys below), so panels keep
    their room and titles never collide with labels. Longer inputs than ``max_side`` are
    drawn as block means (``heads_pooled``): a dozen full-size maps froze the browser.
    ``edges``: ``weights`` are such block means already ([H, blocks, blocks], NaN where a
    whole block is masked), their blocks covering these (query, key) positions.
    """
    z = _masked(_as_array(weights), mask)
    pooled = edges is not None or heads_pooled(query_tokens, key_tokens, max_side)
    if edges is not None:
        q_edges, k_edges = np.asarray(edges[0]), np.asarray(edges[1])
    elif pooled:
        z = pool_cells(z, max_side)
        q_edges = pool_edges(len(query_tokens), max_side)
        k_edges = pool_edges(len(key_tokens), max_side)
    n = z.shape[0]
    cols = cols or min(n, 4)
    rows = math.ceil(n / cols)
    titles = titles or [f"{i}" for i in range(n)]
    if ticks is None:
        ticks = max(len(query_tokens), len(key_tokens)) <= 24
    # make_subplots' grid, written out: its validating API took 0.25 s for 14 panels
    h_gap, v_gap = 0.02, 0.06 if rows > 1 else 0.0
    width, height = (1 - h_gap * (cols - 1)) / cols, (1 - v_gap * (rows - 1)) / rows
    data, layout = [], {"annotations": []}
    for i in range(n):
        r, c = i // cols + 1, i % cols + 1
        name = "" if i == 0 else str(i + 1)
        left, top = (c - 1) * (width + h_gap), 1 - (r - 1) * (height + v_gap)
        layout["annotations"].append(
            {
                "text": html.escape(titles[i]),
                "x": left + width / 2,
                "y": top,
                "xref": "paper",
                "yref": "paper",
                "xanchor": "center",
                "yanchor": "bottom",
                "showarrow": False,
                "font": {"size": 16},
            }
        )
        if pooled:
            heatmap = _pooled_heatmap(z[i], q_edges, k_edges, labels, showscale=i == 0)
        else:
            heatmap = _heatmap(
                z[i],
                query_tokens,
                key_tokens,
                scale=PROBABILITY_SCALE,
                zmin=0,
                zmax=1,
                hover_names=labels,
                showscale=i == 0,
            )
        data += [
            {**trace, "xaxis": f"x{name}", "yaxis": f"y{name}"} for trace in _with_mask(heatmap)
        ]
        if pooled:  # axes over blocks, not tokens; the hover names each block's positions
            x, y = _axes([""] * z.shape[1], [""] * z.shape[2], False, keys_on_top=False)
        else:
            x, y = _axes(query_tokens, key_tokens, ticks, keys_on_top=False)
        x["showticklabels"] = ticks and i + cols >= n  # keys only under the bottom panels
        y["showticklabels"] = ticks and c == 1  # queries only left of the first column
        layout[f"xaxis{name}"] = {**x, "domain": _span(left, left + width), "anchor": f"y{name}"}
        layout[f"yaxis{name}"] = {**y, "domain": _span(top - height, top), "anchor": f"x{name}"}
    panel = 40 + _cell_px(len(query_tokens), len(key_tokens)) * len(query_tokens) * 3 // 4
    if pooled:  # about as tall as wide in four columns: the blocks, not the tokens, set it
        panel = 240
    layout["height"] = min(2000, max(260, 60 + rows * max(160, panel)))
    layout["margin"] = {"l": 10, "r": 10, "t": 40, "b": 10}
    return go.Figure({"data": data, "layout": layout})


def _span(a: float, b: float) -> list[float]:
    """An axis domain inside [0, 1]: sums of spacings land a hair outside (-5.6e-17), which
    plotly refuses."""
    return [min(1.0, max(0.0, round(a, 9))), min(1.0, max(0.0, round(b, 9)))]


def _diverging_map(
    z: np.ndarray, query_tokens, key_tokens, bound: float, title: str, labels, start=(0, 0)
) -> go.Figure:
    """Signed values around 0 on a red-blue scale from -bound to bound; NaN cells grey."""
    heatmap = _heatmap(
        z,
        query_tokens,
        key_tokens,
        scale=SCORE_SCALE,
        zmin=-bound,
        zmax=bound,
        zmid=0.0,
        hover_names=labels,
        start=start,
    )
    return _single_map(heatmap, query_tokens, key_tokens, title, None, start)


@memo_figure
def scores_heatmap(
    values,
    query_tokens: list[str],
    key_tokens: list[str],
    *,
    title: str = "",
    labels: tuple[str, str, str] = ("query", "key", "score"),
    start: tuple[int, int] = (0, 0),
) -> go.Figure:
    """Pre-softmax scores on a diverging scale centred at 0; -inf (masked) cells grey."""
    z = _as_array(values).copy()
    z[~np.isfinite(z)] = np.nan
    bound = float(np.nanmax(np.abs(z))) if np.isfinite(z).any() else 1.0
    return _diverging_map(z, query_tokens, key_tokens, bound, title, labels, start)


def pool_edges(n: int, max_side: int) -> np.ndarray:
    """Block boundaries that split ``n`` positions into at most ``max_side`` near-equal blocks."""
    return np.linspace(0, n, min(n, max_side) + 1).astype(int)


def pool_cells(z: np.ndarray, max_side: int) -> np.ndarray:
    """Average-pool the last two axes down to at most ``max_side`` cells each (thumbnails).

    NaN (masked) cells stay NaN only where a whole block is masked.
    """
    lq, lk = z.shape[-2:]
    if lq <= max_side and lk <= max_side:
        return z
    qe, ke = pool_edges(lq, max_side), pool_edges(lk, max_side)
    present = ~np.isnan(z)
    # Block sums by np.add.reduceat over both axes; NaN cells count neither in sum nor size.
    block_sums = np.add.reduceat(
        np.add.reduceat(np.where(present, z, 0.0), qe[:-1], axis=-2), ke[:-1], axis=-1
    )
    sizes = np.add.reduceat(
        np.add.reduceat(present.astype(np.float32), qe[:-1], axis=-2), ke[:-1], axis=-1
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(sizes > 0, block_sums / sizes, np.nan).astype(
            np.float32
        )  # all-NaN stays NaN


def _pooled_heatmap(
    z: np.ndarray, qe: np.ndarray, ke: np.ndarray, hover_names, showscale: bool
) -> dict:
    """A heatmap of block means (``pool_cells``) whose hover names each block's positions:
    its cells are categories "#a–b" (``block_names``), so the hover needs no per-cell data
    (four numbers a cell, the same in every panel, were most of a 4,096-token page's bytes)."""
    qn, kn, vn = (html.escape(s) for s in hover_names)
    return {
        "type": "heatmap",
        "z": z,
        "x": block_names(ke),
        "y": block_names(qe),
        "zmin": 0,
        "zmax": 1,
        "colorscale": PROBABILITY_SCALE,
        "hovertemplate": f"{qn}: %{{y}}<br>{kn}: %{{x}}<br>{vn}: %{{z:.3f}}<extra></extra>",
        "hoverongaps": False,
        "showscale": showscale,
    }


def _mosaic(z: np.ndarray, gutter: int) -> tuple[np.ndarray, np.ndarray]:
    """[R, C, h, w] tiles -> one [R*(h+g)-g, C*(w+g)-g] picture and its masked cells.

    Gutters are NaN in both the picture and the mask, so they stay blank (not grey).
    """
    rows, cols, h, w = z.shape
    out = np.full((rows * (h + gutter) - gutter, cols * (w + gutter) - gutter), np.nan, np.float32)
    masked = np.zeros(out.shape, dtype=bool)
    for r in range(rows):
        for c in range(cols):
            tile = z[r, c]
            y, x = r * (h + gutter), c * (w + gutter)
            out[y : y + h, x : x + w] = tile
            masked[y : y + h, x : x + w] = np.isnan(tile)
    return out, masked


@memo_figure
def model_grid_figure(
    attention,
    *,
    mask=None,
    row_titles: list[str],
    col_titles: list[str],
    max_side: int = 32,
) -> go.Figure:
    """The whole model at a glance: [L, H, Lq, Lk] as a layers x heads grid of thumbnails.

    One mosaic heatmap rather than L x H subplots: a fraction of the build time and bytes.
    Long inputs are average-pooled to ``max_side`` cells a side; the full-resolution map
    of any head is one click away in the other views.
    """
    z = pool_cells(_masked(_as_array(attention), mask), max_side)
    n_layers, n_heads, h, w = z.shape
    gutter = max(1, max(h, w) // 8)
    picture, masked = _mosaic(z, gutter)
    layer_of = np.repeat(np.arange(n_layers), h + gutter)[: picture.shape[0]]
    head_of = np.repeat(np.arange(n_heads), w + gutter)[: picture.shape[1]]
    fig = go.Figure()
    if masked.any():  # one byte a cell, transparent where allowed (as _mask_layer)
        fig.add_trace(
            go.Heatmap(
                z=masked.astype(np.uint8),
                zmin=0,
                zmax=1,
                colorscale=[[0, "rgba(0,0,0,0)"], [1, MASKED_GREY]],
                showscale=False,
                hoverinfo="skip",
            )
        )
    fig.add_trace(
        go.Heatmap(
            z=picture,
            zmin=0,
            zmax=1,
            colorscale=PROBABILITY_SCALE,
            hoverongaps=False,
            # int8: sent as a packed byte array, one byte per number (models here have < 128 heads)
            customdata=np.stack(np.meshgrid(head_of + 1, layer_of + 1), axis=-1).astype(np.int8),
            hovertemplate="%{customdata[1]} · %{customdata[0]}: %{z:.3f}<extra></extra>",
        )
    )
    fig.update_xaxes(
        tickmode="array",
        tickvals=[c * (w + gutter) + (w - 1) / 2 for c in range(n_heads)],
        ticktext=[html.escape(t) for t in col_titles],
        side="top",
        showgrid=False,
        zeroline=False,
        range=[-0.5, picture.shape[1] - 0.5],
    )
    fig.update_yaxes(
        tickmode="array",
        tickvals=[r * (h + gutter) + (h - 1) / 2 for r in range(n_layers)],
        ticktext=[html.escape(t) for t in row_titles],
        showgrid=False,
        zeroline=False,
        range=[picture.shape[0] - 0.5, -0.5],
    )
    fig.update_layout(
        height=max(260, 60 + n_layers * min(110, max(60, 900 // n_heads))),
        margin=dict(l=10, r=10, t=40, b=10),
    )
    return fig


@memo_figure
def focus_bars_figure(
    rows,
    key_tokens: list[str],
    *,
    head_titles: list[str],
    colours: list[str],
    value_label: str = "weight",
    positions: list[int] | None = None,
) -> go.Figure:
    """One query's attention over the keys, a bar chart per head ([H, Lk] in), shared axes.

    ``positions``: the keys' positions when they are some of the input's keys (the ones a
    long input's token weighs most), so the labels and hover name where each one stands."""
    z = _as_array(rows)
    n_heads = z.shape[0]
    fig = make_subplots(
        rows=n_heads,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.02,
        row_titles=[html.escape(h) for h in head_titles],
    )
    labels = [token_label(t) for t in key_tokens]
    where = "(#%{x})"
    if positions is not None:
        labels = [f"{label} #{p}" for label, p in zip(labels, positions)]
        where = ""
    for head in range(n_heads):
        fig.add_trace(
            go.Bar(
                x=list(range(len(key_tokens))),
                y=z[head],
                marker_color=colours[head],
                customdata=labels,
                showlegend=False,
                meta={"quantity": value_label},  # the summary's noun: the axes show no title
                hovertemplate=f"%{{customdata}} {where}<br>{html.escape(value_label)}: "
                "%{y:.3f}<extra></extra>",
            ),
            row=head + 1,
            col=1,
        )
    fig.update_yaxes(range=[0, 1], showticklabels=False, showgrid=False)
    tickvals, ticktext = thinned_ticks(labels)  # the hover names every key
    fig.update_xaxes(
        tickmode="array", tickvals=tickvals, ticktext=ticktext, tickangle=-45, showticklabels=False
    )
    fig.update_xaxes(showticklabels=True, row=n_heads, col=1)
    fig.update_layout(
        height=min(1600, 80 + 72 * n_heads), margin=dict(l=10, r=60, t=10, b=10), bargap=0.15
    )
    return fig


@memo_figure
def difference_heatmap(
    first,
    second,
    query_tokens: list[str],
    key_tokens: list[str],
    *,
    mask=None,
    title: str = "",
    labels: tuple[str, str, str] = ("query", "key", "difference"),
) -> go.Figure:
    """second − first, [Lq, Lk], on a diverging scale fixed to [−1, 1] (weights lie in [0, 1]).

    Red: the second map attends more there; blue: less; white: the same. Masked cells grey.
    """
    z = _masked(_as_array(second) - _as_array(first), mask)
    return _diverging_map(z, query_tokens, key_tokens, 1.0, title, labels)


def block_names(edges) -> list[str]:
    """Category names of pooled blocks, "#a–b" (or "#a" for a block of one position):
    unique, so the hover names each block's positions without per-cell text."""
    return [f"#{a}–{b - 1}" if b - a > 1 else f"#{a}" for a, b in zip(edges[:-1], edges[1:])]


def _block_axis(edges) -> dict:
    """An axis over blocks labelled with the position each labelled block starts at."""
    n = len(edges) - 1
    shown, _ = thinned_ticks([""] * n, 8)
    return {
        "showgrid": False,
        "zeroline": False,
        "range": [-0.5, n - 0.5],
        "tickmode": "array",
        "tickvals": shown,
        "ticktext": [str(edges[i]) for i in shown],
    }


@memo_figure
def overview_heatmap(
    values,
    row_edges: list[int],
    col_edges: list[int],
    *,
    title: str = "",
    labels: tuple[str, str, str] = ("query", "key", "weight"),
    bound: float | None = None,
) -> go.Figure:
    """A long map pooled block by block: [blocks, blocks], NaN where the model's mask
    forbids a whole block (drawn grey, with the same pooling: one byte a block).

    Axes show positions (a block covers ``row_edges[i]`` to ``row_edges[i + 1] - 1``), the
    hover names each block's range. Weights on [0, 1]; with ``bound``, signed values
    (a difference) on a diverging scale from -bound to bound.
    """
    qn, kn, vn = (html.escape(s) for s in labels)
    z = _as_array(values)
    heatmap = {
        "type": "heatmap",
        "z": z,
        "x": block_names(col_edges),
        "y": block_names(row_edges),
        "zmin": 0 if bound is None else -bound,
        "zmax": 1 if bound is None else bound,
        "colorscale": PROBABILITY_SCALE if bound is None else SCORE_SCALE,
        "hovertemplate": f"{qn}: %{{y}}<br>{kn}: %{{x}}<br>{vn}: %{{z:.3f}}<extra></extra>",
        "hoverongaps": False,
    }
    if bound is not None:
        heatmap["zmid"] = 0.0
    x = {**_block_axis(col_edges), "side": "top", "title": {"text": kn}}
    y = {**_block_axis(row_edges), "title": {"text": qn}}
    y["range"] = y["range"][::-1]
    return _map_figure(heatmap, x, y, title, 760)


def qk_norm_figure(
    query_tokens: list[str],
    key_tokens: list[str],
    stages: dict,
    *,
    names: dict[str, str],
    title: str = "",
) -> go.Figure:
    """QK-norm, one head: the length ‖q‖ of each query and ‖k‖ of each key before and after
    the norm (``stages``: model.trace.Trace.norm_stages), two panels of paired bars. The
    norm makes every length about √d_k times its learned gain, whatever the token: the
    scores q·k can no longer grow with the vectors' size."""
    fig = make_subplots(
        rows=2, cols=1, vertical_spacing=0.18, subplot_titles=[names["queries"], names["keys"]]
    )
    colours = {"before": "#7a7a7a", "after": "#1f5fa8"}
    for row, (side, tokens) in enumerate((("q", query_tokens), ("k", key_tokens)), start=1):
        x = list(range(len(tokens)))
        for when in ("before", "after"):
            lengths = np.linalg.norm(_as_array(stages[f"{side}_{when}"]), axis=-1)
            fig.add_trace(
                go.Bar(
                    x=x,
                    y=lengths,
                    name=names[when],
                    marker_color=colours[when],
                    showlegend=row == 1,
                    customdata=[html.escape(str(tok)) for tok in tokens],
                    hovertemplate="%{customdata}: %{y:.2f}<extra>"
                    + html.escape(names[when])
                    + "</extra>",
                ),
                row=row,
                col=1,
            )
        ticks, labels = thinned_ticks([html.escape(str(tok)) for tok in tokens])
        fig.update_xaxes(tickmode="array", tickvals=ticks, ticktext=labels, row=row, col=1)
        fig.update_yaxes(title_text=names["length"], rangemode="tozero", row=row, col=1)
    fig.update_layout(
        barmode="group", height=520, title=title, margin=dict(t=80), legend=dict(orientation="h")
    )
    return fig
