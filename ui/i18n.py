"""English / Korean text for every visible string: ``t("home.title")``.

Catalogs are flat JSON files mapping dotted keys to text: ``assets/i18n/<lang>.json`` plus
one ``assets/i18n/<lang>.<area>.json`` per area of the app (``ko.decoding.json``), so pages
can grow their text side by side without editing one shared file. A key may live in one
file only.
The pure half (``load_catalog``, ``translate``) needs no running Streamlit, so tests and
notebooks can call it; ``t``, ``current_language`` and ``set_language`` read and write the
session's choice, which is mirrored in the URL (``?lang=ko``) so a shared link keeps it.
"""

from __future__ import annotations

import json
import logging
from functools import cache
from pathlib import Path

import streamlit as st

LANGUAGES: dict[str, str] = {"en": "English", "ko": "한국어"}
DEFAULT_LANGUAGE = "en"
CATALOG_DIR = Path(__file__).resolve().parent.parent / "assets" / "i18n"

_log = logging.getLogger(__name__)

_STATE_KEY = "lang"
_QUERY_KEY = "lang"
_TRANSLATED_WIDGETS = "_translated_widgets"  # keys of widgets whose option labels come from t()


@cache
def _read_catalog(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise RuntimeError(f"cannot read translation catalog {path}: {err}") from err
    if not isinstance(data, dict) or not all(
        isinstance(key, str) and isinstance(text, str) for key, text in data.items()
    ):
        raise RuntimeError(f"translation catalog {path} must map string keys to string values")
    return data


def load_catalog(lang: str) -> dict[str, str]:
    """The catalog for ``lang``, all its files merged, read once per process."""
    return _merged_catalog(CATALOG_DIR, lang)


@cache
def _merged_catalog(folder: Path, lang: str) -> dict[str, str]:
    merged: dict[str, str] = {}
    for path in catalog_files(lang, folder):
        part = _read_catalog(path)
        clash = sorted(merged.keys() & part.keys())
        if clash:
            raise RuntimeError(f"{path.name} repeats keys of another catalog file: {clash[:5]}")
        merged.update(part)
    return merged


def catalog_files(lang: str, folder: Path | None = None) -> list[Path]:
    """``<lang>.json`` first, then ``<lang>.<area>.json`` in name order."""
    folder = CATALOG_DIR if folder is None else folder
    return [folder / f"{lang}.json", *sorted(folder.glob(f"{lang}.*.json"))]


def normalize_language(lang: object) -> str:
    """A supported language code, or the default for anything else (e.g. a bad URL)."""
    return lang if isinstance(lang, str) and lang in LANGUAGES else DEFAULT_LANGUAGE


def translate(key: str, lang: str, /, **kwargs: object) -> str:
    """Text for ``key`` in ``lang``, falling back to English, then to the key itself.

    ``str.format`` runs only when kwargs are given, so catalog text without placeholders
    may hold literal braces (inline LaTeX such as ``$\\sqrt{d_k}$``).
    """
    lang = normalize_language(lang)
    text = load_catalog(lang).get(key)
    if text is None and lang != DEFAULT_LANGUAGE:
        text = load_catalog(DEFAULT_LANGUAGE).get(key)
    if text is None:
        # A missing string must not take a page down: show the key, and say so in the log
        # (the app tests fail on this warning).
        _log.warning("missing translation key %r", key)
        return key
    return text.format(**kwargs) if kwargs else text


def current_language() -> str:
    """This session's language: chosen in the sidebar, else ``?lang=`` from the URL, else en."""
    lang = st.session_state.get(_STATE_KEY)
    if lang not in LANGUAGES:
        lang = normalize_language(st.query_params.get(_QUERY_KEY))
        st.session_state[_STATE_KEY] = lang
    return lang


def set_language(lang: str) -> None:
    """Switch this session's language and put it in the URL.

    Call it from a callback (before the script runs), so the whole rerun is in the new
    language and every translated widget's label is sent again (see ``translated_widget``).
    """
    if lang not in LANGUAGES:
        raise ValueError(f"unsupported language {lang!r}; choose from {sorted(LANGUAGES)}")
    changed = st.session_state.get(_STATE_KEY) != lang
    st.session_state[_STATE_KEY] = lang
    sync_language_to_url()
    if changed:
        _resend_translated_widgets()


def translated_widget(key: str) -> str:
    """Mark ``key`` as a widget whose option labels are translated; returns the key.

    Streamlit tells the browser an option widget's value by its *label*, and sends it again
    only when the value changes. After a language switch the value is unchanged, so a
    drop-down would keep showing the old language's label (English in the Korean UI).
    ``set_language`` re-assigns every marked key, which makes Streamlit send the new label.
    """
    st.session_state.setdefault(_TRANSLATED_WIDGETS, set()).add(key)
    return key


def _resend_translated_widgets() -> None:
    for key in st.session_state.get(_TRANSLATED_WIDGETS, ()):
        if key in st.session_state:  # a widget not drawn yet has nothing to re-send
            st.session_state[key] = st.session_state[key]


def sync_language_to_url() -> None:
    """Write the language into ``?lang=``; page switches clear query params, so every run does."""
    lang = current_language()
    if st.query_params.get(_QUERY_KEY) != lang:
        st.query_params[_QUERY_KEY] = lang


def t(key: str, /, **kwargs: object) -> str:
    """Text for ``key`` in this session's language; kwargs fill ``{placeholders}``."""
    return translate(key, current_language(), **kwargs)


# ---- labels every chart shares (catalog group common.*) ----


def axis_labels(
    rows: str = "common.axis.query", value: str = "common.axis.weight"
) -> tuple[str, str, str]:
    """(row axis, key axis, value) names for an attention heatmap's axes and hover."""
    return t(rows), t("common.axis.key"), t(value)


def head_titles(n: int) -> list[str]:
    """ "Head 1" .. "Head n" in the UI language, for small multiples and pickers."""
    return [t("common.head_n", n=i + 1) for i in range(n)]
