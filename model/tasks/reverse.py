"""Reverse a sequence of digits and letters: output position i copies input position n-1-i.

The ideal cross-attention is a crisp anti-diagonal, the cleanest picture of "where does this
output token look?".
"""

from __future__ import annotations

import random
import string

from model.tasks import EOS, Vocabulary, sample_split
from model.tasks import split_of as _split_of

KIND = "encoder-decoder"
SYMBOLS = tuple(string.digits + string.ascii_lowercase)
MIN_LEN, MAX_LEN = 2, 12


def reference(source: str) -> str:
    """The reference answer: the symbols in reverse order."""
    return " ".join(reversed(_symbols(source)))


def _symbols(source: str) -> list[str]:
    """The symbols of a typed sequence, as the tokenizer reads it: "A3k" and "a 3 k" alike."""
    return [c for c in source.lower() if c.isalnum()]


def split_of(source: str) -> str:
    return _split_of("reverse:" + " ".join(_symbols(source)))


def sample(n: int, seed: int, split: str = "train") -> list[tuple[str, str]]:
    """``n`` (sequence, reversed sequence) pairs from ``split``, the same for the same seed."""
    return sample_split(n, seed, split, _draw, reference, split_of)


def _draw(rng: random.Random) -> str:
    # Half the sequences use only a few symbols: with many repeats, "the symbol before the
    # one I just wrote" is ambiguous, so the model must count positions from the end.
    alphabet = rng.sample(SYMBOLS, rng.randint(2, 5)) if rng.random() < 0.5 else SYMBOLS
    return " ".join(rng.choices(alphabet, k=rng.randint(MIN_LEN, MAX_LEN)))


def vocabularies() -> tuple[Vocabulary, Vocabulary]:
    """One symbol per token on both sides; "a3k" and "a 3 k" read the same.

    The source ends in <eos> (as fairseq and T5 sources do): an anchor the encoder measures
    "distance from the end" against, which is what output position i needs when symbols repeat.
    """
    source = Vocabulary(SYMBOLS, split="chars", prompt_suffix=(EOS,))
    return source, Vocabulary(SYMBOLS, split="chars")
