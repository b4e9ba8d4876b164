"""The rest of a Transformer block by hand: the attention output z = Σ wᵢ vᵢ, a whole weight
matrix (which axis the softmax runs over), where the LayerNorm sits (pre-LN / post-LN), the
feed-forward sub-layer's sizes, and the key/value cache with grouped-query attention."""

from __future__ import annotations

import math

import torch

from model.analysis.concepts import kv_cache_bytes
from model.attention import scaled_dot_product_attention
from model.layers import AddNorm, FeedForward
from model.masks import causal_mask
from practice.core import Exercise, Field, Step, Wrong, distinct, fmt, fmt_vec, rng_for
from practice.kinds import attention, layernorm

SIZES = "sizes"
MIB = 2**20


# --- z = Σ wᵢ vᵢ ------------------------------------------------------------------------------


def attn_output(seed: int) -> Exercise:
    """One query's output: the weights of its row times the value vectors."""
    rng = rng_for("attn_output", seed)
    while True:
        n = rng.choice((3, 4))
        d_v = 3
        # Weights in twentieths (0.05 steps), each at least 0.05, summing to exactly 1.
        cuts = sorted(rng.sample(range(1, 20), n - 1))
        parts = [b - a for a, b in zip([0, *cuts], [*cuts, 20])]
        w = [p / 20 for p in parts]
        values = [[rng.randint(-3, 4) for _ in range(d_v)] for _ in range(n)]
        top = max(range(n), key=lambda i: w[i])
        if sum(x == w[top] for x in w) > 1:
            continue  # a tie: "the largest weight" would not name one value
        wt = torch.tensor([w], dtype=torch.float64)
        vt = torch.tensor(values, dtype=torch.float64)
        z = [float(x) for x in (wt @ vt)[0]]  # the weights applied as attention applies them
        summed = [float(sum(v[j] for v in values)) for j in range(d_v)]
        mean = [s / n for s in summed]
        top_only = [float(x) for x in values[top]]
        candidates = [(summed, "unweighted"), (mean, "plain_mean"), (top_only, "top_only")]
        if n == d_v:  # the weights run along the wrong axis of V
            transposed = [sum(w[i] * values[j][i] for i in range(n)) for j in range(d_v)]
            candidates.append((transposed, "wrong_axis"))
        if distinct([z, *(c for c, _ in candidates)], 0.03):
            break
    mistakes = [
        Wrong((tuple(c),), f"practice.attn_output.hint.{name}", {"n": n, "top": top + 1})
        for c, name in candidates
    ]
    terms = " + ".join(f"{w[i]:.2f}·{fmt_vec(values[i], 0)}" for i in range(n))
    solution = [
        Step("practice.attn_output.step.sum", {"terms": terms}),
        *[
            Step(
                "practice.attn_output.step.component",
                {
                    "j": j + 1,
                    "products": " + ".join(
                        f"{w[i]:.2f}·" + (f"({v})" if (v := values[i][j]) < 0 else f"{v}")
                        for i in range(n)
                    ),
                    "value": fmt(z[j]),
                },
            )
            for j in range(d_v)
        ],
        Step("practice.attn_output.step.why"),
    ]
    return Exercise(
        kind="attn_output",
        seed=seed,
        topic=attention.TOPIC,
        form="numbers",
        data={"weights": w, "values": values, "hint_params": {"n": n}},
        answer=(tuple(z),),
        solution=solution,
        wrong=mistakes,
        fields=(Field("z", size=d_v, abs_tol=0.01),),
    )


# --- a whole weight matrix --------------------------------------------------------------------


def _softmax_over(scores: list[list[float]], allowed: list[list[bool]], cells) -> dict:
    """Softmax over each group of cells (a list of (i, j)), masked cells left out."""
    out = {}
    for group in cells:
        kept = [(i, j) for i, j in group if allowed[i][j]]
        if not kept:
            continue
        top = max(scores[i][j] for i, j in kept)
        e = {(i, j): math.exp(scores[i][j] - top) for i, j in kept}
        total = sum(e.values())
        out.update({c: v / total for c, v in e.items()})
    return out


def _as_matrix(cells: dict, n: int) -> list[float]:
    return [cells.get((i, j), 0.0) for i in range(n) for j in range(n)]


