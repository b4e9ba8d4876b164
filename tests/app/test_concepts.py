"""The five concept pages, run headless through AppTest on MiniLM, in both languages."""

from __future__ import annotations

import re

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from tests.app import helpers
from tests.app.helpers import CONCEPT_PAGES, figures, ok
from ui.i18n import translate

HANGUL = re.compile(r"[\uac00-\ud7a3]")
PAGES = CONCEPT_PAGES


def open_page(page: str, **query: str) -> AppTest:
    return helpers.open_page(page, timeout=180, **{"model": "minilm", **query})


@pytest.mark.parametrize("lang", ["en", "ko"])
@pytest.mark.parametrize("page", list(PAGES))
def test_every_concept_page_renders_in_both_languages(page, lang):
    at = open_page(page, lang=lang)
    ok(at)
    assert at.title[0].value == translate(PAGES[page], lang)
    assert figures(at)
    if lang == "ko":
        assert HANGUL.search(" ".join(m.value for m in at.markdown))


def test_step_by_step_follows_layer_head_and_query_and_matches_the_model():
    at = open_page("concept_attention", clayer="2", chead="4", cquery="1", ctext="I study math")
    ok(at)
    assert any(
        s.value.startswith(translate("concepts.attention.match", "en", error="")[:40])
        for s in at.success
    )
    q_fig = figures(at)[0]
    assert q_fig["layout"]["yaxis"]["ticktext"] == ["i"]  # the chosen query token
    assert (
        len(
            q_fig["data"][-1]["z"]["bdata"]
            if isinstance(q_fig["data"][-1]["z"], dict)
            else q_fig["data"][-1]["z"][0]
        )
        > 0
    )
    assert any("+ b_Q" in latex.value for latex in at.latex)  # the numbers include the biases
    frame = at.dataframe[0].value
    assert frame.iloc[:, 0].tolist() == ["[CLS]", "i", "study", "math", "[SEP]"]
    assert abs(frame.iloc[:, -1].sum() - 1.0) < 1e-5
    helpers.open_tab(at, "attention_tab", translate("tabs.attention.multihead", "en"))
    ok(at)
    assert translate("concepts.attention.out_match", "en", error="")[:30] in " ".join(
        c.value for c in at.caption
    )
    drawn = {helpers.chart_key(c) for c in helpers.elements(at, "plotly_chart")}
    assert drawn == {"heads_chart", "concat_chart", "out_chart"}  # the steps' charts: closed
    helpers.open_tab(at, "attention_tab", translate("tabs.attention.cost", "en"))
    ok(at)
    assert "n < d" in " ".join(i.value for i in at.info)


@pytest.mark.parametrize(
    ("query", "tab", "chart"),
    [
        ({}, "steps", "z_chart"),
        ({"xquery": "1"}, "cross", "xheads_chart"),
        ({"cdk": "128"}, "why_scale", "var_chart"),
    ],
)
def test_the_scaled_dot_product_page_runs_only_its_open_tab(query, tab, chart):
    """A closed tab does no work: its charts are not sent; a link opens its widget's tab."""
    at = open_page("concept_attention", **query)
    ok(at)
    drawn = {helpers.chart_key(c) for c in helpers.elements(at, "plotly_chart")}
    assert chart in drawn
    others = {
        "steps": "z_chart",
        "multihead": "heads_chart",
        "cross": "xheads_chart",
        "why_scale": "var_chart",
    }
    assert not {c for name, c in others.items() if name != tab} & drawn
    assert "time_chart" not in drawn  # the cost tab: closed
    helpers.open_tab(at, "attention_tab", translate("tabs.attention.cost", "en"))
    ok(at)
    drawn = {helpers.chart_key(c) for c in helpers.elements(at, "plotly_chart")}
    assert drawn == {"time_chart", "memory_chart"}


def test_the_lecture_example_is_the_default_sentence():
    at = open_page("concept_attention")
    ok(at)
    assert at.text_input(key="ctext").value == "Thinking Machines"
    helpers.open_tab(at, "attention_tab", translate("tabs.attention.why_scale", "en"))
    at.select_slider(key="cdk").set_value(512).run()
    ok(at)
    assert "d_k = 512" in " ".join(c.value for c in at.caption)


