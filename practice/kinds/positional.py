"""Positional encoding: which positions look alike, and what attention does without them."""

from __future__ import annotations

import torch

from model.attention import scaled_dot_product_attention
from model.positional import sinusoidal_encoding
from practice.core import Exercise, Field, Step, Wrong, fmt, fmt_vec, max_gap, rng_for, torch_seed

TOPIC = "positional"
MAX_POS = 60


def pe_dot(seed: int) -> Exercise:
    """Three pairs of positions: which pair's encodings have the largest dot product?"""
    rng = rng_for("pe_dot", seed)
    while True:
        d_model = rng.choice((8, 16, 32))
        offsets = rng.sample(range(1, 13), 3)
        pairs = []
        for i, off in enumerate(offsets):
            # One pair starts at 0, one far out, one in between: absolute position tempts.
            start = (0, rng.randint(35, MAX_POS - 13), rng.randint(1, 30))[i]
            pairs.append((start, start + off))
        rng.shuffle(pairs)
        pe = sinusoidal_encoding(MAX_POS + 1, d_model).double()
        dots = [float(pe[a] @ pe[b]) for a, b in pairs]
        order = sorted(range(3), key=lambda i: -dots[i])
        if dots[order[0]] - dots[order[1]] > 0.25:
            break
    best = order[0]
    best_off = pairs[best][1] - pairs[best][0]
    mistakes = []
    for i in range(3):
        if i == best:
            continue
        off = pairs[i][1] - pairs[i][0]
        name = "closer_is_more_similar" if off > best_off else "not_monotone"
        mistakes.append(
            Wrong(str(i), f"practice.pe_dot.hint.{name}", {"offset": off, "best_offset": best_off})
        )
    solution = [Step("practice.pe_dot.step.identity", {"half": d_model // 2})]
    solution += [
        Step("practice.pe_dot.step.pair", {"a": a, "b": b, "offset": b - a, "dot": fmt(dots[i])})
        for i, (a, b) in enumerate(pairs)
    ]
    return Exercise(
        kind="pe_dot",
        seed=seed,
        topic=TOPIC,
        form="choice",
        data={
            "d_model": d_model,
            "pairs": pairs,
            "dots": dots,
            "hint_params": {"best_offset": best_off},
        },
        answer=str(best),
        solution=solution,
        wrong=mistakes,
        options=("0", "1", "2"),
    )


def pe_permutation(seed: int) -> Exercise:
    """Self-attention without positions: reorder the words, predict one output row."""
    rng = rng_for("pe_permutation", seed)
    words_pool = ["cat", "sat", "on", "mat", "dog", "ran", "home", "we", "read", "books"]
    d = 4
    gen = torch.Generator().manual_seed(torch_seed(rng))
    while True:
        n = rng.randint(3, 4)
        words = rng.sample(words_pool, n)
        perm = list(range(n))
        while perm == list(range(n)):
            rng.shuffle(perm)
        j = rng.choice([i for i in range(n) if perm[i] != i])
        x = torch.randint(-2, 3, (n, d), generator=gen).double()  # token embeddings
        w_q, w_k, w_v = (torch.randint(-1, 2, (d, d), generator=gen).double() for _ in range(3))

        def attend(inputs: torch.Tensor, w_q=w_q, w_k=w_k, w_v=w_v) -> torch.Tensor:
            out, _ = scaled_dot_product_attention(inputs @ w_q, inputs @ w_k, inputs @ w_v)
            return out

        out_a = attend(x)
        out_b = attend(x[perm])  # the same words, reordered: words_b[i] = words[perm[i]]
        pe = sinusoidal_encoding(n, d).double()
        with_pe_a, with_pe_b = attend(x + pe), attend(x[perm] + pe)
        answer = [float(v) for v in out_b[j]]
        same_position = [float(v) for v in out_a[j]]
        if max_gap(answer, same_position) > 0.05 and float(out_a.abs().max()) < 10:
            break
    pe_gap = float((with_pe_b - with_pe_a[perm]).abs().max())
    words_b = [words[i] for i in perm]
    mistakes = [
        Wrong(
            (tuple(same_position),),
            "practice.pe_permutation.hint.same_position",
            {"j": j + 1, "word": words_b[j]},
        )
    ]
    solution = [
        Step("practice.pe_permutation.step.equivariance"),
        Step(
            "practice.pe_permutation.step.row",
            {"j": j + 1, "word": words_b[j], "i": perm[j] + 1, "row": fmt_vec(answer)},
        ),
        Step("practice.pe_permutation.step.with_pe", {"gap": fmt(pe_gap)}),
    ]
    return Exercise(
        kind="pe_permutation",
        seed=seed,
        topic=TOPIC,
        form="numbers",
        data={
            "words": words,
            "words_b": words_b,
            "perm": perm,
            "j": j,
            "x": x.tolist(),
            "w_q": w_q.tolist(),
            "w_k": w_k.tolist(),
            "w_v": w_v.tolist(),
            "out_a": out_a.tolist(),
            "hint_params": {"j": j + 1, "word": words_b[j]},
        },
        answer=(tuple(answer),),
        solution=solution,
        wrong=mistakes,
        fields=(Field("row", size=d, abs_tol=0.01),),
    )
