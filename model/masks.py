"""Attention masks as booleans: True = this query may attend this key.

Shapes broadcast against attention scores [B, H, Lq, Lk], so a mask built here can be
handed straight to ``scaled_dot_product_attention``.
"""

from __future__ import annotations

import torch


def causal_mask(n: int, device: torch.device | str | None = None) -> torch.Tensor:
    """[n, n] lower triangle: position i sees positions 0..i, never the future."""
    return future_mask(n, n, device=device)


def padding_mask(ids: torch.Tensor, pad_id: int) -> torch.Tensor:
    """[B, L] True where a real token stands (not padding)."""
    return ids != pad_id


def key_padding_mask(valid: torch.Tensor) -> torch.Tensor:
    """[B, L] validity -> [B, 1, 1, Lk]: no query may attend a padded key."""
    return valid[:, None, None, :]


def attention_mask(
    query_valid: torch.Tensor | None,
    key_valid: torch.Tensor | None,
    causal: bool = False,
    offset: int = 0,
) -> torch.Tensor | None:
    """Combine padding on both sides with an optional causal rule, as [B, 1, Lq, Lk].

    Padded keys get no weight; padded query rows are all False, so attention hands back
    zero weights and a zero output there instead of NaN. ``offset`` is the number of keys
    that precede the first query (incremental decoding with a key/value cache).
    """
    mask = None
    if key_valid is not None:
        mask = key_valid[:, None, None, :]
    if query_valid is not None:
        q = query_valid[:, None, :, None]
        mask = q if mask is None else mask & q
    if causal:
        lq = query_valid.shape[1] if query_valid is not None else None
        lk = key_valid.shape[1] if key_valid is not None else None
        if lq is None or lk is None:
            raise ValueError("a causal mask needs both query and key lengths")
        c = future_mask(lq, lk, offset, device=query_valid.device)
        mask = c if mask is None else mask & c
    return mask


def future_mask(
    lq: int, lk: int, offset: int = 0, device: torch.device | str | None = None
) -> torch.Tensor:
    """[Lq, Lk] causal rule for queries at positions offset..offset+Lq-1 over keys 0..Lk-1."""
    q_pos = torch.arange(lq, device=device)[:, None] + offset
    k_pos = torch.arange(lk, device=device)[None, :]
    return k_pos <= q_pos
