"""The parity tests' kept transformers answers (tests/reference_cache.py) are computed again
whenever the file, the inputs, a library or the builder changes, and never read half-written."""

from __future__ import annotations

import pytest
import torch

from model.runtime import gguf_cache
from tests import reference_cache
from tests.reference_cache import cached_reference

calls: list[str] = []


def doubled(x: int) -> dict:
    calls.append("doubled")
    return {"out": torch.tensor([2 * x]), "ids": [x]}


def tripled(x: int) -> dict:
    calls.append("tripled")
    return {"out": torch.tensor([3 * x]), "ids": [x]}


@pytest.fixture
def gguf(tmp_path, monkeypatch):
    monkeypatch.setenv(gguf_cache.CACHE_ENV, str(tmp_path / "cache"))
    calls.clear()
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF one")
    return path


def test_a_kept_answer_is_read_back_not_computed_again(gguf):
    first = cached_reference("toy", gguf, [1], doubled, 1)
    again = cached_reference("toy", gguf, [1], doubled, 1)
    assert calls == ["doubled"]
    assert again["ids"] == [1] and torch.equal(again["out"], first["out"])


def test_a_changed_file_input_library_or_builder_computes_it_again(gguf, monkeypatch):
    cached_reference("toy", gguf, [1], doubled, 1)
    gguf.write_bytes(b"GGUF two")  # the same name, other content
    cached_reference("toy", gguf, [1], doubled, 1)
    cached_reference("toy", gguf, [2], doubled, 2)
    assert cached_reference("toy", gguf, [2], tripled, 2)["out"].item() == 6
    versions = {**reference_cache._versions(), "transformers": "99.0"}
    monkeypatch.setattr(reference_cache, "_versions", lambda: versions)
    cached_reference("toy", gguf, [2], tripled, 2)
    assert calls == ["doubled", "doubled", "doubled", "tripled", "tripled"]
    kept = list((gguf_cache.cache_root() / "reference").iterdir())
    assert len(kept) == 1, "a stale key's file is removed"


def test_a_damaged_file_is_computed_again(gguf):
    cached_reference("toy", gguf, [1], doubled, 1)
    (kept,) = (gguf_cache.cache_root() / "reference").iterdir()
    kept.write_bytes(b"half a pickle")
    assert cached_reference("toy", gguf, [1], doubled, 1)["out"].item() == 2
    assert calls == ["doubled", "doubled"]
