"""Induction: random letters, then the same letters again; the model finishes the repeat.

"<bos> q w e r t y q w" is continued by "e r t y <eos>" (a few random letters may come
first: "<bos> z x q w e r t y q w" is continued the same way). Nothing about the letters can be
learnt, only the rule "find where the current letter was before and copy what came next":
the induction head (Olsson et al., 2022), formed by a previous-token head in layer 1 and a
head in layer 2 that reads it. The block's letters are all different, so the rule always has
exactly one answer. The split is by block length: the held-out lengths never occur in
training, so a model that scores on them has learnt the rule, not the lengths.
"""

from __future__ import annotations

import random
import string

from model.tasks import BOS, Vocabulary

KIND = "decoder"
SYMBOLS = tuple(string.ascii_lowercase)
MIN_BLOCK, MAX_BLOCK = 2, 16
# Random letters before the block: the repeat starts anywhere, so only the letters (not the
# positions) can say where to copy from.
MAX_FILLER = 8
TEST_BLOCKS = (7, 11, 15)  # block lengths held out of training
TRAIN_BLOCKS = tuple(n for n in range(MIN_BLOCK, MAX_BLOCK + 1) if n not in TEST_BLOCKS)


def _symbols(source: str) -> list[str]:
    """The letters of a typed sequence, as the tokenizer reads it: "QweR" and "q w e r" alike."""
    return [c for c in source.lower() if c.isalnum()]


class NotARepeat(ValueError):
    """A prompt that is not "letters, then the same letters again"; ``reason`` says which
    rule it breaks: "empty", "no_repeat" or "breaks_off"."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


def split_block(source: str) -> tuple[list[str], int]:
    """(the block, how many of its letters the prompt already repeats).

    The first letter that comes back starts the repeat; the block runs from its first
    occurrence to there (letters before it are filler), and what follows must repeat it.
    """
    symbols = _symbols(source)
    if not symbols:
        raise NotARepeat("empty", "an induction prompt needs letters")
    seen: dict[str, int] = {}
    for i, s in enumerate(symbols):
        if s in seen:
            start, end = seen[s], i
            break
        seen[s] = i
    else:
        raise NotARepeat("no_repeat", "no letter of the prompt comes back, so nothing repeats")
    block, repeat = symbols[start:end], symbols[end:]
    if len(repeat) > len(block) or block[: len(repeat)] != repeat:
        raise NotARepeat(
            "breaks_off", "after a letter comes back, the prompt must go on repeating the block"
        )
    return block, len(repeat)


def reference(source: str) -> str:
    """The rest of the repeat: the block's letters the prompt has not repeated yet."""
    block, k = split_block(source)
    return " ".join(block[k:])


def split_of(source: str) -> str:
    """ "test" for the held-out block lengths, "train" for the others."""
    block, _ = split_block(source)
    return "test" if len(block) in TEST_BLOCKS else "train"


def draw(rng: random.Random, n: int) -> tuple[str, str]:
    """One (prompt, continuation) pair: up to MAX_FILLER letters of filler, then a block
    of ``n``, all different, then the block's first few letters again."""
    m = rng.randint(0, MAX_FILLER)
    letters = rng.sample(SYMBOLS, m + n)
    filler, block = letters[:m], letters[m:]
    k = rng.randint(1, min(3, n - 1))  # the first few letters of the repeat
    return " ".join(filler + block + block[:k]), " ".join(block[k:])


def sample(n: int, seed: int, split: str = "train") -> list[tuple[str, str]]:
    """``n`` (prompt, continuation) pairs from ``split``, the same for the same seed."""
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', not {split!r}")
    lengths = TRAIN_BLOCKS if split == "train" else TEST_BLOCKS
    rng = random.Random(seed)
    return [draw(rng, rng.choice(lengths)) for _ in range(n)]


def repeated(n: int, seed: int, length: int) -> list[list[str]]:
    """``n`` whole sequences "block block" of ``length`` different letters (for measuring)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        block = rng.sample(SYMBOLS, length)
        out.append(block + block)
    return out


def vocabularies() -> tuple[None, Vocabulary]:
    """(no source side, the one vocabulary: prompts start with "<bos>", no separator)."""
    return None, Vocabulary(SYMBOLS, split="chars", prompt_prefix=(BOS,))
