""" "Attention since 2017", run headless through AppTest in both languages, bad input included."""

from __future__ import annotations

import json
import re

import pytest
from streamlit.testing.v1 import AppTest

from tests.app.helpers import APP, ok, open_tab
from ui.i18n import translate

HANGUL = re.compile(r"[\uac00-\ud7a3]")
TABS = ("positions", "gqa", "cache", "flash", "sinks")


def tab_label(tab: str, lang: str = "en") -> str:
    return translate(f"tabs.modern.{tab}", lang)


def open_page(tab: str | None = None, **query: str) -> AppTest:
    """The page with ``tab`` open (None: the tab a link's parameters open, else the first),
    with the toy en2ko in the sidebar unless ``model`` says otherwise (a real decoder adds
    its own facts and sections: tests/app/test_real_models.py)."""
    query.setdefault("model", "en2ko")
    at = AppTest.from_file(APP, default_timeout=300)
    at.switch_page("pages/modern.py")
    at.query_params.update(query)
    if tab is not None:
        at.session_state["modern_tab"] = tab_label(tab, query.get("lang", "en"))
    return at.run()


def figures(at: AppTest) -> dict[str, dict]:
    return {
        chart.proto.id.split("-")[-1]: json.loads(chart.proto.spec)
        for chart in at.get("plotly_chart")
    }


def specs(at: AppTest) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def lead(key: str, lang: str = "en") -> str:
    """A message's fixed words, up to its first placeholder."""
    return translate(key, lang).split("{")[0]


def texts(elements) -> str:
    return " ".join(str(e.value) for e in elements)


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_page_renders_every_section_in_both_languages(lang):
    at = open_page(lang=lang)
    ok(at)
    assert at.title[0].value == translate("modern.title", lang)
    assert [tab.label for tab in at.tabs] == [tab_label(tab, lang) for tab in TABS]
    charts, successes = [], ""
    for tab in TABS:  # one tab open at a time: each shows its own section only
        open_tab(at, "modern_tab", tab_label(tab, lang))
        ok(at)
        assert [h.value for h in at.header] == [translate(f"modern.{tab}.header", lang)]
        charts += specs(at)
        successes += texts(at.success)
        if lang == "ko":
            assert HANGUL.search(texts(at.markdown))
    # length, q·k, RoPE, two cache layers, two cache sizes, online softmax, memory, sinks
    assert len(charts) == 10
    # equal to the plain module up to float32 rounding (which kernels run depends on what
    # the process loaded before: 0 or ~1e-7)
    parity = re.escape(translate("modern.gqa.parity", lang, gap="@")).replace("@", "([0-9.eE+-]+)")
    gap = re.search(parity, successes)
    assert gap and float(gap.group(1)) <= 1e-6, successes
    assert lead("modern.cache.equal", lang) in successes
    if lang == "ko":
        assert HANGUL.search(json.dumps(charts[0], ensure_ascii=False))


@pytest.mark.parametrize(
    ("query", "tab", "chart"),
    [
        ({}, "positions", "length_chart"),
        ({"mkv": "1"}, "gqa", None),  # numbers and a table, no chart
        ({"mcmodel": "sort"}, "cache", "cache_ours"),
        ({"mfkeys": "12"}, "flash", "flash_chart"),
        ({"mstext": "the cat sat"}, "sinks", "sink_chart"),
    ],
)
def test_only_the_open_tab_runs_and_a_link_opens_the_tab_of_its_widget(query, tab, chart):
    """A closed tab does no work: its charts are not sent; a permalink opens its own tab."""
    at = open_page(**query)
    ok(at)
    assert [h.value for h in at.header] == [translate(f"modern.{tab}.header", "en")]
    drawn = figures(at)
    assert chart in drawn if chart else not drawn
    if tab == "gqa":
        assert at.segmented_control(key="mkv").value == 1
    other = TABS[(TABS.index(tab) + 1) % len(TABS)]
    open_tab(at, "modern_tab", tab_label(other))
    ok(at)
    assert [h.value for h in at.header] == [translate(f"modern.{other}.header", "en")]
    assert not set(figures(at)) & set(drawn)


