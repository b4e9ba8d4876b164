"""The paper's warm-up schedule: the learning rate at a step, and where it peaks."""

from __future__ import annotations

from model.schedule import noam_lr
from practice.core import Exercise, Feedback, Field, Step, Wrong, check_numbers, fmt_sci, rng_for

TOPIC = "warmup"
REL_TOL = 0.01  # the precision the prompt asks for: within 1 % of the rate
NEAR = 0.05  # closer than this (but not within 1 %): rounded too far, not a wrong method


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
        Step(
            "practice.noam.step.lr",
            {
                **p,
                "scale": fmt_sci(d_model**-0.5),
                "min": fmt_sci(min(rising, falling)),
                "lr": fmt_sci(lr),
            },
        ),
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
        fields=(Field("lr", rel_tol=REL_TOL), Field("peak", integer=True)),
        checker=check_noam,
    )


def check_noam(ex: Exercise, answer) -> Feedback:
    """The usual check, then two kinder hints where it would say "compute both branches": a
    right rate with a wrong peak hears about the peak, and a rate that is close but rounded
    too far (outside 1 %, within 5 %) is asked for one more digit (the peak comes next)."""
    fb = check_numbers(ex, answer)
    if fb.correct or fb.key != "practice.noam.generic":
        return fb
    lr, want_lr = float(answer[0]), float(ex.answer[0])
    rel = abs(lr - want_lr) / want_lr
    if rel <= REL_TOL:
        return Feedback(False, "practice.noam.hint.peak", ex.data["hint_params"])
    if rel <= NEAR:
        return Feedback(False, "practice.noam.hint.precision", {"percent": f"{100 * rel:.1f}"})
    return fb
