"""Positions since 2017 (RoPE, ALiBi, learned, none) and grouped-query attention, in the
same Transformer: each trains, each decodes with the key/value cache exactly as without it."""

import math

import pytest
import torch
import torch.nn.functional as F

from model import TransformerConfig, build_model
from model.attention import AttentionConfig, MultiHeadAttention, scaled_dot_product_attention
from model.masks import causal_mask
from model.positional import SCHEMES, alibi_bias, alibi_slopes, apply_rope, rope_frequencies
from model.runtime.decoding import greedy_decode
from tests.tolerance import assert_close_f32

KINDS = ["encoder-decoder", "encoder", "decoder"]


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny tensors: one thread is fastest, and two fight on a shared 2-core machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


KV_HEADS = [4, 2, 1]  # MHA, GQA, MQA for n_heads = 4


def make(kind, positions, n_kv_heads=None, seed=0, **kw):
    torch.manual_seed(seed)
    cfg = TransformerConfig(
        kind=kind,
        positions=positions,
        n_kv_heads=n_kv_heads,
        dropout=0.0,
        d_model=32,
        n_heads=4,
        d_ff=64,
        src_vocab_size=20,
        tgt_vocab_size=20,
        max_len=48,
        **kw,
    )
    return build_model(cfg).eval()


SRC = torch.tensor([[5, 6, 7, 8, 9], [5, 6, 7, 0, 0]])
TGT = torch.tensor([[1, 10, 11, 12], [1, 10, 0, 0]])


def run(model, **kw):
    kind = model.config.kind
    if kind == "encoder-decoder":
        return model(SRC, TGT, **kw)
    return model(SRC if kind == "encoder" else TGT, **kw)


# --- every scheme: trains, fast == traced, cache == recompute --------------------------------


@pytest.mark.parametrize("positions", SCHEMES)
@pytest.mark.parametrize("kind", ["encoder-decoder", "decoder"])
def test_every_scheme_trains_a_few_steps_and_its_loss_falls(kind, positions):
    model = make(kind, positions).train()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(3, 20, (16, 6), generator=gen)
    inputs = torch.cat([torch.ones(16, 1, dtype=torch.long), x], dim=1)  # <bos> x
    losses = []
    for _ in range(12):
        out = model(x, inputs[:, :-1]) if kind == "encoder-decoder" else model(inputs[:, :-1])
        loss = F.cross_entropy(out.logits.flatten(0, 1), x.flatten())  # copy (shifted) task
        opt.zero_grad()
        loss.backward()
        assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0], losses


@pytest.mark.parametrize("n_kv_heads", KV_HEADS)
@pytest.mark.parametrize("positions", SCHEMES)
@pytest.mark.parametrize("kind", KINDS)
def test_fast_path_equals_traced_path_for_every_scheme(kind, positions, n_kv_heads):
    model = make(kind, positions, n_kv_heads)
    with torch.no_grad():
        fast, traced = run(model), run(model, trace=True)
    logits_fast = fast.logits
    torch.testing.assert_close(logits_fast, traced.logits, atol=1e-5, rtol=1e-5)
    for weights in traced.record.attention.values():
        for w in weights:
            assert w.shape[1] == 4, "weights are per query head, whatever n_kv_heads"
            assert torch.isfinite(w).all()


@pytest.mark.parametrize("n_kv_heads", KV_HEADS)
@pytest.mark.parametrize("positions", SCHEMES)
@pytest.mark.parametrize("kind", ["encoder-decoder", "decoder"])
def test_token_by_token_with_the_cache_equals_one_full_pass(kind, positions, n_kv_heads):
    model = make(kind, positions, n_kv_heads)
    tgt = torch.tensor([[1, 12, 13, 14, 15, 16, 17, 18]])
    with torch.no_grad():
        if kind == "encoder-decoder":
            src = SRC[:1]
            full = model(src, tgt).logits
            memory, valid = model.encode(src)

            def step(ids, cache):
                return model.decode(ids, memory, valid, cache=cache)
        else:
            full = model(tgt).logits

            def step(ids, cache):
                return model.decode(ids, cache=cache)

        cache = model.new_cache()
        parts = [step(tgt[:, i : i + 1], cache) for i in range(tgt.shape[1])]
    torch.testing.assert_close(torch.cat(parts, dim=1), full, atol=1e-5, rtol=1e-5)
    k = cache["layers"][0]["self"]["k"]
    assert k.shape == (1, n_kv_heads, tgt.shape[1], 8), "the cache holds only the kv heads"