def test_the_shipped_length_experiment_is_plotted_with_every_scheme_and_the_trained_range():
    from model.training.lengths import load_results

    meta, _ = load_results()
    settings = meta["settings"]
    at = open_page()
    ok(at)
    fig = specs(at)[0]
    lines = [d for d in fig["data"] if d.get("mode") == "lines+markers"]
    bands = [d for d in fig["data"] if d.get("fill") == "toself"]
    assert [d["name"] for d in lines] == [
        translate(f"modern.scheme.{s}", "en")
        for s in ("sinusoidal", "learned", "rope", "alibi", "none")
    ]
    assert len(bands) == 5  # one range over the seeds per scheme
    shaded = fig["layout"]["shapes"][0]
    assert shaded["x1"] == settings["train_max_len"] + 0.5  # the trained lengths
    table = at.dataframe[0].value
    assert len(table) == 5 and table.shape[1] == len(settings["eval_lengths"])
    assert "(" in str(table.iloc[0, 0])  # mean (lowest–highest seed)
    at.segmented_control(key="mmetric").set_value("exact_match").run()
    ok(at)
    assert specs(at)[0]["layout"]["yaxis"]["title"]["text"] == translate(
        "modern.metric.exact_match", "en"
    )


def test_without_the_experiment_asset_the_page_says_how_to_make_it(monkeypatch):
    import ui.modern

    monkeypatch.setattr(ui.modern, "load_results", lambda: ({}, []))
    ui.modern.length_results.clear()
    try:
        at = open_page()
        ok(at)
        assert translate("modern.length.missing", "en") in texts(at.info)
    finally:
        ui.modern.length_results.clear()


def test_rope_controls_turn_the_chosen_pair_and_say_faster_or_slower():
    at = open_page(mpair="3", mpos="5")
    ok(at)
    rope = specs(at)[2]
    points = [d for d in rope["data"] if d.get("mode") == "markers+lines"]
    assert [d["name"] for d in points] == ["pair 3", "pair 11"]
    assert points[0]["text"] == ["0", "1", "2", "3", "4"]
    assert lead("modern.rope.compare_slower") in texts(at.caption)
    assert "radians" not in texts(at.caption)  # "θ = 1 radians" read wrong: rad per position
    at = open_page(mpair="28")
    ok(at)
    assert lead("modern.rope.compare_faster") in texts(at.caption)  # pair 20 turns faster


def test_gqa_choice_changes_the_kv_parameters_but_not_the_weights_shape():
    at = open_page(mkv="1")
    ok(at)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics[translate("modern.gqa.weights_shape", "en")] == "[1, 8, 6, 6]"
    assert metrics[translate("modern.gqa.kv_params", "en")] == f"{2 * (64 * 8 + 8):,}"
    assert translate("modern.gqa.shared", "en", g=1, group=8) in texts(at.caption)


@pytest.mark.parametrize("model", ["en2ko", "reverse", "sort"])
def test_the_cache_grows_one_row_per_step_and_equals_recomputation(model):
    at = open_page(mcmodel=model)
    ok(at)
    assert lead("modern.cache.equal") in texts(at.success)
    # The cross cache is named only where there is one: sort is decoder-only.
    assert (lead("modern.cache.cross") in texts(at.caption)) == (model != "sort")
    at.slider(key="mcstep").set_value(1).run()
    ok(at)
    assert lead("modern.cache.equal_one") in texts(at.success)  # not "the first 1 steps"
    rows = []
    for value in (1, 2, 3):
        at.slider(key="mcstep").set_value(value).run()
        ok(at)
        rows.append(len(figures(at)["cache_layer_0"]["layout"]["yaxis"]["ticktext"]))
    assert rows[1] == rows[0] + 1 and rows[2] == rows[0] + 2, "one more row per step"
    assert lead("modern.cache.equal") in texts(at.success)


