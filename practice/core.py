"""What every exercise is made of: its prompt data, its answer, a checker and a worked solution.

Text is never made here: the prompt is data (numbers, tokens, matrices) and feedback and
solution steps are catalog keys with parameters, so the page can say them in either language
and a notebook can print the numbers.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

# Answer forms the page knows how to ask for.
FORMS = ("numbers", "choice", "tokens", "shape", "cells")


@dataclass(frozen=True)
class Feedback:
    """Whether an answer is right, and what to tell the student (a catalog key + parameters)."""

    correct: bool
    key: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Step:
    """One line of a worked solution: a catalog key and the numbers that fill it."""

    key: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Field:
    """One input box of a "numbers" exercise: ``size`` numbers (1 = a single number).

    ``abs_tol`` / ``rel_tol``: how close a number must be (either suffices); ``abs_tols``,
    one per number, replaces ``abs_tol`` where the rounding the prompt allows on the way
    grows by a different factor for each number (a value rounded, then multiplied by 3).
    """

    name: str
    size: int = 1
    abs_tol: float = 0.0
    rel_tol: float = 0.0
    integer: bool = False
    abs_tols: tuple[float, ...] = ()
    unit: str | None = None  # what the answer is asked in ("MiB"); the reader converts to it


@dataclass(frozen=True)
class Wrong:
    """A common wrong answer and the hint it earns (full answer, so tests can submit it)."""

    answer: Any
    key: str
    params: dict[str, Any] = field(default_factory=dict)


CORRECT = "practice.feedback.correct"
GENERIC = "practice.feedback.wrong"
WRONG_COUNT = "practice.feedback.wrong_count"
NOT_FINITE = "practice.feedback.not_finite"
UNREADABLE = "practice.feedback.unreadable"
CELLS_SCORE = "practice.feedback.cells_score"


@dataclass
class Exercise:
    """One exercise. ``data`` is the prompt (language-neutral), ``answer`` what is right.

    ``form`` says how the answer is given: "numbers" (a tuple, one entry per Field, each a
    float or a tuple of floats), "choice" (one of ``options``), "tokens" (a list of token
    strings), "shape" (a tuple of ints) or "cells" (one key index per query row).
    """

    kind: str
    seed: int
    topic: str
    form: str
    data: dict[str, Any]
    answer: Any
    solution: list[Step]
    wrong: list[Wrong] = field(default_factory=list)
    fields: tuple[Field, ...] = ()
    options: tuple[str, ...] = ()
    checker: Callable[[Exercise, Any], Feedback] | None = field(default=None, repr=False)

    def check(self, answer: Any) -> Feedback:
        """Right or wrong, with the most specific hint that fits the answer."""
        check = self.checker or _CHECKERS[self.form]
        try:
            return check(self, answer)
        except (TypeError, ValueError, IndexError):
            return Feedback(False, UNREADABLE)

    @property
    def prompt_key(self) -> str:
        """The catalog key of the question; some kinds ask one of several (``variant``)."""
        variant = self.data.get("variant")
        return f"practice.{self.kind}.prompt" + (f".{variant}" if variant else "")


# --- checking ---------------------------------------------------------------------------------


def _flat(ex: Exercise, answer: Any) -> list[list[float]]:
    """An answer as one list of floats per field; raises ValueError on the wrong sizes."""
    if len(ex.fields) == 1 and not _is_seq_of_seq(answer):
        answer = (answer,)
    if not isinstance(answer, Sequence) or isinstance(answer, str) or len(answer) != len(ex.fields):
        raise ValueError("one entry per field")
    out = []
    for f, value in zip(ex.fields, answer):
        values = (
            list(value) if isinstance(value, Sequence) and not isinstance(value, str) else [value]
        )
        if len(values) != f.size:
            raise _CountError(f.name, f.size, len(values))
        out.append([float(v) for v in values])
    return out


def _is_seq_of_seq(x: Any) -> bool:
    return (
        isinstance(x, Sequence)
        and not isinstance(x, str)
        and len(x) == 1
        and isinstance(x[0], Sequence)
        and not isinstance(x[0], str)
    )


class _CountError(ValueError):
    def __init__(self, name: str, expected: int, got: int):
        super().__init__(name)
        self.name, self.expected, self.got = name, expected, got


def close(a: float, b: float, f: Field, index: int = 0) -> bool:
    if f.integer:
        return a == b
    abs_tol = f.abs_tols[index] if f.abs_tols else f.abs_tol
    return math.isclose(a, b, rel_tol=f.rel_tol, abs_tol=abs_tol)


def _field_ok(ex: Exercise, i: int, got: list[float], want: list[float]) -> bool:
    return all(close(g, w, ex.fields[i], j) for j, (g, w) in enumerate(zip(got, want)))


def check_numbers(ex: Exercise, answer: Any) -> Feedback:
    try:
        got = _flat(ex, answer)
    except _CountError as err:
        return Feedback(
            False, WRONG_COUNT, {"field": err.name, "expected": err.expected, "got": err.got}
        )
    if not all(math.isfinite(v) for values in got for v in values):
        return Feedback(False, NOT_FINITE)
    right = _flat(ex, ex.answer)
    bad = [i for i in range(len(right)) if not _field_ok(ex, i, got[i], right[i])]
    if not bad:
        return Feedback(True, CORRECT)
    wrongs = [(w, _flat(ex, w.answer)) for w in ex.wrong]
    for w, wrong in wrongs:  # a whole known mistake first ...
        if all(_field_ok(ex, i, got[i], wrong[i]) for i in range(len(right))):
            return Feedback(False, w.key, w.params)
    for w, wrong in wrongs:  # ... then a mistake in some of the fields
        # The fields this mistake changes: a match on them earns its hint.
        changed = [i for i in range(len(right)) if not _field_ok(ex, i, wrong[i], right[i])]
        if (
            changed
            and set(changed) & set(bad)
            and all(_field_ok(ex, i, got[i], wrong[i]) for i in changed)
        ):
            return Feedback(False, w.key, w.params)
    return Feedback(False, f"practice.{ex.kind}.generic", ex.data.get("hint_params", {}))


def check_choice(ex: Exercise, answer: Any) -> Feedback:
    if answer not in ex.options:
        return Feedback(False, UNREADABLE)
    if answer == ex.answer:
        return Feedback(True, CORRECT)
    for w in ex.wrong:
        if w.answer == answer:
            return Feedback(False, w.key, w.params)
    return Feedback(False, f"practice.{ex.kind}.generic", ex.data.get("hint_params", {}))


def _norm_tokens(tokens: Any) -> list[str]:
    if isinstance(tokens, str):
        tokens = tokens.split()
    return [str(tok).strip().lower() for tok in tokens]


def check_tokens(ex: Exercise, answer: Any) -> Feedback:
    got = _norm_tokens(answer)
    if got == _norm_tokens(ex.answer):
        return Feedback(True, CORRECT)
    for w in ex.wrong:
        if got == _norm_tokens(w.answer):
            return Feedback(False, w.key, w.params)
    return Feedback(False, f"practice.{ex.kind}.generic", ex.data.get("hint_params", {}))


def check_shape(ex: Exercise, answer: Any) -> Feedback:
    got = tuple(int(v) for v in answer)
    if got == tuple(ex.answer):
        return Feedback(True, CORRECT)
    for w in ex.wrong:
        if got == tuple(w.answer):
            return Feedback(False, w.key, w.params)
    return Feedback(False, f"practice.{ex.kind}.generic", ex.data.get("hint_params", {}))


def overlap(picked: Sequence[int | None], truth: Sequence[int]) -> float:
    """Share of query rows whose picked key is the true one (an unpicked row counts as a miss)."""
    if len(picked) != len(truth):
        raise ValueError("one pick per row")
    return sum(p is not None and int(p) == t for p, t in zip(picked, truth)) / len(truth)


CELLS_PASS = 0.75  # share of rows that must match


def check_cells(ex: Exercise, answer: Any) -> Feedback:
    picked = list(answer)
    if len(picked) != len(ex.answer):
        return Feedback(
            False, WRONG_COUNT, {"field": "cells", "expected": len(ex.answer), "got": len(picked)}
        )
    score = overlap(picked, ex.answer)
    pct = round(100 * score)
    if score >= CELLS_PASS:
        return Feedback(True, CELLS_SCORE, {"percent": pct})
    for w in ex.wrong:
        if overlap(picked, w.answer) >= CELLS_PASS:
            return Feedback(False, w.key, {**w.params, "percent": pct})
    return Feedback(False, f"practice.{ex.kind}.generic", {"percent": pct})


_CHECKERS: dict[str, Callable[[Exercise, Any], Feedback]] = {
    "numbers": check_numbers,
    "choice": check_choice,
    "tokens": check_tokens,
    "shape": check_shape,
    "cells": check_cells,
}


# --- helpers for generators -------------------------------------------------------------------


def rng_for(kind: str, seed: int) -> random.Random:
    """A private generator per (kind, seed): never the global one (string seeds hash stably)."""
    return random.Random(f"practice:{kind}:{seed}")


def torch_seed(rng: random.Random) -> int:
    return rng.randrange(2**31)


def fmt(x: float, digits: int = 3) -> str:
    """A number as the solution prints it: fixed digits, no "-0.000"."""
    if math.isinf(x):
        return "-∞" if x < 0 else "∞"
    s = f"{x:.{digits}f}"
    if s.strip("-0.") == "":  # zero, or a tiny negative that would print as "-0.000"
        return f"{0:.{digits}f}"
    return s


def fmt_vec(xs: Sequence[float], digits: int = 3) -> str:
    return "[" + ", ".join(fmt(float(x), digits) for x in xs) + "]"


def fmt_sci(x: float) -> str:
    return f"{x:.3e}"


def max_gap(a: Sequence[float], b: Sequence[float]) -> float:
    return max(abs(float(x) - float(y)) for x, y in zip(a, b))


def distinct(vectors: Sequence[Sequence[float]], gap: float) -> bool:
    """Every pair differs somewhere by more than ``gap`` (so a hint names one mistake)."""
    return all(
        max_gap(vectors[i], vectors[j]) > gap
        for i in range(len(vectors))
        for j in range(i + 1, len(vectors))
    )
