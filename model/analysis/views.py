"""A Trace as the reader asked to see it: words merged, special tokens hidden, one map chosen.

The explorer's choices (merge subwords, hide specials, renormalise, head or aggregate) as
plain functions, so a notebook gets the same pictures the page shows.
"""

from __future__ import annotations

import torch

from model.analysis.summaries import trace_layer_aggregate, trace_rollout
from model.analysis.tokens import hide_special_tokens, merge_subwords
from model.trace import Trace

AGGREGATES = ("head", "mean", "max", "rollout")


def model_special_tokens(lm) -> frozenset[str]:
    """Every special token the model's tokenizers name ([CLS], <bos>, <sep>, ...)."""
    found: set[str] = set(getattr(lm, "special_tokens", ()) or ())
    for tok in (getattr(lm, "src_tokenizer", None), getattr(lm, "tgt_tokenizer", None)):
        found |= set(getattr(tok, "special_tokens", ()) or ())
    return frozenset(found)


def shown_trace(
    trace: Trace, specials: frozenset[str], merge: bool, hide: bool, renorm: bool
) -> tuple[Trace, Trace, dict[str, torch.Tensor] | None]:
    """(merged trace, shown trace, share of attention hidden per kind or None)."""
    base = merge_subwords(trace, specials) if merge else trace
    if not hide:
        return base, base, None
    shown, removed = hide_special_tokens(base, specials, renormalize=renorm)
    return base, shown, removed


def rollout_means_flow(model_kind: str, attention_kind: str) -> bool:
    """Whether rollout over ``attention_kind`` is how the model's input reaches each position.

    Rollout follows one self-attention stack. That is the whole flow for an encoder and for a
    decoder-only model; an encoder-decoder's decoder also reads the source through
    cross-attention, and cross-attention maps queries of one sequence onto keys of another."""
    if attention_kind == "encoder":
        return True
    return attention_kind == "decoder" and model_kind == "decoder"


def shown_rollout(
    base: Trace, kind: str, specials: frozenset[str], hide: bool, renorm: bool
) -> torch.Tensor:
    """Rollout over all tokens (the residual stream carries specials too), then hidden.

    [layers, n, n]: row i of layer l is how much each position reaches position i through
    attention and the residual path up to layer l (Abnar & Zuidema 2020)."""
    r = trace_rollout(base, kind)  # a layer's head mean at a time
    if not hide:
        return r
    queries = base.tokens(kind)[0]
    keep = [i for i, tok in enumerate(queries) if tok not in specials]
    r = r[:, keep][:, :, keep]
    if renorm:
        r = r / r.sum(-1, keepdim=True).clamp_min(1e-12)
    return r


def chosen_map(
    shown: Trace,
    kind: str,
    layer: int,
    aggregate: str,
    head: int = 0,
    rollout_maps: torch.Tensor | None = None,
) -> torch.Tensor:
    """[Lq, Lk]: one head, the mean or max over heads, or rollout, at one layer; read
    through the trace's attention_map / attention_heads, never every layer's maps."""
    if aggregate == "head":
        return shown.attention_map(kind, layer, head)
    if aggregate in ("mean", "max"):
        return trace_layer_aggregate(shown, kind, layer, aggregate)
    if aggregate == "rollout":
        if rollout_maps is None:
            raise ValueError("rollout needs the rolled-out maps (shown_rollout)")
        return rollout_maps[layer]
    raise ValueError(f"unknown aggregate {aggregate!r}; choose one of {AGGREGATES}")
