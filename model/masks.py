"""Attention masks as booleans: True = this query may attend this key.

Shapes broadcast against attention scores [B, H, Lq, Lk], so a mask built here can be
handed straight to ``scaled_dot_product_attention``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

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


@dataclass(frozen=True)
class MaskSpec:
    """What a mask is made of (padding on each side, the causal rule, a sliding window)
    rather than its [Lq, Lk] cells: kept by a traced pass so any window of the mask can be
    rebuilt exactly, and read by the fused kernel, which needs no mask tensor at all for
    plain causal attention.

    query_valid [B, Lq] / key_valid [B, Lk] (None = every position is a real token);
    ``offset`` keys precede the first query (a key/value cache); ``window``: a query sees
    only the last ``window`` keys up to itself (Mistral's sliding window), None = all.
    """

    lq: int
    lk: int
    query_valid: torch.Tensor | None = None
    key_valid: torch.Tensor | None = None
    causal: bool = False
    offset: int = 0
    window: int | None = None

    def positions(self, rows=None, cols=None, device=None) -> tuple[torch.Tensor, torch.Tensor]:
        """(query positions, key positions) of a window, counted from the first key, on
        ``device`` (default: the validity tensors', else the CPU)."""
        device = device or _device(self.query_valid, self.key_valid)
        q = torch.arange(self.lq, device=device) + self.offset
        k = torch.arange(self.lk, device=device)
        return _take(q, rows), _take(k, cols)

    @property
    def trivial(self) -> bool:
        """True when no key is ever hidden from any query (no look at the data needed)."""
        return (
            self.query_valid is None
            and self.key_valid is None
            and not self.causal
            and (self.window is None or self.window >= self.lk + self.offset)
        )

    def open_to(self, rows=None) -> bool:
        """True when no key is hidden from any of these query rows, so their weights need
        no mask: no padding, the causal rule and the window reaching every key (a decoding
        step's newest query, in every layer of a model without padding)."""
        if self.trivial:
            return True
        if self.query_valid is not None or self.key_valid is not None:
            return False
        q_pos, _ = self.positions(rows, slice(0, 0), torch.device("cpu"))  # no GPU sync
        if q_pos.numel() == 0:
            return True
        if self.causal and int(q_pos.min()) < self.lk - 1:
            return False
        return self.window is None or int(q_pos.max()) - self.window < 0

    def key_span(self, rows=None) -> tuple[int, int]:
        """(first, end) of the keys that any of these query rows may see under the causal
        rule and the window: every key outside is hidden from all of them, so a map of these
        rows needs no scores there (the upper triangle of a long causal map is half of it)."""
        q_pos, _ = self.positions(rows, slice(0, 0), torch.device("cpu"))  # no GPU sync
        if q_pos.numel() == 0:
            return 0, 0
        first, end = 0, self.lk
        if self.causal:
            end = max(0, min(self.lk, int(q_pos.max()) + 1))
        if self.window is not None:
            first = max(0, min(end, int(q_pos.min()) - self.window + 1))
        return first, end

    def block_counts(self, row_edges: list[int], col_edges: list[int]) -> torch.Tensor:
        """How many cells of each block this mask allows (sentence 0): long [R, C], without
        building the [Lq, Lk] mask: each query row sees one run of keys (its causal end,
        its window's start) less the padding, counted by a running count of real keys."""
        q_pos, k_pos = self.positions(device=torch.device("cpu"))
        lo = torch.zeros_like(q_pos)
        hi = torch.full_like(q_pos, self.lk)
        if self.causal:
            hi = torch.minimum(hi, q_pos + 1)
        if self.window is not None:
            lo = torch.maximum(lo, q_pos - self.window + 1)
        real = torch.ones(self.lk, dtype=torch.long)
        if self.key_valid is not None:
            real = self.key_valid[0].cpu().long()
        before = torch.cat([torch.zeros(1, dtype=torch.long), real.cumsum(0)])  # keys < j
        starts = torch.tensor(col_edges[:-1])
        ends = torch.tensor(col_edges[1:])
        a = torch.maximum(lo[:, None], starts[None, :]).clamp(0, self.lk)
        b = torch.minimum(hi[:, None], ends[None, :]).clamp(0, self.lk)
        per_row = (before[b] - before[a]).clamp_min(0)  # [Lq, C]
        if self.query_valid is not None:
            per_row = per_row * self.query_valid[0].cpu().long()[:, None]
        return torch.zeros(len(row_edges) - 1, per_row.shape[1], dtype=torch.long).index_add_(
            0, block_owner(row_edges), per_row
        )

    def dense(self, rows=None, cols=None, device=None) -> torch.Tensor | None:
        """The mask as bool [B or 1, 1, rows, cols] (True = may attend), or None when open;
        on ``device`` (default: the validity tensors', else the CPU)."""
        if self.trivial:
            return None
        q_pos, k_pos = self.positions(rows, cols, device)
        mask = torch.ones(len(q_pos), len(k_pos), dtype=torch.bool, device=q_pos.device)
        if self.causal:
            mask &= k_pos[None, :] <= q_pos[:, None]
        if self.window is not None:
            mask &= k_pos[None, :] > q_pos[:, None] - self.window
        mask = mask[None, None]  # [1, 1, rows, cols]
        if self.key_valid is not None:
            valid = _take(self.key_valid.to(mask.device), cols, dim=1)
            mask = mask & valid[:, None, None, :]
        if self.query_valid is not None:
            valid = _take(self.query_valid.to(mask.device), rows, dim=1)
            mask = mask & valid[:, None, :, None]
        return mask

    def cut(self, index: int, lq: int, lk: int) -> MaskSpec:
        """Sentence ``index`` of the batch, its first lq queries and lk keys; padding that is
        cut away leaves None (nothing hidden) on that side."""

        def side(valid: torch.Tensor | None, n: int) -> torch.Tensor | None:
            if valid is None:
                return None
            row = valid[index if valid.shape[0] > 1 else 0, :n].cpu()
            return None if bool(row.all()) else row[None].clone()

        return MaskSpec(
            lq, lk, side(self.query_valid, lq), side(self.key_valid, lk), self.causal,
            self.offset, self.window,
        )  # fmt: skip


def _device(*tensors: torch.Tensor | None) -> torch.device | None:
    return next((t.device for t in tensors if t is not None), None)


def block_owner(edges: list[int], device=None) -> torch.Tensor:
    """Which block each position from edges[0] to edges[-1] is in: long [edges[-1] - edges[0]]
    (block 0 first)."""
    sizes = torch.tensor([b - a for a, b in zip(edges[:-1], edges[1:])], device=device)
    return torch.repeat_interleave(torch.arange(len(sizes), device=device), sizes)


def _take(x: torch.Tensor, index, dim: int = 0) -> torch.Tensor:
    """x along ``dim`` at a slice, an index list or None (everything)."""
    if index is None:
        return x
    if isinstance(index, slice):
        return x[(slice(None),) * dim + (index,)]
    index = torch.as_tensor(index, dtype=torch.long, device=x.device)
    return x[(slice(None),) * dim + (index,)]


def mask_spec(
    query_valid: torch.Tensor | None,
    key_valid: torch.Tensor | None,
    causal: bool = False,
    offset: int = 0,
    window: int | None = None,
    lengths: tuple[int, int] | None = None,
) -> MaskSpec:
    """``attention_mask``'s rule as a MaskSpec; lengths (Lq, Lk) where a side has no
    validity tensor."""
    lq = query_valid.shape[1] if query_valid is not None else lengths[0]
    lk = key_valid.shape[1] if key_valid is not None else lengths[1]
    return MaskSpec(lq, lk, query_valid, key_valid, causal, offset, window)


def drop_first_keys(mask: MaskSpec | torch.Tensor | None, n: int) -> MaskSpec | torch.Tensor | None:
    """``mask`` without its first ``n`` key columns: the keys a sliding layer's cache no
    longer holds, which no query of this step may see anyway (they are past its window).
    A MaskSpec keeps its rule, its offset counted from the first key still held."""
    if n <= 0 or mask is None:
        return mask
    if isinstance(mask, MaskSpec):
        kept = None if mask.key_valid is None else mask.key_valid[:, n:]
        return dataclasses.replace(mask, lk=mask.lk - n, key_valid=kept, offset=mask.offset - n)
    return mask[..., n:]


def within_window(
    mask: MaskSpec | torch.Tensor | None, window: int | None
) -> MaskSpec | torch.Tensor | None:
    """``mask`` narrowed to a sliding window: each query also loses every key ``window`` or
    more positions back (one layer's own window, Gemma 3's local layers). A MaskSpec keeps
    its rule (the narrower window wins); a bool [.., Lq, Lk] mask is cut by the band, its
    queries being the last Lq of the Lk positions. ``window`` None: ``mask`` unchanged."""
    if window is None:
        return mask
    if window < 1:
        raise ValueError(f"a sliding window must be at least 1, not {window}")
    if isinstance(mask, MaskSpec):
        if mask.window is not None and mask.window <= window:
            return mask
        return dataclasses.replace(mask, window=window)
    if mask is None:
        raise ValueError("a sliding window needs the mask's lengths: pass a MaskSpec")
    lq, lk = mask.shape[-2], mask.shape[-1]
    q_pos = torch.arange(lk - lq, lk, device=mask.device)[:, None]
    band = torch.arange(lk, device=mask.device)[None, :] > q_pos - window
    return mask.to(torch.bool) & band
