"""The English and Korean catalogs stay in step, and every key the code asks for exists."""

from __future__ import annotations

import ast
import json
import re
import unicodedata
from pathlib import Path

import pytest

from ui import i18n

ROOT = Path(__file__).resolve().parents[2]
CATALOG_DIR = ROOT / "assets" / "i18n"

# Keys whose Korean text may equal the English: names and notation, not prose.
SAME_IN_BOTH = {
    "sidebar.device_cuda",  # "GPU · {name}": a device name
    "sidebar.device_choice.cpu",  # "CPU" is what Korean speakers call it too
    "sidebar.device_choice.cuda",  # "GPU (CUDA)"
    "training.norm.pre",  # "pre-LN": the term itself; the help text says it in Korean
    "a11y.page_title",  # "{page} · Attention Lab": the lab's name stays as it is
}

PLACEHOLDER = re.compile(r"(?<!\{)\{([A-Za-z_][A-Za-z0-9_]*)\}(?!\})")
HANGUL = re.compile(r"[\uac00-\ud7a3]")


def read(lang: str) -> dict[str, str]:
    """Everything ``lang`` says: its main file and every area file, merged."""
    return i18n.load_catalog(lang)


def test_every_language_has_a_catalog_and_the_same_area_files():
    assert sorted({p.name.split(".")[0] for p in CATALOG_DIR.glob("*.json")}) == sorted(
        i18n.LANGUAGES
    )
    areas = {
        lang: [p.name[len(lang) :] for p in i18n.catalog_files(lang)] for lang in i18n.LANGUAGES
    }
    assert areas["en"] == areas["ko"]


def test_a_key_in_two_catalog_files_is_refused(tmp_path, monkeypatch):
    (tmp_path / "en.json").write_text(json.dumps({"a": "A"}), encoding="utf-8")
    (tmp_path / "en.page.json").write_text(json.dumps({"a": "again"}), encoding="utf-8")
    monkeypatch.setattr(i18n, "CATALOG_DIR", tmp_path)
    with pytest.raises(RuntimeError, match="en.page.json repeats keys"):
        i18n.load_catalog("en")


def test_korean_and_english_catalogs_have_the_same_keys():
    en, ko = read("en"), read("ko")
    assert sorted(en.keys() - ko.keys()) == [], "keys missing from ko.json"
    assert sorted(ko.keys() - en.keys()) == [], "keys missing from en.json"


def test_korean_and_english_use_the_same_placeholders():
    en, ko = read("en"), read("ko")
    mismatched = {
        key: (sorted(set(PLACEHOLDER.findall(en[key]))), sorted(set(PLACEHOLDER.findall(ko[key]))))
        for key in en.keys() & ko.keys()
        if set(PLACEHOLDER.findall(en[key])) != set(PLACEHOLDER.findall(ko[key]))
    }
    assert mismatched == {}


def test_korean_text_is_translated_not_copied():
    en, ko = read("en"), read("ko")
    copied = sorted(key for key in en.keys() & ko.keys() if en[key] == ko[key])
    assert [key for key in copied if key not in SAME_IN_BOTH] == [], "copied, not translated"
    assert not SAME_IN_BOTH - en.keys(), "stale allow-list entry"
    untranslated = sorted(
        k for k, v in ko.items() if k not in SAME_IN_BOTH and not HANGUL.search(v)
    )
    assert untranslated == [], "Korean values without any Hangul"


def _keys_used_in_code() -> dict[str, str]:
    """Literal first arguments of t(...) in the app's Streamlit code: key -> where."""
    used = {}
    for path in [ROOT / "app.py", *(ROOT / "pages").rglob("*.py"), *(ROOT / "ui").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "t"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                used[node.args[0].value] = f"{path.relative_to(ROOT)}:{node.lineno}"
    return used


def test_every_key_the_code_asks_for_is_in_the_catalog():
    used = _keys_used_in_code()
    assert len(used) > 5, (
        "the scan found almost no t() calls; is it still looking in the right place?"
    )
    missing = {key: where for key, where in used.items() if key not in read("en")}
    assert missing == {}


@pytest.fixture
def tiny_catalogs(tmp_path, monkeypatch):
    (tmp_path / "en.json").write_text(
        json.dumps({"greet": "Hello, {name}", "only.en": "English only", "tex": r"$\sqrt{d_k}$"}),
        encoding="utf-8",
    )
    (tmp_path / "ko.json").write_text(json.dumps({"greet": "안녕, {name}"}), encoding="utf-8")
    monkeypatch.setattr(i18n, "CATALOG_DIR", tmp_path)


def test_translate_formats_placeholders_in_the_chosen_language(tiny_catalogs):
    assert i18n.translate("greet", "ko", name="민지") == "안녕, 민지"
    assert i18n.translate("greet", "en", name="Ada") == "Hello, Ada"


@pytest.mark.missing_translation_expected
def test_translate_falls_back_to_english_then_to_the_key(tiny_catalogs, caplog):
    assert i18n.translate("only.en", "ko") == "English only"
    assert i18n.translate("nowhere", "ko") == "nowhere"
    assert "missing translation key 'nowhere'" in caplog.text


def test_unknown_language_reads_as_english(tiny_catalogs):
    assert i18n.translate("greet", "fr", name="Ada") == "Hello, Ada"
    assert i18n.normalize_language("fr") == "en"
    assert i18n.normalize_language(["ko"]) == "en"


def test_text_without_arguments_keeps_its_braces(tiny_catalogs):
    assert i18n.translate("tex", "en") == r"$\sqrt{d_k}$"


def test_a_broken_catalog_fails_with_its_path(tmp_path, monkeypatch):
    (tmp_path / "en.json").write_text("{not json", encoding="utf-8")
    monkeypatch.setattr(i18n, "CATALOG_DIR", tmp_path)
    with pytest.raises(RuntimeError, match="en.json"):
        i18n.translate("anything", "en")


# Markdown closes "**" only where the run is right-flanking: after punctuation it must be
# followed by a space or punctuation. Korean particles attach directly ("**[CLS]**나"), so
# such a string shows its asterisks instead of bold text.
# Punctuation here is Unicode's, symbols included ("**−∞**로" showed its asterisks too); a
# placeholder's "}" is not, since the number formatted into it is what the reader sees.
_BOLD_RUN = re.compile(r"\*\*([^*\n]+?)\*\*([\uac00-\ud7a3]?)")


def _stuck_bold(text: str) -> str | None:
    for m in _BOLD_RUN.finditer(text):
        last = m.group(1)[-1]
        if m.group(2) and last != "}" and unicodedata.category(last)[0] in "PS":
            return m.group(0)
    return None


def test_korean_bold_never_ends_in_punctuation_glued_to_a_particle():
    stuck = {key: s for key, text in read("ko").items() if (s := _stuck_bold(text))}
    assert stuck == {}
    assert _stuck_bold("가중치를 **[CLS]**나 둡니다")  # the cases that showed asterisks
    assert _stuck_bold("소프트맥스 전에 **−∞**로 바꿉니다")
    assert (
        _stuck_bold("(**잔차 연결**), 그 합을 정규화합니다(**레이어 정규화**, LayerNorm)") is None
    )
