"""The shipped reverse model, loaded once per process, read only, always on the CPU.

Exercises must come out the same on every machine, so they never follow the sidebar's
device choice: a GPU's kernels may round differently.
"""

from __future__ import annotations

from functools import lru_cache

from model import LabModel, Trace, load


@lru_cache(maxsize=1)
def reverse_model() -> LabModel:
    return load("reverse", device="cpu")


@lru_cache(maxsize=256)
def reverse_trace(source: str) -> Trace:
    """The model's trace of ``source``, teacher-forced on its own greedy output."""
    return reverse_model().trace(source)
