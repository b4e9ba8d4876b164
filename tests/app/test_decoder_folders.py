"""A tiny LLaMA-type folder, picked in the sidebar, on the explorer, decoding, mechanisms and
"Attention since 2017" pages: every view our own decoders have, in both languages."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from tests.app.helpers import APP, chart, figures, ok, open_tab
from tests.hf_folders import build_decoder_folder
from ui.i18n import translate


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return build_decoder_folder("llama", tmp_path_factory.mktemp("apps") / "tiny-llama")


def on_folder(page: str, folder, **query: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=240)
    at.switch_page(f"pages/{page}.py")
    at.query_params.update({"model": "folder", **query})
    at.session_state["model_folder"] = str(folder)
    return at.run()


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_explorer_shows_a_llama_folders_four_stages_like_our_own_decoders(llama, lang):
    at = on_folder("explorer", llama, text="the cat sat on the mat", view="stages", lang=lang)
    ok(at)
    assert translate("explorer.stages_unavailable", lang) not in [i.value for i in at.info]
    assert at.segmented_control(key="kind").options == [translate("common.kind.decoder", lang)]
    shown = figures(at)
    assert len(shown) >= 4  # scores, scaled, masked, weights
    # The weights heatmap reads the folder's own byte-level tokens, <s> first.
    ticks = [f["layout"]["xaxis"].get("ticktext") for f in shown if "xaxis" in f["layout"]]
    assert any(t and t[0] == "&lt;s&gt;" and "␣cat" in t for t in ticks)
    assert not any("Ġ" in label for t in ticks if t for label in t)


@pytest.mark.parametrize("view", ["heatmap", "heads", "model", "lines", "focus", "stats"])
def test_every_other_explorer_view_draws_for_the_folder(llama, view):
    at = on_folder("explorer", llama, text="the cat sat", view=view)
    ok(at)
    if view == "lines":  # the head view is HTML of its own, not a plotly chart
        layers = [translate("explorer.lines_caption", "en", n=n) for n in (1, 2)]
        assert set(layers) & {c.value for c in at.caption}
    elif view == "stats":  # a table, one row per head: 2 layers x 8 heads
        assert len(at.dataframe[0].value) == 16
    else:
        assert figures(at)


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_decoding_a_llama_folder_offers_beam_and_steps(llama, lang):
    at = on_folder("decoding", llama, text="the cat sat", lang=lang)
    ok(at)
    assert at.segmented_control(key="strategy").options == [
        translate(f"decoding.strategy.{s}", lang) for s in ("greedy", "beam", "sample")
    ]
    label = translate("decoding.step", lang)
    next(b for b in at.button if b.label == label).click().run()
    ok(at)
    assert at.session_state["step"] == 1
    assert chart(at, "self_chart") is not None  # the new query's row over the cached keys
    # a decoder-only model reads the text and its own tokens: no target "shifted right"
    said = [m.value for m in at.markdown]
    reads = translate("decoding.decoder_input_lm", lang, tokens="").split("{")[0][:12]
    assert any(m.startswith(reads) for m in said), said
    shifted = translate("decoding.decoder_input", lang, tokens="")[:12]
    assert not any(m.startswith(shifted) for m in said)


def test_beam_hypotheses_read_as_the_text_they_spell_not_as_tokens_in_a_row(llama):
    from model import load
    from model.analysis.tokens import written_text
    from model.analysis.view import model_special_tokens

    at = on_folder("decoding", llama, text="the cat sat", strategy="beam", width="3")
    label = translate("decoding.step", "en")
    next(b for b in at.button if b.label == label).click().run()
    next(b for b in at.button if b.label == label).click().run()
    ok(at)
    shown = list(at.dataframe[0].value[translate("decoding.beam_tokens", "en")])
    lm = load(llama, device="cpu")
    beams = list(lm.decode("the cat sat", strategy="beam", beam_width=3))[1].beams
    specials = model_special_tokens(lm)
    assert shown == [written_text(lm.tgt_tokenizer, toks, specials) for toks, _ in beams]
    assert shown != [" ".join(toks) for toks, _ in beams]  # the row of tokens it once was


def test_switching_a_llama_folders_heads_off_runs_the_ablated_model_beside_it(llama):
    at = on_folder("decoding", llama, text="the cat sat")
    off = [("decoder", 0, 0), ("decoder", 1, 3)]
    at.button_group(key="off_decoder").set_value(off).run()
    ok(at)
    assert translate("decoding.ablation_result", "en") in [h.value for h in at.subheader]


@pytest.mark.slow  # among the slowest of its folder (docs/benchmarks.md, the suite)
def test_the_mechanisms_page_reads_the_folder_with_lens_patching_and_attribution(llama):
    at = on_folder("mechanisms", llama)
    ok(at)
    # Lazy tabs: each tab runs only once opened, as a click on it does.
    for tab, key in (("lens", "mlens_m"), ("patching", "mpatch_m"), ("heads", "mheads_m")):
        open_tab(at, "mech_tab", translate(f"mech.tab.{tab}", "en"))
        ok(at)
        # offered, and chosen: the sidebar's folder
        assert at.selectbox(key=key).value == str(llama)
        assert at.selectbox(key=key).options[-1] == "tiny-llama"
        if tab == "lens":
            lens = chart(at, "mech_lens")
            assert len(lens["layout"]["yaxis"]["ticktext"]) == 3  # embeddings + 2 layers
        if tab == "heads":
            for chart_key in ("mech_sc_abl", "mech_sc_dla", "mech_sc_roll"):
                assert chart(at, chart_key) is not None, chart_key
    # Patching: a pair of inputs this random model answers differently, as long as each other.
    open_tab(at, "mech_tab", translate("mech.tab.patching", "en"))
    clean, corrupted = patchable_pair(llama)
    at.text_input(key="mclean").set_value(clean)
    at.text_input(key="mcorrupt").set_value(corrupted).run()
    ok(at)
    assert not at.warning
    grid = chart(at, "mech_patch_pos")
    assert len(grid["layout"]["yaxis"]["ticktext"]) == 3


def patchable_pair(folder) -> tuple[str, str]:
    """The first one-word change whose two inputs this model completes differently."""
    from model import load
    from model.analysis.patching import PatchingError, patch

    lm = load(folder, device="cpu")
    for word in ("cat", "dog", "park", "math", "world", "day", "mat", "ran"):
        pair = ("the cat sat on the mat", f"the cat sat on the {word}")
        try:
            patch(lm, *pair)
        except PatchingError:
            continue
        return pair
    raise AssertionError("no patchable pair for this random model")


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_attention_since_2017_reads_rope_base_kv_heads_and_cache_bytes_from_the_config(llama, lang):
    at = on_folder("modern", llama, lang=lang, mcmodel=str(llama))
    ok(at)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics[translate("models.yours.positions", lang)] == translate(
        "modern.scheme.rope", lang
    )
    assert metrics[translate("models.yours.rope_base", lang)] == "10,000"
    heads = translate("models.yours.heads_value", lang, q=8, kv=2)
    assert metrics[translate("models.yours.heads", lang)] == heads
    assert heads.replace("개", "") == "8 / 2"
    # 2 layers x (k and v) x 2 KV heads x d_k 8 x 4 bytes = 256 B a token; 128 positions.
    assert metrics[translate("models.yours.per_token", lang)] == "256 B"
    assert metrics[translate("models.yours.at_max", lang, n="128")] == "32.0 KiB"
    # Its own cache, run: the KV-cache section decodes it and finds cache = recomputation.
    assert at.segmented_control(key="mcmodel").value == str(llama)
    bars = chart(at, "cache_ours")["data"][0]["x"]
    assert translate("modern.cache.gqa", lang, g=2) in bars
    assert any(
        s.value.startswith(translate("modern.cache.equal", lang, diff="", steps="")[:12])
        for s in at.success
    )


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_a_chat_models_question_is_decoded_inside_its_own_template(tmp_path, lang):
    from tests.hf_folders import build_chat_folder

    folder = build_chat_folder(tmp_path / "tiny-chat")
    at = on_folder("decoding", folder, text="the cat sat", lang=lang)
    ok(at)
    assert at.toggle(key="chat").value is False  # offered, off until asked
    at.toggle(key="chat").set_value(True).run()
    ok(at)
    # The template's special tokens are what the decoder reads, each one token on a badge.
    said = " ".join(m.value for m in at.markdown)
    assert ":violet-badge[` <|im_start|> `]" in said
    assert said.count(":violet-badge[` <|im_end|> `]") == 1  # the user's turn ends once
    n = len(load_chat_tokens(folder))
    assert translate("decoding.chat_caption", lang, n=n) in [c.value for c in at.caption]


def test_a_template_that_cannot_frame_one_question_says_so_and_decodes_the_text(tmp_path):
    """The toggle is offered from the template's presence alone (rendering it imports
    transformers); one that needs more than a user's turn says why it is not used."""
    from tests.hf_folders import build_chat_folder

    needs_system = (
        "{% if messages[0]['role'] != 'system' %}{{ raise_exception('a system turn first') }}"
        "{% endif %}{% for m in messages %}<|im_start|>{{ m['content'] }}<|im_end|>{% endfor %}"
    )
    folder = build_chat_folder(tmp_path / "tiny-chat", needs_system)
    at = on_folder("decoding", folder, text="the cat sat", lang="ko")
    at.toggle(key="chat").set_value(True).run()
    ok(at)
    assert translate("decoding.chat_unusable", "ko") in [w.value for w in at.warning]
    said = " ".join(m.value for m in at.markdown)
    assert "<|im_start|>" not in said  # the plain text was decoded, with no template tokens


def load_chat_tokens(folder) -> list[str]:
    from model import load

    lm = load(folder, device="cpu")
    return lm.encode(lm.chat_prompt("the cat sat")).tokens


def test_a_model_without_a_chat_template_offers_no_question_toggle(llama):
    at = on_folder("decoding", llama, text="the cat sat")
    ok(at)
    assert not [w for w in at.toggle if w.key == "chat"]
