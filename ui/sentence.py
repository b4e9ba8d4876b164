"""The sentence box every page shares: examples one click away, and a clear word on bad input.

Whatever is typed is shown literally: inside messages it sits in code spans, so markdown,
LaTeX ($), emoji codes and HTML in it are never interpreted.
"""

from __future__ import annotations

import json
import re
import unicodedata
from functools import cache
from pathlib import Path

import streamlit as st

from model.runtime.lab import LabModel
from model.runtime.types import Encoded
from model.tasks import suggestions, vocabulary_sample
from ui.i18n import t
from ui.models import switch_model

EXAMPLES_PATH = Path(__file__).resolve().parents[1] / "assets" / "examples.json"
MAX_CHARS = (
    10_000  # longer text is cut here, before tokenizing (the model cuts again at its own limit)
)
CHARS_PER_TOKEN = 8  # more than any tokenizer's average: a text the model can read is not cut


def char_limit(lm) -> int:
    """Where a pasted text is cut before tokenizing: MAX_CHARS, or more for a model that
    reads more tokens than that (a long document is read whole, up to the model's limit)."""
    tokens = getattr(lm, "max_tokens", None) or getattr(lm, "max_len", 0) or 0
    return max(MAX_CHARS, CHARS_PER_TOKEN * int(tokens))


@cache
def examples_for(model_name: str) -> list[str]:
    """Example inputs for a model (assets/examples.json), falling back to the English ones."""
    data = json.loads(EXAMPLES_PATH.read_text(encoding="utf-8"))
    return data.get(model_name, data["default"])


