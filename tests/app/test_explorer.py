"""The Attention Explorer, run headless through AppTest on the pretrained MiniLM."""

from __future__ import annotations

import json
import re

import pytest
from streamlit.testing.v1 import AppTest

from tests.app.helpers import APP, elements, figures, open_page
from ui.i18n import load_catalog, translate

HANGUL = re.compile(r"[\uac00-\ud7a3]")


def explorer(**query: str) -> AppTest:
    return open_page("explorer", **{"model": "minilm", **query})


def test_a_sentence_becomes_a_heatmap_of_its_own_tokens():
    at = explorer(text="time flies like an arrow")
    assert not at.exception and not at.error
    (fig,) = figures(at)
    ticks = fig["layout"]["xaxis"]["ticktext"]
    assert ticks == ["[CLS]", "time", "flies", "like", "an", "arrow", "[SEP]"]
    assert fig["layout"]["yaxis"]["range"] == [6.5, -0.5]  # queries top to bottom
    assert translate("explorer.not_explanation", "en") in [i.value for i in at.info]


@pytest.mark.parametrize(
    ("view", "kind", "count"),
    [
        ("heads", "plotly_chart", 1),
        ("model", "plotly_chart", 1),
        ("lines", "iframe", 1),
        ("stages", "plotly_chart", 4),
        ("stats", "dataframe", 1),
        ("export", "download_button", 3),
    ],
)
def test_every_view_renders(view, kind, count):
    at = explorer(view=view)
    assert not at.exception and not at.error
    assert len(elements(at, kind)) == count


def test_all_heads_of_a_layer_share_one_figure():
    at = explorer(view="heads", layer="3")
    (fig,) = figures(at)
    titles = [a["text"] for a in fig["layout"]["annotations"]]
    assert titles == [f"Head {i}" for i in range(1, 13)]


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_all_heads_of_a_long_sentence_are_drawn_as_block_means_with_a_note(lang):
    text = " ".join(["the student reads the notes"] * 20)  # 100 words, 102 tokens with [CLS]/[SEP]
    at = explorer(view="heads", text=text, lang=lang)
    (fig,) = figures(at)
    maps = [d for d in fig["data"] if d.get("hovertemplate")]
    assert len(maps) == 12 and all("%{x}" in m["hovertemplate"] for m in maps)
    assert all(m["y"][0] == "#0–1" for m in maps)  # each block named by its positions
    note = translate("explorer.heads_pooled", lang, n=102, k=2)
    assert note in [c.value for c in at.caption]


def test_token_focus_follows_the_chosen_query_token():
    at = explorer(view="focus", token="2", text="I study math")
    (fig,) = figures(at)
    assert len(fig["data"]) == 12  # one bar chart per head
    at.button_group(key="token").set_value(3).run()
    assert at.query_params["token"] == "3"


def test_the_permalink_restores_the_view_in_any_language():
    at = explorer(text="time flies like an arrow", layer="4", head="7", view="heads", lang="ko")
    assert at.selectbox(key="layer").value == 4 and at.selectbox(key="head").value == 7
    assert at.segmented_control(key="view").value == "heads"
    assert at.text_input(key="text").value == "time flies like an arrow"


def test_the_address_follows_every_change_by_id_not_by_label():
    at = explorer(text="time flies like an arrow")
    at.selectbox(key="layer").set_value(1).run()
    at.segmented_control(key="agg").set_value("mean").run()
    assert at.query_params["layer"] == "1" and at.query_params["agg"] == "mean"
    assert at.query_params["model"] == "minilm"  # ids, not the translated labels


def test_a_stale_or_mistyped_link_falls_back_to_defaults():
    at = explorer(layer="99", head="-1", view="nonsense", agg="<script>")
    assert not at.exception
    assert (
        at.selectbox(key="layer").value == 0 and at.segmented_control(key="view").value == "heatmap"
    )


def test_empty_text_asks_for_a_sentence():
    at = explorer(text="   ")
    assert not at.exception
    assert translate("input.empty", "en") in [w.value for w in at.warning]
    assert not figures(at)


def test_markup_and_invisible_characters_are_reported_and_shown_literally():
    at = explorer(text="<b>bold</b> \u200bhi\x07 $x$")
    assert not at.exception
    infos = [i.value for i in at.info]
    assert translate("input.markup_literal", "en") in infos
    assert translate("input.control_removed", "en", n=2) in infos
    ticks = figures(at)[0]["layout"]["xaxis"]["ticktext"]
    assert "&lt;" in ticks and "<" not in "".join(ticks)


