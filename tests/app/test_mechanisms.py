"""The Mechanisms page, headless through AppTest, in both languages, good input and bad."""

from __future__ import annotations

import re

import pytest

from tests.app import helpers
from tests.app.helpers import chart, figures, ok
from ui.i18n import translate

HANGUL = re.compile(r"[\uac00-\ud7a3]")


TABS = ("induction", "scan", "lens", "patching", "heads")
# Each tab's charts: only the open tab's are drawn (lazy tabs).
TAB_CHARTS = {
    "induction": ("mech_loss", "mech_prefix_matching", "mech_previous_token", "mech_att_induction"),
    "scan": ("mech_scan_grid",),
    "lens": ("mech_lens",),
    "patching": ("mech_patch_pos", "mech_patch_decoder"),
    "heads": ("mech_sc_abl", "mech_sc_dla", "mech_sc_roll"),
}


def open_page(tab: str = "induction", **query: str):
    """The page with ``tab`` open (in the language of ``lang``, English by default), on the
    toy models: the sidebar holds en2ko, not a real decoder (tests/app/test_real_models.py
    opens the page on SmolLM2)."""
    query.setdefault("model", "en2ko")
    label = translate(f"mech.tab.{tab}", query.get("lang", "en"))
    return helpers.open_page("mechanisms", timeout=240, tabs={"mech_tab": label}, **query)


def texts(at) -> str:
    return " ".join(
        [m.value for m in at.markdown]
        + [w.value for w in at.warning]
        + [c.value for c in at.caption]
    )


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_two_models_are_compared_in_one_table_in_the_ui_language(lang):
    at = open_page(lang=lang)
    (table,) = at.table
    frame = table.value
    two, one = translate("mech.two_layer", lang), translate("mech.one_layer", lang)
    repeat = translate("mech.metric.repeat", lang)
    assert list(frame.columns) == [two, one]
    assert float(frame.loc[repeat, two].rstrip("%")) >= 95  # the shipped induction head works
    assert float(frame.loc[repeat, one].rstrip("%")) < 50  # one layer cannot do it


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_page_renders_every_tab_in_both_languages(lang):
    at = open_page(lang=lang)
    ok(at)
    assert at.title[0].value == translate("mech.title", lang)
    assert [tab.label for tab in at.tabs] == [translate(f"mech.tab.{n}", lang) for n in TABS]
    for tab in TABS:
        helpers.open_tab(at, "mech_tab", translate(f"mech.tab.{tab}", lang))
        ok(at)
        assert not at.warning
        for key in TAB_CHARTS[tab]:
            assert chart(at, key) is not None, key
        if tab == "lens":
            lens = chart(at, "mech_lens")
        elif tab == "patching":
            captions = [c.value for c in at.caption]
        elif tab == "induction":
            induction_text = texts(at)
            induction_success = [s.value for s in at.success]
    # the logit lens: rows = embeddings + 2 layers, probabilities on a fixed [0, 1] scale
    assert lens["data"][0]["zmin"] == 0 and lens["data"][0]["zmax"] == 1
    assert lens["layout"]["yaxis"]["ticktext"][0] == translate("mech.embeddings", lang)
    # patching: the checks are shown, and read exactly 0 and 1
    check = translate("mech.patch.check", lang, nothing="0.000", whole="1.000")
    assert check in captions
    # the induction model continues the default prompt and stops where the repeat ends
    assert "` e r t y u <eos> `" in induction_text
    assert translate("mech.induction.stop.exact", lang) in induction_success
    if lang == "ko":
        assert HANGUL.search(" ".join(m.value for m in at.markdown))


@pytest.mark.parametrize("tab", TABS)
def test_only_the_open_tab_runs_and_a_click_on_another_draws_it(tab):
    """A closed tab does no work: none of its charts is sent, its models are not run."""
    at = open_page(tab)
    ok(at)
    drawn = {key for keys in TAB_CHARTS.values() for key in keys if chart(at, key) is not None}
    assert drawn == set(TAB_CHARTS[tab])
    other = TABS[(TABS.index(tab) + 1) % len(TABS)]
    helpers.open_tab(at, "mech_tab", translate(f"mech.tab.{other}", "en"))
    ok(at)
    drawn = {key for keys in TAB_CHARTS.values() for key in keys if chart(at, key) is not None}
    assert drawn == set(TAB_CHARTS[other])


def test_the_open_tab_stays_open_when_the_language_changes():
    at = open_page("lens")
    at.button_group(key="_language_picker").set_value("ko").run()  # ui.sidebar's picker
    ok(at)
    assert at.title[0].value == translate("mech.title", "ko")
    assert chart(at, "mech_lens") is not None and chart(at, "mech_loss") is None


def test_the_patching_boxes_keep_what_was_typed_while_another_tab_is_open():
    """Streamlit drops an undrawn widget's state, and the example pair is filled in only for a
    new model: without the boxes' kept state, coming back to the tab found both empty."""
    at = open_page("patching")
    at.text_input(key="mcorrupt").set_value("q w e r t y u q e").run()
    helpers.open_tab(at, "mech_tab", translate("mech.tab.heads", "en"))
    helpers.open_tab(at, "mech_tab", translate("mech.tab.patching", "en"))
    ok(at)
    assert at.text_input(key="mclean").value == "q w e r t y u q w"
    assert at.text_input(key="mcorrupt").value == "q w e r t y u q e"
    assert not at.warning and chart(at, "mech_patch_pos") is not None


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_patching_inputs_of_different_length_get_a_clear_message(lang):
    at = open_page("patching", lang=lang)
    at.text_input(key="mcorrupt").set_value("q w e r t y u i q w").run()
    ok(at)
    # the letters typed, 9 and 10, not counting the <bos> the model reads first
    expected = translate("mech.patch.error.length", lang, clean=9, corrupted=10)
    assert expected in [w.value for w in at.warning]
    assert chart(at, "mech_patch_pos") is None


