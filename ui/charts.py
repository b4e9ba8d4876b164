"""Every chart goes through here, so all of them read well in both languages."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

# Streamlit's chart font has no Hangul, so Korean labels fall back to whatever the system
# offers. Naming Korean faces (Linux, macOS, Windows) keeps them in one consistent font.
FONT_STACK = (
    '"Source Sans", "Source Sans Pro", "Noto Sans CJK KR", "Noto Sans KR", '
    '"Apple SD Gothic Neo", "Malgun Gothic", sans-serif'
)


def plotly_chart(fig: go.Figure, *, key: str, where=st, **kwargs) -> None:
    """st.plotly_chart with the app's font stack, drawn in ``where`` (a column, say).

    ``key`` is required: a keyed chart keeps its zoom and selection across reruns.
    """
    fig.update_layout(font_family=FONT_STACK)
    where.plotly_chart(fig, key=key, **kwargs)
