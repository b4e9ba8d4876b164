"""Tabs that run only the open one: a warm rerun does the open tab's work and sends its
charts, not every tab's (Streamlit runs every tab's content unless told otherwise)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import streamlit as st


def _linked_tab(params: Sequence[Sequence[str]]) -> int:
    """The first tab with one of its own query parameters in the URL (a permalink to a
    widget inside it), else the first tab."""
    present = set(st.query_params.keys())
    return next((i for i, names in enumerate(params) if present & set(names)), 0)


def lazy_tabs(
    sections: dict[str, Callable[[], None]],
    key: str,
    params: Sequence[Sequence[str]] = (),
) -> str:
    """One tab per ``sections`` label; only the open tab's function is called, inside it.
    Opening another tab reruns the page (``on_change="rerun"``). ``params``: per tab, the
    query parameters its widgets keep in the URL; a link carrying one opens that tab. The
    open tab survives a language switch (its label changes, its place does not). Returns
    the open tab's label."""
    labels = list(sections)
    memo = st.session_state.setdefault(f"_{key}_tabs", {"labels": None, "default": 0, "open": 0})
    if memo["labels"] is None:  # this session's first visit: a permalink picks the tab
        memo["open"] = _linked_tab(params)
    if memo["labels"] != labels:  # first run, or new labels (another language): same place
        memo.update(labels=labels, default=min(memo["open"], len(labels) - 1))
    tabs = st.tabs(labels, key=key, on_change="rerun", default=labels[memo["default"]])
    opened = labels[memo["default"]]
    for i, (tab, show) in enumerate(zip(tabs, sections.values(), strict=True)):
        if tab.open:
            memo["open"], opened = i, labels[i]
            with tab:
                show()
    return opened
