"""Gemma 3 folders run in our own decoder, equal to transformers' Gemma3ForCausalLM.

A tiny random Gemma 3 text model (tests/hf_folders.build_gemma3_folder: 4 layers, three with
a sliding window of 8 and a global one between, QK-norm, four norms a layer, a score scale
that is not 1/√d_k) is saved with save_pretrained and read through ``load(folder)``; every
sequence here is longer than the window. Each of the layout's pieces is also held alone.
"""

import math
import socket

import pytest
import torch
import torch.nn.functional as F

from model import load
from model.analysis.circuit import output_matrix, run
from model.analysis.heads import scan_heads
from model.analysis.lens import logit_lens
from model.analysis.patching import patch
from model.analysis.walkthrough import walkthrough
from model.attention import _fast_attention, scaled_dot_product_attention
from model.config import TransformerConfig
from model.hf.decoder import transformers_causal_lm
from model.hf.fallback import HFLabModel
from model.layers import FeedForward, RMSNorm
from model.masks import MaskSpec, within_window
from model.positional import rope_table, rotate
from model.transformer import Embeddings, scale_in
from tests.hf_folders import GEMMA3_LAYER_TYPES, build_gemma3_folder
from tests.lens_check import assert_lens_ends_in_the_models_output

TEXT = "the cat sat on the mat"
TARGET = " and a dog ran in the park every day, attention is all you need"
WINDOW = 8
SLIDING = [i for i, kind in enumerate(GEMMA3_LAYER_TYPES) if kind == "sliding_attention"]
GLOBAL = GEMMA3_LAYER_TYPES.index("full_attention")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return build_gemma3_folder(tmp_path_factory.mktemp("gemma3"))


@pytest.fixture(scope="module")
def models(folder):
    """(our LabModel, transformers' eager Gemma3ForCausalLM) on the same files."""
    return load(folder, device="cpu"), transformers_causal_lm(folder)


@pytest.fixture(scope="module")
def ids(models):
    lm, _ = models
    ids = lm.encode(TEXT).ids + lm.tgt_tokenizer.encode_target(TARGET, 64).ids
    assert len(ids) > 3 * WINDOW  # well past the window
    return torch.tensor([ids])


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a network connection was attempted")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def close(ours: torch.Tensor, theirs: torch.Tensor, tol: float = 1e-4) -> None:
    torch.testing.assert_close(ours, theirs, atol=tol, rtol=tol)


def test_logits_and_every_layers_attention_equal_transformers_past_the_window(models, ids):
    lm, ref = models
    assert lm.info["engine"] == "attention-lab" and lm.info["model_type"] == "gemma3_text"
    trace = lm.trace(TEXT, target=TARGET, stages=True)
    n = ids.shape[1]
    assert trace.tgt_tokens == lm.tgt_tokenizer.tokens(ids[0].tolist())
    with torch.inference_mode():
        theirs = ref(input_ids=ids, output_attentions=True)
        fast = lm.network(ids).logits  # the fused path: sliding layers banded
    close(fast[0], theirs.logits[0])
    maps = trace.attention["decoder"]  # [layers, heads, n, n] from the traced record
    assert maps.shape == (4, 4, n, n)
    close(maps, torch.stack(theirs.attentions)[:, 0])
    close(trace.stages["decoder"]["weights"], maps)
    # A sliding layer gives no weight to a key WINDOW or more positions back; the global
    # layer does, and the mask the trace reports for each layer says the same.
    q_pos, k_pos = torch.arange(n)[:, None], torch.arange(n)[None, :]
    beyond = k_pos <= q_pos - WINDOW
    for layer in SLIDING:
        assert maps[layer][:, beyond].abs().max() == 0
        assert not trace.mask("decoder", layer=layer)[beyond].any()
    assert maps[GLOBAL][:, beyond].min() > 0
    assert trace.mask("decoder", layer=GLOBAL)[beyond].all()
    assert trace.mask("decoder")[beyond].all()  # without a layer: the widest (global)
    counts = trace.allowed_counts("decoder", [0, n], [0, n], layer=SLIDING[0])
    assert int(counts) == int(trace.mask("decoder", layer=SLIDING[0]).sum())
    # The pass's top-k predictions are transformers' probabilities.
    probs = torch.softmax(theirs.logits[0], -1)
    close(trace.predictions.top_probs, probs.topk(trace.predictions.top_ids.shape[1]).values)


