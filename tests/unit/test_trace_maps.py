"""Views read maps through Trace.attention_map / attention_overview (DESIGN: the cost of a
picture follows what is drawn). These hold the two against the model's own stacked weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from model import load
from model.trace import block_edges
from tests.tolerance import assert_close_f32


@pytest.fixture(scope="module")
def trace():
    return load("en2ko").trace("I study math at school every day")


@pytest.mark.parametrize("kind", ["encoder", "decoder", "cross"])
def test_attention_map_is_the_models_own_head_and_window(trace, kind):
    full = trace.attention[kind]
    layers, heads = full.shape[:2]
    for layer in range(layers):
        for head in range(heads):
            assert torch.equal(trace.attention_map(kind, layer, head), full[layer, head])
    window = trace.attention_map(kind, 1, 0, rows=slice(1, 4), cols=[0, 2])
    # A causal window's rows are computed over the keys they may see only: the same
    # softmax, another summation order (float32 rounding)
    assert_close_f32(window, full[1, 0, 1:4][:, [0, 2]], 1e-6)


@pytest.mark.parametrize("reduce", ["max", "mean"])
@pytest.mark.parametrize("size", [1, 2, 3, 1024])
def test_attention_overview_equals_pooling_the_full_map(trace, reduce, size):
    full = trace.attention["cross"][0, 1]
    ov = trace.attention_overview("cross", 0, 1, size=size, reduce=reduce)
    assert ov.row_edges[0] == 0 and ov.row_edges[-1] == full.shape[0]
    assert ov.col_edges[0] == 0 and ov.col_edges[-1] == full.shape[1]
    for i, (a, b) in enumerate(zip(ov.row_edges[:-1], ov.row_edges[1:])):
        for j, (c, d) in enumerate(zip(ov.col_edges[:-1], ov.col_edges[1:])):
            block = full[a:b, c:d]
            want = block.max() if reduce == "max" else block.mean()
            assert ov.values[i, j] == pytest.approx(want.item(), rel=1e-6, abs=1e-7)


def test_block_edges_cover_every_position_once_in_at_most_size_blocks():
    for n in (1, 5, 1000, 4096):
        for size in (1, 7, 1024):
            edges = block_edges(n, size)
            assert edges[0] == 0 and edges[-1] == n
            assert len(edges) - 1 == min(n, size)
            assert all(b > a for a, b in zip(edges[:-1], edges[1:]))


def test_overview_refuses_an_unknown_reduction(trace):
    with pytest.raises(ValueError, match="max"):
        trace.attention_overview("encoder", 0, 0, reduce="median")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_predictions_in_bands_equal_one_softmax_over_every_position(dtype):
    from model.trace import TOP_K, Predictions

    torch.manual_seed(0)
    logits = (torch.randn(3000, 6000) * 3).to(dtype)  # 18M cells: two bands on a CPU
    ids = torch.randint(0, 6000, (3000,))
    pred = Predictions.from_logits(logits, ids.tolist())
    probs = torch.softmax(logits.float(), dim=-1)
    top = probs.topk(TOP_K, dim=-1)
    assert torch.equal(pred.top_ids, top.indices)
    torch.testing.assert_close(pred.top_probs, top.values, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(pred.next_probs, probs[:-1].gather(1, ids[1:, None])[:, 0])
    assert pred.top_probs.dtype == torch.float32 and pred.next_probs.shape == (2999,)


def test_top_k_by_chunks_finds_the_same_k_largest_as_torch_topk():
    """The GPU's way (the best chunks' maxima first), run here by asking for it: same values,
    best first, for a vocabulary that is and one that is not a multiple of the chunk width,
    with ties, -inf and a winner alone in the short last chunk."""
    from model.trace import top_k

    torch.manual_seed(1)
    for vocab in (32000, 6007, 1300):
        x = (torch.randn(300, vocab) * 3).to(torch.bfloat16)  # bfloat16: many ties
        x[0, -1] = 100.0  # the largest in the last, shorter chunk
        x[1, :200] = float("-inf")
        x[2] = 1.0  # every value tied
        got = top_k(x, 10, chunked=True)
        want = x.topk(10, dim=-1)
        assert torch.equal(x.gather(1, got), want.values)
        assert all(len(set(row.tolist())) == 10 for row in got)  # ten different tokens
        assert got[0, 0] == vocab - 1
        second = torch.stack([x.flip(0), x])[1, 3:]  # a view past the storage's start
        assert torch.equal(second.gather(1, top_k(second, 10, chunked=True)), want.values[3:])


@pytest.mark.parametrize("reduce", ["max", "mean"])
def test_pooling_every_head_at_once_in_bands_equals_pooling_each_full_map(reduce):
    """pool_map over [heads, rows, keys] bands (the whole-model grid's way) against each
    head's full map pooled block by block, with uneven blocks and several bands."""
    from model.trace import pool_map

    torch.manual_seed(3)
    maps = torch.rand(5, 203, 157)
    rows, cols = block_edges(203, 9), block_edges(157, 7)
    ov = pool_map(lambda r: maps[:, r], rows, cols, reduce, max_cells=157 * 50)
    assert ov.values.shape == (5, 9, 7)
    for h in range(5):
        for i, (a, b) in enumerate(zip(rows[:-1], rows[1:])):
            for j, (c, d) in enumerate(zip(cols[:-1], cols[1:])):
                block = maps[h, a:b, c:d]
                want = block.amax() if reduce == "max" else block.mean()
                assert ov.values[h, i, j].item() == pytest.approx(want.item(), rel=1e-5)


def test_a_layers_heads_pooled_together_equal_each_head_pooled_alone(trace):
    from model.analysis.view import AttentionView

    view = AttentionView(trace, "cross", layer=1)
    for reduce in ("max", "mean"):
        together, rows, cols = view.heads_overview(3, reduce)
        for h in range(together.shape[0]):
            alone, rows_h, cols_h = view.choose(head=h).overview(3, reduce)
            assert (rows, cols) == (rows_h, cols_h)
            np.testing.assert_allclose(together[h], alone, rtol=1e-5, equal_nan=True)


@pytest.mark.parametrize(
    "spec",
    [
        dict(causal=True),
        dict(causal=True, window=37),
        dict(causal=True, offset=20),  # queries after 20 cached keys
        dict(causal=True, key_valid=True),
    ],
    ids=["causal", "sliding-window", "cached-keys", "padded-keys"],
)
def test_rows_that_see_some_keys_only_are_computed_over_those_keys_alone(spec):
    """A window of a causal (or sliding-window) map skips the keys none of its rows may see:
    the same weights as the whole computation (the stages path computes every key)."""
    from model.attention import attention_weights
    from model.masks import MaskSpec

    torch.manual_seed(5)
    lk = 140
    offset = spec.get("offset", 0)
    lq = lk - offset
    q, k = torch.randn(4, lq, 16), torch.randn(2, lk, 16)
    key_valid = None
    if spec.get("key_valid"):
        key_valid = torch.ones(1, lk, dtype=torch.bool)
        key_valid[0, 3:9] = False
    mask = MaskSpec(lq, lk, None, key_valid, True, offset, spec.get("window"))
    assert mask.key_span(slice(0, 30)) != (0, lk)  # there is something to skip
    for rows, cols in [(slice(0, 30), None), (slice(60, 100), slice(40, 90)), ([5, 70], [0, 139])]:
        got = attention_weights(q, k, mask, rows=rows, cols=cols)
        whole = attention_weights(q, k, mask, rows=rows, cols=cols, stages=True).weights
        assert_close_f32(got, whole, 1e-6)
        assert got.shape == whole.shape


def _block_sums_of(full: torch.Tensor, rows: list[int], cols: list[int]) -> torch.Tensor:
    """[..., Lq, Lk] summed over blocks: [..., R, C]."""
    return torch.stack(
        [
            torch.stack(
                [full[..., a:b, c:d].sum((-1, -2)) for c, d in zip(cols[:-1], cols[1:])], -1
            )
            for a, b in zip(rows[:-1], rows[1:])
        ],
        -2,
    )


@pytest.mark.parametrize(
    ("kind", "positions", "kv_heads"),
    [("decoder", "rope", 2), ("decoder", "alibi", None), ("encoder", "sinusoidal", None)],
)
def test_a_pass_asked_for_block_sums_records_each_heads_weights_summed_per_block(
    kind, positions, kv_heads
):
    """The sums ride along in the fused kernel as extra value columns: they equal the maps
    summed block by block, and the model's own output is the untraced pass's."""
    from model import TransformerConfig, build_model

    torch.manual_seed(2)
    cfg = TransformerConfig(
        kind=kind, d_model=64, n_heads=4, n_kv_heads=kv_heads, positions=positions, max_len=400
    )
    net = build_model(cfg).eval()
    vocab = cfg.tgt_vocab_size if kind == "decoder" else cfg.src_vocab_size
    ids = torch.randint(4, vocab, (1, 301))
    tokens = [str(i) for i in range(301)]
    with torch.inference_mode():
        plain = net(ids).logits
        out = net(ids, trace=True, summed_blocks=16)
    trace = out.trace(0, [], tokens) if kind == "decoder" else out.trace(0, tokens, [])
    if plain is not None:
        assert torch.equal(out.logits, plain)
    edges = block_edges(301, 16)
    recorded = trace.records[kind].block_sums
    assert recorded.shape == (2, 4, 16, 16) and trace.summed_blocks(kind) == 16
    assert_close_f32(recorded, _block_sums_of(trace.attention[kind], edges, edges), 1e-5)
    # whole-model tiles from them: joined in equal groups, the map's block means
    ov = trace.attention_overviews(kind, 1, size=8, reduce="mean")
    assert ov.row_edges == edges[::2] and trace._block_sums_cache == {}  # nothing recomputed
    want = _block_sums_of(trace.attention[kind][1], ov.row_edges, ov.col_edges)
    cells = torch.outer(*(torch.tensor(e).diff().float() for e in (ov.row_edges, ov.col_edges)))
    assert_close_f32(ov.values, want / cells, 1e-6)


def test_a_layers_block_means_are_summed_by_the_fused_kernel_when_the_pass_kept_none():
    """All heads of a layer at 64 blocks, from the record, in one fused pass: the full maps'
    block means (the record's queries and keys have 64 columns, one a block)."""
    from model import TransformerConfig, build_model
    from model.trace import pool_map

    torch.manual_seed(4)
    cfg = TransformerConfig(
        kind="decoder", d_model=256, n_heads=4, n_kv_heads=2, positions="rope", max_len=400
    )
    net = build_model(cfg).eval()
    ids = torch.randint(4, cfg.tgt_vocab_size, (1, 300))
    with torch.inference_mode():
        trace = net(ids, trace=True).trace(0, [], [str(i) for i in range(300)])
    assert trace.summed_blocks("decoder") == 0
    full = trace.attention["decoder"][1]
    for size in (20, 64):
        ov = trace.attention_overviews("decoder", 1, size=size, reduce="mean")
        assert (
            ov.values.shape == (4, size, size) and ("decoder", 1, size) in trace._block_sums_cache
        )
        ref = pool_map(lambda rows: full[:, rows], ov.row_edges, ov.col_edges, "mean")
        assert_close_f32(ov.values, ref.values, 1e-6)


def test_long_inputs_on_a_cpu_record_block_sums_and_short_ones_or_a_gpu_do_not():
    from model.trace import LONG_TRACE, SUMMED_BLOCKS, summed_blocks_for

    assert summed_blocks_for(LONG_TRACE + 1, "cpu") == SUMMED_BLOCKS
    assert summed_blocks_for(LONG_TRACE, "cpu") == 0
    assert summed_blocks_for(8192, "cuda") == 0


@pytest.mark.parametrize(
    "spec",
    [
        dict(causal=True),
        dict(causal=True, window=23),
        dict(causal=True, offset=11),
        dict(causal=False, padded=True),
        dict(causal=True, padded=True, window=50),
    ],
    ids=["causal", "window", "cached-keys", "padded-encoder", "padded-window"],
)
def test_block_counts_from_the_masks_rule_equal_counting_its_cells(spec):
    """An overview's grey blocks and block means rest on how many cells each block allows:
    counted from the rule (no [Lq, Lk] mask built), they equal the dense mask's count."""
    from model.masks import MaskSpec

    lk = 157
    offset = spec.get("offset", 0)
    lq = lk - offset
    query_valid = key_valid = None
    if spec.get("padded"):
        key_valid = torch.ones(1, lk, dtype=torch.bool)
        key_valid[0, 140:] = False
        key_valid[0, 7] = False
        query_valid = torch.ones(1, lq, dtype=torch.bool)
        query_valid[0, lq - 17 :] = False
    mask = MaskSpec(lq, lk, query_valid, key_valid, spec["causal"], offset, spec.get("window"))
    dense = mask.dense()[0, 0].long()
    for size in (1, 6, 40, 500):
        rows, cols = block_edges(lq, size), block_edges(lk, size)
        want = _block_sums_of(dense, rows, cols)
        assert torch.equal(mask.block_counts(rows, cols), want)


def _dense_row_statistics(weights: torch.Tensor, q_pos: torch.Tensor):
    """Entropy and mean |query - key| of each row of [H, Lq, Lk] weights, and live rows."""
    entropy = -(weights * torch.log(weights.clamp_min(1e-12))).sum(-1)
    gap = (q_pos[:, None] - torch.arange(weights.shape[-1])[None, :]).abs().float()
    return entropy, (weights * gap).sum(-1), weights.sum(-1)[0] > 0


@pytest.mark.parametrize("alibi", [False, True], ids=["plain", "alibi"])
@pytest.mark.parametrize(
    "spec",
    [
        dict(),
        dict(window=37),
        dict(offset=20),
        dict(key_valid=True),
        dict(query_valid=True),
    ],
    ids=["causal", "sliding-window", "cached-keys", "padded-keys", "padded-queries"],
)
def test_head_statistics_from_one_fused_pass_equal_those_of_the_weights(spec, alibi):
    """Entropy is the kernel's log-normaliser less the weights' mean score; the mean distance
    the query's position less the mean key position: both as the explicit weights give them,
    with GQA, windows, cached keys, padding on either side and ALiBi."""
    from model.attention import attention_weights, row_statistics
    from model.masks import MaskSpec

    torch.manual_seed(6)
    lk = 140
    offset = spec.get("offset", 0)
    lq = lk - offset
    q, k = 2 * torch.randn(4, lq, 16), 2 * torch.randn(2, lk, 16)
    key_valid = query_valid = None
    if spec.get("key_valid"):
        key_valid = torch.ones(1, lk, dtype=torch.bool)
        key_valid[0, 3:9] = False
    if spec.get("query_valid"):  # a right-padded sentence: its pads neither ask nor answer
        query_valid = torch.ones(1, lq, dtype=torch.bool)
        query_valid[0, -5:] = False
        key_valid = query_valid.clone()
    mask = MaskSpec(lq, lk, query_valid, key_valid, True, offset, spec.get("window"))
    got = row_statistics(q, k, mask, alibi)
    weights = attention_weights(q, k, mask, alibi=alibi, stages=True).weights
    entropy, distance, live = _dense_row_statistics(weights, torch.arange(lq) + offset)
    assert torch.equal(got.live, live) and bool(live.any())
    assert_close_f32(got.entropy, entropy, 5e-5)
    assert_close_f32(got.first_key, weights[..., 0], 1e-6)
    gap = (got.query_position[None, :] - got.key_position).masked_fill(~got.live, 0)
    torch.testing.assert_close(gap, distance, atol=5e-4, rtol=1e-5)
    assert float(entropy[:, live].std()) > 0.1  # the rows really differ


def test_head_statistics_are_left_to_the_maps_where_a_key_may_follow_its_query():
    """An encoder's |query - key| is not linear in the key's position: no fused answer."""
    from model.attention import row_statistics
    from model.masks import MaskSpec

    q, k = torch.randn(2, 30, 8), torch.randn(2, 30, 8)
    assert row_statistics(q, k, None) is None
    assert row_statistics(q, k, MaskSpec(30, 30, torch.ones(1, 30, dtype=torch.bool))) is None
    assert row_statistics(q, k, torch.ones(30, 30, dtype=torch.bool).tril()) is not None


def test_a_traced_pass_reports_each_layer_it_records_only_inside_the_progress_block():
    """The explorer's bar for a long input's first pass: every attention layer, in order,
    for the pass inside the block; nothing for a pass outside it."""
    from model.trace import reporting_progress

    lm = load("en2ko")
    heard: list[tuple[str, int]] = []
    with reporting_progress(lambda kind, done: heard.append((kind, done))):
        lm.trace("I study math at school", target="나는 학교에서 수학을 공부한다")
    enc, dec = lm.config.n_encoder_layers, lm.config.n_decoder_layers
    assert [h for h in heard if h[0] == "encoder"] == [("encoder", n) for n in range(1, enc + 1)]
    assert [h for h in heard if h[0] == "cross"] == [("cross", n) for n in range(1, dec + 1)]
    assert len(heard) == enc + 2 * dec
    lm.trace("I study math")
    assert len(heard) == enc + 2 * dec
