"""What a sentence costs in tokens, Korean beside its English translation, model by model.

A model reads, pays for and attends over tokens, not letters or words. A vocabulary built
mostly from English text spends many tokens on a Korean sentence (single jamo for MiniLM's
WordPiece, two or three byte tokens a syllable for SmolLM2's byte-level BPE), and a
vocabulary that saw Korean spends about as many as on English. The ratio says it in one
number: Korean tokens per English token for the same meaning.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

# (Korean, English): the same meaning, written as people write it.
SENTENCE_PAIRS: tuple[tuple[str, str], ...] = (
    ("안녕하세요, 저는 학생입니다.", "Hello, I am a student."),
    ("고양이가 매트 위에 앉았다.", "The cat sat on the mat."),
    ("나는 학교에서 수학을 공부한다.", "I study math at school."),
    ("오늘 날씨가 정말 좋네요!", "The weather is really nice today!"),
)
MAX_TOKENS = 100_000  # no real sentence reaches it; a pasted book is counted, then cut


@dataclass(frozen=True)
class TokenCount:
    """One text as one tokenizer reads it: its tokens (no special tokens), and how many of
    them are the unknown token (a word the vocabulary cannot spell)."""

    tokens: tuple[str, ...]
    unknown: int = 0

    @property
    def n(self) -> int:
        return len(self.tokens)


@dataclass(frozen=True)
class TokenCost:
    """A model's token counts for a Korean sentence and its English translation."""

    name: str
    korean: TokenCount
    english: TokenCount

    @property
    def ratio(self) -> float | None:
        """Korean tokens per English token (None when the English has none)."""
        return self.korean.n / self.english.n if self.english.n else None


def count_tokens(tokenizer, text: str) -> TokenCount:
    """``text`` as ``tokenizer`` reads it, without the special tokens a model adds around
    every input ([CLS], <bos>): those cost the same in both languages."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, not {type(text).__name__}")
    found = tokenizer.encode_target(text.strip(), MAX_TOKENS)
    unk = getattr(tokenizer, "unk_id", None)
    unknown = sum(1 for i in found.ids if i == unk) if unk is not None else 0
    return TokenCount(tuple(found.tokens), unknown)


def tokenizers_of(model) -> list:
    """A model's tokenizers (input side first), or the object itself when it is one."""
    if callable(getattr(model, "encode_target", None)):
        return [model]
    found = []
    for side in ("input_tokenizer", "src_tokenizer", "tgt_tokenizer"):
        tok = getattr(model, side, None)
        if tok is not None and all(tok is not other for other in found):
            found.append(tok)
    if not found:
        raise TypeError(f"{type(model).__name__} has no tokenizer")
    return found


def best_count(tokenizers: Iterable, text: str) -> TokenCount:
    """The count by the model's tokenizer that knows the text best (fewest unknown tokens;
    the input side on a tie): a translation model reads English with one vocabulary and
    writes Korean with another, and each language is counted by its own."""
    counts = [count_tokens(tok, text) for tok in tokenizers]
    return min(counts, key=lambda c: c.unknown)


def token_cost(
    models: Mapping[str, object] | Iterable[tuple[str, object]], korean: str, english: str
) -> list[TokenCost]:
    """For each (name, model or tokenizer), in order, the token counts of ``korean`` and of
    its translation ``english``."""
    items = models.items() if isinstance(models, Mapping) else models
    costs = []
    for name, model in items:
        toks = tokenizers_of(model)
        costs.append(TokenCost(str(name), best_count(toks, korean), best_count(toks, english)))
    return costs
