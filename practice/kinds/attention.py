"""Scaled dot-product attention by hand, why √d_k, and the tensor shapes of multi-head attention."""

from __future__ import annotations

import math

import torch

from model.analysis.concepts import qk_products
from model.attention import AttentionConfig, MultiHeadAttention, scaled_dot_product_attention
from model.masks import causal_mask, padding_mask
from practice.core import Exercise, Field, Step, Wrong, distinct, fmt, fmt_vec, rng_for

TOPIC = "attention"


def _softmax_masked(scores: list[float], allowed: list[bool]) -> list[float]:
    """Softmax over the allowed entries only (masked ones are exactly 0)."""
    top = max(s for s, ok in zip(scores, allowed) if ok)
    e = [math.exp(s - top) if ok else 0.0 for s, ok in zip(scores, allowed)]
    total = sum(e)
    return [x / total for x in e]


def sdpa_row(seed: int) -> Exercise:
    """One query row of masked attention weights, computed by hand (tolerance 0.01)."""
    rng = rng_for("sdpa_row", seed)
    for _ in range(1000):
        d_k = rng.choice((2, 4))
        n = rng.choice((3, 4))
        q = [rng.randint(-2, 2) for _ in range(d_k)]
        keys = [[rng.randint(-2, 2) for _ in range(d_k)] for _ in range(n)]
        mask_kind = rng.choice(("causal", "padding"))
        if mask_kind == "causal":
            position = rng.randint(1, n - 2)  # at least two keys allowed, at least one not
            allowed_t = causal_mask(n)[position]
        else:
            position = rng.randrange(n)
            n_pad = rng.randint(1, n - 2)
            ids = torch.tensor([[1] * (n - n_pad) + [0] * n_pad])
            allowed_t = padding_mask(ids, pad_id=0)[0]
        allowed = [bool(a) for a in allowed_t]
        qt = torch.tensor([q], dtype=torch.float64)  # [1, d_k]
        kt = torch.tensor(keys, dtype=torch.float64)  # [n, d_k]
        _, w = scaled_dot_product_attention(qt, kt, kt, mask=allowed_t[None, :])
        weights = [float(x) for x in w[0]]
        scores = [float(x) for x in (qt @ kt.T)[0]]
        scaled = [s / math.sqrt(d_k) for s in scores]
        no_sqrt = _softmax_masked(scores, allowed)
        by_dk = _softmax_masked([s / d_k for s in scores], allowed)
        full = _softmax_masked(scaled, [True] * n)
        after = [p if ok else 0.0 for p, ok in zip(full, allowed)]
        if distinct([weights, no_sqrt, by_dk, after, full], 0.03):
            break
    mistakes = [
        Wrong(
            (tuple(no_sqrt),), "practice.sdpa_row.hint.no_sqrt", {"sqrt_dk": fmt(math.sqrt(d_k))}
        ),
        Wrong(
            (tuple(by_dk),),
            "practice.sdpa_row.hint.divided_by_dk",
            {"d_k": d_k, "sqrt_dk": fmt(math.sqrt(d_k))},
        ),
        Wrong((tuple(after),), "practice.sdpa_row.hint.mask_after_softmax"),
        Wrong((tuple(full),), "practice.sdpa_row.hint.no_mask"),
    ]
    shown = [s if ok else float("-inf") for s, ok in zip(scaled, allowed)]
    solution = [
        Step("practice.sdpa_row.step.scores", {"scores": fmt_vec(scores, 0)}),
        Step(
            "practice.sdpa_row.step.scaled",
            {"sqrt_dk": fmt(math.sqrt(d_k)), "scaled": fmt_vec(scaled)},
        ),
        Step("practice.sdpa_row.step.masked", {"masked": fmt_vec(shown)}),
        Step("practice.sdpa_row.step.softmax", {"weights": fmt_vec(weights)}),
    ]
    return Exercise(
        kind="sdpa_row",
        seed=seed,
        topic=TOPIC,
        form="numbers",
        data={
            "d_k": d_k,
            "q": q,
            "keys": keys,
            "allowed": allowed,
            "mask_kind": mask_kind,
            "position": position,
            "hint_params": {"d_k": d_k},
        },
        answer=(tuple(weights),),
        solution=solution,
        wrong=mistakes,
        fields=(Field("weights", size=n, abs_tol=0.01),),
    )


