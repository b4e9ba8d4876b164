"""Encoder, decoder, encoder-decoder: which attention is this, which family fits a task, and
where the reverse model's cross-attention looks."""

from __future__ import annotations

from functools import lru_cache

from model.tasks import en2ko, reverse, sort
from practice.core import (
    CELLS_PASS,
    Exercise,
    Feedback,
    Step,
    Wrong,
    check_choice,
    fmt,
    overlap,
    rng_for,
)
from practice.lab import reverse_trace

TOPIC = "family"
ATTENTION_KINDS = ("encoder", "decoder", "cross")
FAMILIES = ("encoder", "decoder", "encoder-decoder")


@lru_cache(maxsize=1)
def _pool() -> tuple[str, ...]:
    """64 test-split sequences of 3..7 symbols: the model never trained on them, and a
    small fixed pool keeps every trace cached."""
    pool = []
    for source, _ in reverse.sample(400, 2024, split="test"):
        if 3 <= len(source.split()) <= 7 and source not in pool:
            pool.append(source)
    return tuple(pool[:64])


def _source(rng) -> str:
    return rng.choice(_pool())


def attention_kind(seed: int) -> Exercise:
    """One head of the reverse model: encoder self-, decoder masked self- or cross-attention?"""
    rng = rng_for("attention_kind", seed)
    truth = rng.choice(ATTENTION_KINDS)
    source = _source(rng)
    trace = reverse_trace(source)
    layer = rng.randrange(trace.attention[truth].shape[0])
    head = rng.randrange(trace.attention[truth].shape[1])
    weights = trace.attention[truth][layer, head]
    queries, keys = trace.tokens(truth)
    p = {"bos": trace.tgt_tokens[0], "eos": trace.src_tokens[-1]}
    mistakes = [
        Wrong(c, f"practice.attention_kind.hint.{truth}_as_{c}", p)
        for c in ATTENTION_KINDS
        if c != truth
    ]
    solution = [
        Step(
            "practice.attention_kind.step.axes", {"rows": " ".join(queries), "cols": " ".join(keys)}
        ),
        Step(f"practice.attention_kind.step.{truth}", p),
    ]
    return Exercise(
        kind="attention_kind",
        seed=seed,
        topic=TOPIC,
        form="choice",
        data={
            "queries": queries,
            "keys": keys,
            "weights": weights.tolist(),
            "layer": layer,
            "head": head,
            "hint_params": p,
        },
        answer=truth,
        solution=solution,
        wrong=mistakes,
        options=ATTENTION_KINDS,
    )


# Tasks and the family that fits them; the lab's own tasks say their family themselves.
TASKS = {
    "sentiment": "encoder",
    "ner": "encoder",
    "search": "encoder",
    "story": "decoder",
    "code": "decoder",
    "translation": "encoder-decoder",
    "lab_reverse": reverse.KIND,
    "lab_sort": sort.KIND,
    "lab_en2ko": en2ko.KIND,
}


def family_task(seed: int) -> Exercise:
    rng = rng_for("family_task", seed)
    task = rng.choice(sorted(TASKS))
    truth = TASKS[task]
    mistakes = [
        Wrong(c, f"practice.family_task.hint.{truth}_as_{c}") for c in FAMILIES if c != truth
    ]
    also = ALSO_RIGHT.get(task, {})
    solution = [
        Step(f"practice.family_task.why.{task}"),
        Step(f"practice.family_task.step.{truth}"),
        *(Step(note) for note in also.values()),
    ]
    return Exercise(
        kind="family_task",
        seed=seed,
        topic=TOPIC,
        form="choice",
        data={"task": task, "hint_params": {}, "also_right": also},
        answer=truth,
        solution=solution,
        wrong=[w for w in mistakes if w.answer not in also],
        options=FAMILIES,
        checker=_check_family if also else None,
    )


# Answers that are also right today, each with the note that says why and how it differs.
# Translation: decoder-only models translate too (the source given as the start of the
# prompt); the paper's answer, and the lab's en2ko, is encoder-decoder.
ALSO_RIGHT = {"translation": {"decoder": "practice.family_task.also_right.translation_decoder"}}


def _check_family(ex: Exercise, answer: str) -> Feedback:
    note = ex.data["also_right"].get(answer)
    if note is not None:
        return Feedback(True, note)
    return check_choice(ex, answer)


def cross_attention(seed: int) -> Exercise:
    """Predict, row by row, the source token the last layer's cross-attention looks at most."""
    rng = rng_for("cross_attention", seed)
    for _ in range(100):
        source = _source(rng)
        trace = reverse_trace(source)
        cross = trace.attention["cross"][-1].mean(0)  # [queries, keys], heads averaged
        truth = [int(i) for i in cross.argmax(-1)]
        n_rows, n_src = cross.shape
        # Common wrong pictures: in reading order (the diagonal), and each row on the token
        # it has just read (one step behind the anti-diagonal; <bos> on the source's <eos>).
        diagonal = [min(i, n_src - 1) for i in range(n_rows)]
        behind = [max(0, n_src - 1 - i) for i in range(n_rows)]
        if overlap(diagonal, truth) < CELLS_PASS and overlap(behind, truth) < CELLS_PASS:
            break
    mistakes = [
        Wrong(tuple(diagonal), "practice.cross_attention.hint.diagonal"),
        Wrong(tuple(behind), "practice.cross_attention.hint.just_read"),
    ]
    peaks = [fmt(float(cross[i, truth[i]]), 2) for i in range(n_rows)]
    solution = [
        Step("practice.cross_attention.step.what", {"layer": trace.attention["cross"].shape[0]}),
        *[
            Step(
                "practice.cross_attention.step.row",
                {
                    "query": trace.tgt_tokens[i],
                    "key": trace.src_tokens[truth[i]],
                    "k": truth[i] + 1,
                    "weight": peaks[i],
                },
            )
            for i in range(n_rows)
        ],
        Step("practice.cross_attention.step.why"),
    ]
    return Exercise(
        kind="cross_attention",
        seed=seed,
        topic=TOPIC,
        form="cells",
        data={
            "source": source,
            "queries": trace.tgt_tokens,
            "keys": trace.src_tokens,
            "weights": cross.tolist(),
            "hint_params": {},
        },
        answer=tuple(truth),
        solution=solution,
        wrong=mistakes,
    )
