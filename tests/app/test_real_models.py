"""The shipped real models on the pages a first visit opens: SmolLM2 in English, Gemma 3 in
Korean, their real heads in the mechanisms scan, and what their configs say on the modern
page. Every number the page shows is recomputed here from the real weights."""

from __future__ import annotations

import pytest

from model.analysis.concepts import attention_facts
from model.analysis.heads import default_length, scan_heads
from model.runtime.gguf_cache import installed
from tests.app.helpers import figures, ok, open_page
from ui.i18n import translate
from viz.modern import human_bytes

pytestmark = pytest.mark.skipif(
    not (installed("smollm2") and installed("gemma3")),
    reason="the model packages (requirements-models.txt) are not installed",
)


@pytest.fixture(scope="module")
def smollm2():
    from model import load

    return load("smollm2", device="cpu")


@pytest.fixture(scope="module")
def gemma3():
    """One Gemma 3 for the module's own recomputations (1.4 s of CPU a load; four tests each
    loaded it again), apart from the instance the pages load for themselves."""
    from model import load

    return load("gemma3", device="cpu")


@pytest.mark.parametrize(("lang", "model"), [("en", "smollm2"), ("ko", "gemma3")])
def test_a_first_visit_opens_the_explorer_on_the_real_model_for_its_language(lang, model):
    at = open_page("explorer", lang=lang)
    ok(at)
    assert at.selectbox(key="model").value == model
    assert figures(at), "the explorer draws the real model's attention"


def test_the_korean_explorer_shows_gemmas_own_korean_words_not_bytes():
    at = open_page("explorer", lang="ko", text="고양이가 매트 위에 앉았다.", merge="none")
    ok(at)
    ticks = [
        tick
        for f in figures(at)
        for axis in ("xaxis", "yaxis")
        for tick in (f["layout"].get(axis, {}).get("ticktext") or [])
    ]
    # Gemma reads the particle 이가 and the ending 았다 as tokens of their own.
    assert any("이가" in str(tick) for tick in ticks)
    assert any("았다" in str(tick) for tick in ticks)


def test_the_mechanisms_scan_finds_smollm2s_real_induction_heads_and_sinks(smollm2):
    at = open_page("mechanisms", lang="en")
    ok(at)
    # The sidebar's real decoder opens the scan first, on itself.
    assert at.selectbox(key="mscan_m").value == "smollm2"
    scan = scan_heads(smollm2, length=default_length(smollm2), n=1, seed=0)
    induction = scan.found("prefix_matching")
    sinks = scan.found("first_token")
    best = max(induction, key=lambda h: float(scan.scores["prefix_matching"][h]))
    # The claims the page makes of this model, from its weights: a strong induction head
    # (0.89 on 50 random tokens repeated in issue 43) and attention sinks.
    assert float(scan.scores["prefix_matching"][best]) > 0.8
    assert len(sinks) >= 10
    table = at.dataframe[0].value
    top = table.iloc[0]
    assert top.iloc[0] == translate("mech.head_lh", "en", layer=best[0] + 1, head=best[1] + 1)
    said = " ".join(m.value for m in at.markdown)
    assert translate("mech.head_lh", "en", layer=best[0] + 1, head=best[1] + 1) in said


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_modern_page_reads_smollm2s_grouped_heads_rope_base_and_cache_from_its_config(
    smollm2, lang
):
    at = open_page("modern", lang=lang, model="smollm2")
    ok(at)
    facts = attention_facts(smollm2.config)
    assert (facts["n_heads"], facts["kv_heads"], facts["layers"]) == (9, 3, 30)
    assert facts["rope_base"] == 100_000
    metrics = {m.label: m.value for m in at.metric}
    heads = translate("models.yours.heads_value", lang, q=9, kv=3)
    assert metrics[translate("models.yours.heads", lang)] == heads
    assert metrics[translate("models.yours.rope_base", lang)] == "100,000"
    # 2 (keys, values) x 30 layers x 3 key/value heads x 64 dims x 4 bytes = 46,080 bytes
    assert facts["cache_per_token"] == 2 * 30 * 3 * 64 * 4
    # no sliding layers: one base, and every layer keeps every token
    assert facts["rope_local_base"] is None and facts["sliding_layers"] == 0
    at_max = translate("models.yours.at_max", lang, n=f"{smollm2.config.max_len:,}")
    assert metrics[at_max] == human_bytes(2 * 30 * 3 * 64 * 4 * smollm2.config.max_len)


