"""The paper's warm-up schedule: the learning rate at a step, and where it peaks."""

from __future__ import annotations

from model.schedule import noam_lr
from practice.core import Exercise, Field, Step, Wrong, fmt_sci, rng_for

TOPIC = "warmup"


def noam(seed: int) -> Exercise:
    rng = rng_for("noam", seed)
    d_model = rng.choice((128, 256, 512, 1024))
    warmup = rng.choice((1000, 2000, 4000, 8000))
    while True:
        step = rng.choice((rng.randint(100, warmup - 100), rng.randint(warmup + 100, 5 * warmup)))
        step = round(step, -2)
        if step != warmup:
            break
    lr = noam_lr(step, d_model, warmup)
    # The peak, found on the lab's own schedule rather than by the formula.
    peak = max(range(1, 3 * warmup), key=lambda s: noam_lr(s, d_model, warmup))
    rising, falling = step * warmup**-1.5, step**-0.5
    other = falling if step < warmup else rising  # the branch min() did not pick
    p = {"d_model": d_model, "warmup": warmup, "step": step}
    mistakes = [
        Wrong((d_model**-0.5 * other, peak), "practice.noam.hint.wrong_branch", p),
        Wrong((min(rising, falling), peak), "practice.noam.hint.no_dmodel", p),
        Wrong((lr, peak + 1), "practice.noam.hint.peak_off_by_one", p),
        Wrong((lr, peak - 1), "practice.noam.hint.peak_off_by_one", p),
    ]
    solution = [
        Step(
            "practice.noam.step.branches",
            {**p, "rising": fmt_sci(rising), "falling": fmt_sci(falling)},
        ),
        Step("practice.noam.step.lr", {**p, "scale": fmt_sci(d_model**-0.5), "lr": fmt_sci(lr)}),
        Step(
            "practice.noam.step.peak",
            {**p, "peak": peak, "peak_lr": fmt_sci(noam_lr(peak, d_model, warmup))},
        ),
    ]
    return Exercise(
        kind="noam",
        seed=seed,
        topic=TOPIC,
        form="numbers",
        data={**p, "hint_params": p},
        answer=(lr, float(peak)),
        solution=solution,
        wrong=mistakes,
        fields=(Field("lr", rel_tol=0.01), Field("peak", integer=True)),
    )
