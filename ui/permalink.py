"""Choices mirrored in the URL by stable ids, so a copied address reopens the same view.

Streamlit's own ``bind="query-params"`` writes a choice's *displayed* label into the URL;
ours are translated, so a link made in Korean would not open in English. Here the URL
holds the option itself (``?model=minilm&layer=2``), whatever the language.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import streamlit as st

from ui.i18n import translated_widget


def restore(key: str, options: Sequence[Any], default: Any) -> None:
    """Before the widget is drawn: seed it from ?key= once; drop a value that no longer fits.

    A value from the URL that is not one of ``options`` (a mistyped or stale link) is
    ignored, not an error.
    """
    if key not in st.session_state:
        by_text = {str(option): option for option in options}
        st.session_state[key] = by_text.get(st.query_params.get(key, ""), default)
    elif st.session_state[key] not in options:
        st.session_state[key] = default


def publish(key: str, default: Any) -> None:
    """After the widget: write its value into the URL, leaving defaults out to keep links short."""
    value = st.session_state.get(key)
    if value is None or value == default:
        if key in st.query_params:
            del st.query_params[key]
    elif st.query_params.get(key) != str(value):
        st.query_params[key] = str(value)


def linked(
    widget: Callable[..., Any],
    label: str,
    options: Sequence[Any],
    *,
    key: str,
    default: Any = None,
    format_func: Callable[[Any], str] = str,
    **kwargs: Any,
) -> Any:
    """Draw ``widget(label, options, key=key, ...)`` with its value kept in the URL and session.

    Option labels are computed here, during the run, so a translated label is fixed for
    this run rather than looked up later in whatever language a caller happens to be in;
    a language switch sends them again (``ui.i18n.translated_widget``).
    """
    default = options[0] if default is None and options else default
    translated_widget(key)
    restore(key, options, default)
    names = {option: format_func(option) for option in options}
    value = widget(
        label, options, key=key, persist_state="session", format_func=names.__getitem__, **kwargs
    )
    publish(key, default)
    return value if value in options else default
