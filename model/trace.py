"""What a traced forward pass saw: collected per call, then cut per sentence into a Trace.

The Recorder lives for one forward call only (never on a module), so concurrent sessions
sharing one cached model cannot see each other's sentences.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import torch

from model.attention import AttentionStages

KINDS = ("encoder", "decoder", "cross")
STAGE_NAMES = ("scores", "scaled", "masked", "weights")


def _token_stats(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token mean and (biased, as LayerNorm uses) std over the feature axis: [B, L].

    Two passes, mean then mean square of the deviations: on CPU ten times faster than
    torch.var's reduction, which cost the traced path 5% of a 0.5B model's forward."""
    mean = x.mean(dim=-1, keepdim=True)
    return mean[..., 0], (x - mean).pow(2).mean(dim=-1).sqrt()


class Recorder:
    """Collects attention, its stages, LayerNorm statistics and residual norms during forward."""

    def __init__(self, stages: bool = False, inputs: bool = False):
        self.want_stages = stages
        self.want_inputs = inputs  # keep each attention's input (the step-by-step page)
        self.attention: dict[str, list[torch.Tensor]] = defaultdict(
            list
        )  # kind -> [B,H,Lq,Lk]/layer
        self.stages: dict[str, list[AttentionStages]] = defaultdict(list)
        self.norms: dict[str, dict[str, torch.Tensor]] = {}  # name -> stat -> [B, L]
        self.residual: dict[str, list[torch.Tensor]] = defaultdict(list)  # stack -> [B, L]/layer
        # kind -> per layer {"query": [B, Lq, D], "memory": [B, Lk, D], "mask": bool or None};
        # "encoder_ffn" / "decoder_ffn": what each layer's feed-forward network read
        self.inputs: dict[str, list[dict]] = defaultdict(list)
        # kind -> the mask that kind's attention used (every layer of a kind uses the same)
        self.masks: dict[str, torch.Tensor | None] = {}

    def add_input(
        self, kind: str, query: torch.Tensor, memory: torch.Tensor, mask: torch.Tensor | None
    ) -> None:
        """What one attention read (only when asked: it is a full hidden state per layer)."""
        if self.want_inputs:
            self.inputs[kind].append(
                {
                    "query": query.detach(),
                    "memory": memory.detach(),
                    "mask": None if mask is None else mask.detach(),
                }
            )

    def add_attention(
        self,
        kind: str,
        weights: torch.Tensor | AttentionStages,
        mask: torch.Tensor | None = None,  # bool, True = may attend, broadcastable
    ) -> None:
        if kind not in self.masks:
            self.masks[kind] = None if mask is None else mask.detach()
        if isinstance(weights, AttentionStages):
            self.stages[kind].append(weights)
            weights = weights.weights
        self.attention[kind].append(weights.detach())

    def add_norm(self, name: str, x_in: torch.Tensor, x_out: torch.Tensor) -> None:
        in_mean, in_std = _token_stats(x_in.detach())
        out_mean, out_std = _token_stats(x_out.detach())
        self.norms[name] = {
            "in_mean": in_mean,
            "in_std": in_std,
            "out_mean": out_mean,
            "out_std": out_std,
        }

    def add_residual(self, stack: str, x: torch.Tensor) -> None:
        self.residual[stack].append(x.detach().norm(dim=-1))  # [B, L]

    def to_trace(
        self,
        index: int,
        src_tokens: list[str],
        tgt_tokens: list[str],
        logits: torch.Tensor | None = None,
    ) -> Trace:
        """Cut sentence ``index`` out of the batch, dropping padded positions on both axes."""
        ns, nt = len(src_tokens), len(tgt_tokens)
        lengths = {"encoder": (ns, ns), "decoder": (nt, nt), "cross": (nt, ns)}
        stack_len = {"encoder": ns, "decoder": nt}

        def cut(kind: str, layers: list[torch.Tensor]) -> torch.Tensor:
            lq, lk = lengths[kind]
            return torch.stack([w[index, :, :lq, :lk] for w in layers]).float().cpu()

        attention = {kind: cut(kind, ws) for kind, ws in self.attention.items() if ws}
        masks = {}
        for kind, ws in self.attention.items():
            mask, (lq, lk) = self.masks.get(kind), lengths[kind]
            full = ws[0].shape[-2:]  # this batch's [Lq, Lk], padding included
            if mask is None:
                masks[kind] = torch.ones(lq, lk, dtype=torch.bool)
            else:
                row = mask[index if mask.shape[0] > 1 else 0]  # [1 or H, Lq or 1, Lk]
                masks[kind] = torch.broadcast_to(row[0], full)[:lq, :lk].cpu().clone()
        stages = {
            kind: {s: cut(kind, [getattr(st, s) for st in sts]) for s in STAGE_NAMES}
            for kind, sts in self.stages.items()
            if sts
        }
        norms = {}
        for name, stats in self.norms.items():
            n = stack_len[name.split(".", 1)[0]]
            norms[name] = {k: v[index, :n].float().cpu() for k, v in stats.items()}
        residual = {
            stack: torch.stack([r[index, : stack_len[stack]] for r in rs]).float().cpu()
            for stack, rs in self.residual.items()
        }
        if logits is not None:
            logits = logits[index, : (nt or ns)].float().cpu()
        return Trace(
            list(src_tokens), list(tgt_tokens), attention, stages, norms, residual, logits, masks
        )


