"""The maps a page draws, read from a Trace only through attention_map / attention_overview.

A long input is never held whole: above ``LONG_ABOVE`` tokens a side a heatmap is its
block-pooled overview (at most ``OVERVIEW_SIZE`` blocks a side) and a zoom window of at most
``WINDOW_MAX`` positions a side, read at full resolution. The model's mask is pooled with the
same blocks (a block is grey only when every cell in it is masked).
"""

from __future__ import annotations

import numpy as np
import streamlit as st
import torch

from model.analysis.summaries import trace_rollout_layer
from model.trace import LONG_TRACE, Trace, block_edges, pool_map
from ui.i18n import t
from viz.memo import KeptWithTrace

# A side longer than this: overview + zoom window (where a CPU pass records block sums too)
LONG_ABOVE = LONG_TRACE
# What the browser receives for a float32 cell is base64 with every "/" escaped as \u002f
# (Streamlit's JSON), about 6 bytes, and its mask one byte more: 256 x 256 cells are about
# 0.5 MB (480 x 480 were 1.8 MB, 512 x 512 2.04 MB, over the 2 MB a chart may send). What
# sets the size is the time to draw: headless Chromium took about 0.5 s for each 480 x 480
# heatmap and a quarter of that for 256 x 256 (four tokens a pixel of a 900 px chart at
# 4,096 tokens, and a window's tokens still legible).
OVERVIEW_SIZE = 256
WINDOW_MAX = 256  # the zoom window's longest side, in positions
# The stages of a long input: four maps of one window, so a smaller one than the heatmap's
# (four 256 x 256 maps took the browser about 2 s to draw, four 128 x 128 ones about 1 s)
STAGES_WINDOW_MAX = 128
# Token focus of a long input: bars for the keys the token weighs most (14 heads x 4,096
# bars took the browser 7 s to draw), and the text shaded around the token only.
FOCUS_KEYS = 48
FOCUS_TEXT_BEFORE, FOCUS_TEXT_AFTER = 240, 60


def is_long(n_queries: int, n_keys: int) -> bool:
    """Whether a map of this size is drawn as an overview and a zoom window."""
    return max(n_queries, n_keys) > LONG_ABOVE


def head_maps(
    trace: Trace, kind: str, layer: int, n_heads: int, rows=None, cols=None
) -> torch.Tensor:
    """Every head of one layer for one window: [heads, rows, cols]."""
    return torch.stack(
        [trace.attention_map(kind, layer, h, rows=rows, cols=cols) for h in range(n_heads)]
    )


def chosen_reader(trace: Trace, kind: str, layer: int, aggregate: str, head: int, n_heads: int):
    """read(rows, cols=None) -> [rows, cols] of one head, the mean or max over heads, or
    the rollout up to the layer (``rollout_map``: computed when first asked, then kept)."""
    if aggregate == "head":
        return lambda rows, cols=None: trace.attention_map(kind, layer, head, rows=rows, cols=cols)
    if aggregate == "rollout":
        rolled = rollout_map(trace, kind, layer)
        return lambda rows, cols=None: _window_of(rolled, rows, cols)
    if aggregate not in ("mean", "max"):
        raise ValueError(f"no streamed map for aggregate {aggregate!r}")

    def read(rows, cols=None) -> torch.Tensor:
        maps = head_maps(trace, kind, layer, n_heads, rows, cols)
        return maps.mean(0) if aggregate == "mean" else maps.amax(0)

    return read


def _window_of(m: torch.Tensor, rows, cols) -> torch.Tensor:
    m = m if rows is None else m[rows]
    return m if cols is None else m[:, cols]


# A long input's rollout is 64 MB at 4,096 tokens and takes seconds a layer: the latest
# two are kept with their trace, computed once, when first drawn
ROLLOUTS = KeptWithTrace(kept=2)


def rollout_map(trace: Trace, kind: str, layer: int, progress=None) -> torch.Tensor:
    """The rollout up to ``layer`` (``trace_rollout_layer``), kept with the trace; a deeper
    one goes on from the deepest kept below it. ``progress(done, total)`` per layer."""
    found = ROLLOUTS.get(trace, (kind, layer))
    if found is not None:
        return found
    below = [(k[1], r) for k, r in ROLLOUTS.items(trace) if k[0] == kind and k[1] < layer]
    start = max(below, key=lambda kept: kept[0]) if below else None
    found = trace_rollout_layer(trace, kind, layer, start, progress)
    ROLLOUTS.put(trace, (kind, layer), found)
    return found


