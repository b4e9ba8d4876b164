"""The zoom widgets of a long map, and how much of one a page draws.

A long input is never held whole: above ``LONG_ABOVE`` tokens a side a heatmap is its
block-pooled overview (at most ``OVERVIEW_SIZE`` blocks a side, the attention view's
``overview``) and a zoom window of at most ``WINDOW_MAX`` positions a side, read at full
resolution (``AttentionView.map(rows, cols)``), its positions picked here.
"""

from __future__ import annotations

import streamlit as st

from model.analysis.view import LONG_ABOVE, OVERVIEW_SIZE, is_long
from ui.i18n import t

__all__ = ["LONG_ABOVE", "OVERVIEW_SIZE", "is_long", "zoom_window"]

# What the browser receives for a float32 cell is base64 with every "/" escaped as \u002f
# (Streamlit's JSON), about 6 bytes, and its mask one byte more: 256 x 256 cells are about
# 0.5 MB (480 x 480 were 1.8 MB, 512 x 512 2.04 MB, over the 2 MB a chart may send). What
# sets the size is the time to draw: headless Chromium took about 0.5 s for each 480 x 480
# heatmap and a quarter of that for 256 x 256 (four tokens a pixel of a 900 px chart at
# 4,096 tokens, and a window's tokens still legible): OVERVIEW_SIZE (model.analysis.view).
WINDOW_MAX = 256  # the zoom window's longest side, in positions
# The stages of a long input: four maps of one window, so a smaller one than the heatmap's
# (four 256 x 256 maps took the browser about 2 s to draw, four 128 x 128 ones about 1 s)
STAGES_WINDOW_MAX = 128
# Token focus of a long input: bars for the keys the token weighs most (14 heads x 4,096
# bars took the browser 7 s to draw), and the text shaded around the token only.
FOCUS_KEYS = 48
FOCUS_TEXT_BEFORE, FOCUS_TEXT_AFTER = 240, 60


def _clamped(key: str, n: int, default: tuple[int, int]) -> None:
    """Keep a range slider's stored value inside 0..n-1 (the text, and so n, may change)."""
    value = st.session_state.get(key)
    if value is None:
        st.session_state[key] = default
        return
    a, b = (min(max(0, int(end)), n - 1) for end in value)
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