def test_the_cache_check_shows_the_largest_logit_gap_of_the_steps_so_far():
    """The number in "equal to recomputation" is the largest |logit| gap over the steps shown:
    the page's kept gaps are those of two greedy decodes recomputed here (with the cache and
    without; float32 rounding apart), and the message shows their maximum for each step."""
    import torch

    from model.runtime.decoding import greedy_decode
    from ui.models import load
    from ui.modern import cache_run

    at = open_page(mcmodel="en2ko")
    ok(at)
    text = at.text_input(key="mctext").value
    lm = load("en2ko", "auto")
    run = cache_run("en2ko", "auto", text)  # the page's own run, from the cache it filled
    ids = torch.tensor([lm.encode(text).ids])
    bos, eos = lm.tgt_tokenizer.bos_id, lm.tgt_tokenizer.eos_id
    cache = lm.network.new_cache()
    _, cached = greedy_decode(lm.network, ids, bos, eos, len(run.generated), True, cache)
    _, full = greedy_decode(lm.network, ids, bos, eos, len(run.generated), use_cache=False)
    gaps = (cached[0] - full[0]).abs().amax(dim=-1)
    assert len(run.logit_gap) == len(run.generated) > 1
    assert run.logit_gap.tolist() == pytest.approx(gaps.tolist(), abs=1e-5)
    for step in (1, 2, len(run.generated)):
        at.slider(key="mcstep").set_value(step).run()
        ok(at)
        said = f"{float(run.logit_gap[:step].max()):.1e}"
        assert said in texts(at.success), (step, said, texts(at.success))


@pytest.fixture(scope="module")
def sentence_box_page():
    """One open page per sentence box and language, as a student keeps it: each bad text is
    typed into the same box (a rerun, not a fresh page each: 4 page loads, not 16), so an
    earlier bad text's leftovers are tested too, as in tests/app/test_bad_input.py."""
    pages: dict[tuple[str, str], AppTest] = {}

    def page(key: str, lang: str) -> AppTest:
        if (key, lang) not in pages:
            pages[key, lang] = open_page("cache" if key == "mctext" else "sinks", lang=lang)
        return pages[key, lang]

    return page


@pytest.mark.parametrize("lang", ["en", "ko"])
@pytest.mark.parametrize("key", ["mctext", "mstext"])
@pytest.mark.parametrize("bad", ["", "<script>alert(1)</script> & <b>", "word " * 2000, "\x00\x07"])
def test_bad_text_gets_a_message_not_a_traceback(sentence_box_page, key, bad, lang):
    at = sentence_box_page(key, lang)
    at.text_input(key=key).set_value(bad).run()
    assert not at.exception, [e.value for e in at.exception]
    messages = texts(at.warning) + texts(at.info)
    if not bad.strip("\x00\x07 "):
        assert translate("input.empty", lang) in messages
    elif bad.startswith("<"):
        assert translate("input.markup_literal", lang) in messages
    else:
        assert messages  # truncated, or unknown words: said, never silent
    if lang == "ko":
        assert HANGUL.search(messages)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"mc_h": 32, "mc_g": 3}, "modern.calc.kv_divide"),
        ({"mc_h": 8, "mc_g": 16}, "modern.calc.kv_divide"),
        ({"mc_d": 100, "mc_h": 32}, "modern.calc.d_model_heads"),
    ],
)
@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_cache_calculator_explains_impossible_shapes(values, message, lang):
    at = open_page("cache", lang=lang)
    for key, value in values.items():
        at.number_input(key=key).set_value(value)
    at.run()
    ok(at)
    assert lead(message, lang) in texts(at.warning)


def test_the_cache_calculator_gives_the_real_models_sizes():
    at = open_page("cache")
    ok(at)
    result = translate("modern.calc.result", "en")
    assert {m.label: m.value for m in at.metric}[result] == "1.0 GiB"  # 32 layers, 8 KV heads
    at.number_input(key="mc_g").set_value(1).run()
    assert {m.label: m.value for m in at.metric}[result] == "128.0 MiB"
    # Gemma-7B: 28 layers, d_model 3072, 16 heads of width 256 (not 3072 / 16 = 192), MHA
    for key, value in (("mc_layers", 28), ("mc_d", 3072), ("mc_h", 16), ("mc_g", 16)):
        at.number_input(key=key).set_value(value)
    at.number_input(key="mc_dk").set_value(256).run()
    ok(at)
    assert {m.label: m.value for m in at.metric}[result] == "3.5 GiB"  # 2·28·16·256·8192·2
    assert translate("modern.calc.no_saving", "en") in texts(at.caption)  # not "1× smaller"


def test_online_softmax_steps_reach_ordinary_attention_at_the_last_tile():
    at = open_page(mfkeys="12", mfblock="5")
    ok(at)
    tiles = at.slider(key="mftile")
    assert tiles.max == 3  # 12 keys in blocks of 5: 5 + 5 + 2
    assert translate("modern.flash.more", "en", left=2) in texts(at.info)
    tiles.set_value(3).run()
    ok(at)
    assert lead("modern.flash.equal") in texts(at.success)
    assert len(at.dataframe[0].value) == 3  # one row per tile read (the flash tab alone is open)


