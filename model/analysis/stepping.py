"""A decoding run read at one step, as the decoding page draws it: no Streamlit.

``DecodeStep`` keeps only the new query's attention row. Read up to step ``n``, the run is
a growing lower triangle: one row per generated token, each over the keys that existed
when it was chosen, under the model's causal rule.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from model.masks import future_mask
from model.runtime.types import DecodeStep


@dataclass(frozen=True)
class GrowingMask:
    """The rows a run has produced by one step, in one layer (heads averaged)."""

    queries: list[str]  # the last ``len(rows)`` decoder positions, one per generated token
    keys: list[str]  # every decoder position the newest query could read
    rows: list[torch.Tensor]  # [keys so far] per query, the layer's heads averaged
    mask: torch.Tensor  # [queries, keys] bool, True = may attend (the causal rule)


def growing_mask(steps: list[DecodeStep], step: int, layer: int, keys: list[str]) -> GrowingMask:
    """Steps 1..``step`` of the run in ``layer``; ``keys`` are the decoder's input tokens
    with the generated ones appended (cut to the newest query's keys here)."""
    keys = keys[: steps[step - 1].attention["decoder"].shape[-1]]
    offset = len(keys) - step
    return GrowingMask(
        queries=keys[offset:],
        keys=keys,
        rows=[s.attention["decoder"][layer].mean(0) for s in steps[:step]],
        mask=future_mask(step, len(keys), offset=offset),
    )


def distribution_before(step: DecodeStep) -> torch.Tensor:
    """[vocab] the model's own distribution for the step, before temperature, top-k and
    top-p changed it (greedy and beam use it as it is)."""
    return step.logits.softmax(-1) if step.logits is not None else step.probs


def top_candidates(after, chosen: int, k: int = 10) -> list[int]:
    """The ids the next-token chart shows: the k most likely after temperature and
    filtering, then the chosen one if it is not among them."""
    after = torch.as_tensor(after, dtype=torch.float32)
    # Ties keep the lower id first (a stable sort). Sorting only the ids at or above the
    # k-th value gives the same order: a stable sort of all 262k of Gemma's ids was 25 ms,
    # twice each step drawn.
    kth = torch.topk(after, min(k, after.numel())).values[-1]
    near = torch.nonzero(after >= kth).flatten()  # in id order
    order = near[torch.argsort(after[near], descending=True, stable=True)]
    top = [int(i) for i in order[:k]]
    return top if chosen in top else [*top, chosen]


def candidate_labels(model, text: str, steps: list[DecodeStep], step: int) -> dict[int, str]:
    """The next-token chart's labels for step ``step``, each candidate read after what came
    before it: a byte that ends a Korean syllable reads "이 · 3/3", as on the strip, not
    "<0xB4>". Only the candidates shown are read, never a 49k- to 262k-token vocabulary."""
    current = steps[step - 1]
    before = [s.token_id for s in steps[: step - 1]]
    ids = top_candidates(current.probs, current.token_id)
    return {i: model.decoder_tokens(text, [*before, i])[-1] for i in ids}