@pytest.mark.parametrize("positions", SCHEMES)
@pytest.mark.parametrize("kind", ["encoder-decoder", "decoder"])
def test_every_scheme_decodes_greedily_with_the_cache_as_without(kind, positions):
    model = make(kind, positions, n_kv_heads=2, seed=3)
    ids = SRC if kind == "encoder-decoder" else SRC[:1]
    cached, cached_logits = greedy_decode(model, ids, 1, 2, 20, use_cache=True)
    full, full_logits = greedy_decode(model, ids, 1, 2, 20, use_cache=False)
    assert cached.shape[1] > 3
    assert torch.equal(cached, full)
    torch.testing.assert_close(cached_logits, full_logits, atol=1e-5, rtol=1e-5)


def test_relative_schemes_add_nothing_to_the_embeddings_and_keep_no_table():
    for positions in ("rope", "alibi", "none"):
        model = make("decoder", positions)
        assert model.embed.position is None
        assert not any("position" in name for name, _ in model.named_parameters())
    assert make("decoder", "learned").embed.position is not None


def test_without_positions_an_encoder_cannot_tell_order_but_rope_and_alibi_can():
    words, shuffled = torch.tensor([[3, 4, 5, 6]]), torch.tensor([[6, 4, 3, 5]])
    perm = [3, 1, 0, 2]  # shuffled[i] = words[perm[i]]
    for positions, blind in (("none", True), ("rope", False), ("alibi", False)):
        model = make("encoder", positions)
        with torch.no_grad():
            a, b = model(words).logits[0], model(shuffled).logits[0]
        same = torch.allclose(b, a[perm], atol=1e-5)
        assert same == blind, positions


# --- RoPE ----------------------------------------------------------------------------------------


def test_rope_q_dot_k_depends_only_on_relative_distance():
    torch.manual_seed(0)
    d_k = 16
    q, k = torch.randn(d_k, dtype=torch.float64), torch.randn(d_k, dtype=torch.float64)

    def dot(p, s):
        rq = apply_rope(q[None], torch.tensor([p]))[0]
        rk = apply_rope(k[None], torch.tensor([s]))[0]
        return float(rq @ rk)

    for distance in (-7, -1, 0, 3, 20):
        values = [dot(p, p - distance) for p in range(25, 90, 7)]
        assert max(values) - min(values) < 1e-9, (distance, values)
    assert abs(dot(30, 27) - dot(30, 20)) > 1e-3, "different distances give different scores"


def test_rope_is_a_rotation_of_each_pair_by_position_times_its_frequency():
    torch.manual_seed(1)
    x = torch.randn(5, 8, dtype=torch.float64)
    pos = torch.arange(5)
    out = apply_rope(x, pos)
    torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1))  # lengths kept
    theta = rope_frequencies(8)
    torch.testing.assert_close(
        theta, torch.tensor([10000 ** (-2 * i / 8) for i in range(4)], dtype=torch.float64)
    )
    p, i = 3, 2
    angle = p * theta[i]
    x0, x1 = x[p, 2 * i], x[p, 2 * i + 1]
    expected = torch.stack(
        [
            x0 * torch.cos(angle) - x1 * torch.sin(angle),
            x0 * torch.sin(angle) + x1 * torch.cos(angle),
        ]
    )
    torch.testing.assert_close(out[p, 2 * i : 2 * i + 2], expected)
    torch.testing.assert_close(out[0], x[0])  # position 0: no rotation


def test_rope_needs_an_even_head_width():
    with pytest.raises(ValueError, match="even d_k"):
        TransformerConfig(d_model=12, n_heads=4, positions="rope")


# --- ALiBi ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 4, 8, 16])
def test_alibi_slopes_for_a_power_of_two_are_two_to_the_minus_8i_over_n(n):
    expected = torch.tensor([2 ** (-8 * i / n) for i in range(1, n + 1)])
    torch.testing.assert_close(alibi_slopes(n), expected)


def test_alibi_slopes_otherwise_follow_the_papers_rule():
    # 6 heads: the 4 slopes of n=4, then every other slope of n=8 (2^-1, 2^-3).
    torch.testing.assert_close(
        alibi_slopes(6), torch.tensor([2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3])
    )
    # 12 heads: the 8 slopes of n=8, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5 from n=16.
    eight = [2 ** -(i + 1) for i in range(8)]
    torch.testing.assert_close(
        alibi_slopes(12), torch.tensor(eight + [2**-0.5, 2**-1.5, 2**-2.5, 2**-3.5])
    )


