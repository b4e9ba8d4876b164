"""The family page's token-cost section: every installed model's count of a Korean sentence
and of its English translation, side by side, recomputed here from the tokenizers."""

from __future__ import annotations

import pytest

from model import load
from model.analysis.token_cost import SENTENCE_PAIRS, token_cost
from tests.app.helpers import ok, open_page
from ui.i18n import translate


def cost_table(at, lang: str):
    model = translate("tokens.cost.col.model", lang)
    found = [d.value for d in at.dataframe if model in d.value.columns]
    assert len(found) == 1
    return found[0]


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
    assert rows[col["ratio"]].tolist() == [round(c.ratio, 2) for c in expected]
    assert expected[0].korean.n == 32  # MiniLM spells the greeting in single jamo
    # Models not installed here are named, not silently dropped.
    if len(table) < 4:
        assert any(
            translate("tokens.cost.missing", lang, names="").split(":")[0] in c.value
            for c in at.caption
        )


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