@pytest.mark.parametrize("page,key", [("concept_layernorm", "ltext")])
@pytest.mark.parametrize("bad", ["", "<script>alert(1)</script> & <b>", "word " * 2000])
def test_bad_input_gets_a_message_not_a_traceback(page, key, bad):
    """The layernorm page's sentence box. The attention page's box gets the same three (empty,
    markup, 10,000 characters read up to 512 tokens) among the 46 of tests/app/test_bad_input.py,
    which asks for the same messages, and no traceback, error, NaN or unescaped label."""
    at = open_page(page)
    at.text_input(key=key).set_value(bad).run()
    assert not at.exception
    if not bad:
        assert translate("input.empty", "en") in [w.value for w in at.warning]
    elif bad.startswith("<"):
        assert translate("input.markup_literal", "en") in [i.value for i in at.info]


def test_positional_controls_change_the_table():
    at = open_page("concept_positional", pmaxlen="20", pdmodel="8", playout="concatenated")
    ok(at)
    z = figures(at)[0]["data"][-1]["z"]
    shape = z["shape"] if isinstance(z, dict) else [len(z), len(z[0])]
    assert [int(s) for s in str(shape).strip("[]").split(",")] == [20, 8]
    assert translate("concepts.positional.layout_help.concatenated", "en") in [
        c.value for c in at.caption
    ]


def test_layernorm_page_lists_every_norm_and_its_statistics():
    at = open_page("concept_layernorm", lnorm="encoder.5.ffn")
    ok(at)
    box = at.selectbox(key="lnorm")
    assert len(box.options) == 12 and box.value == "encoder.5.ffn"
    assert translate("concepts.layernorm.placement.post", "en", model="minilm") in [
        c.value for c in at.caption
    ]


def test_a_missing_toy_checkpoint_falls_back_to_minilm_with_a_note(tmp_path, monkeypatch):
    import model.runtime.loading

    monkeypatch.setattr(model.runtime.loading, "CHECKPOINTS", tmp_path)  # no checkpoints at all
    # Models loaded by earlier tests must not hide the missing files, and the stand-ins
    # loaded here must not leak into later tests: the shelf is emptied, then put back.
    with helpers.shelf_set_aside():
        at = open_page("concept_layernorm", model="sort")
        ok(at)
        note = translate("concepts.fallback", "en", name=translate("model.name.sort", "en"))
        assert note in [i.value for i in at.info]
        at = open_page("concept_family")
        ok(at)


def test_warmup_sliders_and_presets():
    at = open_page("concept_warmup", wdmodel="256", wwarmup="8000", wpresets="false")
    ok(at)
    names = [d["name"] for d in figures(at)[0]["data"] if d.get("name")]
    assert len(names) == 2 and "256:8000" in names[0]
    assert "6.988e-04" in " ".join(m.value for m in at.latex)  # 256^-0.5 · 8000^-0.5


def _caption_with(at: AppTest, key: str, lang: str = "en") -> str:
    """The caption whose text starts like the catalog entry ``key`` (numbers filled in)."""
    head = re.split(r"\{", translate(key, lang))[0][:30]
    found = [c.value for c in at.caption if c.value.startswith(head)]
    assert found, f"no caption like {key}"
    return found[0]


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_layernorm_captions_carry_the_measured_numbers(lang):
    at = open_page("concept_layernorm", lnorm="encoder.0.ffn", lang=lang)
    ok(at)
    stats = _caption_with(at, "concepts.layernorm.stats_caption", lang)
    assert "rms(γ)" in stats and "0.6" in stats  # rms(γ) of MiniLM's first FFN norm: 0.62
    length = _caption_with(at, "concepts.layernorm.residual_caption.post", lang)
    assert "19.6" in length  # √384 at initialisation
    assert "√d_model·std(γ)" in length  # named as what the length is not


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_positional_shift_matrix_and_clipped_learned_table(lang):
    at = open_page(
        "concept_positional", pmaxlen="30", pdmodel="16", pshift="4", pstart="2", lang=lang
    )
    ok(at)  # a link with the shift's parameters opens the shift tab
    shift = helpers.chart(at, "shift_chart")
    assert shift["layout"]["yaxis"]["ticktext"] == ["PE(2)", "M_4 · PE(2)", "PE(6)"]
    check = translate("concepts.positional.shift_check", lang, k=4, p=2, one="", every="", n=26)
    assert any(s.value[:12] == check[:12] for s in at.success)
    assert "d_model = 16" in _caption_with(at, "concepts.positional.wavelengths", lang)
    assert helpers.chart(at, "learned_chart") is None  # a closed tab draws nothing
    helpers.open_tab(at, "positional_tab", translate("tabs.positional.learned", lang))
    ok(at)
    assert helpers.chart(at, "shift_chart") is None
    learned = helpers.chart(at, "learned_chart")["data"][-1]
    assert learned["zmax"] < 0.2  # the 99th percentile, not the largest value (about 1.9)
    clip = _caption_with(at, "concepts.positional.learned_clip", lang)
    assert f"{learned['zmax']:.3f}" in clip
    helpers.open_tab(at, "positional_tab", translate("tabs.positional.why", lang))
    ok(at)
    assert any("equivariant" in w.value for w in at.warning)


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_warmup_experiment_shows_bands_the_exact_command_and_what_it_shows(lang):
    from model.training.warmup import load_warmup

    meta, _ = load_warmup()
    at = open_page("concept_warmup", lang=lang)
    ok(at)
    for norm in ("post", "pre"):
        fig = helpers.chart(at, f"exp_{norm}_chart")
        fills = [d for d in fig["data"] if d.get("fill") == "toself"]
        assert len(fills) == 2 and len(fig["data"]) == 4  # a band and a mean line per variant
    assert meta["rerun"] in [c.value for c in at.code]
    assert "--d-model 64" in meta["rerun"] and "--lr-factor 0.125" in meta["rerun"]
    text = " ".join(m.value for m in at.markdown)
    v = meta["variants"]
    assert f"{v['pre_no_warmup']['exact_match']:.2f}" in text
    assert f"{v['post_no_warmup']['exact_match_max']:.2f}" in text
    table = at.dataframe[0].value
    assert len(table) == 4


