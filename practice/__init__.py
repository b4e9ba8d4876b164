"""Exercises with instant feedback, made from the lab's own models and functions.

Pure Python on top of ``model/`` (no Streamlit), so a notebook can use it too::

    import practice
    ex = practice.make("sdpa_row", seed=7)
    ex.data                      # the prompt: numbers, tokens, matrices
    ex.check((0.2, 0.3, 0.5))    # Feedback(correct=..., key=..., params=...)
    ex.answer, ex.solution       # the answer and its worked steps (catalog keys + numbers)

The same ``(kind, seed)`` always makes the same exercise; ``item(seed, topic, i)`` gives the
i-th exercise of a class set, the same for everyone who opens the same link.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from practice.core import Exercise, Feedback, Field, Step, Wrong
from practice.kinds import attention, blocks, family, layernorm, masks, positional, warmup
from practice.parse import AnswerError

_MAKERS: dict[str, tuple[str, Callable[[int], Exercise]]] = {
    "sdpa_row": (attention.TOPIC, attention.sdpa_row),
    "qk_variance": (attention.TOPIC, attention.qk_variance),
    "mha_shapes": (attention.TOPIC, attention.mha_shapes),
    "attn_output": (attention.TOPIC, blocks.attn_output),
    "weight_matrix": (attention.TOPIC, blocks.weight_matrix),
    "which_mask": (masks.TOPIC, masks.which_mask),
    "shift_right": (masks.TOPIC, masks.shift_right),
    "pe_dot": (positional.TOPIC, positional.pe_dot),
    "pe_permutation": (positional.TOPIC, positional.pe_permutation),
    "layernorm": (layernorm.TOPIC, layernorm.layernorm),
    "ln_placement": (layernorm.TOPIC, blocks.ln_placement),
    "noam": (warmup.TOPIC, warmup.noam),
    "attention_kind": (family.TOPIC, family.attention_kind),
    "family_task": (family.TOPIC, family.family_task),
    "cross_attention": (family.TOPIC, family.cross_attention),
    "ffn": (blocks.SIZES, blocks.ffn),
    "kv_cache": (blocks.SIZES, blocks.kv_cache),
}

KINDS: tuple[str, ...] = tuple(_MAKERS)
TOPICS: tuple[str, ...] = tuple(dict.fromkeys(topic for topic, _ in _MAKERS.values()))
MIXED = "mixed"
MAX_SEED = 10**9


def topic_of(kind: str) -> str:
    return _MAKERS[kind][0]


def kinds_for(topic: str) -> tuple[str, ...]:
    """The kinds of one topic, all of them for "mixed", or just one kind (a kind's id).

    A topic comes first where a kind has the same name ("layernorm"): the concept page's
    link to its topic gets every exercise of the topic.
    """
    if topic == MIXED:
        return KINDS
    if topic in TOPICS:
        return tuple(k for k in KINDS if topic_of(k) == topic)
    if topic in _MAKERS:
        return (topic,)
    raise ValueError(f"unknown topic {topic!r}; choose one of {(MIXED, *TOPICS, *KINDS)}")


def make(kind: str, seed: int) -> Exercise:
    """The exercise ``kind`` number ``seed``: the same every time, on every machine."""
    if kind not in _MAKERS:
        raise ValueError(f"unknown kind {kind!r}; choose one of {KINDS}")
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= MAX_SEED:
        raise ValueError(f"seed must be an integer from 0 to {MAX_SEED}, not {seed!r}")
    return _MAKERS[kind][1](seed)


def item(seed: int, topic: str, index: int) -> tuple[str, int]:
    """(kind, exercise seed) of exercise ``index`` in the class set ``seed`` for ``topic``.

    Every round of len(kinds) items holds each kind once, in an order shuffled per round,
    so a class working through a mixed set meets every topic.
    """
    kinds = list(kinds_for(topic))
    rnd, pos = divmod(index, len(kinds))
    random.Random(f"practice-set:{seed}:{topic}:{rnd}").shuffle(kinds)
    sub = random.Random(f"practice-item:{seed}:{topic}:{index}").randrange(MAX_SEED)
    return kinds[pos], sub


def class_set(seed: int, topic: str = MIXED, n: int = 10) -> list[Exercise]:
    """The first ``n`` exercises of a class set (what the teacher's answer key lists)."""
    return [make(*item(seed, topic, i)) for i in range(n)]


__all__ = [
    "KINDS",
    "MIXED",
    "TOPICS",
    "AnswerError",
    "Exercise",
    "Feedback",
    "Field",
    "Step",
    "Wrong",
    "class_set",
    "item",
    "kinds_for",
    "make",
    "topic_of",
]
