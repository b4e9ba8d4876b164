"""Attention figures keep the promises in docs/ARCHITECTURE.md's "Plots tell the truth"."""

import json

import numpy as np
import pytest
import torch

from model.masks import causal_mask
from viz.attention import (
    MASKED_GREY,
    attention_heatmap,
    difference_heatmap,
    heads_figure,
    model_grid_figure,
    pool_cells,
    scores_heatmap,
    token_label,
)

TOKENS = ["<bos>", "the", "cat", "the", "<b>mat</b>"]


def causal_weights(n):
    w = torch.tril(torch.rand(n, n))
    return w / w.sum(-1, keepdim=True)


def test_queries_run_top_to_bottom_and_repeated_tokens_keep_their_own_rows():
    fig = attention_heatmap(causal_weights(5), TOKENS, TOKENS)
    assert list(fig.layout.yaxis.range) == [4.5, -0.5]  # row 0 on top, no padding frame
    assert list(fig.layout.xaxis.range) == [-0.5, 4.5]
    assert list(fig.layout.yaxis.tickvals) == [0, 1, 2, 3, 4]  # "the" twice, two rows
    assert list(fig.data[0].y) == [0, 1, 2, 3, 4]


def test_tokens_are_escaped_before_plotly_can_read_them_as_html():
    fig = attention_heatmap(causal_weights(5), TOKENS, TOKENS)
    assert fig.layout.xaxis.ticktext[4] == "&lt;b&gt;mat&lt;/b&gt;"
    assert fig.layout.yaxis.ticktext[0] == "&lt;bos&gt;"
    assert fig.data[0].customdata[4][0][0] == "&lt;b&gt;mat&lt;/b&gt;"
    assert token_label("") == "∅" and token_label("  ") == "␣␣"


def test_probability_colours_are_fixed_to_zero_one_whatever_the_data():
    fig = attention_heatmap(np.full((2, 2), 0.5), ["a", "b"], ["a", "b"])
    assert (fig.data[0].zmin, fig.data[0].zmax) == (0, 1)


def test_cells_the_models_mask_forbids_are_grey_gaps_not_zero_weights():
    w = causal_weights(4).numpy()
    w[3, 0] = 0.0  # a real zero weight in the past must stay a 0, not turn grey
    fig = attention_heatmap(w, list("abcd"), list("abcd"), mask=causal_mask(4))
    grey, weights = fig.data  # the grey layer lies under the weights
    z = np.asarray(weights.z, dtype=float)
    assert np.isnan(z[0, 1]) and np.isnan(z[2, 3]) and weights.hoverongaps is False
    assert z[3, 0] == 0.0
    under = np.asarray(grey.z)
    assert under.dtype == np.uint8  # a byte a cell: the mask never doubles what is sent
    assert np.array_equal(under == 1, np.isnan(z))  # grey exactly where masked
    assert grey.colorscale[-1][1] == MASKED_GREY and grey.colorscale[0][1] == "rgba(0,0,0,0)"
    assert grey.hoverinfo == "skip"


def test_a_padding_mask_greys_the_padded_keys_of_every_row():
    keys_ok = torch.tensor([True, True, False])  # the last key is padding: no query sees it
    fig = attention_heatmap(np.full((3, 3), 0.5), list("abc"), list("ab_"), mask=keys_ok)
    z = np.asarray(fig.data[-1].z, dtype=float)
    assert np.isnan(z[:, 2]).all() and not np.isnan(z[:, :2]).any()


def test_unmasked_maps_have_no_grey_layer():
    assert len(attention_heatmap(np.full((3, 3), 1 / 3), list("abc"), list("abc")).data) == 1


def test_all_heads_share_one_figure_and_one_colour_bar():
    fig = heads_figure(
        torch.rand(6, 3, 3), list("abc"), list("abc"), titles=[f"h{i}" for i in range(6)]
    )
    assert len(fig.data) == 6
    assert [bool(t.showscale) for t in fig.data].count(True) == 1
    assert [a.text for a in fig.layout.annotations] == [f"h{i}" for i in range(6)]


def test_pre_softmax_scores_diverge_around_zero_and_masked_cells_turn_grey():
    s = torch.tensor([[1.5, float("-inf")], [-3.0, 2.0]])
    fig = scores_heatmap(s, ["a", "b"], ["a", "b"])
    grey, t = fig.data
    assert t.zmid == 0 and t.zmin == -3.0 and t.zmax == 3.0
    assert np.isnan(np.asarray(t.z, dtype=float)[0, 1])
    assert np.asarray(grey.z, dtype=float)[0, 1] == 1.0


def test_whole_model_grid_puts_each_head_in_its_own_tile_with_blank_gutters():
    a = torch.zeros(2, 3, 4, 4)
    a[1, 2] = 1.0  # layer 2, head 3 lit up
    fig = model_grid_figure(a, row_titles=["L1", "L2"], col_titles=["H1", "H2", "H3"])
    weights = fig.data[-1]
    z = np.asarray(weights.z, dtype=float)
    step = 4 + 1  # tile + gutter
    assert np.all(z[step : step + 4, 2 * step : 2 * step + 4] == 1.0)
    assert np.isnan(z[4]).all() and np.isnan(z[:, 4]).all()  # gutters are blank, not grey
    assert len(fig.data) == 1  # nothing masked: no grey layer
    assert list(np.asarray(weights.customdata)[step, 2 * step]) == [3, 2]  # head 3, layer 2
    assert list(fig.layout.xaxis.ticktext) == ["H1", "H2", "H3"]