def test_text_longer_than_the_model_is_cut_with_a_notice():
    at = explorer(text=" ".join(["word"] * 600))
    assert not at.exception
    assert translate("input.truncated", "en", limit=512) in [w.value for w in at.warning]
    fig = figures(at)[0]
    heatmap = fig["data"][-1]
    assert len(heatmap["x"]) == len(heatmap["y"]) == 512  # every token keeps its cell
    # At most 60 labels are drawn, so they never overlap; the hover names every token.
    assert len(fig["layout"]["xaxis"]["ticktext"]) <= 60
    assert heatmap["y"][0] == "[CLS] #0" and heatmap["y"][1] == "word #1"
    assert heatmap["y"][511] == "[SEP] #511" and "%{y}" in heatmap["hovertemplate"]


def test_a_huge_paste_is_cut_to_the_character_limit_first():
    at = explorer(text="a" * 12_000)
    assert not at.exception
    warnings = [w.value for w in at.warning]
    assert translate("input.too_many_chars", "en", n=12_000, limit=10_000) in warnings


def test_hiding_special_tokens_says_how_much_attention_they_took():
    at = explorer(hide="true")
    captions = [c.value for c in at.caption]
    assert any(
        re.fullmatch(r"Hidden special tokens took \d+\.\d% of this layer's attention\.", c)
        for c in captions
    )
    ticks = figures(at)[0]["layout"]["xaxis"]["ticktext"]
    assert "[CLS]" not in ticks and "[SEP]" not in ticks


def test_a_model_folder_that_is_not_there_gets_a_message_not_a_traceback():
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("pages/explorer.py")
    at.query_params["model"] = "folder"
    at.session_state["model_folder"] = "/no/such/folder"
    at.run()
    assert not at.exception
    missing = translate("model.problem.not_found", "en", path="`/no/such/folder`")
    assert [e.value for e in at.error] == [missing]


def test_the_korean_explorer_shows_no_english_interface_text():
    at = explorer(lang="ko", view="stats")
    assert not at.exception
    english = set(load_catalog("en").values()) - set(load_catalog("ko").values())
    shown = [
        e.value
        for kind in ("title", "caption", "info", "warning", "markdown")
        for e in at.get(kind)
    ]
    shown += [w.label for w in at.get("selectbox")] + [w.label for w in at.get("button_group")]
    assert not [text for text in shown if text in english]
    assert HANGUL.search(at.title[0].value)


