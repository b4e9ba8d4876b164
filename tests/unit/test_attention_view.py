"""The attention view (model.analysis.view) against the stacked maps: every aggregate, every
mask kind, merged words, hidden specials, short and long inputs, with no Streamlit at all.

What the explorer and its HTML export draw comes from the view; these hold the view to
``trace.attention[kind]``, the maps as the model computed them, stacked."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from model import load
from model.analysis.summaries import entropy, first_token_share, mean_distance, rollout
from model.analysis.tokens import merge_attention
from model.analysis.view import GENERATED_MARK, LONG_ABOVE, AttentionView
from model.masks import MaskSpec
from model.trace import AttentionRecord, Trace, block_edges
from tests.tolerance import assert_close_f32

SPECIALS = frozenset({"[CLS]", "[SEP]", "<bos>", "<eos>"})


def recorded(n: int, kind: str, mask, layers: int = 2, heads: int = 3, seed: int = 0, lq=None):
    """A trace whose ``kind`` maps are recomputed from random queries and keys under
    ``mask``, as a traced pass records them (tokens t0, t1, ...)."""
    gen = torch.Generator().manual_seed(seed)
    lq = n if lq is None else lq
    q = [torch.randn(heads, lq, 8, generator=gen) for _ in range(layers)]
    k = [torch.randn(heads, n, 8, generator=gen) for _ in range(layers)]
    tokens = [f"t{i}" for i in range(n)]
    record = AttentionRecord(q, k, mask)
    if kind == "encoder":
        return Trace(tokens, [], records={kind: record})
    return Trace([], tokens, records={kind: record})


@pytest.fixture(scope="module")
def en2ko():
    return load("en2ko").trace("I study math at school every day")


def padded_encoder():
    valid = torch.ones(1, 9, dtype=torch.bool)
    valid[0, 6:] = False  # three padding keys at the end
    return recorded(9, "encoder", MaskSpec(9, 9, None, valid)), "encoder"


def causal_decoder():
    return recorded(10, "decoder", MaskSpec(10, 10, causal=True)), "decoder"


def sliding_window():
    return recorded(12, "decoder", MaskSpec(12, 12, causal=True, window=4)), "decoder"


MASKS = {"padded-encoder": padded_encoder, "causal": causal_decoder, "sliding": sliding_window}


def expected(full: torch.Tensor, aggregate: str, layer: int, head: int) -> torch.Tensor:
    """The chosen map from the stacked maps [L, H, Lq, Lk]."""
    if aggregate == "head":
        return full[layer, head]
    if aggregate == "mean":
        return full[layer].mean(0)
    if aggregate == "max":
        return full[layer].amax(0)
    return rollout(full)[layer]


@pytest.mark.parametrize("aggregate", ["head", "mean", "max", "rollout"])
@pytest.mark.parametrize("masked", list(MASKS))
def test_the_views_map_is_the_stacked_maps_chosen_head_or_aggregate(masked, aggregate):
    trace, kind = MASKS[masked]()
    full = trace.attention[kind]
    for layer in range(2):
        view = AttentionView(trace, kind, layer=layer, head=2, aggregate=aggregate)
        assert_close_f32(view.map(), expected(full, aggregate, layer, 2), 1e-6)
        window = view.map(slice(3, 8), slice(1, 6))
        assert_close_f32(window, expected(full, aggregate, layer, 2)[3:8, 1:6], 1e-6)


@pytest.mark.parametrize("masked", list(MASKS))
def test_the_views_mask_is_the_rule_the_model_used(masked):
    trace, kind = MASKS[masked]()
    n = len(trace.tokens(kind)[0])
    q, k = torch.arange(n)[:, None], torch.arange(n)[None, :]
    rule = {
        "padded-encoder": (k < 6).expand(n, n),
        "causal": k <= q,
        "sliding": (k <= q) & (k > q - 4),
    }[masked]
    view = AttentionView(trace, kind, aggregate="mean")
    assert torch.equal(view.mask(), rule)
    assert torch.equal(view.mask(slice(2, 5), slice(0, 3)), rule[2:5, :3])
    # and the maps hold no weight where it forbids
    assert float(view.map()[~rule].abs().max()) == 0.0


@pytest.mark.parametrize("kind", ["encoder", "decoder", "cross"])
@pytest.mark.parametrize("aggregate", ["head", "mean", "max", "rollout"])
def test_a_real_models_view_is_its_stacked_maps(en2ko, kind, aggregate):
    if aggregate == "rollout" and kind == "cross":
        with pytest.raises(ValueError, match="self-attention"):
            AttentionView(en2ko, kind, aggregate=aggregate)
        return
    full = en2ko.attention[kind]
    view = AttentionView(en2ko, kind, layer=1, head=1, aggregate=aggregate)
    assert_close_f32(view.map(), expected(full, aggregate, 1, 1), 1e-6)
    assert view.tokens == tuple(map(list, en2ko.tokens(kind)))
    assert view.shape == tuple(full.shape)


def test_merged_words_sum_their_key_pieces_and_average_their_query_pieces():
    tokens = ["[CLS]", "play", "##ing", "ball", "##s", "now", "[SEP]"]
    full = torch.softmax(torch.randn(2, 3, 7, 7, generator=torch.Generator().manual_seed(1)), -1)
    trace = Trace(tokens, [], {"encoder": full})
    view = AttentionView(trace, "encoder", layer=1, head=0, merge=True, specials=SPECIALS)
    groups = [[0], [1, 2], [3, 4], [5], [6]]
    assert view.tokens[0] == ["[CLS]", "playing", "balls", "now", "[SEP]"]
    merged = merge_attention(full, groups, groups)
    assert_close_f32(view.map(), merged[1, 0], 1e-6)
    assert_close_f32(view.choose(aggregate="mean").map(), merged[1].mean(0), 1e-6)
    assert_close_f32(view.choose(aggregate="rollout").map(), rollout(merged)[1], 1e-6)


@pytest.mark.parametrize("renorm", [True, False], ids=["renormalised", "as-they-were"])
@pytest.mark.parametrize("aggregate", ["head", "mean", "max", "rollout"])
def test_hidden_specials_leave_the_other_rows_and_columns(aggregate, renorm):
    tokens = ["[CLS]", "a", "b", "c", "[SEP]"]
    full = torch.softmax(torch.randn(2, 2, 5, 5, generator=torch.Generator().manual_seed(2)), -1)
    trace = Trace(tokens, [], {"encoder": full})
    view = AttentionView(
        trace, "encoder", 1, 1, aggregate, hide=True, renorm=renorm, specials=SPECIALS
    )
    keep = [1, 2, 3]
    assert view.tokens == (["a", "b", "c"], ["a", "b", "c"])
    if aggregate == "rollout":  # over every token (the residual carries specials), then hidden
        want = rollout(full)[1][keep][:, keep]
    else:
        kept = full[:, :, keep][:, :, :, keep]
        if renorm:
            kept = kept / kept.sum(-1, keepdim=True)
        want = expected(kept, aggregate, 1, 1)
    if renorm and aggregate == "rollout":
        want = want / want.sum(-1, keepdim=True)
    assert_close_f32(view.map(), want, 1e-6)
    hidden = 1 - full[1][:, keep][:, :, keep].sum(-1) / full[1][:, keep].sum(-1)
    assert view.hidden_share() == pytest.approx(float(hidden.mean()), rel=1e-5)


def test_generated_tokens_are_marked_without_copying_the_trace():
    trace = recorded(6, "decoder", MaskSpec(6, 6, causal=True))
    trace.tgt_tokens = ["<bos>", "I", "like", "tea", "and", "<eos>"]
    before = list(trace.tgt_tokens)
    view = AttentionView(trace, "decoder", n_prompt=3, specials=SPECIALS)
    mark = GENERATED_MARK
    assert view.tokens[0] == ["<bos>", "I", "like", f"tea{mark}", f"and{mark}", f"<eos>{mark}"]
    assert view.tokens[1] == view.tokens[0]
    assert view.trace is trace and trace.tgt_tokens == before  # the model's trace, untouched
    hidden = view.choose(hide=True)  # a generated special is still a special
    assert hidden.tokens[0] == ["I", "like", f"tea{mark}", f"and{mark}"]
    assert AttentionView(trace, "decoder", n_prompt=6).tokens[0] == before


def test_a_new_view_of_the_same_trace_reuses_what_was_computed():
    trace, kind = causal_decoder()
    first = AttentionView(trace, kind, layer=1, aggregate="rollout")
    assert not first.rollout_ready()
    rolled = first.rollout()
    again = AttentionView(trace, kind, layer=1, aggregate="rollout")
    assert again.rollout_ready() and again.rollout() is rolled
    assert again.overview(4, "mean") is first.overview(4, "mean")
    assert again.statistics()["entropy"] is first.statistics()["entropy"]


@pytest.fixture(scope="module")
def long_trace():
    n = LONG_ABOVE + 88  # 600 tokens: long enough for an overview and a zoom window
    return recorded(n, "decoder", MaskSpec(n, n, causal=True, window=200), layers=2, heads=2)


@pytest.mark.parametrize("reduce", ["max", "mean"])
@pytest.mark.parametrize("aggregate", ["head", "mean", "rollout"])
def test_a_long_views_overview_pools_the_stacked_map_over_allowed_cells(
    long_trace, aggregate, reduce
):
    view = AttentionView(long_trace, "decoder", layer=1, head=1, aggregate=aggregate)
    assert view.long
    full = expected(long_trace.attention["decoder"], aggregate, 1, 1)
    allowed = view.mask()  # a rollout's: where it reaches, past one layer's window
    if aggregate == "rollout":
        assert torch.equal(allowed, full > 0) and bool(allowed[400, 100])
    pooled = view.overview(size=64, reduce=reduce)
    n = full.shape[0]
    assert pooled.row_edges == block_edges(n, 64) == pooled.col_edges
    edges = pooled.row_edges
    for i in range(0, 64, 7):
        for j in range(0, 64, 5):
            block = full[edges[i] : edges[i + 1], edges[j] : edges[j + 1]]
            ok = allowed[edges[i] : edges[i + 1], edges[j] : edges[j + 1]]
            got = pooled.values[i, j]
            if not ok.any():
                assert np.isnan(got)
            elif reduce == "max":
                assert got == pytest.approx(float(block.max()), rel=1e-5, abs=1e-7)
            else:
                assert got == pytest.approx(float(block[ok].mean()), rel=1e-4, abs=1e-7)
    assert_close_f32(view.map(slice(300, 420), slice(250, 400)), full[300:420, 250:400], 1e-6)


def test_a_long_view_never_merges_or_hides():
    n = LONG_ABOVE + 1
    long = recorded(n, "encoder", None, layers=1, heads=1)
    view = AttentionView(long, "encoder", merge=True, hide=True, specials=SPECIALS)
    assert (view.merge, view.hide) == (False, False)
    assert len(view.tokens[0]) == n


def test_statistics_are_those_of_the_stacked_maps():
    trace, kind = sliding_window()
    stats = AttentionView(trace, kind).statistics()
    full = trace.attention[kind]
    want = {
        "entropy": entropy(full),
        "mean_distance": mean_distance(full),
        "first_token": first_token_share(full),
    }
    for name in ("entropy", "mean_distance", "first_token"):
        assert_close_f32(stats[name], want[name], 1e-5)


def test_top_cells_are_the_strongest_weights_of_the_map_in_whole_text_positions():
    trace, kind = causal_decoder()
    view = AttentionView(trace, kind, layer=1, aggregate="max")
    full = view.map()
    cells = view.top_cells(3, slice(4, 10), slice(2, 8))
    window = full[4:10, 2:8]
    assert [w for *_, w in cells] == pytest.approx(window.flatten().topk(3).values.tolist())
    for q, k, w in cells:
        assert full[q, k].item() == pytest.approx(w)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (dict(kind="cross"), "no 'cross'"),
        (dict(aggregate="median"), "unknown aggregate"),
        (dict(layer=5), "layers 0..1"),
        (dict(head=9), "heads 0..2"),
    ],
)
def test_a_choice_the_trace_cannot_show_is_refused_with_its_reason(change, message):
    trace, kind = causal_decoder()
    with pytest.raises((KeyError, ValueError, IndexError), match=message):
        AttentionView(trace, **{"kind": kind, **change})
