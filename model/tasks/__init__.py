"""Toy tasks the from-scratch Transformer is trained on, each small enough to read its attention.

Every task module exposes ``KIND``, ``sample(n, seed, split="train") -> [(source, target)]``,
``reference(source)`` (the right answer),
``split_of(source)`` (a hash-based train/test split that never overlaps) and
``vocabularies()``: the input and output sides' Vocabulary, from which
``model.runtime.tokenizer.task_tokenizers`` builds the tokenizers.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Literal

# Special tokens, the same names in every vocabulary (<pad> is id 0, see config.pad_id).
PAD, BOS, EOS, UNK, SEP = "<pad>", "<bos>", "<eos>", "<unk>", "<sep>"


@dataclass(frozen=True)
class Vocabulary:
    """What one side of a task reads and writes: its words and how text is cut into them.

    ``prompt_prefix`` / ``prompt_suffix``: the specials an input is wrapped in (a
    decoder-only prompt is "<bos> ... <sep>"); ``suffixes``: tokens that may be written glued
    to the word before them (Korean particles).
    """

    words: tuple[str, ...]
    split: Literal["words", "chars"] = "words"
    extra_specials: tuple[str, ...] = ()
    prompt_prefix: tuple[str, ...] = ()
    prompt_suffix: tuple[str, ...] = ()
    suffixes: tuple[str, ...] = ()


TASKS = ("en2ko", "reverse", "sort", "induction")
TEST_PERCENT = 10  # share of the sentence space held out for evaluation


def split_of(key: str) -> str:
    """ "train" or "test", fixed by a hash of the normalised source, so the splits never overlap."""
    bucket = int.from_bytes(hashlib.sha1(key.encode("utf-8")).digest()[:4], "big") % 100
    return "test" if bucket < TEST_PERCENT else "train"


def sample_split(
    n: int,
    seed: int,
    split: str,
    draw: Callable[[random.Random], str],
    reference: Callable[[str], str],
    split_of: Callable[[str], str],
) -> list[tuple[str, str]]:
    """``n`` (source, reference) pairs from ``split``: draw sources with a seeded generator
    and keep those the hash puts on that side. The same seed gives the same pairs."""
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', not {split!r}")
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        source = draw(rng)
        if split_of(source) == split:
            out.append((source, reference(source)))
    return out


def words(items: Iterable[str]) -> tuple[str, ...]:
    """A vocabulary's words in a fixed order (sorted), each once."""
    return tuple(sorted(set(items)))


def get_task(name: str) -> ModuleType:
    """The task module by name ("en2ko" | "reverse" | "sort" | "induction")."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; choose one of {', '.join(TASKS)}")
    import importlib

    return importlib.import_module(f"model.tasks.{name}")


def reference_answer(task: str | None, source: str) -> str:
    """The task's own answer for ``source``; "" for an unknown task or an input outside its
    grammar (then there is nothing to compare with)."""
    if task not in TASKS:
        return ""
    try:
        return get_task(task).reference(source)
    except (ValueError, KeyError):
        return ""


CLOSE_SPELLING = 0.6  # difflib ratio: "scool" ~ "school" is 0.91, "quokkas" ~ "works" 0.5


def suggestions(task: str | None, known: Iterable[str], word: str, n: int = 3):
    """Known words to offer for an unknown ``word``: ("spelling", words) when some known word
    is spelt like it; else, for a task with a grammar, (kind, words of that kind) closest in
    spelling among that kind (a noun for a noun, the kind guessed from the word's ending);
    else ("none", [])."""
    import difflib

    lower = word.lower()
    known = list(known)
    close = difflib.get_close_matches(lower, known, n=n, cutoff=CLOSE_SPELLING)
    if close:
        return "spelling", close
    module = get_task(task) if task in TASKS else None
    classes = getattr(module, "word_classes", None)
    if classes is None:
        return "none", []
    kind = module.guess_class(word)
    same_kind = classes().get(kind, [])
    return kind, difflib.get_close_matches(lower, same_kind, n=n, cutoff=0.0)


def vocabulary_sample(task: str | None, per_kind: int = 6) -> dict[str, list[str]]:
    """A few known words of each kind, for "this model knows about N words, such as ..."."""
    module = get_task(task) if task in TASKS else None
    classes = getattr(module, "word_classes", None)
    if classes is None:
        return {}
    return {
        kind: words[:: max(1, len(words) // per_kind)][:per_kind]
        for kind, words in classes().items()
    }