def test_smollm2s_patching_pairs_are_facts_it_answers_right_and_tokenizes_evenly(smollm2):
    """The mechanisms page's patching starts from the first even pair (its page run, 450
    forward passes of a 30-layer model, is left to the browser test's budget)."""
    from model.analysis.pairs import FACTS, answers, even_pairs

    pairs = even_pairs(smollm2)
    assert pairs[0] == ("The capital of France is", "The capital of Italy is")
    for clean, corrupted, a, b in FACTS[:1]:  # Paris → Rome (FACTS[1] it gets wrong)
        assert len(smollm2.encode(clean).ids) == len(smollm2.encode(corrupted).ids)
        assert answers(smollm2, clean, a) and answers(smollm2, corrupted, b), clean


@pytest.mark.parametrize("lang", ["ko", "en"])
def test_the_modern_page_shows_gemmas_local_and_global_layers_and_the_cache_they_save(gemma3, lang):
    from model.analysis.concepts import window_cache_bytes, window_pattern

    cfg = gemma3.config
    pattern = window_pattern(cfg)
    # Gemma 3 270M: 18 layers, five local (window 512) then one global, three times over.
    assert pattern == ([512] * 5 + [None]) * 3
    at = open_page(
        "modern",
        lang=lang,
        model="gemma3",
        tabs={"modern_tab": translate("tabs.modern.cache", lang)},
    )
    ok(at)
    row = next(d.value for d in at.dataframe if d.value.shape == (1, 18)).iloc[0].tolist()
    assert row.count(translate("modern.window.global", lang)) == 3
    assert row.count(translate("modern.window.local", lang, w="512")) == 15
    sizes = window_cache_bytes(cfg, cfg.max_len)
    # 2 x 1 kv head x 256 dims x 4 bytes a key and value: 3 layers keep every token, 15 keep 512
    assert sizes["windowed"] == 2048 * (3 * cfg.max_len + 15 * 512)
    assert sizes["all_global"] == 2048 * 18 * cfg.max_len
    metrics = {m.label: m.value for m in at.metric}
    ratio = f"{sizes['all_global'] / sizes['windowed']:.1f}×"
    assert metrics[translate("modern.window.saving", lang)] == ratio
    # The facts panel: both rotary bases, and the cache its sliding layers really keep.
    facts = attention_facts(cfg)
    assert (facts["rope_local_base"], facts["rope_base"]) == (10_000, 1_000_000)
    assert metrics[translate("models.yours.rope_base_local", lang)] == "10,000"
    assert metrics[translate("models.yours.rope_base_global", lang)] == "1,000,000"
    assert facts["cache_at_max_len"] == sizes["windowed"]
    at_max = translate("models.yours.at_max", lang, n=f"{cfg.max_len:,}")
    assert metrics[at_max] == human_bytes(sizes["windowed"])
    # past the window a token adds a key and a value to the 3 global layers only
    assert facts["cache_per_token_past_window"] == 2048 * 3
    windows = translate(
        "models.yours.windows",
        lang,
        local=15,
        glob=3,
        w="512",
        past=human_bytes(2048 * 3),
        n=f"{cfg.max_len:,}",
        all_global=human_bytes(sizes["all_global"]),
    )
    assert windows in [c.value for c in at.caption]


def test_the_korean_stages_view_shows_gemmas_queries_and_keys_before_and_after_qk_norm(gemma3):
    text = "고양이가 매트 위에 앉았다."
    at = open_page("explorer", lang="ko", model="gemma3", text=text, view="stages", merge="none")
    ok(at)
    assert translate("explorer.qknorm.header", "ko") in [h.value for h in at.subheader]
    parts = gemma3.trace(text, stages=True, max_new_tokens=0).norm_stages("decoder", 0, 0)
    spans = {
        name: f"{float(v.norm(dim=-1).min()):.1f}–{float(v.norm(dim=-1).max()):.1f}"
        for name, v in parts.items()
    }
    assert translate("explorer.qknorm.caption", "ko", **spans) in [c.value for c in at.caption]
    # one trace of the sentence drew the page and its QK-norm stages, not a second pass
    from ui.models import TRACES

    kept = [  # traces only: another test's decoding of the sentence is kept beside them
        k for k in TRACES.kept_keys() if isinstance(k, tuple) and text in k and k[0] != "decode"
    ]
    assert len(kept) == 1 and kept[0][4] is True, kept  # (name, device, text, target, stages..)


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_gemmas_model_card_names_its_quantiser_and_offers_the_terms_shipped_with_it(lang):
    from model.runtime.gguf_cache import SHIPPED_GGUF

    at = open_page("home", lang=lang, model="gemma3")
    ok(at)
    card = translate("model.card.gemma3", lang)
    assert card in [m.value for m in at.sidebar.markdown]
    assert "hugginllam" in card and "Gemma Terms of Use" in card
    terms = SHIPPED_GGUF["gemma3"].terms_path()
    assert terms.is_file() and b"Gemma" in terms.read_bytes()
    labels = [b.label for b in at.sidebar.get("download_button")]
    assert translate("model.card.terms", lang) in labels