def test_the_layout_is_read_from_the_config(models):
    lm, _ = models
    cfg, net = lm.config, lm.network
    assert (cfg.ffn, cfg.norm, cfg.rms_unit_offset, cfg.sandwich_norm, cfg.qk_norm) == (
        "geglu",
        "rms",
        True,
        True,
        True,
    )
    assert [cfg.layer_window(i) for i in range(4)] == [8, 8, None, 8]
    assert [layer.self_attn.rope_base for layer in net.decoder.layers] == [
        10_000.0,
        10_000.0,
        1_000_000.0,
        10_000.0,
    ]
    assert cfg.attention_scale == pytest.approx(24**-0.5)  # query_pre_attn_scalar, not d_k
    assert (cfg.n_heads, cfg.kv_heads, cfg.d_k, cfg.d_model) == (4, 1, 16, 64)
    assert cfg.scale_embedding and net.head.weight is net.embed.token.weight
    assert lm.max_tokens == 128  # the window is a mask, not a limit
    # the cache a pattern of three sliding layers and one global needs, against all-global
    per_position = 2 * 1 * 16  # K and V, one key/value head of 16
    assert cfg.kv_cache_values(100) == per_position * (3 * 8 + 100)
    assert cfg.kv_cache_values(100, all_global=True) == per_position * 4 * 100
    assert cfg.kv_cache_values(5) == cfg.kv_cache_values(5, all_global=True)


def test_cached_greedy_decoding_equals_recomputation_and_generate(models):
    lm, ref = models
    steps = list(lm.decode(TEXT, max_new_tokens=24))
    prompt = lm.encode(TEXT).ids
    assert len(prompt) + len(steps) > 2 * WINDOW  # the cache outgrows the window
    seq = list(prompt)
    with torch.inference_mode():
        for step in steps:  # no cache: the whole sequence again for every token
            logits = lm.network(torch.tensor([seq])).logits[0, -1]
            assert int(logits.argmax()) == step.token_id
            close(step.logits, logits)
            seq.append(step.token_id)
        generated = ref.generate(
            input_ids=torch.tensor([prompt]),
            attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
            max_new_tokens=len(steps),
            do_sample=False,
            pad_token_id=0,
        )[0, len(prompt) :]
    assert [s.token_id for s in steps] == generated.tolist()[: len(steps)]
    # Each step's attention row is that query's row of one full traced pass.
    trace = lm.trace(TEXT, max_new_tokens=24)
    for k, step in enumerate(steps):
        q = len(prompt) - 1 + k
        close(step.attention["decoder"], trace.attention["decoder"][:, :, q, : q + 1])


def test_a_sliding_layers_cache_keeps_only_its_window_and_greedy_tokens_do_not_change(models):
    """As transformers' hybrid cache: a local layer keeps its last WINDOW keys and values,
    a global layer every one; the cache's bytes are window_cache_bytes', and the greedy
    tokens past the window are those of the uncached recomputation."""
    from model.analysis.concepts import cache_nbytes, window_cache_bytes
    from model.runtime.decoding import greedy_decode

    lm, _ = models
    prompt = torch.tensor([lm.encode(TEXT).ids])
    cache = lm.network.new_cache()
    n_new = 3 * WINDOW
    cached, _ = greedy_decode(lm.network, prompt, 0, -1, n_new, cache=cache)
    recomputed, _ = greedy_decode(lm.network, prompt, 0, -1, n_new, use_cache=False)
    assert cached.tolist() == recomputed.tolist()
    # every token but the last generated one has been fed through the cache
    n_tokens = prompt.shape[1] + n_new - 1
    held = [layer["self"]["k"].shape[2] for layer in cache["layers"]]
    assert held == [WINDOW if i in SLIDING else n_tokens for i in range(len(held))]
    cfg = lm.network.config
    assert cache_nbytes(cache)["self"] == window_cache_bytes(cfg, n_tokens)["windowed"]
    assert cache_nbytes(cache)["self"] < window_cache_bytes(cfg, n_tokens)["all_global"]