def test_long_inputs_are_pooled_into_thumbnails():
    fig = model_grid_figure(
        torch.rand(1, 1, 100, 100), row_titles=["L"], col_titles=["H"], max_side=20
    )
    assert np.asarray(fig.data[-1].z).shape == (20, 20)


def test_difference_map_is_second_minus_first_on_a_fixed_diverging_scale():
    a = np.array([[1.0, 0.0], [0.5, 0.5]])
    b = np.array([[1.0, 0.0], [0.2, 0.8]])
    fig = difference_heatmap(a, b, ["x", "y"], ["x", "y"], mask=causal_mask(2))
    grey, diff = fig.data
    z = np.asarray(diff.z, dtype=float)
    assert np.isnan(z[0, 1]) and z[1, 0] == pytest.approx(-0.3) and z[1, 1] == pytest.approx(0.3)
    assert (diff.zmin, diff.zmax, diff.zmid) == (-1, 1, 0)


def test_a_long_input_draws_at_most_sixty_labels_and_names_every_token_on_hover():
    tokens = [f"w{i % 7}" for i in range(256)]  # repeated tokens, as real text has
    fig = attention_heatmap(np.full((256, 256), 1 / 256), tokens, tokens)
    heatmap = fig.data[-1]
    for axis in (fig.layout.xaxis, fig.layout.yaxis):
        assert len(axis.ticktext) <= 60
        assert [tokens[v] for v in axis.tickvals] == list(axis.ticktext)  # labels sit right
    assert len(set(heatmap.y)) == 256  # "w3 #3" and "w3 #10" stay apart
    assert heatmap.y[10] == "w3 #10" and "%{y}" in heatmap.hovertemplate
    assert heatmap.customdata is None  # no per-cell text: the bytes stay small


def test_a_short_input_keeps_every_label_and_integer_positions():
    fig = attention_heatmap(causal_weights(5), TOKENS, TOKENS)
    assert len(fig.layout.xaxis.ticktext) == 5 and list(fig.data[-1].x) == [0, 1, 2, 3, 4]


def test_pooled_blocks_are_the_mean_of_their_unmasked_cells_and_fully_masked_blocks_stay_grey():
    z = np.arange(36, dtype=np.float32).reshape(6, 6)
    z[0:3, 3:6] = np.nan  # one whole block masked
    z[3, 0] = np.nan  # one cell of another block
    pooled = pool_cells(z, 2)
    assert np.isnan(pooled[0, 1])
    assert pooled[0, 0] == pytest.approx(np.mean(z[0:3, 0:3]))
    assert pooled[1, 0] == pytest.approx(np.nanmean(z[3:6, 0:3]))


def test_all_heads_of_a_long_input_draw_block_means_whose_hover_names_the_positions():
    tokens = [f"w{i}" for i in range(256)]
    weights = np.random.default_rng(0).random((4, 256, 256)).astype(np.float32)
    fig = heads_figure(weights, tokens, tokens, mask=causal_mask(256), max_side=64)
    maps = [d for d in fig.data if d.hovertemplate]
    assert len(maps) == 4 and np.asarray(maps[0].z).shape == (64, 64)
    assert np.asarray(maps[0].z)[1, 0] == pytest.approx(weights[0, 4:8, 0:4].mean(), rel=1e-5)
    assert (maps[0].y[1], maps[0].x[2]) == ("#4–7", "#8–11")  # the hover's block names
    assert "%{y}" in maps[0].hovertemplate and "%{x}" in maps[0].hovertemplate
    short = heads_figure(weights[:, :20, :20], tokens[:20], tokens[:20], max_side=64)
    assert np.asarray(short.data[0].z).shape == (20, 20)  # short inputs stay token by token


def test_a_figure_asked_for_again_with_equal_inputs_is_not_rebuilt_but_new_inputs_are():
    w = causal_weights(5)
    attention_heatmap.cache_clear()
    first = attention_heatmap(w, TOKENS, TOKENS, title="A")
    again = attention_heatmap(w.clone(), TOKENS, TOKENS, title="A")  # kept: not built again
    assert json.loads(again.to_json()) == json.loads(first.to_json())
    assert len(attention_heatmap.cache_store()) == 1
    other = attention_heatmap(w, TOKENS, TOKENS, title="B")  # another language: its own
    assert other.layout.title.text == "B" and len(attention_heatmap.cache_store()) == 2
    changed = w.clone()
    changed[4, 0] += 0.5
    again = attention_heatmap(changed, TOKENS, TOKENS, title="A")
    assert (
        again is not first
        and np.asarray(again.data[-1].z)[4, 0] != np.asarray(first.data[-1].z)[4, 0]
    )


def test_all_heads_lay_out_for_any_number_of_heads():
    """Every panel's axes lie inside the figure, one title each, for 1 to 16 heads (14 heads'
    last row once ended a hair below 0, which plotly refused: a traceback, no chart)."""
    tokens = [f"w{i}" for i in range(100)]
    for n in range(1, 17):
        weights = np.random.default_rng(n).random((n, 100, 100)).astype(np.float32)
        fig = heads_figure(weights, tokens, tokens, max_side=64, titles=[f"H{i}" for i in range(n)])
        domains = [a.domain for a in (*fig.select_xaxes(), *fig.select_yaxes())]
        assert len(domains) == 2 * n and all(0 <= lo < hi <= 1 for lo, hi in domains)
        assert [a.text for a in fig.layout.annotations] == [f"H{i}" for i in range(n)]
