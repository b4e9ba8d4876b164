"""Typed answers to numbers, lists, shapes and tokens, with a catalog key for every mistake.

The page reads text boxes through these functions, so it decides every message itself:
empty, not a number, NaN or infinity, too large, the wrong count.
"""

from __future__ import annotations

import math
import re

LIMIT = 1e12  # no answer here is anywhere near this; larger is a typo (or a test of us)
MAX_CHARS = 500

_SPLIT = re.compile(r"[\s,;]+")
_SHAPE_SPLIT = re.compile(r"[\s,;×xX*]+")
_FRACTION = re.compile(r"^([+-]?[0-9.]+(?:e[+-]?\d+)?)\s*/\s*([+-]?[0-9.]+(?:e[+-]?\d+)?)$", re.I)


class AnswerError(ValueError):
    """A typed answer that cannot be read; ``key`` and ``params`` make the message."""

    def __init__(self, key: str, **params: object):
        super().__init__(key)
        self.key, self.params = key, params


def _clean(text: object) -> str:
    if text is None:
        raise AnswerError("practice.input.empty")
    text = str(text).strip()
    if not text:
        raise AnswerError("practice.input.empty")
    if len(text) > MAX_CHARS:
        raise AnswerError("practice.input.too_long", limit=MAX_CHARS)
    return text


def _number(token: str) -> float:
    token = token.replace("−", "-").replace("⁻", "-")
    fraction = _FRACTION.match(token)
    try:
        if fraction:
            num, den = float(fraction.group(1)), float(fraction.group(2))
        else:
            num, den = float(token), 1.0
    except (ValueError, OverflowError):
        raise AnswerError("practice.input.not_a_number", value=token[:40]) from None
    if den == 0:
        raise AnswerError("practice.input.divide_by_zero", value=token[:40])
    value = num / den
    if math.isnan(value) or math.isinf(value):
        raise AnswerError("practice.input.not_finite", value=token[:40])
    if abs(value) > LIMIT:
        raise AnswerError("practice.input.too_large", value=token[:40])
    return value


def parse_number(text: object) -> float:
    """One number: "0.25", "-1e-3", "1/3"."""
    text = _clean(text)
    parts = [p for p in _SPLIT.split(text) if p]
    if len(parts) != 1:
        raise AnswerError("practice.input.one_number", got=len(parts))
    return _number(parts[0])


def parse_int(text: object) -> int:
    value = parse_number(text)
    if value != int(value):
        raise AnswerError("practice.input.not_integer", value=str(text).strip()[:40])
    return int(value)


def parse_numbers(text: object, n: int) -> tuple[float, ...]:
    """Exactly ``n`` numbers, separated by commas, semicolons or spaces; brackets allowed."""
    text = _clean(text).strip("[]()")
    parts = [p for p in _SPLIT.split(text) if p]
    values = tuple(_number(p) for p in parts)
    if len(values) != n:
        raise AnswerError("practice.input.count", expected=n, got=len(values))
    return values


def parse_shape(text: object) -> tuple[int, ...]:
    """A tensor shape: "[2, 8, 5, 16]", "(2, 8, 5, 16)" or "2 x 8 x 5 x 16"."""
    text = _clean(text).strip("[]()")
    parts = [p for p in _SHAPE_SPLIT.split(text) if p]
    if not parts:
        raise AnswerError("practice.input.empty")
    dims = []
    for p in parts:
        value = _number(p)
        if value != int(value) or value < 1:
            raise AnswerError("practice.input.bad_dim", value=p[:40])
        dims.append(int(value))
    if len(dims) > 8:
        raise AnswerError("practice.input.too_many_dims", got=len(dims))
    return tuple(dims)


def parse_tokens(text: object) -> list[str]:
    """Tokens separated by spaces or commas: "<bos> a b c"."""
    text = _clean(text)
    return [p for p in _SPLIT.split(text.strip("[]")) if p]