def weight_matrix(seed: int) -> Exercise:
    """All the weights of a 3-token self-attention from its scaled scores: a softmax per row."""
    rng = rng_for("weight_matrix", seed)
    n = 3
    rows = [[(i, j) for j in range(n)] for i in range(n)]
    cols = [[(i, j) for i in range(n)] for j in range(n)]
    everything = [[(i, j) for i in range(n) for j in range(n)]]
    while True:
        mask_kind = rng.choice(("none", "causal"))
        scores = [[float(rng.randint(-2, 2)) for _ in range(n)] for _ in range(n)]
        allowed_t = causal_mask(n) if mask_kind == "causal" else torch.ones(n, n, dtype=torch.bool)
        allowed = [[bool(a) for a in row] for row in allowed_t]
        # The lab's own attention, with identity queries/keys so that Q Kᵀ / √d_k = the scores.
        s = torch.tensor(scores, dtype=torch.float64)
        eye = torch.eye(n, dtype=torch.float64)
        _, w = scaled_dot_product_attention(s * math.sqrt(n), eye, eye, mask=allowed_t)
        answer = [float(x) for x in w.reshape(-1)]
        every = [[True] * n for _ in range(n)]
        candidates = [
            (_as_matrix(_softmax_over(scores, allowed, cols), n), "wrong_axis"),
            (_as_matrix(_softmax_over(scores, allowed, everything), n), "whole_matrix"),
        ]
        if mask_kind == "causal":
            full = _softmax_over(scores, every, rows)
            candidates.append((_as_matrix(full, n), "no_mask"))
            after = {c: v for c, v in full.items() if allowed[c[0]][c[1]]}
            candidates.append((_as_matrix(after, n), "mask_after_softmax"))
        if distinct([answer, *(c for c, _ in candidates)], 0.03):
            break
    mistakes = [
        Wrong((tuple(c),), f"practice.weight_matrix.hint.{name}", {"n": n})
        for c, name in candidates
    ]
    solution = [Step(f"practice.weight_matrix.step.rule.{mask_kind}")]
    for i in range(n):
        kept = [scores[i][j] if allowed[i][j] else float("-inf") for j in range(n)]
        solution.append(
            Step(
                "practice.weight_matrix.step.row",
                {
                    "i": i + 1,
                    "scores": fmt_vec(kept, 0),
                    "weights": fmt_vec(answer[i * n : (i + 1) * n]),
                },
            )
        )
    solution.append(Step("practice.weight_matrix.step.check"))
    return Exercise(
        kind="weight_matrix",
        seed=seed,
        topic=attention.TOPIC,
        form="numbers",
        data={
            "scores": scores,
            "allowed": allowed,
            "mask_kind": mask_kind,
            "variant": mask_kind,
            "hint_params": {"n": n},
        },
        answer=(tuple(answer),),
        solution=solution,
        wrong=mistakes,
        fields=(Field("matrix", size=n * n, abs_tol=0.01),),
    )


# --- pre-LN versus post-LN --------------------------------------------------------------------


def _ln(x: list[float]) -> list[float]:
    mu = sum(x) / len(x)
    var = sum((v - mu) ** 2 for v in x) / len(x)
    return [(v - mu) / math.sqrt(var + layernorm.EPS) for v in x]


