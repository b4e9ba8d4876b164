"""Summaries of attention maps: head aggregates, rollout, entropy, attention distance.

All take [layers, heads, queries, keys] tensors as stored in a Trace and return tensors.
"""

from __future__ import annotations

import torch


def head_mean(attention: torch.Tensor) -> torch.Tensor:
    """[L, H, Lq, Lk] -> [L, Lq, Lk]: what the heads of a layer attend to on average."""
    return attention.mean(dim=1)


def head_max(attention: torch.Tensor) -> torch.Tensor:
    """[L, H, Lq, Lk] -> [L, Lq, Lk]: the strongest weight any head puts on each cell.

    Rows no longer sum to 1; it shows where *some* head looks, not a distribution.
    """
    return attention.amax(dim=1)


def rollout(attention: torch.Tensor) -> torch.Tensor:
    """Attention rollout (Abnar & Zuidema, 2020) for self-attention, [L, H, n, n] -> [L, n, n].

    Each layer's head-averaged map gets the identity added for the residual connection and
    its rows renormalised; multiplying those through the layers tracks how much of each
    input token reaches each position. Entry l is the rollout up to and including layer l.
    """
    if attention.shape[-1] != attention.shape[-2]:
        raise ValueError("rollout needs self-attention (as many queries as keys)")
    n = attention.shape[-1]
    eye = torch.eye(n, dtype=attention.dtype)
    out, acc = [], eye
    for layer in head_mean(attention):  # [n, n]
        a = layer + eye
        a = a / a.sum(dim=-1, keepdim=True)
        acc = a @ acc
        out.append(acc)
    return torch.stack(out)


def entropy(attention: torch.Tensor) -> torch.Tensor:
    """Mean over queries of each head's attention entropy in nats: [L, H, Lq, Lk] -> [L, H].

    0 = every query looks at one key; log(n) = spread evenly. Rows of all zeros (a query
    with nothing to see) are left out.
    """
    p = attention.clamp_min(0)
    h = -(p * torch.log(p.clamp_min(1e-12))).sum(dim=-1)  # [L, H, Lq]
    live = (p.sum(dim=-1) > 0).to(h.dtype)
    return (h * live).sum(dim=-1) / live.sum(dim=-1).clamp_min(1)


def mean_distance(attention: torch.Tensor) -> torch.Tensor:
    """Average |query position - key position| weighted by attention: [L, H, n, n] -> [L, H].

    Small for heads that look at neighbours, large for heads that reach across the
    sentence. Only meaningful for self-attention, where both axes are the same tokens.
    """
    lq, lk = attention.shape[-2:]
    if lq != lk:
        raise ValueError("attention distance needs self-attention (as many queries as keys)")
    pos = torch.arange(lq, dtype=attention.dtype)
    dist = (pos[:, None] - pos[None, :]).abs()  # [n, n]
    per_query = (attention * dist).sum(dim=-1)  # [L, H, n]
    live = (attention.sum(dim=-1) > 0).to(attention.dtype)
    return (per_query * live).sum(dim=-1) / live.sum(dim=-1).clamp_min(1)


def sink_share(
    attention: torch.Tensor, tokens: list[str], sinks: tuple[str, ...] = ("[CLS]", "[SEP]")
) -> torch.Tensor:
    """[L, H, n, n] self-attention -> [L, H, len(sinks)]: the share of each head's attention,
    averaged over its queries, that lands on each sink token (all its occurrences).

    Heads with nothing useful to do for a query still have to spend a whole softmax
    somewhere; many park it on [CLS] / [SEP] (Clark et al. 2019; Xiao et al. 2023 call such
    tokens attention sinks). A share near 1 means the head mostly does nothing.
    """
    if attention.shape[-1] != len(tokens):
        raise ValueError(f"{attention.shape[-1]} keys but {len(tokens)} tokens")
    per_query = attention.float().mean(dim=-2)  # [L, H, n]: average weight on each key
    columns = []
    for sink in sinks:
        where = torch.tensor([tok == sink for tok in tokens])
        columns.append(per_query[..., where].sum(dim=-1))
    return torch.stack(columns, dim=-1)
