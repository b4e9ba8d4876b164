"""Attention against torch's own implementations, which nobody here wrote."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from model.attention import AttentionConfig, MultiHeadAttention, scaled_dot_product_attention
from model.masks import causal_mask
from tests.module_state import assert_same_tensors, tensor_state


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def qkv(b=2, h=3, lq=5, lk=7, d=8):
    return torch.randn(b, h, lq, d), torch.randn(b, h, lk, d), torch.randn(b, h, lk, d)


def test_sdpa_without_mask_equals_torch():
    q, k, v = qkv()
    out, w = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v))
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 3, 5))


def test_sdpa_with_causal_mask_equals_torch_and_never_looks_ahead():
    q, k, v = qkv(lq=6, lk=6)
    mask = causal_mask(6)
    out, w = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    assert torch.all(w.triu(diagonal=1) == 0)


def test_sdpa_with_padding_mask_equals_torch_and_gives_padded_keys_no_weight():
    q, k, v = qkv()
    valid = torch.tensor([[1, 1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1, 1]], dtype=torch.bool)
    mask = valid[:, None, None, :]  # [B, 1, 1, Lk] broadcasts over heads and queries
    out, w = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    assert torch.all(w[0, :, :, 4:] == 0)


def test_query_with_no_allowed_key_gets_zero_weights_and_output_not_nan():
    q, k, v = qkv(lq=3, lk=4)
    q.requires_grad_(True)
    mask = torch.ones(3, 4, dtype=torch.bool)
    mask[1] = False  # the middle query may attend nothing
    out, w = scaled_dot_product_attention(q, k, v, mask)
    assert torch.all(w[..., 1, :] == 0) and torch.all(out[..., 1, :] == 0)
    torch.testing.assert_close(w[..., [0, 2], :].sum(-1), torch.ones(2, 3, 2))
    out.sum().backward()
    assert torch.isfinite(q.grad).all()


def test_stages_scale_by_sqrt_dk_not_dk():
    q, k, v = qkv(d=16)
    mask = causal_mask(5)[:, :5]
    q, k, v = q[..., :5, :], k[..., :5, :], v[..., :5, :]
    _, st = scaled_dot_product_attention(q, k, v, mask, return_stages=True)
    torch.testing.assert_close(st.scores, q @ k.transpose(-2, -1))
    torch.testing.assert_close(st.scaled, st.scores / math.sqrt(16))  # 4, not 16
    assert torch.all(torch.isneginf(st.masked[..., ~mask]))
    torch.testing.assert_close(st.weights, torch.softmax(st.masked, dim=-1))


def copy_into_torch_mha(ours: MultiHeadAttention, ref: nn.MultiheadAttention) -> None:
    with torch.no_grad():
        ref.in_proj_weight.copy_(
            torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight])
        )
        ref.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
        ref.out_proj.weight.copy_(ours.out_proj.weight)
        ref.out_proj.bias.copy_(ours.out_proj.bias)


@pytest.mark.parametrize("masking", ["none", "causal", "padding"])
def test_multi_head_attention_equals_torch_multihead_attention(masking):
    d_model, n_heads = 32, 4
    ours = MultiHeadAttention(AttentionConfig(d_model, n_heads)).eval()
    ref = nn.MultiheadAttention(d_model, n_heads, batch_first=True).eval()
    copy_into_torch_mha(ours, ref)
    x = torch.randn(2, 6, d_model)
    mask, kw = None, {}
    if masking == "causal":
        mask = causal_mask(6)
        kw = {"attn_mask": ~mask}  # torch: True = NOT allowed
    elif masking == "padding":
        valid = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]], dtype=torch.bool)
        mask = valid[:, None, None, :]
        kw = {"key_padding_mask": ~valid}
    out, w, _, _ = ours(x, x, x, mask)
    ref_out, ref_w = ref(x, x, x, need_weights=True, average_attn_weights=True, **kw)
    torch.testing.assert_close(out, ref_out, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(w.mean(dim=1), ref_w, atol=1e-6, rtol=1e-5)
    assert w.shape == (2, n_heads, 6, 6)


def test_cross_attention_with_other_key_length_equals_torch():
    ours = MultiHeadAttention(AttentionConfig(16, 2)).eval()
    ref = nn.MultiheadAttention(16, 2, batch_first=True).eval()
    copy_into_torch_mha(ours, ref)
    query, memory = torch.randn(3, 4, 16), torch.randn(3, 9, 16)
    out, w, _, _ = ours(query, memory, memory)
    ref_out, ref_w = ref(query, memory, memory)
    torch.testing.assert_close(out, ref_out, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(w.mean(1), ref_w, atol=1e-6, rtol=1e-5)


def test_fast_path_equals_traced_path_even_with_fully_masked_rows():
    mha = MultiHeadAttention(AttentionConfig(16, 4)).eval()
    x = torch.randn(2, 5, 16)
    valid = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    mask = valid[:, None, None, :] & valid[:, None, :, None] & causal_mask(5)
    traced = mha(x, x, x, mask).output
    fast, none, _, _ = mha(x, x, x, mask, need_weights=False)
    assert none is None
    torch.testing.assert_close(traced, fast, atol=1e-6, rtol=1e-5)
    assert torch.isfinite(fast).all()


def test_attention_is_returned_not_stored_on_the_module():
    mha = MultiHeadAttention(AttentionConfig(16, 4)).eval()
    before = tensor_state(mha)
    x = torch.randn(1, 3, 16)
    stages = mha(x, x, x, return_stages=True).stages
    assert_same_tensors(before, tensor_state(mha))
    assert stages is not None  # the weights came back to the caller instead


def test_the_state_check_catches_attention_kept_on_a_module():
    mha = MultiHeadAttention(AttentionConfig(16, 4)).eval()
    before = tensor_state(mha)
    x = torch.randn(1, 3, 16)
    mha.last_weights = mha(x, x, x).weights  # the leak the check exists for
    with pytest.raises(AssertionError, match="left a tensor"):
        assert_same_tensors(before, tensor_state(mha))


def test_head_mask_switches_one_head_off_and_all_ones_changes_nothing():
    mha = MultiHeadAttention(AttentionConfig(16, 4)).eval()
    x = torch.randn(1, 5, 16)
    base = mha(x, x, x).output
    same = mha(x, x, x, head_mask=torch.ones(4)).output
    torch.testing.assert_close(base, same)
    off = torch.ones(4)
    off[2] = 0
    changed = mha(x, x, x, head_mask=off).output
    assert not torch.allclose(base, changed)
    # Removing head 2 removes exactly its slice of the concatenation before W_O.
    heads, _ = scaled_dot_product_attention(
        mha.split_heads(mha.q_proj(x)),
        mha.split_heads(mha.k_proj(x)),
        mha.split_heads(mha.v_proj(x)),
    )
    heads[:, 2] = 0
    torch.testing.assert_close(changed, mha.out_proj(mha.merge_heads(heads)))


@pytest.mark.parametrize("need_weights", [True, False])
def test_a_head_mask_per_sentence_switches_each_sentences_own_head(need_weights):
    """[B, H]: a batch of ablations, one head off in each sentence (head attribution), gives
    each sentence what the [H] mask of its own head gives it alone, on either path."""
    mha = MultiHeadAttention(AttentionConfig(16, 4)).eval()
    x = torch.randn(1, 5, 16).expand(4, -1, -1)
    mask = torch.ones(4, 4) - torch.eye(4)  # sentence j without head j
    batched = mha(x, x, x, head_mask=mask, need_weights=need_weights).output
    for j in range(4):
        alone = mha(x[:1], x[:1], x[:1], head_mask=mask[j], need_weights=need_weights).output
        torch.testing.assert_close(batched[j : j + 1], alone)
    assert not torch.allclose(batched[0], batched[1])


def test_d_model_not_divisible_by_heads_is_refused_clearly():
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(AttentionConfig(10, 3))