def _window(m: torch.Tensor, rows, cols) -> torch.Tensor:
    """m[rows][:, cols] for a slice, an index list or None (everything) on each axis."""
    if rows is not None:
        m = m[rows] if isinstance(rows, slice) else m[torch.as_tensor(rows, dtype=torch.long)]
    if cols is not None:
        m = m[:, cols] if isinstance(cols, slice) else m[:, torch.as_tensor(cols, dtype=torch.long)]
    return m


def block_edges(n: int, size: int) -> list[int]:
    """Edges (token positions) of at most ``size`` near-equal blocks covering 0..n."""
    blocks = max(1, min(n, size))
    return [round(i * n / blocks) for i in range(blocks + 1)]


@dataclass
class Overview:
    """A map pooled block by block: values [len(row_edges)-1, len(col_edges)-1], block i
    covering query positions row_edges[i]..row_edges[i+1]-1 (likewise for keys)."""

    values: torch.Tensor
    row_edges: list[int]
    col_edges: list[int]
    reduce: str


def pool_map(read_rows, row_edges: list[int], col_edges: list[int], reduce: str) -> Overview:
    """Pool a map one band of query rows at a time, so the whole map is never held.

    read_rows(slice) -> float32 [rows, keys]; reduce is "max" or "mean" over each block."""
    if reduce not in ("max", "mean"):
        raise ValueError(f"reduce must be 'max' or 'mean', not {reduce!r}")
    # which column block each key position falls in, for one scatter per band
    owner = torch.repeat_interleave(
        torch.arange(len(col_edges) - 1),
        torch.tensor([b - a for a, b in zip(col_edges[:-1], col_edges[1:])]),
    )
    how = "amax" if reduce == "max" else "mean"
    out = torch.empty(len(row_edges) - 1, len(col_edges) - 1)
    for i, (a, b) in enumerate(zip(row_edges[:-1], row_edges[1:])):
        band = read_rows(slice(a, b))  # [b - a, Lk]
        band = band.amax(dim=0) if reduce == "max" else band.mean(dim=0)  # [Lk]
        out[i] = torch.zeros(len(col_edges) - 1).scatter_reduce(
            0, owner, band, how, include_self=False
        )
    return Overview(out, list(row_edges), list(col_edges), reduce)


@dataclass
class Trace:
    """Plain data from one traced pass: tokens and CPU float32 tensors, safe to cache and plot.

    attention[kind] is [layers, heads, queries, keys] for kind in "encoder" (self),
    "decoder" (masked self) and "cross" (decoder queries over encoder keys), where the model
    has them. Decoder-only models put their tokens in ``tgt_tokens``.
    """

    src_tokens: list[str]
    tgt_tokens: list[str]
    attention: dict[str, torch.Tensor]
    stages: dict[str, dict[str, torch.Tensor]] = field(default_factory=dict)
    norms: dict[str, dict[str, torch.Tensor]] = field(default_factory=dict)  # LayerNorm in/out
    residual_norms: dict[str, torch.Tensor] = field(default_factory=dict)  # [layers+1, tokens]
    logits: torch.Tensor | None = None  # [tokens, vocab] of the last stack
    # kind -> bool [queries, keys], the mask the model applied: True = may attend
    masks: dict[str, torch.Tensor] = field(default_factory=dict)

    def attention_map(
        self,
        kind: str,
        layer: int,
        head: int,
        rows: slice | list[int] | None = None,
        cols: slice | list[int] | None = None,
    ) -> torch.Tensor:
        """One head's attention weights for a window: float32 [len(rows), len(cols)].

        Views read maps through this (and attention_overview), never the whole stack, so what
        a picture costs follows what it draws."""
        weights = self.attention[kind][layer, head]  # [Lq, Lk]
        return _window(weights, rows, cols).float()

    def attention_overview(
        self, kind: str, layer: int, head: int, size: int = 1024, reduce: str = "max"
    ) -> Overview:
        """One head's map pooled to at most size x size blocks (max or mean per block)."""
        n_q, n_k = (len(t) for t in self.tokens(kind))
        row_edges, col_edges = block_edges(n_q, size), block_edges(n_k, size)
        return pool_map(
            lambda rows: self.attention_map(kind, layer, head, rows=rows),
            row_edges,
            col_edges,
            reduce,
        )

    def mask(self, kind: str) -> torch.Tensor:
        """The model's own mask for ``kind`` as bool [queries, keys] (True = may attend)."""
        if kind in self.masks:
            return self.masks[kind]
        queries, keys = self.tokens(kind)
        return torch.ones(len(queries), len(keys), dtype=torch.bool)

    def tokens(self, kind: str) -> tuple[list[str], list[str]]:
        """(query tokens, key tokens) for an attention kind."""
        if kind == "encoder":
            return self.src_tokens, self.src_tokens
        if kind == "decoder":
            return self.tgt_tokens, self.tgt_tokens
        if kind == "cross":
            return self.tgt_tokens, self.src_tokens
        raise KeyError(f"unknown attention kind {kind!r}; expected one of {KINDS}")