def test_alibi_bias_equals_minus_slope_times_distance():
    q_pos, k_pos = torch.arange(3, 6), torch.arange(6)
    bias = alibi_bias(4, q_pos, k_pos)
    slopes = alibi_slopes(4)
    assert bias.shape == (4, 3, 6)
    for h in range(4):
        for i, qp in enumerate(q_pos.tolist()):
            for j, kp in enumerate(k_pos.tolist()):
                assert bias[h, i, j].item() == pytest.approx(-slopes[h].item() * abs(qp - kp))


def test_alibi_in_a_cached_step_uses_absolute_query_and_key_positions():
    torch.manual_seed(0)
    mha = MultiHeadAttention(AttentionConfig(16, 4, positions="alibi")).eval()
    x = torch.randn(1, 7, 16)
    cache: dict = {}
    with torch.no_grad():
        mha(x[:, :5], x[:, :5], x[:, :5], causal_mask(5), cache=cache)
        st = mha(x[:, 5:], x[:, 5:], x[:, 5:], None, cache=cache, return_stages=True).stages
    # The two new queries stand at positions 5 and 6, the keys at 0..6.
    added = st.scaled - st.scores / math.sqrt(4)
    torch.testing.assert_close(added[0], alibi_bias(4, torch.arange(5, 7), torch.arange(7)))


# --- grouped-query attention ---------------------------------------------------------------------


def test_gqa_with_as_many_kv_heads_as_heads_is_the_ungrouped_path():
    torch.manual_seed(0)
    plain = MultiHeadAttention(AttentionConfig(32, 4)).eval()
    grouped = MultiHeadAttention(AttentionConfig(32, 4, n_kv_heads=4)).eval()
    grouped.load_state_dict(plain.state_dict())  # same parameter names and shapes
    x = torch.randn(2, 6, 32)
    mask = causal_mask(6)
    for need in (True, False):
        a, wa, _, _ = plain(x, x, x, mask, need_weights=need)
        b, wb, _, _ = grouped(x, x, x, mask, need_weights=need)
        assert_close_f32(a, b, atol=1e-6)
        if need:
            assert_close_f32(wa, wb, atol=1e-6)
    # ... and the same holds for whole models: n_kv_heads=n_heads builds the default model.
    assert_close_f32(
        run(make("encoder-decoder", "sinusoidal", n_kv_heads=4)).logits,
        run(make("encoder-decoder", "sinusoidal")).logits,
        atol=1e-6,
    )


def test_gqa_with_as_many_kv_heads_as_heads_is_the_papers_formula_head_by_head():
    """Against an independent reading of the paper, not our own code: head_i =
    softmax(Q W_Q^i (K W_K^i)ᵀ / √d_k) V W_V^i with column blocks i·d_k .. (i+1)·d_k, then
    Concat(head_1..head_h) W_O."""
    torch.manual_seed(1)
    d_model, h, d_k = 32, 4, 8
    mha = MultiHeadAttention(AttentionConfig(d_model, h, n_kv_heads=h)).eval()
    x, memory = torch.randn(2, 5, d_model), torch.randn(2, 7, d_model)
    mask = torch.rand(2, 1, 5, 7) > 0.3
    mask[..., 0] = True  # every query may attend something
    with torch.no_grad():
        out, weights, _, _ = mha(x, memory, memory, mask)
        q = x @ mha.q_proj.weight.T + mha.q_proj.bias
        k = memory @ mha.k_proj.weight.T + mha.k_proj.bias
        v = memory @ mha.v_proj.weight.T + mha.v_proj.bias
        heads, ref_weights = [], []
        for i in range(h):
            cols = slice(i * d_k, (i + 1) * d_k)
            scores = q[..., cols] @ k[..., cols].transpose(-1, -2) / math.sqrt(d_k)
            w = torch.softmax(scores.masked_fill(~mask[:, 0], float("-inf")), dim=-1)
            heads.append(w @ v[..., cols])
            ref_weights.append(w)
        ref = torch.cat(heads, dim=-1) @ mha.out_proj.weight.T + mha.out_proj.bias
    assert_close_f32(out, ref, atol=1e-6)
    assert_close_f32(weights, torch.stack(ref_weights, dim=1), atol=1e-6)
    assert weights.shape == (2, h, 5, 7)


