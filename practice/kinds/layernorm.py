"""Layer normalization of one token's vector, by hand (biased variance, as LayerNorm uses)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from practice.core import Exercise, Field, Step, Wrong, distinct, fmt, fmt_vec, rng_for

TOPIC = "layernorm"
EPS = 1e-5


def layernorm(seed: int) -> Exercise:
    rng = rng_for("layernorm", seed)
    while True:
        d = rng.choice((4, 5))
        x = [rng.randint(-4, 6) for _ in range(d)]
        gamma = rng.choice((1.0, 1.0, 2.0, 0.5))
        beta = rng.choice((0.0, 0.0, 1.0, -1.0))
        xt = torch.tensor([x], dtype=torch.float64)
        out = F.layer_norm(
            xt,
            (d,),
            torch.full((d,), gamma, dtype=torch.float64),
            torch.full((d,), beta, dtype=torch.float64),
            eps=EPS,
        )[0]
        answer = [float(v) for v in out]
        mu = sum(x) / d
        var = sum((v - mu) ** 2 for v in x) / d
        if var == 0:
            continue
        var_unbiased = sum((v - mu) ** 2 for v in x) / (d - 1)
        unbiased = [gamma * (v - mu) / math.sqrt(var_unbiased + EPS) + beta for v in x]
        no_mean = [gamma * v / math.sqrt(var + EPS) + beta for v in x]
        by_var = [gamma * (v - mu) / (var + EPS) + beta for v in x]
        candidates = [(unbiased, "unbiased"), (no_mean, "no_mean"), (by_var, "var_not_std")]
        if gamma != 1.0 or beta != 0.0:
            plain = [(v - mu) / math.sqrt(var + EPS) for v in x]
            candidates.append((plain, "no_affine"))
        if distinct([answer, *(c for c, _ in candidates)], 0.03):
            break
    p = {"d": d, "gamma": fmt(gamma, 1), "beta": fmt(beta, 1)}
    mistakes = [Wrong((tuple(c),), f"practice.layernorm.hint.{name}", p) for c, name in candidates]
    solution = [
        Step("practice.layernorm.step.mean", {"d": d, "mean": fmt(mu)}),
        Step("practice.layernorm.step.var", {"d": d, "var": fmt(var), "std": fmt(math.sqrt(var))}),
        Step(
            "practice.layernorm.step.normalize",
            {"normalized": fmt_vec([(v - mu) / math.sqrt(var + EPS) for v in x])},
        ),
        Step("practice.layernorm.step.affine", {**p, "out": fmt_vec(answer)}),
    ]
    return Exercise(
        kind="layernorm",
        seed=seed,
        topic=TOPIC,
        form="numbers",
        data={"x": x, "gamma": gamma, "beta": beta, "eps": EPS, "hint_params": p},
        answer=(tuple(answer),),
        solution=solution,
        wrong=mistakes,
        fields=(Field("out", size=d, abs_tol=0.01),),
    )
