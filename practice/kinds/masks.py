"""Masks read off a heatmap, and the decoder input under teacher forcing."""

from __future__ import annotations

import torch

from model.attention import scaled_dot_product_attention
from model.masks import attention_mask, causal_mask
from model.runtime.tokenizer import task_tokenizers
from model.tasks import PAD, en2ko, reverse
from model.training.trainer import make_batch
from practice.core import Exercise, Step, Wrong, rng_for, torch_seed

TOPIC = "masks"
MASKS = ("none", "padding", "causal", "both")
MIN_SHOWN = 0.01  # the smallest allowed weight: it reads 0.01 at two decimals, never 0.00


def _mask_for(kind: str, valid: torch.Tensor) -> torch.Tensor | None:
    """The lab's own masks, [1, 1, L, L] or [L, L], for one sentence with padding at the end."""
    n = valid.shape[1]
    if kind == "none":
        return None
    if kind == "causal":
        return causal_mask(n)
    return attention_mask(valid, valid, causal=kind == "both")


def which_mask(seed: int) -> Exercise:
    """Attention weights of a padded sentence: which mask made them?"""
    rng = rng_for("which_mask", seed)
    truth = rng.choice(MASKS)
    words = en2ko.sample(1, rng.randrange(10_000))[0][0].lower().split()
    n_real = min(len(words), rng.randint(3, 5))
    n_pad = rng.randint(1, 2)
    tokens = words[:n_real] + [PAD] * n_pad
    n = len(tokens)
    valid = torch.tensor([[True] * n_real + [False] * n_pad])
    gen = torch.Generator().manual_seed(torch_seed(rng))
    mask = _mask_for(truth, valid)
    while True:
        q = torch.randn(n, 8, generator=gen)
        k = torch.randn(n, 8, generator=gen)
        _, w = scaled_dot_product_attention(q, k, k, mask=mask)
        weights = w.reshape(n, n)
        # The heatmap prints two decimals: an allowed cell must not read 0.00, or the picture
        # would show a "zero" the solution says is not there.
        if float(weights[weights > 0].min()) >= MIN_SHOWN:
            break
    zeros = int((weights == 0).sum())
    hints = {
        ("none", "padding"): "no_zeros",
        ("none", "causal"): "no_zeros",
        ("none", "both"): "no_zeros",
        ("padding", "none"): "zeros_mean_mask",
        ("causal", "none"): "zeros_mean_mask",
        ("both", "none"): "zeros_mean_mask",
        ("padding", "causal"): "zeros_are_pad_columns",
        ("padding", "both"): "upper_not_zero",
        ("causal", "padding"): "zeros_are_future",
        ("causal", "both"): "pad_columns_get_weight",
        ("both", "padding"): "missed_causal",
        ("both", "causal"): "missed_padding",
    }
    params = {"n_pad": n_pad, "zeros": zeros}
    mistakes = [
        Wrong(m, f"practice.which_mask.hint.{hints[truth, m]}", params) for m in MASKS if m != truth
    ]
    solution = [
        Step("practice.which_mask.step.count", {"zeros": zeros, "cells": n * n}),
        Step(f"practice.which_mask.step.{truth}", {"n_pad": n_pad}),
    ]
    return Exercise(
        kind="which_mask",
        seed=seed,
        topic=TOPIC,
        form="choice",
        data={"tokens": tokens, "weights": weights.tolist(), "hint_params": params},
        answer=truth,
        solution=solution,
        wrong=mistakes,
        options=MASKS,
    )


def shift_right(seed: int) -> Exercise:
    """Teacher forcing: what the decoder reads (or must say) for one target sequence."""
    rng = rng_for("shift_right", seed)
    src_tok, tgt_tok = task_tokenizers(reverse)
    while True:
        source, target = reverse.sample(1, rng.randrange(100_000))[0]
        if 3 <= len(target.split()) <= 6:
            break
    asked = rng.choice(("inputs", "labels"))
    # The lab's own training batch: inputs <bos> y1..yn, labels y1..yn <eos>.
    batch = make_batch([(source, target)], src_tok, tgt_tok, max_len=32)
    inputs = tgt_tok.tokens(batch.inputs[0].tolist())
    labels = tgt_tok.tokens(batch.labels[0].tolist())
    y = target.split()
    bos, eos = tgt_tok.tokens([tgt_tok.bos_id, tgt_tok.eos_id])
    if asked == "inputs":
        answer = inputs
        candidates = [
            (y, "not_shifted"),
            ([bos, *y, eos], "eos_in_input"),
            ([bos, *y[:-1]], "dropped_last"),
            (labels, "gave_labels"),
        ]
    else:
        answer = labels
        candidates = [
            ([bos, *y], "labels_with_bos"),
            (y, "no_eos"),
            ([*y[1:], eos], "dropped_first"),
        ]
    p = {"n": len(y), "n1": len(y) + 1, "bos": bos, "eos": eos}
    mistakes = [Wrong(list(a), f"practice.shift_right.hint.{name}", p) for a, name in candidates]
    solution = [
        Step("practice.shift_right.step.rule", p),
        Step("practice.shift_right.step.inputs", {"tokens": " ".join(inputs)}),
        Step("practice.shift_right.step.labels", {"tokens": " ".join(labels)}),
        Step("practice.shift_right.step.why"),
    ]
    return Exercise(
        kind="shift_right",
        seed=seed,
        topic=TOPIC,
        form="tokens",
        data={
            "source": source.split(),
            "target": y,
            "asked": asked,
            "variant": asked,
            "bos": bos,
            "eos": eos,
            "hint_params": p,
        },
        answer=answer,
        solution=solution,
        wrong=mistakes,
    )
