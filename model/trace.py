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