def code_span(text: str) -> str:
    """``text`` as a markdown code span, whatever backticks it holds."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    return f"{fence} {text} {fence}"


def special_span(token: str) -> str:
    """A special token (``<|im_start|>``, ``[CLS]``) as a code span on a badge: read as one
    token the tokenizer reserves, not as text the reader typed."""
    return f":violet-badge[{code_span(token)}]"


def _unwanted(ch: str) -> bool:
    # Control (Cc) and format (Cf: zero-width, bidi overrides) characters have no glyph.
    return unicodedata.category(ch) in ("Cc", "Cf") and ch not in "\t\n"


def clean_text(raw: str, max_chars: int = MAX_CHARS) -> tuple[str, dict[str, int]]:
    """(text fit for the model, what was done to it) — never raises."""
    notes: dict[str, int] = {}
    removed = sum(_unwanted(ch) for ch in raw)
    text = "".join(" " if ch in "\t\n" else ch for ch in raw if not _unwanted(ch))
    if removed:
        notes["control"] = removed
    text = re.sub(r"\s+", " ", text).strip()
    if len(text) > max_chars:
        notes["chars"] = len(text)
        text = text[:max_chars]
    return text, notes


PRETRAINED_CHOICE = "minilm"  # knows any English word (WordPiece), unlike the toy models


def _looks_like_markup(text: str) -> bool:
    return bool(re.search(r"<[^>]*>|&[#\w]+;", text))


def sentence_input(
    lm: LabModel, model_name: str, key: str = "text", offer_pretrained: bool = False
) -> str | None:
    """Draw the box and examples; return cleaned text ready for the model, or None
    (``sentence_read``, for a page that needs no tokens of its own)."""
    found = sentence_read(lm, model_name, key, offer_pretrained)
    return None if found is None else found[0]


def sentence_read(
    lm: LabModel, model_name: str, key: str = "text", offer_pretrained: bool = False
) -> tuple[str, Encoded] | None:
    """Draw the box and examples; return (cleaned text ready for the model, how the model
    reads it), or None. The page that needs the tokens gets them here: read once a rerun.

    With ``offer_pretrained``, a sentence with words the model does not know gets a button
    that reads the same sentence with MiniLM (the obvious next step for a free sentence).

    The text is bound to ?text= and kept for the whole session, so it survives reruns,
    page switches and shared links. Switching models swaps an untouched example for the
    new model's example, and never replaces what the reader typed.
    """
    examples = examples_for(model_name)
    last = st.session_state.get(f"{key}_model")
    if last != model_name:
        current = st.session_state.get(key)
        from_link = current is None and st.query_params.get(key) is not None
        untouched = current is None or (last is not None and current in examples_for(last))
        if untouched and not from_link:
            st.session_state[key] = examples[0]
        st.session_state[f"{key}_model"] = model_name

    def use_example() -> None:
        picked = st.session_state.get(f"{key}_example")
        if picked:
            st.session_state[key] = picked
        st.session_state[f"{key}_example"] = None

    st.pills(
        t("input.examples"),
        examples,
        format_func=code_span,
        key=f"{key}_example",
        on_change=use_example,
    )
    raw = st.text_input(
        t("input.label"),
        key=key,
        help=t("input.help"),
        bind="query-params",
        persist_state="session",
    )
    limit = char_limit(lm)
    text, notes = clean_text(raw or "", limit)
    if "control" in notes:
        st.info(t("input.control_removed", n=notes["control"]), icon=":material/cleaning_services:")
    if "chars" in notes:
        st.warning(
            t("input.too_many_chars", n=notes["chars"], limit=limit),
            icon=":material/content_cut:",
        )
    if not text:
        st.warning(t("input.empty"), icon=":material/edit:")
        return None
    if _looks_like_markup(text):
        st.info(t("input.markup_literal"), icon=":material/code:")
    enc = lm.encode(text)
    report_encoding(lm, enc)
    if offer_pretrained and enc.unknown and model_name != PRETRAINED_CHOICE:
        st.button(
            t("input.read_with_pretrained", model=t(f"model.name.{PRETRAINED_CHOICE}")),
            on_click=switch_model,
            args=(PRETRAINED_CHOICE,),
            icon=":material/swap_horiz:",
            key=f"{key}_read_with_pretrained",
        )
    if not readable(lm, enc):
        st.warning(t("input.nothing_readable"), icon=":material/block:")
        return None
    return text, enc


def readable(lm: LabModel, enc: Encoded) -> bool:
    """False when the tokenizer dropped everything (the toy vocabularies skip emoji and
    punctuation): the model would run on its special tokens alone, unasked."""
    specials = set(getattr(lm.input_tokenizer, "special_tokens", ()) or ())
    return bool(enc.unknown) or any(tok not in specials for tok in enc.tokens)


def report_encoding(lm: LabModel, enc: Encoded) -> None:
    """Tell the reader what the tokenizer did: cut the text, or met words it does not know."""
    if enc.truncated:
        st.warning(t("input.truncated", limit=len(enc.ids)), icon=":material/content_cut:")
    if enc.unknown:
        tokenizer = lm.input_tokenizer
        task = (getattr(lm, "info", None) or {}).get("task")
        specials = set(getattr(tokenizer, "special_tokens", ()) or ())
        # the lab's word tokenizers; a subword tokenizer's pieces are no words to suggest
        words = getattr(tokenizer, "vocab", []) if hasattr(tokenizer, "suggest") else []
        known = [w for w in words if w not in specials]
        parts = []
        for word in dict.fromkeys(enc.unknown):  # each word once, in order
            how, close = suggestions(task, known, word) if known else ("none", [])
            alts = ", ".join(code_span(w) for w in close)
            if how == "spelling":
                parts.append(t("input.unknown_word_with", word=code_span(word), alternatives=alts))
            elif close:
                parts.append(
                    t(
                        "input.unknown_word_kind",
                        word=code_span(word),
                        alternatives=alts,
                        kind=t(f"input.kind.{how}"),
                    )
                )
            elif how != "none":
                parts.append(
                    t(
                        "input.unknown_word_no_kind",
                        word=code_span(word),
                        kind=t(f"input.kind.{how}"),
                    )
                )
            else:
                parts.append(code_span(word))
        message = t("input.unknown", n=len(parts)) + "\n\n" + "\n".join(f"- {p}" for p in parts)
        sample = vocabulary_sample(task)
        if sample:
            listed = " · ".join(
                f"{t(f'input.kind.{kind}')}: " + ", ".join(code_span(w) for w in words)
                for kind, words in sample.items()
            )
            message += "\n\n" + t("input.vocabulary", n=len(known), sample=listed)
        st.warning(
            message,
            icon=":material/help:",
        )
