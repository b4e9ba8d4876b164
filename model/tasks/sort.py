"""Sort digits with a decoder-only model: "<bos> 3 1 2 <sep>" is continued by "1 2 3 <eos>".

As in the well-known sorting-GPT pictures, each output digit attends back to the prompt
digit it copies (the smallest not yet written).
"""

from __future__ import annotations

import random
import string

from model.tasks import BOS, SEP, Vocabulary, sample_split
from model.tasks import split_of as _split_of

KIND = "decoder"
SYMBOLS = tuple(string.digits)
MIN_LEN, MAX_LEN = 2, 10


def reference(source: str) -> str:
    """The reference answer: the same digits in ascending order."""
    return " ".join(sorted(_symbols(source)))


def _symbols(source: str) -> list[str]:
    """The symbols of a typed sequence, as the tokenizer reads it: "A3k" and "a 3 k" alike."""
    return [c for c in source.lower() if c.isalnum()]


def split_of(source: str) -> str:
    return _split_of("sort:" + " ".join(_symbols(source)))


def sample(n: int, seed: int, split: str = "train") -> list[tuple[str, str]]:
    """``n`` (digits, sorted digits) pairs from ``split``, the same for the same seed."""
    return sample_split(n, seed, split, _draw, reference, split_of)


def _draw(rng: random.Random) -> str:
    return " ".join(rng.choices(SYMBOLS, k=rng.randint(MIN_LEN, MAX_LEN)))


def vocabularies() -> tuple[None, Vocabulary]:
    """(no source side, the one vocabulary: prompts are wrapped as "<bos> ... <sep>")."""
    vocab = Vocabulary(
        SYMBOLS, split="chars", extra_specials=(SEP,), prompt_prefix=(BOS,), prompt_suffix=(SEP,)
    )
    return None, vocab
