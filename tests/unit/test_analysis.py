"""Attention summaries against small cases worked out by hand."""

import math

import pytest
import torch

from model.analysis.summaries import entropy, head_max, head_mean, mean_distance, rollout


def test_head_mean_and_max_reduce_over_heads_only():
    a = torch.tensor([[[[1.0, 0.0], [0.5, 0.5]], [[0.0, 1.0], [0.5, 0.5]]]])  # [1, 2, 2, 2]
    assert head_mean(a).tolist() == [[[0.5, 0.5], [0.5, 0.5]]]
    assert head_max(a).tolist() == [[[1.0, 1.0], [0.5, 0.5]]]


def test_rollout_of_one_layer_is_the_residual_averaged_map():
    a = torch.tensor([[[[0.0, 1.0], [1.0, 0.0]]]])  # one layer, one head, tokens swap
    # (W + I) renormalised: every token keeps half of itself and takes half of the other.
    assert rollout(a)[0].tolist() == [[0.5, 0.5], [0.5, 0.5]]


def test_rollout_multiplies_through_layers_and_keeps_rows_stochastic():
    torch.manual_seed(0)
    a = torch.softmax(torch.randn(3, 4, 5, 5), dim=-1)
    r = rollout(a)
    eye = torch.eye(5)
    step = [(m + eye) / (m + eye).sum(-1, keepdim=True) for m in a.mean(1)]
    torch.testing.assert_close(r[2], step[2] @ step[1] @ step[0])
    torch.testing.assert_close(r.sum(-1), torch.ones(3, 5))


def test_rollout_refuses_cross_attention():
    with pytest.raises(ValueError, match="self-attention"):
        rollout(torch.rand(1, 1, 2, 3))


def test_entropy_is_zero_for_one_hot_and_log_n_for_uniform_rows():
    one_hot = torch.eye(4)[None, None]  # [1, 1, 4, 4]
    uniform = torch.full((1, 1, 4, 4), 0.25)
    assert entropy(one_hot).item() == pytest.approx(0.0, abs=1e-6)
    assert entropy(uniform).item() == pytest.approx(math.log(4))


def test_entropy_and_distance_skip_rows_that_see_nothing():
    a = torch.tensor([[[[0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0]]]])
    assert entropy(a).item() == pytest.approx(0.0, abs=1e-6)
    assert mean_distance(a).item() == pytest.approx((1 + 2) / 2)


def test_mean_distance_is_zero_on_the_diagonal_and_grows_with_reach():
    assert mean_distance(torch.eye(5)[None, None]).item() == 0.0
    prev = torch.diag(torch.ones(4), -1)
    prev[0, 0] = 1.0  # the first token has no previous one and looks at itself
    assert mean_distance(prev[None, None]).item() == pytest.approx(4 / 5)


def test_rollout_is_offered_only_where_it_is_the_flow_from_the_input():
    from model.analysis.view import rollout_means_flow

    assert rollout_means_flow("encoder", "encoder")
    assert rollout_means_flow("encoder-decoder", "encoder")
    assert rollout_means_flow("decoder", "decoder")
    # an encoder-decoder's decoder also reads the source through cross-attention
    assert not rollout_means_flow("encoder-decoder", "decoder")
    assert not rollout_means_flow("encoder-decoder", "cross")