def test_block_sums_and_row_statistics_of_a_long_pass_equal_those_of_the_maps(models, ids):
    lm, _ = models
    n = ids.shape[1]
    with torch.inference_mode():
        out = lm.network(ids, trace=True, summed_blocks=4)
    trace = out.trace(0, [], [str(i) for i in range(n)])
    record = trace.records["decoder"]
    assert record.block_sums is not None
    for layer in (SLIDING[0], GLOBAL):
        maps = trace.attention_heads("decoder", layer)  # [H, n, n]
        overview = trace.attention_overviews("decoder", layer, size=4, reduce="mean")
        pooled = torch.stack(
            [
                torch.stack(
                    [
                        maps[:, a:b, c:d].mean((-2, -1))
                        for c, d in zip(overview.col_edges, overview.col_edges[1:])
                    ],
                    -1,
                )
                for a, b in zip(overview.row_edges, overview.row_edges[1:])
            ],
            -2,
        )
        close(overview.values, pooled, 1e-5)
        stats = trace.row_statistics("decoder", layer)
        entropy = -(maps * maps.clamp_min(1e-30).log()).sum(-1)
        close(stats.entropy, entropy, 1e-4)
        close(stats.key_position, (maps * torch.arange(n)).sum(-1), 1e-3)
        close(stats.first_key, maps[..., 0], 1e-5)