@pytest.mark.parametrize(
    "clean, corrupted, key",
    [("q w e r t", "", "empty"), ("q w e r t y u q w", "q w e r t y u q w", "same")],
)
def test_patching_empty_or_unchanged_input_is_explained(clean, corrupted, key):
    at = open_page("patching", lang="ko")
    at.text_input(key="mclean").set_value(clean)
    at.text_input(key="mcorrupt").set_value(corrupted).run()
    ok(at)
    which = translate("mech.patch.which.corrupted", "ko")
    assert translate(f"mech.patch.error.{key}", "ko", which=which) in [w.value for w in at.warning]


def test_patching_unknown_words_are_named_on_en2ko():
    at = open_page("patching", mpatch_m="en2ko")
    ok(at)
    assert chart(at, "mech_patch_cross") is not None  # encoder-decoder: cross heads too
    at.text_input(key="mcorrupt").set_value("I study xylophone at school").run()
    ok(at)
    which = translate("mech.patch.which.corrupted", "en")
    expected = translate("mech.patch.error.unknown", "en", which=which, words="` xylophone `")
    assert expected in [w.value for w in at.warning]


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_lens_explains_unknown_words_and_empty_input(lang):
    at = open_page("lens", lang=lang, mlens_m="sort")
    ok(at)
    at.text_input(key="mlens").set_value("3 x 1").run()
    ok(at)
    assert any(translate("input.unknown", lang, n=1) in w.value for w in at.warning)
    at.text_input(key="mlens").set_value("   ").run()
    ok(at)
    assert translate("input.empty", lang) in [w.value for w in at.warning]


def test_the_head_tab_follows_the_chosen_position_on_sort():
    at = open_page("heads", mheads_m="sort", mheads="3 1 2")
    ok(at)
    before = chart(at, "mech_sc_dla")
    at.selectbox(key="mheads_pos").set_value(6).run()  # after "1": predicts "2"
    ok(at)
    after = chart(at, "mech_sc_dla")
    assert before["data"][0]["y"] != after["data"][0]["y"]
    assert len(figures(at)) >= 3


@pytest.mark.parametrize("lang", ["en", "ko"])
@pytest.mark.parametrize("text, reason", [("a b c d", "no_repeat"), ("a b c a c", "breaks_off")])
def test_the_induction_box_refuses_a_prompt_that_is_not_a_repeat(text, reason, lang):
    at = open_page(lang=lang)
    at.text_input(key="mind").set_value(text).run()
    ok(at)
    assert translate(f"mech.induction.not_repeat.{reason}", lang) in [w.value for w in at.warning]
    assert chart(at, "mech_att_induction") is None


def test_the_induction_view_shows_teacher_forced_rows_and_the_shipped_counts():
    from model import load

    metrics = load("induction", device="cpu").info["metrics"]
    fr = metrics["free_running"]
    at = open_page()
    at.text_input(key="mind").set_value("z x q w e r t y q w").run()
    ok(at)
    table = at.dataframe[0].value
    col = translate("mech.induction.col.reference", "en")
    assert list(table[col]) == ["w", "e", "r", "t", "y", "<eos>"]
    assert translate("mech.induction.stop.exact", "en") in [s.value for s in at.success]
    counts = " ".join(c.value for c in at.caption)
    assert f"stopped exactly {fr['exact']:,} ({fr['exact'] / fr['n']:.1%})" in counts
    assert f"kept going {fr['kept_going']:,}" in counts
    assert f"stopped early {fr['stopped_early']:,}" in counts


def test_the_heads_tab_names_the_previous_token_heads_indirect_effect():
    """Default induction prompt: L1H3 writes almost nothing directly, yet switching it off
    takes most of the answer's logit away: the text's numbers are the table's."""
    at = open_page("heads", mheads_m="induction")
    ok(at)
    table = at.dataframe[-1].value
    heads = table[translate("mech.heads.col.head", "en")].tolist()
    row = table.iloc[heads.index(translate("mech.head_label", "en", kind="self", layer=1, head=3))]
    direct = row[translate("mech.heads.direct", "en")]
    ablation = row[translate("mech.heads.ablation", "en")]
    assert abs(direct) < 1 and ablation < -5
    text = " ".join(m.value for m in at.markdown)
    assert f"self L1 H3 writes {direct:+.2f}" in text
    assert f"{-ablation - direct:+.2f} of it goes through later layers" in text


@pytest.mark.parametrize(("tab", "lang"), [("scan", "en"), ("lens", "ko"), ("heads", "en")])
def test_the_scan_lens_and_heads_charts_download_as_one_html_file(tab, lang):
    at = open_page(tab, lang=lang)
    ok(at)
    (button,) = at.get("download_button")
    assert button.proto.label == translate("chart.export_html", lang)
    assert button.proto.deferred_file_id  # made when clicked
