"""The sidebar's card for a shipped real model: where its file comes from, who quantised it,
its licence, and for Gemma 3 the terms that apply, as the copy shipped with the model."""

from __future__ import annotations

import streamlit as st

from model.runtime.gguf_cache import SHIPPED_GGUF
from ui.i18n import t


def show_model_card(name: str, where=st) -> None:
    """A short card under the picker for ``name`` when it is a shipped GGUF model; nothing
    for the toys, MiniLM or a folder."""
    shipped = SHIPPED_GGUF.get(name)
    if shipped is None:
        return
    with where.expander(t("model.card.header"), icon=":material/badge:"):
        st.markdown(t(f"model.card.{name}"))
        terms = shipped.terms_path()
        if terms is not None and terms.is_file():
            st.download_button(
                t("model.card.terms"),
                data=terms.read_bytes(),
                file_name=terms.name,
                mime="text/html",
                icon=":material/gavel:",
                key=f"terms_{name}",
            )
