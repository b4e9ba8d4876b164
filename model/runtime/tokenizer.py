"""Word-level tokenizer for the toy tasks: one id per word (or per character), specials first.

Implements the runtime's Tokenizer protocol (model.runtime.types). Unknown words become <unk> and are reported in
``Encoded.unknown`` so the app can show them with ``suggest()``-ed close known words.
"""

from __future__ import annotations

import difflib
import json
import re
import unicodedata
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from model.runtime.types import Encoded
from model.tasks import BOS, EOS, PAD, SEP, UNK, Vocabulary

__all__ = ["BOS", "EOS", "PAD", "SEP", "UNK", "WordTokenizer", "task_tokenizers"]
SPECIALS = (PAD, BOS, EOS, UNK)  # ids 0..3 in every vocabulary: <pad> must be 0 (config.pad_id)
VOCAB_FORMAT = "attention-lab-vocab/1"

# Runs of letters/digits (Hangul included), keeping inner apostrophes ("don't"); everything
# else (punctuation, symbols, control characters, "<" of typed HTML) only separates words.
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*")


class WordTokenizer:
    """A fixed vocabulary of whole words ("words") or single characters ("chars").

    ``prompt_prefix`` / ``prompt_suffix`` are the specials ``encode`` wraps input in (a
    decoder-only prompt is "<bos> ... <sep>"). ``suffixes`` are tokens that may be written
    glued to the word before them (Korean particles: "학교에서" reads as "학교 에서").
    """

    def __init__(
        self,
        words: Iterable[str],
        *,
        extra_specials: Iterable[str] = (),
        split: Literal["words", "chars"] = "words",
        lowercase: bool = True,
        prompt_prefix: Iterable[str] = (),
        prompt_suffix: Iterable[str] = (),
        suffixes: Iterable[str] = (),
    ):
        if split not in ("words", "chars"):
            raise ValueError(f"split must be 'words' or 'chars', not {split!r}")
        specials = [*SPECIALS, *(s for s in extra_specials if s not in SPECIALS)]
        plain = [w for w in dict.fromkeys(words) if w not in specials]
        self.vocab: list[str] = [*specials, *plain]
        self.index = {tok: i for i, tok in enumerate(self.vocab)}
        self.special_tokens = frozenset(specials)
        self.pad_id, self.bos_id, self.eos_id, self.unk_id = (self.index[s] for s in SPECIALS)
        self.split = split
        self.lowercase = lowercase
        self.prompt_prefix = [self.index[s] for s in prompt_prefix]
        self.prompt_suffix = [self.index[s] for s in prompt_suffix]
        # Longest first, so "에서" is tried before "에".
        self.suffixes = sorted((s for s in suffixes if s in self.index), key=len, reverse=True)

    def __len__(self) -> int:
        return len(self.vocab)

    def words(self, text: str) -> list[str]:
        """Normalised pieces of ``text``: NFC, lower-cased, punctuation dropped, particles split."""
        text = unicodedata.normalize("NFC", text)
        if self.lowercase:
            text = text.lower()
        if self.split == "chars":
            return [c for c in text if c.isalnum()]
        out: list[str] = []
        for word in _WORD.findall(text):
            out.extend(self._split_suffix(word))
        return out

    def _split_suffix(self, word: str) -> list[str]:
        if word in self.index:
            return [word]
        for suffix in self.suffixes:
            stem = word[: -len(suffix)]
            if word.endswith(suffix) and stem in self.index:
                return [stem, suffix]
        return [word]

    def _encode_words(self, words: list[str]) -> tuple[list[int], list[str]]:
        ids = [self.index.get(w, self.unk_id) for w in words]
        unknown = [w for w in dict.fromkeys(words) if w not in self.index]
        return ids, unknown

    def encode(self, text: str, max_len: int) -> Encoded:
        """Input text -> prefix + word ids + suffix, at most ``max_len`` ids in all."""
        ids, unknown = self._encode_words(self.words(text))
        room = max(0, max_len - len(self.prompt_prefix) - len(self.prompt_suffix))
        full = [*self.prompt_prefix, *ids[:room], *self.prompt_suffix]
        return Encoded(full, self.tokens(full), unknown, truncated=len(ids) > room)

    def encode_target(self, text: str, max_len: int) -> Encoded:
        """Output text -> bare word ids (no specials), at most ``max_len``."""
        ids, unknown = self._encode_words(self.words(text))
        return Encoded(ids[:max_len], self.tokens(ids[:max_len]), unknown, len(ids) > max_len)

    def tokens(self, ids: list[int]) -> list[str]:
        return [self.vocab[i] if 0 <= i < len(self.vocab) else UNK for i in ids]

    def detokenize(self, ids: list[int]) -> str:
        """Ids -> words joined by spaces, specials dropped (the form the task targets use)."""
        return " ".join(t for t in self.tokens(ids) if t not in self.special_tokens)

    def written(self, tokens: Iterable[str]) -> str:
        """Tokens -> text as it is written: specials dropped, each suffix (a Korean particle)
        glued to the token before it ("나 는 학교 에서" -> "나는 학교에서")."""
        out: list[str] = []
        suffixes = set(self.suffixes)
        for tok in tokens:
            if tok in self.special_tokens:
                continue
            if out and tok in suffixes:
                out[-1] += tok
            else:
                out.append(tok)
        return " ".join(out)

    def suggest(self, word: str, n: int = 3) -> list[str]:
        """Up to ``n`` known words closest to ``word`` (difflib's ratio), best first."""
        known = [t for t in self.vocab if t not in self.special_tokens]
        key = word.lower() if self.lowercase else word
        return difflib.get_close_matches(key, known, n=n, cutoff=0.5)

    def to_dict(self) -> dict:
        return {
            "tokens": self.vocab,
            "specials": sorted(self.special_tokens, key=self.index.__getitem__),
            "split": self.split,
            "lowercase": self.lowercase,
            "prompt_prefix": self.tokens(self.prompt_prefix),
            "prompt_suffix": self.tokens(self.prompt_suffix),
            "suffixes": self.suffixes,
        }

    @classmethod
    def from_dict(cls, data: dict) -> WordTokenizer:
        """Rebuild from ``to_dict()``; the ids must come back exactly as saved."""
        tokens, specials = list(data["tokens"]), list(data["specials"])
        if tokens[: len(specials)] != specials or specials[: len(SPECIALS)] != list(SPECIALS):
            raise ValueError("the vocabulary must start with <pad> <bos> <eos> <unk>")
        tok = cls(
            tokens[len(specials) :],
            extra_specials=specials[len(SPECIALS) :],
            split=data.get("split", "words"),
            lowercase=bool(data.get("lowercase", True)),
            prompt_prefix=data.get("prompt_prefix", ()),
            prompt_suffix=data.get("prompt_suffix", ()),
            suffixes=data.get("suffixes", ()),
        )
        if tok.vocab != tokens:
            raise ValueError("the vocabulary has repeated tokens")
        return tok