def qk_variance(seed: int) -> Exercise:
    """Var(q·k) for independent entries of variance s², before and after dividing by √d_k."""
    rng = rng_for("qk_variance", seed)
    d_k = rng.choice((16, 32, 64, 128, 256, 512))
    s2 = rng.choice((1, 1, 2, 4))  # variance of every entry of q and of k
    raw, scaled = float(d_k * s2 * s2), float(s2 * s2)
    # The lab's own experiment: q·k of random N(0, 1) vectors, scaled to variance s² each.
    dots = qk_products(d_k, n=2000, seed=seed % 1000) * s2  # (s·q)·(s·k) = s² q·k
    measured_raw = float(dots.var())
    measured_scaled = float((dots / math.sqrt(d_k)).var())
    answer = (raw, scaled)
    mistakes = [
        Wrong((math.sqrt(raw), scaled), "practice.qk_variance.hint.std_not_var", {"d_k": d_k}),
        Wrong(
            (raw, s2 * s2 / d_k),
            "practice.qk_variance.hint.divided_by_dk",
            {"d_k": d_k, "value": fmt(s2 * s2 / d_k, 4)},
        ),
        Wrong((raw, raw), "practice.qk_variance.hint.scale_unchanged", {"d_k": d_k}),
    ]
    if s2 == 1:
        mistakes.append(Wrong((1.0, scaled), "practice.qk_variance.hint.unit", {"d_k": d_k}))
    else:
        mistakes.append(Wrong((float(d_k), 1.0), "practice.qk_variance.hint.forgot_s2", {"s2": s2}))
        # The usual slip: the product's variance taken as s² instead of s² · s² = s⁴.
        mistakes.append(
            Wrong(
                (float(d_k * s2), float(s2)),
                "practice.qk_variance.hint.s2_once",
                {"s2": s2, "s4": s2 * s2, "d_k": d_k},
            )
        )
    solution = [
        Step("practice.qk_variance.step.sum", {"d_k": d_k, "s2": s2, "raw": fmt(raw, 0)}),
        Step(
            "practice.qk_variance.step.scaled",
            {"d_k": d_k, "raw": fmt(raw, 0), "scaled": fmt(scaled, 0)},
        ),
        Step(
            "practice.qk_variance.step.measured",
            {"raw": fmt(measured_raw, 1), "scaled": fmt(measured_scaled, 2)},
        ),
        Step("practice.qk_variance.step.why"),
    ]
    return Exercise(
        kind="qk_variance",
        seed=seed,
        topic=TOPIC,
        form="numbers",
        data={"d_k": d_k, "s2": s2, "hint_params": {"d_k": d_k}},
        answer=answer,
        solution=solution,
        wrong=mistakes,
        fields=(Field("raw", rel_tol=0.02), Field("scaled", rel_tol=0.02)),
    )


SHAPE_TARGETS = ("q_heads", "k_heads", "weights", "out")


def mha_shapes(seed: int) -> Exercise:
    """The shape of one tensor inside multi-head cross-attention (decoder queries, encoder keys)."""
    rng = rng_for("mha_shapes", seed)
    while True:
        b = rng.randint(1, 4)
        d_model = rng.choice((64, 128, 256, 512))
        h = rng.choice((2, 4, 8))
        lq, lk = rng.randint(3, 12), rng.randint(3, 12)
        d_k = d_model // h
        if len({b, h, lq, lk, d_k, d_model}) == 6:
            break
    target = rng.choice(SHAPE_TARGETS)
    # Run the lab's own module on meta tensors: real shapes, no numbers, no random state.
    with torch.device("meta"):
        mha = MultiHeadAttention(AttentionConfig(d_model=d_model, n_heads=h))
        query, memory = torch.empty(b, lq, d_model), torch.empty(b, lk, d_model)
        attended = mha(query, memory, memory)
        shapes = {
            "q_heads": tuple(mha.split_heads(mha.q_proj(query)).shape),
            "k_heads": tuple(mha.split_heads(mha.k_proj(memory)).shape),
            "weights": tuple(attended.weights.shape),
            "out": tuple(attended.output.shape),
        }
    answer = shapes[target]
    p = {"b": b, "h": h, "lq": lq, "lk": lk, "d_k": d_k, "d_model": d_model}
    candidates = {
        "q_heads": [
            ((b, lq, h, d_k), "before_transpose"),
            ((b, lq, d_model), "no_split"),
            ((b, h, lq, d_model), "full_width"),
        ],
        "k_heads": [
            ((b, h, lq, d_k), "used_lq"),
            ((b, lk, h, d_k), "before_transpose"),
            ((b, lk, d_model), "no_split"),
        ],
        "weights": [
            ((b, h, lk, lq), "swapped"),
            ((b, lq, lk), "no_heads"),
            ((b, h, lq, d_k), "dk_not_lk"),
        ],
        "out": [((b, h, lq, d_k), "not_merged"), ((b, lk, d_model), "used_lk")],
    }[target]
    mistakes = [Wrong(shape, f"practice.mha_shapes.hint.{name}", p) for shape, name in candidates]
    solution = [
        Step("practice.mha_shapes.step.dk", p),
        Step(f"practice.mha_shapes.step.{target}", {**p, "shape": str(list(answer))}),
    ]
    return Exercise(
        kind="mha_shapes",
        seed=seed,
        topic=TOPIC,
        form="shape",
        data={**p, "target": target, "variant": target, "hint_params": p},
        answer=answer,
        solution=solution,
        wrong=mistakes,
    )
