"""Views read maps through Trace.attention_map / attention_overview (DESIGN: the cost of a
picture follows what is drawn). These hold the two against the model's own stacked weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from model import load
from model.trace import block_edges


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
    assert torch.equal(window, full[1, 0, 1:4][:, [0, 2]])


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
    from ui.maps import pooled_heads, pooled_map

    for reduce in ("max", "mean"):
        together, rows, cols = pooled_heads(trace, "cross", 1, reduce, size=3)
        for h in range(together.shape[0]):
            alone, rows_h, cols_h = pooled_map(trace, "cross", 1, "head", h, 0, reduce, 3)
            assert (rows, cols) == (rows_h, cols_h)
            np.testing.assert_allclose(together[h], alone, rtol=1e-5, equal_nan=True)