def ln_placement(seed: int) -> Exercise:
    """One residual step x → y around a toy sub-layer F(h) = w ⊙ h, pre-LN or post-LN."""
    rng = rng_for("ln_placement", seed)
    while True:
        placement = rng.choice(("pre", "post"))
        d = 4
        x = [float(rng.randint(-3, 5)) for _ in range(d)]
        w = [rng.choice((-1.0, 0.5, 2.0, 3.0)) for _ in range(d)]
        if len(set(x)) < 3:
            continue
        # The lab's own Add & Norm (eval mode: no dropout; LayerNorm starts at γ = 1, β = 0).
        add_norm = AddNorm(d, layernorm.EPS, 0.0, pre_norm=placement == "pre").double().eval()
        wt = torch.tensor(w, dtype=torch.float64)
        with torch.no_grad():
            y = add_norm(torch.tensor([x], dtype=torch.float64), lambda h, wt=wt: h * wt)[0]
        answer = [float(v) for v in y]
        n_x = _ln(x)
        pre = [a + b * c for a, b, c in zip(x, w, n_x)]
        summed = [a + b * a for a, b in zip(x, w)]
        post = _ln(summed)
        if placement == "pre":
            candidates = [
                (post, "did_post"),
                ([a + b * a for a, b in zip(n_x, w)], "normed_residual"),
                (_ln(pre), "norm_after_too"),
            ]
        else:
            candidates = [
                (pre, "did_pre"),
                (summed, "no_norm"),
                ([a + b * a for a, b in zip(n_x, w)], "norm_before_sum"),
            ]
        if distinct([answer, *(c for c, _ in candidates)], 0.03) and max(map(abs, answer)) < 20:
            break
    mistakes = [
        Wrong((tuple(c),), f"practice.ln_placement.hint.{name}", {}) for c, name in candidates
    ]
    if placement == "pre":
        solution = [
            Step("practice.ln_placement.step.pre_rule"),
            Step("practice.ln_placement.step.norm_x", {"normed": fmt_vec(n_x)}),
            Step(
                "practice.ln_placement.step.sublayer",
                {"f": fmt_vec([b * c for b, c in zip(w, n_x)])},
            ),
            Step("practice.ln_placement.step.pre_add", {"y": fmt_vec(answer)}),
        ]
    else:
        solution = [
            Step("practice.ln_placement.step.post_rule"),
            Step(
                "practice.ln_placement.step.sublayer",
                {"f": fmt_vec([b * a for a, b in zip(x, w)])},
            ),
            Step("practice.ln_placement.step.post_sum", {"sum": fmt_vec(summed, 1)}),
            Step("practice.ln_placement.step.post_norm", {"y": fmt_vec(answer)}),
        ]
    solution.append(Step(f"practice.ln_placement.step.residual.{placement}"))
    return Exercise(
        kind="ln_placement",
        seed=seed,
        topic=layernorm.TOPIC,
        form="numbers",
        data={
            "x": x,
            "w": w,
            "placement": placement,
            "variant": placement,
            "eps": layernorm.EPS,
            "hint_params": {},
        },
        answer=(tuple(answer),),
        solution=solution,
        wrong=mistakes,
        fields=(Field("y", size=d, abs_tol=ROUNDED, abs_tols=_ln_placement_tols(placement, w)),),
    )


ROUNDED = 0.01  # "to two decimals": the last rounding (0.005), and as much again to spare


def _ln_placement_tols(placement: str, w: list[float]) -> tuple[float, ...]:
    """How far y_i may be off when the student rounds as the prompt allows. Pre-LN: LN(x)
    rounded to two decimals on the way (as the worked solution shows it) is off by up to
    0.005, and F = w ⊙ LN(x) carries that times |w_i|, plus F's own rounding. Post-LN: full
    precision until the end, as its prompt asks."""
    if placement == "pre":
        return tuple(ROUNDED + 0.005 * abs(wi) + 0.005 + 1e-9 for wi in w)
    return tuple(ROUNDED for _ in w)


# --- the feed-forward sub-layer ---------------------------------------------------------------


def ffn(seed: int) -> Exercise:
    """The position-wise FFN: the shape of its hidden activation, or its parameter count."""
    rng = rng_for("ffn", seed)
    while True:
        b = rng.randint(1, 8)
        length = rng.randint(5, 40)
        d_model = rng.choice((64, 128, 256, 512, 768))
        mult = rng.choice((2, 4))
        d_ff = mult * d_model
        if len({b, length, d_model, d_ff}) == 4:
            break
    asked = rng.choice(("params", "hidden"))
    p = {"b": b, "l": length, "d_model": d_model, "d_ff": d_ff, "mult": mult}
    # The lab's own module, on the meta device: real sizes, no numbers.
    with torch.device("meta"):
        module = FeedForward(d_model, d_ff, 0.0, "relu")
        hidden = module.linear1(torch.empty(b, length, d_model))
    count = sum(t.numel() for t in module.parameters())
    if asked == "params":
        form, answer, fields = "numbers", (float(count),), (Field("count", integer=True),)
        candidates = [
            (2 * d_model * d_ff, "no_bias"),
            (d_model * d_ff + d_ff, "one_layer"),
            (2 * d_model * d_ff + d_model, "one_bias"),
            (count * length, "per_token"),
        ]
        if mult != 2:  # (for d_ff = 2 d_model this is the same number as one_layer)
            candidates.append((2 * d_model * d_model + 2 * d_model, "no_expand"))
        mistakes = [Wrong((float(c),), f"practice.ffn.hint.{name}", p) for c, name in candidates]
        solution = [
            Step("practice.ffn.step.layers", p),
            Step(
                "practice.ffn.step.count",
                {
                    **p,
                    "w": 2 * d_model * d_ff,
                    "bias": d_ff + d_model,
                    "count": f"{count:,}",
                },
            ),
            Step("practice.ffn.step.not_tokens", p),
        ]
    else:
        form, answer, fields = "shape", tuple(hidden.shape), ()
        candidates = [
            ((b, length, d_model), "no_expand_shape"),
            ((length, d_ff), "no_batch"),
            ((b, d_ff, length), "swapped"),
            ((b, d_ff), "pooled"),
        ]
        mistakes = [Wrong(c, f"practice.ffn.hint.{name}", p) for c, name in candidates]
        solution = [
            Step("practice.ffn.step.layers", p),
            Step("practice.ffn.step.hidden", {**p, "shape": str(list(answer))}),
            Step("practice.ffn.step.position_wise", p),
        ]
    return Exercise(
        kind="ffn",
        seed=seed,
        topic=SIZES,
        form=form,
        data={**p, "asked": asked, "variant": asked, "hint_params": p},
        answer=answer,
        solution=solution,
        wrong=mistakes,
        fields=fields,
    )