def explorer_on_folder(folder, **query: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("pages/explorer.py")
    at.query_params.update({"model": "folder", **query})
    at.session_state["model_folder"] = str(folder)
    return at.run()


@pytest.mark.parametrize(
    ("name", "kinds"), [("gpt2", ["decoder"]), ("bart", ["encoder", "decoder", "cross"])]
)
def test_local_hugging_face_folders_show_their_own_attention_kinds(hf_folders, name, kinds):
    at = explorer_on_folder(hf_folders[name], text="the cat sat")
    assert not at.exception and not at.error
    assert at.segmented_control(key="kind").options == [
        translate(f"common.kind.{k}", "en") for k in kinds
    ]
    assert figures(at)


def test_a_transformers_model_says_its_stages_are_not_available(hf_folders):
    at = explorer_on_folder(hf_folders["bart"], text="the cat sat", view="stages")
    assert not at.exception
    assert translate("explorer.stages_unavailable", "en") in [i.value for i in at.info]


def test_cross_attention_pairs_decoder_queries_with_encoder_keys(hf_folders):
    at = explorer_on_folder(hf_folders["bart"], text="the cat sat", kind="cross")
    weights = figures(at)[0]
    x_ticks, y_ticks = (
        weights["layout"]["xaxis"]["ticktext"],
        weights["layout"]["yaxis"]["ticktext"],
    )
    assert x_ticks[0] == "&lt;s&gt;" and "cat" in "".join(x_ticks)  # encoder tokens across
    assert len(y_ticks) >= 1  # decoder tokens down


def test_compare_two_layers_shows_both_maps_and_their_difference():
    at = explorer(view="compare", cmp="layer", layer="0", layer2="5")
    assert not at.exception and not at.error
    first, second, diff = figures(at)
    assert diff["data"][-1]["zmin"] == -1 and diff["data"][-1]["zmax"] == 1
    assert "Layer 6" in second["layout"]["title"]["text"]


def test_compare_two_sentences_of_different_lengths_explains_why_no_difference():
    at = explorer(
        view="compare", cmp="sentence", text="I study math", text2="time flies like an arrow"
    )
    assert not at.exception
    assert len(figures(at)) == 2
    assert translate("explorer.compare_tokens_differ", "en") in [i.value for i in at.info]


def test_compare_two_sentences_of_the_same_length_subtracts_them_position_by_position():
    at = explorer(view="compare", cmp="sentence", text="I study math", text2="I study art")
    *_, diff = figures(at)
    assert diff["layout"]["xaxis"]["ticktext"] == ["[CLS]", "i", "study", "math/art", "[SEP]"]


def test_compare_two_models_needs_the_same_tokens_to_subtract(hf_folders):
    at = explorer(view="compare", cmp="model", model2="minilm")  # MiniLM vs itself is excluded
    assert not at.exception
    assert at.selectbox(key="model2").value != "minilm"


def chart_configs(at: AppTest) -> list[dict]:
    return [json.loads(chart.proto.config) for chart in elements(at, "plotly_chart")]


def test_every_chart_saves_in_the_chosen_format_with_its_toolbar_in_the_ui_language():
    at = explorer(view="stages", lang="ko")
    configs = chart_configs(at)
    assert len(configs) >= 4  # the stages view draws one chart per stage
    for config in configs:
        assert config["toImageButtonOptions"]["format"] == "png"
        assert config["locale"] == "ko"
        toolbar = config["locales"]["ko"]["dictionary"]
        assert toolbar["Download plot as a PNG"] == translate("chart.toolbar.download_png", "ko")
    names = [c["toImageButtonOptions"]["filename"] for c in configs]
    assert len(set(names)) == len(names)  # each saved file says which chart it is

    at.button_group(key="chart_image_format").set_value("svg").run()
    assert {c["toImageButtonOptions"]["format"] for c in chart_configs(at)} == {"svg"}
    at.button_group(key="view").set_value("export").run()
    assert any("SVG" in c.value for c in at.caption)  # the export view names the format


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_unknown_words_offer_one_button_that_reads_the_sentence_with_minilm(lang):
    text = "the quokkas study math"  # en2ko does not know "quokkas"
    at = open_page("explorer", model="en2ko", text=text, lang=lang)
    label = translate(
        "input.read_with_pretrained", lang, model=translate("model.name.minilm", lang)
    )
    (button,) = [b for b in at.button if b.label == label]
    button.click().run()
    assert not at.exception and not at.error
    assert at.query_params["model"] == "minilm"  # the link keeps it
    assert at.text_input(key="text").value == text  # the sentence is not lost
    assert not [b for b in at.button if b.label == label]  # MiniLM knows every word
    ticks = figures(at)[0]["layout"]["xaxis"]["ticktext"]
    assert "quo" in " ".join(ticks)  # WordPiece reads the word the toy model could not


def test_a_sentence_the_model_knows_gets_no_switch_button():
    at = open_page("explorer", model="en2ko", text="I study math")
    label = translate(
        "input.read_with_pretrained", "en", model=translate("model.name.minilm", "en")
    )
    assert label not in [b.label for b in at.button]


def test_rollout_is_not_offered_on_an_encoder_decoders_decoder():
    at = open_page("explorer", model="en2ko", text="I study math", kind="encoder")
    assert not at.exception
    assert translate("explorer.aggregate.rollout", "en") in at.segmented_control(key="agg").options
    at.segmented_control(key="kind").set_value("decoder").run()
    assert not at.exception
    assert (
        translate("explorer.aggregate.rollout", "en") not in at.segmented_control(key="agg").options
    )


def test_korean_output_reads_as_written_with_its_tokens_on_the_axes():
    at = open_page("explorer", model="en2ko", text="I study math at school", kind="decoder")
    assert not at.exception
    output = " ".join(m.value for m in at.markdown)
    assert "나는 학교에서 수학을 공부한다" in output
    assert "나 는 학교 에서 수학 을 공부한다" in " ".join(c.value for c in at.caption)
    (fig,) = figures(at)
    assert fig["layout"]["xaxis"]["ticktext"][1:3] == ["나", "는"]  # tokens on the axes


def test_the_heatmap_offers_itself_as_one_html_file_made_when_clicked():
    at = explorer(lang="ko", layer="1")
    (button,) = elements(at, "download_button")
    assert button.proto.label == translate("chart.export_html", "ko")
    assert button.proto.deferred_file_id  # made when clicked, not on every rerun


def test_a_rerun_reads_the_text_once_and_draws_from_the_trace_the_model_made(monkeypatch):
    """The page tokenizes its text once a rerun (the sentence box hands the tokens on), and
    views draw from the very trace kept in the cache: no copy (a copy's kept rollouts and
    overviews would be lost on every rerun)."""
    from model.analysis import view as view_module
    from model.runtime.lab import LabModel
    from ui.models import TRACES

    at = explorer(text="I study math at school", agg="rollout")
    assert not at.exception
    reads, drawn = [], []
    real_encode, real_init = LabModel.encode, view_module.AttentionView.__post_init__
    monkeypatch.setattr(
        LabModel, "encode", lambda lm, text: (reads.append(text), real_encode(lm, text))[1]
    )
    monkeypatch.setattr(
        view_module.AttentionView,
        "__post_init__",
        lambda v: (drawn.append(v.trace), real_init(v))[1],
    )
    at.run()
    assert not at.exception
    assert reads == ["I study math at school"]
    kept = [TRACES.get(k) for k in TRACES.kept_keys() if k[2] == "I study math at school"]
    assert drawn and all(any(t is k for k in kept) for t in drawn)