@pytest.mark.slow  # 10-13 s on a quiet machine: make test runs it, make test-fast does not
def test_the_fact_pairs_each_real_model_answers_right_come_first_in_english_and_korean(
    smollm2, gemma3
):
    """What the patching tab says of each model, recomputed: SmolLM2 knows the capitals in
    English; Gemma 3 270M answers "Paris is the capital of" → France, and in Korean only
    with one example given first (its bare "프랑스의 수도는" continues with a year)."""
    from model.analysis.pairs import fact_pairs

    small = fact_pairs(smollm2)
    assert small[0] == ("The capital of France is", "The capital of Italy is", True)
    gemma = {(c, d): right for c, d, right in fact_pairs(gemma3)}
    assert gemma[("Paris is the capital of", "Rome is the capital of")]
    assert not gemma[("The capital of France is", "The capital of Italy is")]
    assert not gemma.get(("프랑스의 수도는", "이탈리아의 수도는"), False)
    few_shot = (
        "대한민국의 수도는 서울이고, 일본의 수도는",
        "대한민국의 수도는 서울이고, 중국의 수도는",
    )
    assert gemma[few_shot]


@pytest.mark.slow  # 10-13 s on a quiet machine: make test runs it, make test-fast does not
@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_layernorm_page_names_smollm2s_massive_activation_on_a_log_axis(smollm2, lang):
    from model.analysis.concepts import residual_peak

    at = open_page("concept_layernorm", lang=lang, model="smollm2")
    ok(at)
    text = at.text_input(key="ltext").value
    trace = smollm2.trace(text, max_new_tokens=0)  # as the page reads it: the sentence alone
    tokens = trace.tgt_tokens
    peak = residual_peak(trace.residual_norms["decoder"])
    # SmolLM2's first token: 24,101 after layer 12, some 35 times the median token's peak,
    # on the three tokens of the sentence alone
    assert peak["token"] == 0 and peak["massive"] and peak["peak"] > 20_000
    said = translate(
        "concepts.layernorm.massive",
        lang,
        token=f"0: {tokens[0]}",
        peak=f"{peak['peak']:,.0f}",
        layer=peak["layer"],
        ratio=f"{peak['ratio']:,.0f}",
        median=f"{peak['median']:,.0f}",
    )
    assert said in [c.value for c in at.caption]
    chart = next(f for f in figures(at) if f["layout"].get("yaxis", {}).get("type") == "log")
    named = [d["name"] for d in chart["data"] if d.get("showlegend", True)]
    assert named == [f"{i}: {token}" for i, token in enumerate(tokens)]  # a few: each named
    # Its FFN is SwiGLU, three matrices without biases, not the paper's ReLU MLP.
    ffn = smollm2.network.decoder.layers[0].ffn
    d_model, d_ff = smollm2.config.d_model, smollm2.config.d_ff
    assert sum(p.numel() for p in ffn.parameters()) == 3 * d_model * d_ff
    text = translate(
        "concepts.ffn.text_gated",
        lang,
        model="smollm2",
        gated="SwiGLU",
        act="SiLU",
        d_model=d_model,
        d_ff=d_ff,
        ratio=f"{d_ff / d_model:g}",
        params=f"{3 * d_model * d_ff:,}",
    )
    assert text in [m.value for m in at.markdown]
    formula = " ".join(m.value for m in at.latex)
    assert r"\mathrm{SiLU}(xW_1 ) \odot (xV )" in formula and r"\max(0" not in formula


@pytest.mark.slow  # 10-13 s on a quiet machine: make test runs it, make test-fast does not
def test_the_korean_decoding_page_on_gemma_speaks_of_no_cross_attention():
    at = open_page("decoding", lang="ko")
    ok(at)
    assert at.selectbox(key="model").value == "gemma3"
    captions = [c.value for c in at.caption]
    assert translate("decoding.intro_decoder", "ko") in captions
    assert not any("크로스 어텐션(" in c or "원문(크로스" in c for c in captions)


def test_the_explorer_joins_smollm2s_byte_pieces_into_korean_characters_not_words():
    from model.hf.pieces import part_of

    text = "안녕하세요, 저는 학생입니다."
    at = open_page("explorer", lang="en", text=text, merge_chars="true")
    ok(at)
    assert at.toggle(key="merge_chars").value and not at.toggle(key="merge").value
    ticks = [
        str(tick)
        for f in figures(at)
        for tick in (f["layout"].get("xaxis", {}).get("ticktext") or [])
    ]
    assert ticks and not any(part_of(tick) for tick in ticks)  # no "학 · 2/3" left
    bare = [tick.lstrip("␣") for tick in ticks]
    assert "학" in bare and "학생입니다." not in bare  # characters, the words still apart
