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

from model.trace import Trace, block_edges, pool_map
from ui.i18n import t

LONG_ABOVE = 512  # a side longer than this: overview + zoom window
# What the browser receives for a float32 cell is base64 with every "/" escaped as \u002f
# (Streamlit's JSON), about 6 bytes, and its mask one byte more as base64: 480 x 480 cells
# are 1.8 MB at most, under the 2 MB a chart may send. (512 x 512 measured 2.04 MB.)
OVERVIEW_SIZE = 480
WINDOW_MAX = 480  # the zoom window's longest side, in positions


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
    """read(rows, cols=None) -> [rows, cols] of one head, or the mean or max over heads."""
    if aggregate == "head":
        return lambda rows, cols=None: trace.attention_map(kind, layer, head, rows=rows, cols=cols)
    if aggregate not in ("mean", "max"):
        raise ValueError(f"no streamed map for aggregate {aggregate!r}")

    def read(rows, cols=None) -> torch.Tensor:
        maps = head_maps(trace, kind, layer, n_heads, rows, cols)
        return maps.mean(0) if aggregate == "mean" else maps.amax(0)

    return read


def allowed_counts(mask: torch.Tensor, row_edges: list[int], col_edges: list[int]) -> np.ndarray:
    """How many cells of each block the model's mask allows: int [blocks, blocks]."""
    m = np.asarray(mask, dtype=np.uint8)
    by_rows = np.add.reduceat(m, row_edges[:-1], axis=0, dtype=np.int64)
    return np.add.reduceat(by_rows, col_edges[:-1], axis=1, dtype=np.int64)


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
    no weight); NaN where the mask allows none, so the block is drawn grey."""
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
    counts = allowed_counts(trace.mask(kind), ov.row_edges, ov.col_edges)
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


def zoom_window(n_queries: int, n_keys: int) -> tuple[slice, slice]:
    """Two range inputs (sliders: Tab to a handle, then the arrow keys, PageUp/PageDown and
    Home/End move it) that pick the query and key positions drawn at full resolution.

    A range longer than WINDOW_MAX is cut to its first WINDOW_MAX positions, with a note."""
    span_q, span_k = min(WINDOW_MAX, n_queries), min(WINDOW_MAX, n_keys)
    _clamped("zoom_q", n_queries, (0, span_q - 1))
    _clamped("zoom_k", n_keys, (0, span_k - 1))
    st.markdown(t("explorer.zoom_intro", limit=WINDOW_MAX))
    c1, c2 = st.columns(2)
    q = c1.slider(t("explorer.zoom_queries"), 0, n_queries - 1, key="zoom_q")
    k = c2.slider(t("explorer.zoom_keys"), 0, n_keys - 1, key="zoom_k")
    cut = False
    rows, cols = [q[0], q[1] + 1], [k[0], k[1] + 1]
    for r in (rows, cols):
        if r[1] - r[0] > WINDOW_MAX:
            r[1], cut = r[0] + WINDOW_MAX, True
    if cut:
        st.caption(t("explorer.zoom_cut", limit=WINDOW_MAX))
    return slice(*rows), slice(*cols)
