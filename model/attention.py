"""Scaled dot-product and multi-head attention, written out so every stage can be shown.

softmax(Q Kᵀ / √d_k) V — the scale is the square root of d_k: q·k of two random unit-variance
vectors has variance d_k, so dividing by √d_k brings it back to 1 and keeps the softmax
out of its saturated, vanishing-gradient region.

Since 2017: grouped-query attention (fewer key/value heads than query heads, each shared by
a group), rotary positions and ALiBi applied inside self-attention (see model.positional),
and FlashAttention's online softmax (``tiled_attention``): the same numbers, computed block by
block without ever holding the whole [Lq, Lk] matrix.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from model.masks import MaskSpec, block_owner
from model.positional import alibi_bias, alibi_slopes, rope_table, rotate


@dataclass
class AttentionStages:
    """Every step between Q, K and the weights, each [..., Lq, Lk], for the teaching pages."""

    scores: torch.Tensor  # raw Q Kᵀ
    scaled: torch.Tensor  # Q Kᵀ / √d_k (+ the ALiBi distance bias where the model uses it)
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
    bias: torch.Tensor | None = None,
    scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor | AttentionStages]:
    """softmax(Q Kᵀ / √d_k + bias) V over the last two dims; returns (out, weights).

    q [..., Lq, d_k], k [..., Lk, d_k], v [..., Lk, d_v]; mask is bool, True = may attend,
    broadcastable to [..., Lq, Lk]. A query with no allowed key gets zero weights and a zero
    output rather than NaN. ``bias``: an additive float term on the scaled scores (ALiBi),
    broadcastable the same way. With ``return_stages`` the second item is an AttentionStages.
    ``scale``: the factor on q·k where it is not 1/√d_k (Gemma's query_pre_attn_scalar^-1/2).
    """
    d_k = q.size(-1)
    scores = q @ k.transpose(-2, -1)  # [..., Lq, Lk]
    scaled = scores / math.sqrt(d_k) if scale is None else scores * scale
    if bias is not None:
        scaled = scaled + bias
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
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | MaskSpec | None,
    dropout_p: float,
    bias: torch.Tensor | None = None,
    scale: float | None = None,
    band: bool = True,
) -> torch.Tensor:
    """torch's fused kernel, made to agree with the traced path on fully masked rows.

    k and v may have fewer heads than q (grouped-query attention: FlashAttention shares
    them without copying; see ``_sdpa``). A MaskSpec of plain causal attention over
    unpadded tokens reaches the kernel as ``is_causal``, with no [Lq, Lk] mask built at all
    (FlashAttention on a GPU). A causal sliding window narrower than the keys is computed a
    block of queries at a time over only the keys the window reaches (``_banded``)."""
    if band and isinstance(mask, MaskSpec) and _bands(mask):
        return _banded(q, k, v, mask, dropout_p, bias, scale)
    if isinstance(mask, MaskSpec):
        spec, mask = mask, None
        if spec.query_valid is None and spec.key_valid is None and bias is None:
            plain = spec.window is None or spec.window >= spec.lk
            # no causal rule, or one new query at the end, which sees every key
            if plain and (not spec.causal or spec.lq == 1):
                mask = None
            elif plain and spec.offset == 0 and spec.lq == spec.lk:
                return _sdpa(q, k, v, None, dropout_p, is_causal=True, scale=scale)
            else:
                mask = spec.dense(device=q.device)
        else:
            mask = spec.dense(device=q.device)
    if mask is None:
        return _sdpa(q, k, v, bias, dropout_p, scale=scale)
    mask = mask.to(torch.bool)
    row_ok = mask.any(dim=-1, keepdim=True)  # [..., Lq, 1]
    # Let rows with no allowed key attend everything (no NaN inside the kernel), then zero them.
    allowed = mask | ~row_ok
    if bias is not None:  # one float mask: the bias where allowed, -inf where not
        allowed = bias.to(q.dtype).masked_fill(~allowed, float("-inf"))
    out = _sdpa(q, k, v, allowed, dropout_p, scale=scale)
    return out.masked_fill(~row_ok, 0.0)


def _bands(spec: MaskSpec) -> bool:
    """Whether a sliding window hides most keys from some query: then only the keys inside
    it are worth computing."""
    return spec.causal and spec.window is not None and spec.window < spec.lk


def key_band(spec: MaskSpec, start: int, end: int) -> tuple[int, int]:
    """(first, end) of the keys queries start..end-1 may see under the causal rule and the
    sliding window: the only keys their weights need."""
    first = max(0, spec.offset + start - spec.window + 1) if spec.window is not None else 0
    last = min(spec.lk, spec.offset + end) if spec.causal else spec.lk
    return min(first, last), last


def band_spec(spec: MaskSpec, start: int, end: int, first: int, last: int) -> MaskSpec:
    """``spec`` for queries start..end-1 over keys first..last-1 only (the same rule)."""
    return MaskSpec(
        end - start, last - first,
        None if spec.query_valid is None else spec.query_valid[:, start:end],
        None if spec.key_valid is None else spec.key_valid[:, first:last],
        spec.causal, spec.offset + start - first, spec.window,
    )  # fmt: skip


def _banded(q, k, v, spec: MaskSpec, dropout_p, bias, scale) -> torch.Tensor:
    """Sliding-window attention, a block of ``window`` queries at a time over the at most
    2·window - 1 keys their windows reach: L·2W scores instead of L² (Gemma 3's local
    layers at 2,048 tokens and a 512 window: half of them). Keys outside a query's window
    get no weight in either form, so the outputs are the same."""
    lq, step = spec.lq, spec.window
    out = []
    for start in range(0, lq, step):
        end = min(lq, start + step)
        first, last = key_band(spec, start, end)
        part = band_spec(spec, start, end, first, last)
        b = None if bias is None else _tile(bias, start, end, first, last)
        if last == first:  # no key at all (cannot happen under the causal rule, but safe)
            out.append(q.new_zeros(*q.shape[:-2], end - start, v.shape[-1]))
            continue
        out.append(
            _fast_attention(
                q[..., start:end, :],
                k[..., first:last, :],
                v[..., first:last, :],
                part,
                dropout_p,
                b,
                scale,
                band=False,
            )
        )
    return torch.cat(out, dim=-2)


def _sdpa(q, k, v, attn_mask, dropout_p: float, is_causal: bool = False, scale=None):
    """F.scaled_dot_product_attention, sharing k / v heads where it pays.

    On CUDA only FlashAttention (float16 / bfloat16, no mask tensor) shares key/value heads
    itself (``enable_gqa``); any other case with enable_gqa falls to the math kernel (a
    dozen launches, the whole [Lq, Lk] matrix), so there k and v are expanded to every query
    head (two copies) and the memory-efficient kernel runs instead: float32 at 64 tokens of
    a Qwen2.5-0.5B-size model. On the CPU the fused kernel takes enable_gqa in any dtype."""
    groups = q.shape[-3] // k.shape[-3]
    gqa = groups > 1
    if gqa and q.is_cuda and (attn_mask is not None or q.dtype not in _FLASH_DTYPES):
        k, v, gqa = repeat_kv(k, groups), repeat_kv(v, groups), False
    return F.scaled_dot_product_attention(
        q, k, v, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=gqa
    )


_FLASH_DTYPES = (torch.float16, torch.bfloat16)


@dataclass
class QK:
    """What one attention layer's weights are made of, kept instead of the weights: its
    queries (rotary positions applied) and keys, in the weights' dtype. Maps are recomputed
    from these exactly (``attention_weights``) for the head and window a view asks for.

    ``block_sums``, when the pass was asked for them (``sum_blocks``): every head's weights
    summed over blocks of query rows and key columns (``block_edges``), float32 [B, H, R, C]; what
    the wide views (all heads, the whole model) draw for a long input, without recomputing
    hundreds of maps."""

    q: torch.Tensor  # [B, H, Lq, d_k]
    k: torch.Tensor  # [B, G, Lk, d_k]; key head g serves query heads g·H/G .. (g+1)·H/G - 1
    alibi: bool = False  # ALiBi's distance bias on the scores (slopes from H)
    block_sums: torch.Tensor | None = None
    scale: float | None = None  # the factor on q·k where it is not 1/√d_k (Gemma)
    # QK-norm's input and output, before the rotary positions, where the pass was asked for
    # stages: "q_before", "q_after" [B, H, Lq, d_k], "k_before", "k_after" [B, G, Lk, d_k]
    norm_stages: dict[str, torch.Tensor] | None = None


def block_edges(n: int, size: int) -> list[int]:
    """Edges (token positions) of at most ``size`` near-equal blocks covering 0..n."""
    blocks = max(1, min(n, size))
    return [round(i * n / blocks) for i in range(blocks + 1)]


def sum_blocks(
    q: torch.Tensor,
    k: torch.Tensor,
    mask: torch.Tensor | MaskSpec | None,
    bias: torch.Tensor | None,
    blocks: int,
    v: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    scale: float | None = None,
) -> tuple[torch.Tensor | None, torch.Tensor]:
    """Each head's attention weights summed over blocks of queries and of keys (at most
    ``blocks`` a side, ``block_edges``): float32 [B, H, R, C], from the fused kernel; with
    ``v``, the attention's own output [B, H, Lq, d_v] from the same pass, else None.

    The weights times a value that is 1 on a key block's keys and 0 elsewhere is the weight
    a query gives that block, so those indicator columns ride along as extra value columns,
    never a map. The fused kernel needs as many query/key columns as value columns: queries
    and keys get zero columns (their products are unchanged; the scale stays 1/√d_k, or
    ``scale``). Exact, with the layer's mask and bias; a query that may see nothing gives 0.

    The names: ``sum_blocks`` (this function) sums; what it returns, and what QK and
    AttentionRecord keep, are ``block_sums``; how many blocks a side is ``blocks`` here and
    in ``MultiHeadAttention.forward``, ``summed_blocks`` on a model's forward and the
    Recorder (model.trace)."""
    lq, lk, d = q.shape[-2], k.shape[-2], q.shape[-1]
    rows, cols = block_edges(lq, blocks), block_edges(lk, blocks)
    n_cols, d_v = len(cols) - 1, 0 if v is None else v.shape[-1]
    width = max(d, d_v + n_cols)
    indicator = torch.zeros(lk, width - d_v, dtype=q.dtype, device=q.device)
    indicator[torch.arange(lk, device=q.device), block_owner(cols, q.device)] = 1
    values = indicator.expand(*k.shape[:-2], lk, width - d_v)
    if v is not None:
        values = torch.cat([v, values], dim=-1)
    if width > d:
        q, k = F.pad(q, (0, width - d)), F.pad(k, (0, width - d))
    scale = 1 / math.sqrt(d) if scale is None else scale
    out = _fast_attention(q, k, values, mask, dropout_p, bias, scale=scale)
    row_blocks = torch.zeros(len(rows) - 1, lq, device=q.device)
    row_blocks[block_owner(rows, q.device), torch.arange(lq, device=q.device)] = 1
    block_sums = row_blocks @ out[..., d_v : d_v + n_cols].float()  # [B, H, R, C]
    return (None if v is None else out[..., :d_v]), block_sums


# torch's CPU FlashAttention kernel, which also returns each row's log-normaliser (what
# F.scaled_dot_product_attention drops); None on a torch without it
try:
    _CPU_FLASH_WITH_LSE = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
except (AttributeError, RuntimeError):
    _CPU_FLASH_WITH_LSE = None


@dataclass
class RowStatistics:
    """Per head and query row, from one fused pass (``row_statistics``)."""

    entropy: torch.Tensor  # float32 [H, Lq]: the row's weights' entropy in nats
    key_position: torch.Tensor  # float32 [H, Lq]: the mean key position, weighted
    first_key: torch.Tensor  # float32 [H, Lq]: the weight on key 0 (an attention sink's)
    query_position: torch.Tensor  # [Lq]: each query's own position, counted from key 0
    live: torch.Tensor  # bool [Lq]: rows that may see some key (others are all zeros)

    FIELDS = ("entropy", "key_position", "first_key", "query_position", "live")


def row_statistics(
    q: torch.Tensor,
    k: torch.Tensor,
    mask: MaskSpec | torch.Tensor | None,
    alibi: bool = False,
    scale: float | None = None,
) -> RowStatistics | None:
    """Every head's entropy, mean key position and weight on the first key per query of one
    layer, exactly as the weights would give them, from torch's fused CPU kernel: no map
    is held.

    q [H, Lq, d_k], k [G, Lk, d_k] of one sentence (a record's layout; G divides H). For a
    row's weights p = softmax(s), H(p) = log Σ exp(s) − Σ p·s: the kernel returns the first
    (its log-normaliser), and Σ_j p_j s_j = q · (Σ_j p_j k_j) / √d_k (+ the bias's mean)
    needs only the keys as value columns, beside one column holding each key's position
    and one that is 1 on the first key.

    Only where every allowed key is at or before its query (the causal rule), so that the
    mean distance is the query's position less the mean key position; None otherwise, on
    a GPU, or on a torch without that kernel: the caller then reads the maps in bands.
    A sliding window is read a block of queries at a time over only the keys it reaches."""
    if _CPU_FLASH_WITH_LSE is None or q.device.type != "cpu":
        return None
    h, lq, d = q.shape
    lk = k.shape[-2]
    banded = isinstance(mask, MaskSpec) and (mask.lq, mask.lk) == (lq, lk) and _bands(mask)
    if banded and not alibi:  # (ALiBi's distances count from key 0: never cut)
        return _banded_row_statistics(q, k, mask, scale)
    return _row_statistics(q, k, mask, alibi, scale)


def _row_statistics(q, k, mask, alibi: bool, scale: float | None) -> RowStatistics | None:
    """``row_statistics`` over every key (see there)."""
    h, lq, d = q.shape
    lk = k.shape[-2]
    if isinstance(mask, MaskSpec):
        if not mask.causal or (mask.lq, mask.lk) != (lq, lk):
            return None
        q_pos, k_pos = mask.positions(device=q.device)
        plain = mask.query_valid is None and mask.key_valid is None and mask.offset == 0
        plain = plain and lq == lk and (mask.window is None or mask.window >= lk)
        allowed = None if plain and not alibi else mask.dense(device=q.device)[0, 0]
    else:
        q_pos, k_pos = torch.arange(lq) + (lk - lq), torch.arange(lk)
        plain = False
        allowed = torch.ones(lq, lk, dtype=torch.bool) if mask is None else mask.to(torch.bool)
        allowed = torch.broadcast_to(allowed, (*allowed.shape[:-2], lq, lk)).reshape(-1, lq, lk)[0]
        if bool((allowed & (k_pos[None, :] > q_pos[:, None])).any()):
            return None  # a key after its query: |i - j| is not linear in j
    live = torch.ones(lq, dtype=torch.bool) if allowed is None else allowed.any(-1)
    bias = None
    if allowed is not None:  # rows that see nothing see everything, then are left out
        bias = torch.zeros(lq, lk).masked_fill_(~(allowed | ~live[:, None]), float("-inf"))
        if alibi:
            bias = bias + alibi_bias(h, q_pos, k_pos)
        bias = bias[None] if bias.dim() == 3 else bias[None, None]
    keys = repeat_kv(k.float()[None], h // k.shape[0])  # [1, H, Lk, d]
    extra = torch.zeros(lk, 2)  # each key's position, and 1 on key 0 only
    extra[:, 0], extra[0, 1] = k_pos.float(), 1.0
    values = torch.cat([keys, extra.expand(1, h, lk, 2)], -1)
    scale = 1 / math.sqrt(d) if scale is None else scale
    out, log_z = _CPU_FLASH_WITH_LSE(
        F.pad(q.float()[None], (0, 2)),
        F.pad(keys, (0, 2)),
        values,
        0.0,
        plain and not alibi,
        attn_mask=bias,
        scale=scale,
    )
    mean_score = scale * (q.float() * out[0, ..., :d]).sum(-1)  # [H, Lq]
    key_position = out[0, ..., d]
    if alibi:  # the bias -m·(i - j) at its weighted mean
        slopes = alibi_slopes(h)[:, None]
        mean_score = mean_score - slopes * (q_pos.float()[None, :] - key_position)
    entropy = (log_z[0] - mean_score).clamp_min_(0).masked_fill_(~live, 0.0)
    first_key = out[0, ..., d + 1].masked_fill(~live, 0.0)
    return RowStatistics(entropy, key_position.masked_fill(~live, 0.0), first_key, q_pos, live)


def _banded_row_statistics(q, k, spec: MaskSpec, scale) -> RowStatistics | None:
    """``row_statistics`` under a sliding window: each block of ``window`` queries over the
    keys its windows reach, positions shifted back to count from key 0."""
    parts = []
    for start in range(0, spec.lq, spec.window):
        end = min(spec.lq, start + spec.window)
        first, last = key_band(spec, start, end)
        part = band_spec(spec, start, end, first, last)
        found = _row_statistics(q[:, start:end], k[:, first:last], part, False, scale)
        if found is None:
            return None
        if first:  # key 0 is outside these windows: no weight on it
            found.first_key = torch.zeros_like(found.first_key)
            found.key_position = (found.key_position + first).masked_fill_(~found.live, 0.0)
            found.query_position = found.query_position + first
        parts.append(found)
    return RowStatistics(
        *(torch.cat([getattr(p, f) for p in parts], dim=-1) for f in RowStatistics.FIELDS)
    )


def _positions(n: int, index, device) -> torch.Tensor:
    pos = torch.arange(n, device=device)
    if index is None:
        return pos
    if isinstance(index, slice):
        return pos[index]
    return pos[torch.as_tensor(index, dtype=torch.long, device=device)]


def attention_weights(
    q: torch.Tensor,
    k: torch.Tensor,
    mask: MaskSpec | torch.Tensor | None = None,
    *,
    heads: list[int] | None = None,
    n_heads: int | None = None,
    alibi: bool = False,
    rows=None,
    cols=None,
    stages: bool = False,
    scale: float | None = None,
) -> torch.Tensor | AttentionStages:
    """The weights one layer computed, recomputed in float32 from its queries and keys.

    q [H, Lq, d_k] and k [G, Lk, d_k] of one sentence (G divides H: grouped-query heads
    share keys); ``heads``: which query heads (default all) -> [len(heads), rows, cols].
    rows / cols: a slice or index list of query / key positions (None = all). ``mask``: a
    MaskSpec (rebuilt for the window) or a bool tensor broadcastable to [.., Lq, Lk].
    Same arithmetic as ``scaled_dot_product_attention``: scores / √d_k (or x ``scale``)
    (+ ALiBi), the dtype's lowest value where masked, softmax, zero where masked.
    """
    h_all, lq, d_k = q.shape[-3], q.shape[-2], q.shape[-1]
    n_heads = n_heads or h_all
    lk = k.shape[-2]
    cut_keys = isinstance(mask, MaskSpec) and not (stages or alibi)  # ALiBi counts from key 0
    if cut_keys and lq == mask.lq and lk == mask.lk:
        first, end = mask.key_span(rows)
        if end - first < lk:  # keys no row may see: zero weights, never computed
            return _keys_within(q, k, mask, first, end, heads, n_heads, rows, cols, scale)
    heads = list(range(h_all)) if heads is None else list(heads)
    groups = n_heads // k.shape[-3]
    device = q.device
    head_idx = torch.tensor(heads, dtype=torch.long, device=device)
    q_pos = _positions(lq, rows, device) + (lk - lq)  # queries are the last lq positions
    k_pos = torch.arange(lk, device=device)  # the softmax runs over every key ...
    qs = q.index_select(-3, head_idx).index_select(-2, q_pos - (lk - lq)).float()
    ks = k.index_select(-3, head_idx // groups).float()
    scores = qs @ ks.transpose(-2, -1)  # [h, r, Lk]
    # Without stages nothing but the weights is returned: the steps run in place (a copy
    # of [heads, rows, keys] each was half a 4,096-token layer's time on a CPU).
    if scale is None:
        scaled = scores / math.sqrt(d_k) if stages else scores.div_(math.sqrt(d_k))
    else:
        scaled = scores * scale if stages else scores.mul_(scale)
    if alibi:
        dist = (q_pos[:, None] - k_pos[None, :]).abs().to(torch.float32)
        slopes = alibi_slopes(n_heads).to(device)[head_idx]
        scaled = scaled - slopes[:, None, None] * dist
    if isinstance(mask, MaskSpec):
        # rows that see every key are softmaxed as they are: the same numbers, without
        # building and applying a mask that hides nothing (every decoding step's row)
        allowed = None if mask.open_to(rows) else mask.dense(rows, None, device)[0, 0]
    elif mask is not None:
        allowed = torch.broadcast_to(mask.to(torch.bool), (*mask.shape[:-2], lq, lk))
        allowed = allowed.reshape(-1, lq, lk)[0]  # one sentence: [Lq, Lk]
        allowed = allowed[q_pos - (lk - lq)]
    else:
        allowed = None
    if allowed is None:
        weights = torch.softmax(scaled, dim=-1)
        masked = scaled
    elif stages:
        filled = scaled.masked_fill(~allowed, torch.finfo(scaled.dtype).min)
        weights = torch.softmax(filled, dim=-1).masked_fill(~allowed, 0.0)
        masked = scaled.masked_fill(~allowed, float("-inf"))
    else:
        blocked = ~allowed
        masked = scaled.masked_fill_(blocked, torch.finfo(scaled.dtype).min)
        weights = torch.softmax(masked, dim=-1).masked_fill_(blocked, 0.0)
    if cols is not None:  # ... and the window is cut from its result
        cut = _positions(lk, cols, device)
        scores, scaled, masked, weights = (t[..., cut] for t in (scores, scaled, masked, weights))
    if stages:
        return AttentionStages(scores, scaled, masked, weights)
    return weights


def _keys_within(q, k, mask: MaskSpec, first, end, heads, n_heads, rows, cols, scale=None):
    """``attention_weights`` for rows that may see only keys first..end-1: computed over
    those keys (the same softmax: every other key is masked) and set into zeros."""
    lq, lk = q.shape[-2], k.shape[-2]
    inside = MaskSpec(
        lq, end - first,
        mask.query_valid,
        None if mask.key_valid is None else mask.key_valid[:, first:end],
        mask.causal, mask.offset - first, mask.window,
    )  # fmt: skip
    part = attention_weights(
        q, k[..., first:end, :], inside, heads=heads, n_heads=n_heads, rows=rows, scale=scale
    )
    out = part.new_zeros(*part.shape[:-1], lk)
    out[..., first:end] = part
    return out if cols is None else out[..., _positions(lk, cols, out.device)]


# --- FlashAttention's online softmax ------------------------------------------------------------


@dataclass
class TileStep:
    """The running state after one [query block x key block] tile of ``online_softmax``.

    Shapes are the tile's: scores [..., bq, bk], the rest per query row [..., bq, 1] or
    [..., bq, d_v]. ``rescale`` = exp(m_old - m_new) is what the earlier sum and output are
    multiplied by when a larger score turns up.
    """

    q_start: int
    q_end: int
    k_start: int
    k_end: int
    scores: torch.Tensor  # this tile's scaled (+ bias) scores, -inf where masked
    m_old: torch.Tensor  # running max before this tile (-inf before the first)
    m_new: torch.Tensor  # running max after it
    rescale: torch.Tensor  # exp(m_old - m_new): 0 the first time, 1 when the max held
    l: torch.Tensor  # noqa: E741  running sum of exp(score - m_new) after this tile
    acc: torch.Tensor  # running un-normalised output Σ exp(score - m_new) v
    last: bool  # the last key block of these queries: acc / l is their output

    @property
    def partial(self) -> torch.Tensor:
        """acc / l: the output these queries would get if the keys ended here."""
        return torch.where(self.l > 0, self.acc / self.l.clamp_min(1e-30), 0.0)


def _tile(t: torch.Tensor | None, qs: int, qe: int, ks: int, ke: int) -> torch.Tensor | None:
    """Rows qs:qe and columns ks:ke of a mask or bias, leaving broadcast (size-1) axes alone."""
    if t is None:
        return None
    rows = slice(None) if t.shape[-2] == 1 else slice(qs, qe)
    cols = slice(None) if t.shape[-1] == 1 else slice(ks, ke)
    return t[..., rows, cols]


def online_softmax(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    block_size: int = 64,
    *,
    bias: torch.Tensor | None = None,
    q_block_size: int | None = None,
) -> Iterator[TileStep]:
    """Walk attention tile by tile, yielding the running max / sum / output after each.

    For each block of queries, key blocks arrive one at a time; with m the running max of the
    scores seen, l = Σ exp(s - m) and acc = Σ exp(s - m) v, a new block with a larger max
    multiplies l and acc by exp(m_old - m_new) before adding its own terms. After the last
    block acc / l is exactly softmax(s) v: no [Lq, Lk] matrix is ever held, only one tile.
    """
    if block_size < 1 or (q_block_size is not None and q_block_size < 1):
        raise ValueError(f"block sizes must be at least 1, got {block_size}, {q_block_size}")
    lq, lk = q.shape[-2], k.shape[-2]
    bq = q_block_size or block_size
    scale = 1.0 / math.sqrt(q.shape[-1])
    mask = None if mask is None else mask.to(torch.bool)
    for qs in range(0, lq, bq):
        qe = min(qs + bq, lq)
        q_blk = q[..., qs:qe, :]
        m = torch.full((*q_blk.shape[:-1], 1), float("-inf"), dtype=q.dtype, device=q.device)
        l = torch.zeros_like(m)  # noqa: E741 (the paper's name)
        acc = torch.zeros((*q_blk.shape[:-1], v.shape[-1]), dtype=q.dtype, device=q.device)
        for ks in range(0, lk, block_size):
            ke = min(ks + block_size, lk)
            s = (q_blk @ k[..., ks:ke, :].transpose(-2, -1)) * scale  # [..., bq, bk]
            if bias is not None:
                s = s + _tile(bias, qs, qe, ks, ke)
            if mask is not None:
                s = s.masked_fill(~_tile(mask, qs, qe, ks, ke), float("-inf"))
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
            # Rows with nothing allowed yet keep m = -inf; shift them by 0 so exp gives 0, not NaN.
            shift = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
            p = torch.exp(s - shift)  # [..., bq, bk]; 0 where masked
            rescale = torch.exp(m - shift)
            l = rescale * l + p.sum(dim=-1, keepdim=True)  # noqa: E741
            acc = rescale * acc + p @ v[..., ks:ke, :]
            yield TileStep(qs, qe, ks, ke, s, m, m_new, rescale, l, acc, ke == lk)
            m = m_new


def tiled_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    block_size: int = 64,
    *,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """Exact softmax(Q Kᵀ / √d_k + bias) V computed block by block (FlashAttention's online
    softmax); same shapes and mask contract as ``scaled_dot_product_attention`` (a query with
    no allowed key gets a zero output), returns only the output: the weights never exist whole.
    """
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    out = torch.zeros((*lead, q.shape[-2], v.shape[-1]), dtype=q.dtype, device=q.device)
    if k.shape[-2] == 0:
        return out
    for step in online_softmax(q, k, v, mask, block_size, bias=bias):
        if step.last:
            out[..., step.q_start : step.q_end, :] = step.partial
    return out


def switch_heads(heads: torch.Tensor, head_mask: torch.Tensor) -> torch.Tensor:
    """Each head's output [B, H, L, d_k] times its switch: ``head_mask`` [H] for every
    sentence alike, or [B, H] a sentence each (a batch of ablations, one head off in each)."""
    m = head_mask.to(heads.dtype)
    return heads * m.view(m.shape[0] if m.dim() == 2 else 1, -1, 1, 1)


def repeat_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    """[B, G, L, d] -> [B, G·groups, L, d]: each key/value head serves ``groups`` query heads
    in a row (query head h reads key/value head h // groups)."""
    if groups == 1:
        return x
    b, g, n, d = x.shape
    return x[:, :, None].expand(b, g, groups, n, d).reshape(b, g * groups, n, d)


@dataclass(frozen=True)
class AttentionConfig:
    """One attention layer's shape and options, named as in the paper (what transformers passes
    its attention modules as ``config``); ``model.layers.attention_config`` derives it from a
    model's TransformerConfig.

    ``n_kv_heads`` < n_heads: grouped-query attention (1 = multi-query); None: n_heads.
    ``d_k``: each head's width; None: d_model / n_heads. ``bias``: on W_Q, W_K, W_V (and W_O
    unless ``out_bias`` says otherwise; Qwen2 has q/k/v only). ``positions`` "rope" / "alibi"
    put relative positions into self-attention (``rope_base``, ``rope_layout``: see
    model.positional). ``scale``: the factor on q·k where it is not 1/√d_k (Gemma's
    query_pre_attn_scalar^-1/2)."""

    d_model: int
    n_heads: int
    n_kv_heads: int | None = None
    d_k: int | None = None
    dropout: float = 0.0
    bias: bool = True
    out_bias: bool | None = None
    positions: str | None = None
    rope_base: float = 10000.0
    rope_layout: str = "interleaved"
    scale: float | None = None

    def __post_init__(self) -> None:
        if self.d_k is None and self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} must be divisible by n_heads={self.n_heads}")
        if self.kv_heads < 1 or self.n_heads % self.kv_heads:
            raise ValueError(
                f"n_heads={self.n_heads} must be a multiple of n_kv_heads={self.kv_heads}"
            )
        if self.positions == "rope" and self.head_dim % 2:
            raise ValueError(f"rotary positions need an even d_k, got {self.head_dim}")

    @property
    def kv_heads(self) -> int:
        """Key/value heads: n_kv_heads, or n_heads where it is not set."""
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @property
    def head_dim(self) -> int:
        """d_k: as given, or d_model / n_heads."""
        return self.d_model // self.n_heads if self.d_k is None else self.d_k


class AttentionOutput(NamedTuple):
    """What ``MultiHeadAttention.forward`` returns; each field is one type or None, as the
    call asked: ``weights`` [B, H, Lq, Lk] (the default), ``stages`` (``return_stages``;
    its ``weights`` are also in ``weights``), ``record`` (``record=True``: the queries and
    keys the weights are recomputed from). The fused fast paths (``need_weights=False``,
    ``record``) return no weights."""

    output: torch.Tensor  # [B, Lq, D]
    weights: torch.Tensor | None = None
    stages: AttentionStages | None = None
    record: QK | None = None


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W_O, head_i = Attention(Q W_Q^i, K W_K^i, V W_V^i).

    Built from an ``AttentionConfig``. The per-head projections are packed into one matrix
    each (head i owns columns i*d_k .. (i+1)*d_k). With n_kv_heads < n_heads (grouped-query
    attention) K and V have only n_kv_heads heads, each shared by n_heads / n_kv_heads query
    heads in a row; the cache shrinks by the same factor, and weights are still returned per
    query head. ``q_norm`` / ``k_norm``: QK-norm, a norm module over each head's d_k features
    of the queries and keys, before their rotation (Gemma 3).
    Weights are returned, never kept on the module: one model serves every browser session.
    """

    def __init__(
        self,
        config: AttentionConfig,
        *,
        q_norm: nn.Module | None = None,
        k_norm: nn.Module | None = None,
    ):
        super().__init__()
        self.config = config
        self.d_model, self.n_heads = config.d_model, config.n_heads
        self.d_k, self.n_kv_heads = config.head_dim, config.kv_heads
        self.rope = config.positions == "rope"
        self.alibi = config.positions == "alibi"
        self.rope_base, self.rope_layout = config.rope_base, config.rope_layout
        self.dropout = config.dropout
        d_model, bias = config.d_model, config.bias
        self.q_proj = nn.Linear(d_model, self.n_heads * self.d_k, bias=bias)
        self.k_proj = nn.Linear(d_model, self.n_kv_heads * self.d_k, bias=bias)
        self.v_proj = nn.Linear(d_model, self.n_kv_heads * self.d_k, bias=bias)
        out_bias = bias if config.out_bias is None else config.out_bias
        self.out_proj = nn.Linear(self.n_heads * self.d_k, d_model, bias=out_bias)
        self.q_norm, self.k_norm = q_norm, k_norm
        self.scale = config.scale

    def _rope(self, start: int, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos / sin of x's positions (start ..), shared by every layer of a forward."""
        if torch.is_grad_enabled():  # autograd may save them: fresh tensors, never cached
            return rope_table.__wrapped__(
                start, x.shape[-2], self.d_k, self.rope_base, x.device, x.dtype
            )
        return rope_table(start, x.shape[-2], self.d_k, self.rope_base, x.device, x.dtype)

    def split_heads(self, x: torch.Tensor, heads: int | None = None) -> torch.Tensor:
        """[B, L, heads·d_k] -> [B, heads, L, d_k] (heads: n_heads unless given)."""
        b, n, _ = x.shape
        return x.view(b, n, heads or self.n_heads, self.d_k).transpose(1, 2)

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:  # [B, H, L, d_k] -> [B, L, H·d_k]
        b, _, n, _ = x.shape
        return x.transpose(1, 2).reshape(b, n, -1)

    def project(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        cache: dict | None = None,
        static_kv: bool = False,
        share: bool = True,
        seen: dict | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """(q [B, H, Lq, d_k], k and v [B, H, Lk, d_k], score bias or None): the inputs of
        softmax(QKᵀ/√d_k + bias) V, positions applied and key/value heads shared out.

        cache: a dict the caller owns for incremental decoding; new keys/values
        [B, n_kv_heads, L, d_k] are appended (self-attention) or computed once and reused
        (``static_kv``, cross-attention). Positions count every key seen (``cache["seen"]``):
        the new queries and keys stand at positions past .. past + L - 1. A cache with a
        ``"window"`` (a sliding layer's) keeps only that many last keys and values, as
        transformers' hybrid cache does; this step still attends over all it was given. ``share=False`` leaves k
        and v with their n_kv_heads heads (the fused kernel shares them itself). ``seen``: a
        dict that receives QK-norm's input and output (``QK.norm_stages``), where there is one.
        """
        q = self.split_heads(self.q_proj(query))  # [B, H, Lq, d_k]
        if self.q_norm is not None:
            if seen is not None:
                seen["q_before"] = q
            q = self.q_norm(q)
            if seen is not None:
                seen["q_after"] = q
        if cache is not None and static_kv and "k" in cache:
            k, v = cache["k"], cache["v"]
            end = k.shape[2]
        else:
            k = self.split_heads(self.k_proj(key), self.n_kv_heads)  # [B, G, Lk, d_k]
            v = self.split_heads(self.v_proj(value), self.n_kv_heads)
            if self.k_norm is not None:
                if seen is not None:
                    seen["k_before"] = k
                k = self.k_norm(k)
                if seen is not None:
                    seen["k_after"] = k
            held = cache is not None and "k" in cache and not static_kv
            past = cache.get("seen", cache["k"].shape[2]) if held else 0
            if self.rope:  # keys rotated once, at their absolute positions, then cached
                cos, sin = self._rope(past, k)
                k = rotate(k, cos, sin, self.rope_layout)
            end = past + k.shape[2]  # the position after the newest key
            if cache is not None:
                if held:
                    k = torch.cat([cache["k"], k], dim=2)
                    v = torch.cat([cache["v"], v], dim=2)
                window = cache.get("window")
                if window is not None:  # this step attends over k, v whole; the cache keeps less
                    cache["k"], cache["v"] = k[:, :, -window:], v[:, :, -window:]
                else:
                    cache["k"], cache["v"] = k, v
                cache["seen"] = end
        lq, lk = q.shape[2], k.shape[2]
        # Self-attention: the queries are the last lq of the positions up to ``end`` (all
        # lk of them without a cache).
        if self.rope:
            cos, sin = self._rope(end - lq, q)
            q = rotate(q, cos, sin, self.rope_layout)
        bias = None
        if self.alibi:  # (positions built only here: one launch less per layer otherwise)
            q_pos = torch.arange(lk - lq, lk, device=q.device)
            bias = alibi_bias(self.n_heads, q_pos, torch.arange(lk, device=q.device)).to(q.dtype)
        groups = self.n_heads // self.n_kv_heads if share else 1
        return q, repeat_kv(k, groups), repeat_kv(v, groups), bias  # k, v: [B, H, Lk, d_k]

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
        record: bool = False,
        blocks: int = 0,
        norm_stages: bool = False,
    ) -> AttentionOutput:
        """An ``AttentionOutput``: the output [B, Lq, D] and what the call asked for.

        By default its ``weights`` [B, H, Lq, Lk]; ``return_stages`` adds every stage between
        Q, K and the weights (``stages``). need_weights=False takes the fused fast path and
        returns no weights; record=True takes it too and returns the QK the weights are
        recomputed from (``record``; with ``blocks`` > 0, one sentence and float32, also its
        ``block_sums`` at that many blocks a side (``sum_blocks``), summed in the same pass; with
        ``norm_stages``, also QK-norm's input and output).
        cache / static_kv: see ``project``. mask: bool tensor or MaskSpec.
        head_mask [H], or [B, H] a sentence each: multiplies each head's output (0 switches
        a head off; ``switch_heads``).
        """
        p = self.dropout if self.training else 0.0
        if record or not (need_weights or return_stages):
            seen = {} if record and norm_stages and self.q_norm is not None else None
            q, k, v, bias = self.project(query, key, value, cache, static_kv, False, seen)
            summed = None
            if record and blocks and q.shape[0] == 1 and q.dtype == torch.float32:
                heads, summed = sum_blocks(q, k, mask, bias, blocks, v, p, self.scale)
            else:
                heads = _fast_attention(q, k, v, mask, p, bias, self.scale)
            if head_mask is not None:
                heads = switch_heads(heads, head_mask)
            qk = None
            if record:  # detached only where autograd tracks them (training, not a trace)
                qk = QK(*(t.detach() if t.requires_grad else t for t in (q, k)), self.alibi)
                qk.block_sums = None if summed is None else summed.detach()
                qk.scale = self.scale
                if seen:
                    qk.norm_stages = {name: t.detach() for name, t in seen.items()}
            return AttentionOutput(self.out_proj(self.merge_heads(heads)), record=qk)
        q, k, v, bias = self.project(query, key, value, cache, static_kv)
        if isinstance(mask, MaskSpec):
            mask = mask.dense(device=q.device)
        heads, weights = scaled_dot_product_attention(
            q, k, v, mask, dropout_p=p, return_stages=return_stages, bias=bias, scale=self.scale
        )
        if head_mask is not None:
            heads = switch_heads(heads, head_mask)
        out = self.out_proj(self.merge_heads(heads))
        if return_stages:
            return AttentionOutput(out, weights.weights, stages=weights)
        return AttentionOutput(out, weights)