@pytest.mark.parametrize("n_kv_heads", [1, 2])
def test_gqa_equals_full_attention_with_each_kv_head_copied_to_its_group(n_kv_heads):
    torch.manual_seed(0)
    gqa = MultiHeadAttention(AttentionConfig(32, 4, n_kv_heads=n_kv_heads)).eval()
    full = MultiHeadAttention(AttentionConfig(32, 4)).eval()
    groups, d_k = 4 // n_kv_heads, 8
    with torch.no_grad():
        full.q_proj.load_state_dict(gqa.q_proj.state_dict())
        full.out_proj.load_state_dict(gqa.out_proj.state_dict())
        for name in ("k_proj", "v_proj"):
            src, dst = getattr(gqa, name), getattr(full, name)
            w = src.weight.view(n_kv_heads, d_k, 32).repeat_interleave(groups, 0)
            dst.weight.copy_(w.reshape(32, 32))
            dst.bias.copy_(src.bias.view(n_kv_heads, d_k).repeat_interleave(groups, 0).flatten())
    x = torch.randn(2, 5, 32)
    a, wa, _, _ = gqa(x, x, x)
    b, wb, _, _ = full(x, x, x)
    torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(wa, wb, atol=1e-6, rtol=1e-5)
    assert gqa.k_proj.weight.shape == (n_kv_heads * d_k, 32)


@pytest.mark.parametrize("n_kv_heads", [1, 2, 4])
def test_weights_are_per_query_head_for_any_number_of_kv_heads(n_kv_heads):
    mha = MultiHeadAttention(AttentionConfig(32, 4, n_kv_heads=n_kv_heads)).eval()
    query, memory = torch.randn(3, 4, 32), torch.randn(3, 9, 32)
    out, w, _, _ = mha(query, memory, memory)
    assert out.shape == (3, 4, 32) and w.shape == (3, 4, 4, 9)
    torch.testing.assert_close(w.sum(-1), torch.ones(3, 4, 4))


def test_fast_path_equals_traced_path_with_gqa_rope_alibi_and_fully_masked_rows():
    valid = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    mask = valid[:, None, None, :] & valid[:, None, :, None] & causal_mask(5)
    x = torch.randn(2, 5, 16)
    for positions in ("rope", "alibi"):
        mha = MultiHeadAttention(AttentionConfig(16, 4, n_kv_heads=2, positions=positions)).eval()
        traced = mha(x, x, x, mask).output
        fast = mha(x, x, x, mask, need_weights=False).output
        torch.testing.assert_close(traced, fast, atol=1e-6, rtol=1e-5)
        assert torch.isfinite(fast).all()
        assert torch.all(fast[0, 3:] == mha.out_proj.bias)  # padded rows: zero heads


def test_config_reads_old_files_and_refuses_bad_new_fields():
    old = TransformerConfig(d_model=32, n_heads=4).to_dict()
    del old["n_kv_heads"]
    cfg = TransformerConfig.from_dict(old)
    assert cfg.positions == "sinusoidal" and cfg.n_kv_heads is None and cfg.kv_heads == 4
    assert TransformerConfig(n_heads=4, n_kv_heads=1).kv_heads == 1
    with pytest.raises(ValueError, match="n_kv_heads=3"):
        TransformerConfig(d_model=32, n_heads=4, n_kv_heads=3)
    with pytest.raises(ValueError, match="n_kv_heads=0"):
        TransformerConfig(d_model=32, n_heads=4, n_kv_heads=0)
    with pytest.raises(ValueError, match="positions must be one of"):
        TransformerConfig(positions="relative")
    with pytest.raises(ValueError, match="multiple of n_kv_heads"):
        MultiHeadAttention(AttentionConfig(32, 4, n_kv_heads=3))


def test_sdpa_bias_is_added_to_the_scaled_scores():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 5, 8) for _ in range(3))
    bias = alibi_bias(4, torch.arange(5), torch.arange(5))
    out, w = scaled_dot_product_attention(q, k, v, causal_mask(5), bias=bias)
    ref = F.scaled_dot_product_attention(
        q, k, v, attn_mask=bias.masked_fill(~causal_mask(5), float("-inf"))
    )
    torch.testing.assert_close(out, ref, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize(("positions", "n_kv_heads"), [("rope", 1), ("alibi", 2), ("none", 4)])
def test_the_step_by_step_walkthrough_agrees_for_new_schemes_and_kv_heads(positions, n_kv_heads):
    from model import LabModel
    from model.analysis.walkthrough import walkthrough
    from model.runtime.types import Encoded

    class Words:
        pad_id, bos_id, eos_id, special_tokens = 0, None, None, frozenset()

        def encode(self, text, max_len):
            words = text.split()[:max_len]
            return Encoded([1 + (hash(w) % 15) for w in words], words)

        def tokens(self, ids):
            return [str(i) for i in ids]

    lm = LabModel("toy", make("decoder", positions, n_kv_heads), None, Words(), device="cpu")
    wt = walkthrough(lm, "a b c d e", 1)
    assert wt.q.shape == wt.k.shape == (4, 5, 8)
    assert wt.agrees()
