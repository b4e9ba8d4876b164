"""Scaled dot-product and multi-head attention, written out so every stage can be shown.

softmax(Q Kᵀ / √d_k) V — the scale is the square root of d_k: q·k of two random unit-variance
vectors has variance d_k, so dividing by √d_k brings it back to 1 and keeps the softmax
out of its saturated, vanishing-gradient region.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class AttentionStages:
    """Every step between Q, K and the weights, each [..., Lq, Lk], for the teaching pages."""

    scores: torch.Tensor  # raw Q Kᵀ
    scaled: torch.Tensor  # Q Kᵀ / √d_k
    masked: torch.Tensor  # scaled, with -inf where the mask forbids
    weights: torch.Tensor  # softmax over keys; all zero for a query with no allowed key


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    dropout_p: float = 0.0,
    return_stages: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | AttentionStages]:
    """softmax(Q Kᵀ / √d_k) V over the last two dims; returns (out, weights).

    q [..., Lq, d_k], k [..., Lk, d_k], v [..., Lk, d_v]; mask is bool, True = may attend,
    broadcastable to [..., Lq, Lk]. A query with no allowed key gets zero weights and a zero
    output rather than NaN. With ``return_stages`` the second item is an AttentionStages.
    """
    d_k = q.size(-1)
    scores = q @ k.transpose(-2, -1)  # [..., Lq, Lk]
    scaled = scores / math.sqrt(d_k)
    if mask is None:
        masked = scaled
        weights = torch.softmax(scaled, dim=-1)
    else:
        mask = mask.to(torch.bool)
        # The dtype's lowest finite value instead of -inf: a fully masked row then softmaxes
        # to a harmless uniform row (zeroed just below) instead of 0/0 = NaN.
        filled = scaled.masked_fill(~mask, torch.finfo(scaled.dtype).min)
        weights = torch.softmax(filled, dim=-1).masked_fill(~mask, 0.0)
        masked = scaled.masked_fill(~mask, float("-inf")) if return_stages else filled
    attended = F.dropout(weights, dropout_p) if dropout_p > 0 else weights
    out = attended @ v  # [..., Lq, d_v]
    if return_stages:
        return out, AttentionStages(scores, scaled, masked, weights)
    return out, weights


def _fast_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, dropout_p: float
) -> torch.Tensor:
    """torch's fused kernel, made to agree with the traced path on fully masked rows."""
    if mask is None:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)
    row_ok = mask.any(dim=-1, keepdim=True)  # [..., Lq, 1]
    # Let rows with no allowed key attend everything (no NaN inside the kernel), then zero them.
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask | ~row_ok, dropout_p=dropout_p)
    return out.masked_fill(~row_ok, 0.0)


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W_O, head_i = Attention(Q W_Q^i, K W_K^i, V W_V^i).

    The per-head projections are packed into one d_model x d_model matrix each (head i owns
    columns i*d_k .. (i+1)*d_k). Weights are returned, never kept on the module: one model
    serves every browser session at once.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} must be divisible by n_heads={n_heads}")
        self.d_model, self.n_heads, self.d_k = d_model, n_heads, d_model // n_heads
        self.dropout = dropout
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:  # [B, L, D] -> [B, H, L, d_k]
        b, n, _ = x.shape
        return x.view(b, n, self.n_heads, self.d_k).transpose(1, 2)

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:  # [B, H, L, d_k] -> [B, L, D]
        b, _, n, _ = x.shape
        return x.transpose(1, 2).reshape(b, n, self.d_model)

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None = None,
        *,
        need_weights: bool = True,
        return_stages: bool = False,
        cache: dict | None = None,
        static_kv: bool = False,
        head_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | AttentionStages | None]:
        """Returns (out [B, Lq, D], weights [B, H, Lq, Lk]).

        need_weights=False takes the fused fast path and returns None for the weights.
        cache: a dict the caller owns for incremental decoding; new keys/values are appended
        (self-attention) or computed once and reused (``static_kv``, cross-attention).
        head_mask [H]: multiplies each head's output (0 switches a head off).
        """
        q = self.split_heads(self.q_proj(query))  # [B, H, Lq, d_k]
        if cache is not None and static_kv and "k" in cache:
            k, v = cache["k"], cache["v"]
        else:
            k = self.split_heads(self.k_proj(key))  # [B, H, Lk, d_k]
            v = self.split_heads(self.v_proj(value))
            if cache is not None:
                if not static_kv and "k" in cache:
                    k = torch.cat([cache["k"], k], dim=2)
                    v = torch.cat([cache["v"], v], dim=2)
                cache["k"], cache["v"] = k, v
        p = self.dropout if self.training else 0.0
        if need_weights or return_stages:
            heads, weights = scaled_dot_product_attention(
                q, k, v, mask, dropout_p=p, return_stages=return_stages
            )
        else:
            heads, weights = _fast_attention(q, k, v, mask, p), None
        if head_mask is not None:
            heads = heads * head_mask.to(heads.dtype).view(1, -1, 1, 1)
        return self.out_proj(self.merge_heads(heads)), weights