def save_vocab(
    path: str | Path, task: str, source: WordTokenizer | None, target: WordTokenizer
) -> None:
    """vocab.json: both sides' tokenizers (source is null for decoder-only models)."""
    data = {
        "format": VOCAB_FORMAT,
        "task": task,
        "source": None if source is None else source.to_dict(),
        "target": target.to_dict(),
    }
    Path(path).write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")


def load_vocab(path: str | Path) -> tuple[str, WordTokenizer | None, WordTokenizer]:
    """(task, source tokenizer or None, target tokenizer) from a vocab.json."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict) or data.get("format") != VOCAB_FORMAT:
        raise ValueError(f"not an Attention Lab vocabulary (format {VOCAB_FORMAT!r} expected)")
    source = None if data.get("source") is None else WordTokenizer.from_dict(data["source"])
    return str(data.get("task", "")), source, WordTokenizer.from_dict(data["target"])


def from_vocabulary(vocab: Vocabulary) -> WordTokenizer:
    """The tokenizer of one side of a task."""
    return WordTokenizer(
        vocab.words,
        extra_specials=vocab.extra_specials,
        split=vocab.split,
        prompt_prefix=vocab.prompt_prefix,
        prompt_suffix=vocab.prompt_suffix,
        suffixes=vocab.suffixes,
    )


def task_tokenizers(task) -> tuple[WordTokenizer | None, WordTokenizer]:
    """(input-side tokenizer or None for decoder-only tasks, output-side tokenizer)."""
    source, target = task.vocabularies()
    return (None if source is None else from_vocabulary(source)), from_vocabulary(target)
