"""FlashAttention's online softmax: exact attention, one tile at a time."""

import math

import pytest
import torch
import torch.nn.functional as F

from model.attention import online_softmax, scaled_dot_product_attention, tiled_attention
from model.masks import causal_mask, future_mask
from model.positional import alibi_bias


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def qkv(lq=12, lk=12, d=8, b=2, h=3):
    return torch.randn(b, h, lq, d), torch.randn(b, h, lk, d), torch.randn(b, h, lk, d)


@pytest.mark.parametrize("block", [1, 3, 4, 5, 12, 64])  # 3, 4, 12 divide 12; 5 and 64 do not
@pytest.mark.parametrize("masking", ["none", "causal", "padding"])
def test_tiled_equals_scaled_dot_product_attention(block, masking):
    q, k, v = qkv()
    mask = None
    if masking == "causal":
        mask = causal_mask(12)
    elif masking == "padding":
        valid = torch.ones(2, 12, dtype=torch.bool)
        valid[1, 7:] = False
        mask = valid[:, None, None, :]
    ours, _ = scaled_dot_product_attention(q, k, v, mask)
    tiled = tiled_attention(q, k, v, mask, block_size=block)
    torch.testing.assert_close(tiled, ours, atol=1e-5, rtol=1e-5)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(tiled, ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("block", [2, 7])
def test_tiled_with_other_query_and_key_lengths_and_a_cache_offset(block):
    q, k, v = qkv(lq=5, lk=13)
    mask = future_mask(5, 13, offset=8)  # the last 5 of 13 positions, as in a cached step
    ours, _ = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(tiled_attention(q, k, v, mask, block), ours, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(
        tiled_attention(q, k, v, None, block),
        F.scaled_dot_product_attention(q, k, v),
        atol=1e-5,
        rtol=1e-5,
    )


def test_tiled_with_an_alibi_bias_equals_the_ordinary_path():
    q, k, v = qkv(h=4)
    bias = alibi_bias(4, torch.arange(12), torch.arange(12))
    ours, _ = scaled_dot_product_attention(q, k, v, causal_mask(12), bias=bias)
    tiled = tiled_attention(q, k, v, causal_mask(12), block_size=5, bias=bias)
    torch.testing.assert_close(tiled, ours, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("block", [1, 3, 5])
def test_a_query_with_no_allowed_key_gets_zeros_not_nan(block):
    q, k, v = qkv(lq=4, lk=7)
    mask = torch.ones(4, 7, dtype=torch.bool)
    mask[2] = False
    mask[3, :4] = False  # allowed keys only in a late block: earlier blocks see nothing
    tiled = tiled_attention(q, k, v, mask, block_size=block)
    ours, _ = scaled_dot_product_attention(q, k, v, mask)
    assert torch.isfinite(tiled).all()
    assert torch.all(tiled[..., 2, :] == 0)
    torch.testing.assert_close(tiled, ours, atol=1e-5, rtol=1e-5)


def test_large_scores_do_not_overflow_thanks_to_the_running_max():
    q, k, v = qkv(lq=6, lk=10)
    q = q * 200  # exp(score) alone would overflow float32
    ours, _ = scaled_dot_product_attention(q, k, v)
    tiled = tiled_attention(q, k, v, block_size=3)
    assert torch.isfinite(tiled).all()
    torch.testing.assert_close(tiled, ours, atol=1e-5, rtol=1e-5)


def test_each_step_keeps_the_running_max_and_the_rescaled_sum():
    q, k, v = qkv(lq=4, lk=10, b=1, h=1)
    steps = list(online_softmax(q, k, v, block_size=4, q_block_size=2))
    assert [(s.q_start, s.k_start, s.k_end) for s in steps] == [
        (0, 0, 4),
        (0, 4, 8),
        (0, 8, 10),
        (2, 0, 4),
        (2, 4, 8),
        (2, 8, 10),
    ]
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(8)  # [1, 1, 4, 10]
    for s in steps:
        seen = scores[..., s.q_start : s.q_end, : s.k_end]
        m = seen.amax(-1, keepdim=True)
        torch.testing.assert_close(s.m_new, m)
        torch.testing.assert_close(s.l, torch.exp(seen - m).sum(-1, keepdim=True))
        assert torch.all(s.rescale <= 1)
        # The partial output is the attention over the keys seen so far.
        partial = torch.softmax(seen, -1) @ v[..., : s.k_end, :]
        torch.testing.assert_close(s.partial, partial, atol=1e-6, rtol=1e-5)
    assert [s.last for s in steps] == [False, False, True, False, False, True]
    assert torch.all(steps[0].rescale == 0)  # nothing to rescale before the first block


def test_block_size_must_be_positive():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="at least 1"):
        tiled_attention(q, k, v, block_size=0)