def test_cross_attention_step_through_and_the_mask_correction_show_measured_numbers():
    at = open_page("concept_attention", xquery="1")  # a link into the cross tab opens it
    ok(at)
    success = " ".join(s.value for s in at.success)
    assert translate("concepts.attention.cross_match", "en", error="", out="")[:40] in success
    cross = at.dataframe[0].value  # the decoder query's row over the source tokens
    assert cross.iloc[:, 0].tolist() == ["i", "study", "math"]
    assert abs(cross.iloc[:, -1].sum() - 1.0) < 1e-5
    helpers.open_tab(at, "attention_tab", translate("tabs.attention.steps", "en"))
    ok(at)
    warning = " ".join(w.value for w in at.warning)
    assert "−∞" in warning and "%" in warning  # the 0-fill leak, measured on this head


def test_the_feed_forward_section_uses_the_models_own_sizes():
    at = open_page("concept_layernorm", flayer="1")
    ok(at)
    text = " ".join(m.value for m in at.markdown)
    assert "d_ff = 1536" in text and "d_model = 384" in text
    assert translate("concepts.ffn.check", "en", error="", moved="")[:40] in " ".join(
        s.value for s in at.success
    )


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_family_page_draws_each_mask_on_its_own_and_counts_what_it_masks(lang):
    """Three masks side by side in columns (they stack on a phone), each with a summary that
    counts its pairs: the decoder's causal mask lets 21 of 6×6 pairs through."""
    at = open_page("concept_family", lang=lang)
    ok(at)
    expected = {"encoder": (3, 3, 9), "decoder": (6, 6, 21), "cross": (6, 3, 18)}
    for name, (rows, cols, allowed) in expected.items():
        fig = helpers.chart(at, f"mask_{name}_chart")
        assert fig is not None, name
        z = helpers.plotted(fig["data"][0]["z"])
        assert z.shape == (rows, cols) and z.sum() == allowed
        if name == "decoder":  # causal: row i sees keys 0..i
            assert (z == np.tril(np.ones((6, 6)))).all()
        title = translate(f"concepts.family.mask.{name}", lang)
        alt = next(e.proto.alt for e in helpers.elements(at, "plotly_chart") if name in e.proto.id)
        assert alt == translate(
            "concepts.family.mask_summary",
            lang,
            title=title,
            queries=rows,
            keys=cols,
            allowed=allowed,
            masked=rows * cols - allowed,
            total=rows * cols,
        )
        assert f"**{title}**" in [m.value for m in at.markdown]


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_base_settings_table_puts_the_paper_beside_the_shipped_models(lang):
    at = open_page("concept_family", lang=lang)
    ok(at)
    table = at.table[0].value
    paper = table[translate("concepts.family.base.paper", lang)].tolist()
    assert paper[1:5] == ["512", "8", "64", "2048"] and paper[5] == "0.1"
    assert table["en2ko"].tolist()[1:5] == ["128", "4", "32", "256"]
    assert table["minilm"].tolist()[1] == "384"
