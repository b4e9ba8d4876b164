"""Toy tasks the from-scratch Transformer is trained on, each small enough to read its attention.

Every task module exposes ``KIND``, ``sample(n, seed, split="train") -> [(source, target)]``,
``split_of(source)`` (a hash-based train/test split that never overlaps), its vocabularies,
and ``tokenizers()`` for the model's input and output sides.
"""

from __future__ import annotations

import hashlib
from types import ModuleType

TASKS = ("en2ko", "reverse", "sort")
TEST_PERCENT = 10  # share of the sentence space held out for evaluation


def split_of(key: str) -> str:
    """ "train" or "test", fixed by a hash of the normalised source, so the splits never overlap."""
    bucket = int.from_bytes(hashlib.sha1(key.encode("utf-8")).digest()[:4], "big") % 100
    return "test" if bucket < TEST_PERCENT else "train"


def get_task(name: str) -> ModuleType:
    """The task module by name ("en2ko" | "reverse" | "sort")."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; choose one of {', '.join(TASKS)}")
    import importlib

    return importlib.import_module(f"model.tasks.{name}")