def test_a_block_larger_than_the_keys_is_one_tile_not_an_error():
    at = open_page(mfkeys="4", mfblock="16")
    ok(at)
    assert lead("modern.flash.equal") in texts(at.success)


def test_memory_measurements_match_the_formulas():
    at = open_page(mmblock="64")
    ok(at)
    mem = figures(at)["memory_chart"]["data"]
    measured_full, formula_full = mem[0]["y"], mem[1]["y"]
    assert measured_full == formula_full
    tiled, output = mem[2]["y"], mem[3]["y"]
    assert isinstance(tiled, list) and len(tiled) == 5  # n = 64 .. 1024
    assert output == [n * 64 * 4 for n in (64, 128, 256, 512, 1024)]
    above = [a - b for a, b in zip(tiled, output)]
    assert len(set(above[1:])) == 1, above  # the working set beside the output does not grow
    assert tiled[-1] < measured_full[-1] / 8


def test_sinks_show_a_share_per_layer_and_head_for_minilm():
    at = open_page(mstext="the cat sat on the mat")
    ok(at)
    sink = figures(at)["sink_chart"]
    assert len(sink["data"]) == 2  # [CLS] and [SEP]
    assert "8 tokens: spread evenly, [CLS] and [SEP] together would get 0.25" in texts(at.caption)


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_a_mistyped_link_falls_back_to_defaults_not_a_traceback(lang):
    at = open_page(
        lang=lang,
        mpair="999",
        mpos="abc",
        mfkeys="-3",
        mfblock="x",
        mkv="7",
        mcmodel="nope",
        mmetric="zzz",
        mmblock="5",
    )
    ok(at)
    assert at.segmented_control(key="mmetric").value == "token_accuracy"
    assert 0 <= at.slider(key="mpair").value <= 31
    assert translate("modern.title", lang) == at.title[0].value
    open_tab(at, "modern_tab", tab_label("gqa", lang))
    ok(at)
    assert at.segmented_control(key="mkv").value == 8
    open_tab(at, "modern_tab", tab_label("cache", lang))
    ok(at)
    assert at.segmented_control(key="mcmodel").value == "en2ko"
    open_tab(at, "modern_tab", tab_label("flash", lang))
    ok(at)
    assert at.segmented_control(key="mmblock").value == 128
    assert 4 <= at.slider(key="mfkeys").value <= 32


@pytest.mark.parametrize("lang", ["en", "ko"])
@pytest.mark.parametrize(
    ("page", "label", "query"),
    [
        ("concept_positional", "modern.link.from_positional", {}),
        ("decoding", "modern.link.from_decoding", {"model": "sort"}),
    ],
)
def test_the_positional_and_decoding_pages_link_here(page, label, query, lang):
    """The decoding page's link is its last element, drawn whatever decoder is chosen: the toy
    sort model reaches it in a fraction of a second, where the default decoders (en2ko in
    English, Gemma 3 in Korean) took 17 s and more to decode and force their sentence first
    (those default pages are opened by tests/app/test_decoding.py and, for Gemma 3,
    tests/app/test_real_models.py's Korean decoding test)."""
    at = AppTest.from_file(APP, default_timeout=300)
    at.switch_page(f"pages/{page}.py")
    at.query_params.update(lang=lang, **query)
    at.run()
    ok(at)
    links = {link.proto.label: link.proto.page for link in at.get("page_link")}
    assert translate(label, lang) in links
    assert links[translate(label, lang)] == "modern"  # the url_path of pages/modern.py


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_reading_says_how_long_the_runs_took_from_the_record_not_a_minute(lang):
    """35–146 s per run, as metadata.json recorded them (start to scored); the text once said
    "trained for a minute" whatever the runs took."""
    from model.training.lengths import load_results

    meta, _ = load_results()
    times = [run["total_s"] for run in meta["runs"]]
    assert len({run["seed"] for run in meta["runs"]}) >= 3
    said = f"{min(times):,.0f}–{max(times):,.0f}"
    at = open_page(lang=lang)
    ok(at)
    reading = [m.value for m in at.markdown if lead("modern.length.reading", lang) in m.value]
    assert len(reading) == 1 and said in reading[0], said
    assert "a minute" not in reading[0] and "1분" not in reading[0]