# --- the KV cache with grouped-query attention ------------------------------------------------

DTYPES = {"float32": 4, "bfloat16": 2, "float16": 2, "int8": 1}


def kv_cache(seed: int) -> Exercise:
    """Bytes of the key/value cache of a decoder with grouped-query attention, in MiB."""
    rng = rng_for("kv_cache", seed)
    while True:
        layers = rng.choice((12, 16, 24, 32, 40, 48, 80))
        n_heads = rng.choice((8, 16, 32, 64))
        n_kv = rng.choice([k for k in (1, 2, 4, 8) if k < n_heads])
        d_head = rng.choice((64, 128))
        tokens = rng.choice((1024, 2048, 4096, 8192, 32768))
        batch = rng.choice((1, 1, 2, 4, 8))
        dtype = rng.choice(tuple(DTYPES))
        size = DTYPES[dtype]
        total = kv_cache_bytes(layers, n_heads * d_head, n_heads, n_kv, tokens, size, batch)
        mib = total / MIB
        candidates = [
            (mib * n_heads / n_kv, "all_heads"),
            (mib / 2, "keys_only"),
            (total / 1e6, "decimal_mb"),
            (mib / layers, "one_layer"),
        ]
        if n_kv > 1:  # (with one KV head this is the same number as all_heads)
            candidates.append((mib * n_heads, "d_model_per_kv_head"))
        if size != 4:
            candidates.append((mib * 4 / size, "four_bytes"))
        values = [mib, *(c for c, _ in candidates)]
        # every named mistake at least 3 % from the answer and from each other (tolerance 0.5 %)
        spread = all(
            abs(a - b) > 0.03 * max(a, b) for i, a in enumerate(values) for b in values[i + 1 :]
        )
        if spread and 1 <= mib <= 10**6:
            break
    p = {
        "layers": layers,
        "n_heads": n_heads,
        "n_kv_heads": n_kv,
        "d_head": d_head,
        "tokens": tokens,
        "batch": batch,
        "dtype": dtype,
        "size": size,
        "group": n_heads // n_kv,
    }
    mistakes = [Wrong((c,), f"practice.kv_cache.hint.{name}", p) for c, name in candidates]
    solution = [
        Step("practice.kv_cache.step.formula", p),
        Step(
            "practice.kv_cache.step.bytes",
            {**p, "bytes": f"{total:,}"},
        ),
        Step("practice.kv_cache.step.mib", {"bytes": f"{total:,}", "mib": f"{mib:,.1f}"}),
        Step(
            "practice.kv_cache.step.saving",
            {**p, "mha_mib": f"{mib * n_heads / n_kv:,.1f}"},
        ),
    ]
    return Exercise(
        kind="kv_cache",
        seed=seed,
        topic=SIZES,
        form="numbers",
        data={**p, "hint_params": p},
        answer=(mib,),
        solution=solution,
        wrong=mistakes,
        fields=(Field("mib", rel_tol=0.005, unit="MiB"),),
    )