# The last 8 overviews drawn of a trace (256 KB each): moving the zoom window, or coming
# back to the heatmap from another view, redraws the same one
POOLED = KeptWithTrace(kept=8)


def pooled_map(
    trace: Trace,
    kind: str,
    layer: int,
    aggregate: str,
    head: int,
    n_heads: int,
    reduce: str = "max",
    size: int = OVERVIEW_SIZE,
) -> tuple[np.ndarray, list[int], list[int]]:
    """(values [blocks, blocks] float32, query block edges, key block edges).

    A block's value is the max or the mean of the cells the mask allows (masked cells hold
    no weight); NaN where the mask allows none, so the block is drawn grey. The last few
    are kept with the trace: moving the zoom window, or coming back to the heatmap from
    another view, redraws the same overview (0.2 s each time at 4,096 tokens)."""
    key = (kind, layer, aggregate, head if aggregate == "head" else None, reduce, size)
    found = POOLED.get(trace, key)
    if found is None:
        found = _pooled_map(trace, kind, layer, aggregate, head, n_heads, reduce, size)
        POOLED.put(trace, key, found)
    return found


def _pooled_map(trace, kind, layer, aggregate, head, n_heads, reduce, size):
    if aggregate == "head":
        ov = trace.attention_overview(kind, layer, head, size=size, reduce=reduce)
    else:
        n_q, n_k = (len(toks) for toks in trace.tokens(kind))
        read = chosen_reader(trace, kind, layer, aggregate, head, n_heads)
        ov = pool_map(read, block_edges(n_q, size), block_edges(n_k, size), reduce)
    return _over_allowed(trace, kind, ov), list(ov.row_edges), list(ov.col_edges)


def pooled_heads(
    trace: Trace, kind: str, layer: int, reduce: str = "mean", size: int = OVERVIEW_SIZE
) -> tuple[np.ndarray, list[int], list[int]]:
    """``pooled_map`` of every head of one layer at once: values [heads, blocks, blocks]
    (the heads computed together, the mask's counts once)."""
    ov = trace.attention_overviews(kind, layer, size=size, reduce=reduce)
    return _over_allowed(trace, kind, ov), list(ov.row_edges), list(ov.col_edges)


def _over_allowed(trace: Trace, kind: str, ov) -> np.ndarray:
    """Pooled values [..., blocks, blocks] as a reader of the map expects: a mean over the
    cells the mask allows, NaN where it allows none."""
    counts = trace.allowed_counts(kind, ov.row_edges, ov.col_edges).numpy()
    values = ov.values.numpy().astype(np.float32)
    if ov.reduce == "mean":
        cells = np.outer(np.diff(ov.row_edges), np.diff(ov.col_edges))
        values = (values * cells / np.maximum(counts, 1)).astype(np.float32)
    values[..., counts == 0] = np.nan
    return values


def _clamped(key: str, n: int, default: tuple[int, int]) -> None:
    """Keep a range slider's stored value inside 0..n-1 (the text, and so n, may change)."""
    value = st.session_state.get(key)
    if value is None:
        st.session_state[key] = default
        return
    a, b = (min(max(0, int(v)), n - 1) for v in value)
    st.session_state[key] = (min(a, b), max(a, b))


def zoom_window(n_queries: int, n_keys: int, limit: int = WINDOW_MAX) -> tuple[slice, slice]:
    """Two range inputs (sliders: Tab to a handle, then the arrow keys, PageUp/PageDown and
    Home/End move it) that pick the query and key positions drawn at full resolution.

    A range longer than ``limit`` (at most WINDOW_MAX) is cut to its first ``limit``
    positions, with a note: the stages view draws four maps of the window, so it takes less."""
    # a first window as wide as this view draws (the stages' narrower one has no cut note)
    span_q, span_k = min(limit, n_queries), min(limit, n_keys)
    _clamped("zoom_q", n_queries, (0, span_q - 1))
    _clamped("zoom_k", n_keys, (0, span_k - 1))
    st.markdown(t("explorer.zoom_intro", limit=limit))
    c1, c2 = st.columns(2)
    q = c1.slider(t("explorer.zoom_queries"), 0, n_queries - 1, key="zoom_q")
    k = c2.slider(t("explorer.zoom_keys"), 0, n_keys - 1, key="zoom_k")
    cut = False
    rows, cols = [q[0], q[1] + 1], [k[0], k[1] + 1]
    for r in (rows, cols):
        if r[1] - r[0] > limit:
            r[1], cut = r[0] + limit, True
    if cut:
        st.caption(t("explorer.zoom_cut", limit=limit))
    return slice(*rows), slice(*cols)