def test_a_sliding_window_layer_computes_only_the_keys_in_its_window(monkeypatch):
    torch.manual_seed(1)
    h, g, n, d, window = 4, 2, 40, 8, 6
    q, k, v = torch.randn(1, h, n, d), torch.randn(1, g, n, d), torch.randn(1, g, n, d)
    valid = torch.ones(1, n, dtype=torch.bool)
    valid[0, 3] = False  # a padded key inside some windows
    spec = MaskSpec(n, n, None, valid, True, 0, window)
    widths = []
    real = F.scaled_dot_product_attention

    def counting(q_, k_, *args, **kwargs):
        widths.append(k_.shape[-2])
        return real(q_, k_, *args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", counting)
    out = _fast_attention(q, k, v, spec, 0.0, scale=0.3)
    monkeypatch.undo()
    assert widths and max(widths) <= 2 * window - 1
    dense = spec.dense()
    groups = h // g
    kk, vv = k.repeat_interleave(groups, 1), v.repeat_interleave(groups, 1)
    expected, _ = scaled_dot_product_attention(q, kk, vv, dense, scale=0.3)
    close(out, expected, 1e-5)
    # One new query against a cache of n keys: only its window's keys are read.
    step = MaskSpec(1, n, None, None, True, n - 1, window)
    widths.clear()
    monkeypatch.setattr(F, "scaled_dot_product_attention", counting)
    one = _fast_attention(q[..., -1:, :], k, v, step, 0.0)
    monkeypatch.undo()
    assert widths == [window]
    expected, _ = scaled_dot_product_attention(q[..., -1:, :], kk, vv, step.dense())
    close(one, expected, 1e-5)


def test_a_dense_mask_narrowed_to_a_window_equals_the_windowed_rule():
    spec = MaskSpec(5, 12, None, None, True, 7)  # 5 new queries after 7 cached keys
    narrowed = within_window(spec.dense(), 4)
    assert torch.equal(narrowed, within_window(spec, 4).dense())
    assert within_window(spec, None) is spec
    assert within_window(MaskSpec(3, 3, causal=True, window=2), 4).window == 2


def test_rmsnorm_with_unit_offset_is_one_plus_w_times_x_over_its_rms():
    from transformers.models.gemma3.modeling_gemma3 import Gemma3RMSNorm

    torch.manual_seed(2)
    ours, theirs = RMSNorm(16, 1e-6, unit_offset=True), Gemma3RMSNorm(16, eps=1e-6)
    assert torch.equal(ours.weight, torch.zeros(16))  # a fresh norm: gain 1
    with torch.no_grad():
        ours.weight.normal_()
        theirs.weight.copy_(ours.weight)
    x = torch.randn(3, 5, 16) * 4
    formula = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * (1 + ours.weight)
    close(ours(x), formula, 1e-5)
    torch.testing.assert_close(ours.gain, 1 + ours.weight)
    for dtype in (torch.float32, torch.bfloat16):  # the gain in float32, then the cast
        xs = x.to(dtype)
        assert torch.equal(ours.to(dtype)(xs), theirs.to(dtype)(xs))


def test_geglu_is_w2_of_gelu_tanh_gate_times_up():
    torch.manual_seed(3)
    ffn = FeedForward(8, 12, 0.0, "geglu", bias=False)
    x = torch.randn(2, 3, 8)
    gate, up = x @ ffn.linear1.weight.T, x @ ffn.up.weight.T
    gelu_tanh = 0.5 * gate * (1 + torch.tanh(math.sqrt(2 / math.pi) * (gate + 0.044715 * gate**3)))
    close(ffn(x), (gelu_tanh * up) @ ffn.linear2.weight.T, 1e-5)


def test_embeddings_are_scaled_by_sqrt_d_model_in_their_own_dtype():
    from transformers.models.gemma3.modeling_gemma3 import Gemma3TextScaledWordEmbedding

    assert scale_in(math.sqrt(640), torch.bfloat16) == 25.25  # not 25.298
    assert scale_in(math.sqrt(640), torch.float32) == pytest.approx(math.sqrt(640), rel=1e-7)
    cfg = TransformerConfig(
        kind="decoder", d_model=640, n_heads=4, tgt_vocab_size=32, positions="none", dropout=0.0
    )
    ours = Embeddings(32, cfg).to(torch.bfloat16)
    theirs = Gemma3TextScaledWordEmbedding(32, 640, 0, embed_scale=640**0.5).to(torch.bfloat16)
    with torch.no_grad():
        theirs.weight.copy_(ours.token.weight)
    ids = torch.arange(32)[None]
    assert torch.equal(ours(ids), theirs(ids))


def test_qk_norm_stages_hold_queries_and_keys_before_and_after_the_norm(models):
    lm, _ = models
    trace = lm.trace(TEXT, target=TARGET, stages=True)
    assert trace.has_norm_stages("decoder")
    assert not lm.trace(TEXT, target=TARGET).has_norm_stages("decoder")  # only when asked
    n = len(trace.tgt_tokens)
    for layer in (SLIDING[0], GLOBAL):
        attn = lm.network.decoder.layers[layer].self_attn
        for head in (0, 3):  # both read the one key/value head
            st = trace.norm_stages("decoder", layer, head)
            assert st["q_before"].shape == st["q_after"].shape == (n, 16)
            with torch.no_grad():
                close(st["q_after"], attn.q_norm(st["q_before"]), 1e-6)
                close(st["k_after"], attn.k_norm(st["k_before"]), 1e-6)
            # the record's queries are the normed ones turned by this layer's rotary base
            cos, sin = rope_table.__wrapped__(0, n, 16, attn.rope_base, "cpu", torch.float32)
            record_q = trace.records["decoder"].q[layer][head].float()
            close(record_q, rotate(st["q_after"], cos, sin, "half"), 1e-5)


def test_the_runner_head_scan_patching_lens_and_walkthrough_read_gemma(models, ids):
    lm, _ = models
    r = run(lm.network, ids, decompose=True)
    with torch.inference_mode():
        close(r.logits, lm.network(ids).logits)
    # The final stream as a sum of parts, through every norm (gain 1 + w), gives each logit.
    close(sum(r.parts.values()) @ output_matrix(lm.network).T, r.logits, 1e-3)
    # The runner's maps are each layer's own: a sliding layer's end at its window.
    trace = lm.trace(TEXT, target=TARGET)
    for layer in (SLIDING[0], GLOBAL):
        close(r.attention["decoder"][layer][0], trace.attention["decoder"][layer], 1e-5)
    scan = scan_heads(lm, length=12, n=2)
    assert scan.scores["prefix_matching"].shape == (4, 4)
    tail = " and a dog ran in the park"  # past the window
    patched = patch(lm, "the cat sat on the mat" + tail, "the mat sat on the cat" + tail)
    assert patched.by_position.shape[0] == 5  # the embeddings and after each of 4 layers
    assert patched.by_position.shape[1] > WINDOW
    lens = logit_lens(lm, TEXT + TARGET, k=3)
    assert_lens_ends_in_the_models_output(lm, lens, TEXT + TARGET)
    for layer in (SLIDING[0], GLOBAL):
        wt = walkthrough(lm, TEXT + TARGET, layer=layer)
        assert wt.agrees(), (layer, wt.weights_error(), wt.out_error())


def test_a_gemma_config_our_engine_cannot_run_falls_back_with_the_reason(tmp_path):
    folder = build_gemma3_folder(tmp_path / "capped", attn_logit_softcapping=50.0)
    lm = load(folder, device="cpu")
    assert isinstance(lm, HFLabModel)
    assert "soft-caps its logits (attn_logit_softcapping)" in lm.info["note"]


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"layer_types": ["full_attention"]}, "layer_types names 1 layers"),
        ({"layer_types": ["local", "full_attention"]}, "layer_types must be"),
        ({"layer_types": ["sliding_attention"] * 2}, "need a sliding_window"),
        ({"sandwich_norm": True, "norm_placement": "post"}, "needs norm_placement='pre'"),
        ({"query_pre_attn_scalar": 0}, "query_pre_attn_scalar must be positive"),
    ],
)
def test_a_bad_gemma_switch_is_refused_with_a_message(fields, message):
    with pytest.raises(ValueError, match=message):
        TransformerConfig(kind="decoder", **fields)
