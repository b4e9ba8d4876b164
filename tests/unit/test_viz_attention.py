"""Attention figures keep the promises in DESIGN.md's "Plots tell the truth"."""

import numpy as np
import torch

from viz.attention import (
    MASKED_GREY,
    attention_heatmap,
    heads_figure,
    scores_heatmap,
    token_label,
)

TOKENS = ["<bos>", "the", "cat", "the", "<b>mat</b>"]


def causal_weights(n):
    w = torch.tril(torch.rand(n, n))
    return w / w.sum(-1, keepdim=True)


def test_queries_run_top_to_bottom_and_repeated_tokens_keep_their_own_rows():
    fig = attention_heatmap(causal_weights(5), TOKENS, TOKENS)
    assert fig.layout.yaxis.autorange == "reversed"
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


def test_future_cells_are_grey_gaps_not_zero_weights():
    w = causal_weights(4).numpy()
    w[3, 0] = 0.0  # a real zero weight in the past must stay a 0, not turn grey
    fig = attention_heatmap(w, list("abcd"), list("abcd"), causal=True)
    z = np.asarray(fig.data[0].z, dtype=float)
    assert np.isnan(z[0, 1]) and np.isnan(z[2, 3])
    assert z[3, 0] == 0.0
    assert fig.layout.plot_bgcolor == MASKED_GREY and fig.data[0].hoverongaps is False


def test_all_heads_share_one_figure_and_one_colour_bar():
    fig = heads_figure(torch.rand(6, 3, 3), list("abc"), list("abc"), titles=[f"h{i}" for i in range(6)])
    assert len(fig.data) == 6
    assert [bool(t.showscale) for t in fig.data].count(True) == 1
    assert [a.text for a in fig.layout.annotations] == [f"h{i}" for i in range(6)]


def test_pre_softmax_scores_diverge_around_zero_and_masked_cells_turn_grey():
    s = torch.tensor([[1.5, float("-inf")], [-3.0, 2.0]])
    fig = scores_heatmap(s, ["a", "b"], ["a", "b"])
    t = fig.data[0]
    assert t.zmid == 0 and t.zmin == -3.0 and t.zmax == 3.0
    assert np.isnan(np.asarray(t.z, dtype=float)[0, 1])
