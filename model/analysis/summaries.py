"""Summaries of attention maps: head aggregates, rollout, entropy, attention distance.

Most take [layers, heads, queries, keys] tensors (a short trace's ``attention[kind]``); the
``trace_*`` forms read a Trace a layer and a band of query rows at a time through
``attention_heads``, so a long input never holds more than one band of one layer's maps.
"""

from __future__ import annotations

import torch

BAND_CELLS = 2**24  # cells (heads x rows x keys) read at once by the streaming forms


def _bands(trace, kind: str):
    """Slices of query rows, each small enough that every head's rows fit BAND_CELLS."""
    _, heads, n_q, n_k = trace.shape(kind)
    step = max(1, BAND_CELLS // max(1, heads * n_k))
    return [slice(a, min(a + step, n_q)) for a in range(0, n_q, step)]


def trace_layer_aggregate(trace, kind: str, layer: int, how: str = "mean") -> torch.Tensor:
    """[Lq, Lk]: the mean or max over one layer's heads, a band of rows at a time."""
    if how not in ("mean", "max"):
        raise ValueError(f"how must be 'mean' or 'max', not {how!r}")
    bands = []
    for rows in _bands(trace, kind):
        heads = trace.attention_heads(kind, layer, rows=rows)  # [H, rows, Lk]
        bands.append(heads.mean(0) if how == "mean" else heads.amax(0))
    return torch.cat(bands)


def trace_rollout(trace, kind: str, upto: int | None = None) -> torch.Tensor:
    """``rollout`` of a Trace's self-attention, one layer's head mean at a time:
    [layers, n, n] (or [upto + 1, n, n]), never [layers, heads, n, n]."""
    layers, _, n_q, n_k = trace.shape(kind)
    if n_q != n_k:
        raise ValueError("rollout needs self-attention (as many queries as keys)")
    out, acc = [], None
    for layer in range(layers if upto is None else upto + 1):
        acc = _rollout_step(trace, kind, layer, acc)
        out.append(acc)
    return torch.stack(out)


def _rollout_step(trace, kind: str, layer: int, acc: torch.Tensor | None) -> torch.Tensor:
    """The rollout through ``layer`` from ``acc``, the rollout before it (None: none yet):
    the layer's head mean plus the residual's identity, rows renormalised, times ``acc``."""
    a = trace_layer_aggregate(trace, kind, layer, "mean")
    a = a + torch.eye(a.shape[-1])
    a = a / a.sum(dim=-1, keepdim=True)
    return a if acc is None else _product(a, acc)


def trace_rollout_layer(
    trace, kind: str, layer: int, start: tuple[int, torch.Tensor] | None = None, progress=None
) -> torch.Tensor:
    """``rollout``'s entry ``layer`` alone, [n, n]: one layer's head mean at a time, never
    more than two [n, n] matrices (a long input: 64 MB each at 4,096 tokens, where every
    layer's rollout would be 1.6 GB). ``start``: (l, rollout up to l) to go on from, l <
    layer. Lower-triangular products (causal self-attention: every key at or before its
    query) skip the blocks above the diagonal, a third of the work. ``progress(done,
    total)`` after each layer."""
    layers, _, n_q, n_k = trace.shape(kind)
    if n_q != n_k:
        raise ValueError("rollout needs self-attention (as many queries as keys)")
    if not 0 <= layer < layers:
        raise IndexError(f"{kind} attention has layers 0..{layers - 1}, not {layer}")
    first, acc = (0, None) if start is None else (start[0] + 1, start[1])
    for done, step in enumerate(range(first, layer + 1), 1):
        acc = _rollout_step(trace, kind, step, acc)
        if progress is not None:
            progress(done, layer + 1 - first)
    return acc


def _product(a: torch.Tensor, b: torch.Tensor, block: int = 512) -> torch.Tensor:
    """a @ b, by bands of rows that stop at the diagonal when both are lower-triangular."""
    if bool(torch.triu(a, 1).any()) or bool(torch.triu(b, 1).any()):
        return a @ b
    out = torch.zeros_like(b)
    for i in range(0, a.shape[0], block):
        end = min(a.shape[0], i + block)
        out[i:end, :end] = a[i:end, :end] @ b[:end, :end]
    return out


def trace_head_statistics(trace, kind: str, progress=None) -> dict[str, torch.Tensor]:
    """{"entropy": [L, H], "mean_distance": [L, H] (self-attention only), "first_token":
    [L, H]}, as ``entropy``, ``mean_distance`` and ``first_token_share`` compute them, a
    layer at a time: from one fused pass over its
    queries and keys where the trace allows (``Trace.row_statistics``: no map at all), else
    streamed over bands of query rows. ``progress(done, layers)`` after each layer."""
    layers, heads, n_q, n_k = trace.shape(kind)
    self_attn = n_q == n_k
    ent, dist, first = (torch.zeros(layers, heads) for _ in range(3))
    for layer in range(layers):
        fused = trace.row_statistics(kind, layer)
        if fused is None:
            ent[layer], dist[layer], first[layer] = _band_statistics(trace, kind, layer, self_attn)
        else:
            live_n = fused.live.sum().clamp_min(1)
            ent[layer] = fused.entropy.sum(-1) / live_n
            gap = (fused.query_position[None, :] - fused.key_position).masked_fill(~fused.live, 0)
            dist[layer] = gap.sum(-1) / live_n
            first[layer] = fused.first_key.sum(-1) / live_n
        if progress is not None:
            progress(layer + 1, layers)
    out = {"entropy": ent}
    if self_attn:
        out["mean_distance"] = dist
    out["first_token"] = first
    return out


def _band_statistics(trace, kind: str, layer: int, self_attn: bool):
    """One layer's (entropy, mean distance, weight on the first key), each [H], from its
    maps, a band of rows at a time."""
    _, heads, n_q, n_k = trace.shape(kind)
    totals = None  # [4, H]: entropy, distance, first key, live rows; where the maps are made
    for rows in _bands(trace, kind):
        p = trace.attention_heads(kind, layer, rows=rows, on_device=True).clamp_min(0)
        if totals is None:
            totals = torch.zeros(4, heads, device=p.device)
        live = (p.sum(dim=-1) > 0).float()  # [H, r]
        h = -(p * torch.log(p.clamp_min(1e-12))).sum(dim=-1)
        totals[0] += (h * live).sum(-1)
        totals[2] += (p[..., 0] * live).sum(-1)
        totals[3] += live.sum(-1)
        if self_attn:
            q_pos = torch.arange(n_q, device=p.device)[rows].float()
            gap = (q_pos[:, None] - torch.arange(n_k, device=p.device).float()[None, :]).abs()
            totals[1] += ((p * gap).sum(-1) * live).sum(-1)
    totals = totals.cpu()
    n = totals[3].clamp_min(1)
    return totals[0] / n, totals[1] / n, totals[2] / n


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


def first_token_share(attention: torch.Tensor) -> torch.Tensor:
    """Mean over queries of each head's weight on the first token: [L, H, Lq, Lk] -> [L, H].

    Near 1 for a head that parks its attention there when it has nothing to do: large
    decoders' attention sink (Xiao et al. 2023). Rows of all zeros are left out."""
    live = (attention.sum(dim=-1) > 0).to(attention.dtype)
    return (attention[..., 0] * live).sum(dim=-1) / live.sum(dim=-1).clamp_min(1)


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
