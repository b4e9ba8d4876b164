"""The parity tests' recorded transformers answers (tests/references.py): a stale record is
refused with the command that records it again, and a logit summary lets no wrong logit
through, anywhere in the row, while rounding passes."""

from __future__ import annotations

import pytest
import torch

from tests import references
from tests.references import assert_logits_match, recorded, summarize_logits

VOCAB = 262_144  # Gemma 3's: the widest row, where one logit weighs least in a projection


@pytest.fixture
def logits():
    return torch.randn(3, VOCAB, generator=torch.Generator().manual_seed(1)) * 4


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setattr(references, "FOLDER", tmp_path)
    return tmp_path


def test_a_record_is_read_back_for_its_file_and_inputs(folder):
    references.write("toy", "smollm2", {"texts": ("a", "b")}, {"ids": [1, 2]})
    assert recorded("toy", "smollm2", {"texts": ["a", "b"]}) == {"ids": [1, 2]}


def test_a_record_of_another_file_names_the_command(folder):
    path = references.write("toy", "smollm2", {"texts": ["a"]}, {"ids": [1]})
    pinned = references.gguf_cache.SHIPPED_GGUF["smollm2"].sha256
    path.write_text(path.read_text().replace(pinned, "0" * 64))
    with pytest.raises(pytest.fail.Exception, match="another smollm2 GGUF") as err:
        recorded("toy", "smollm2", {"texts": ["a"]})
    assert "python -m tests.references toy" in str(err.value)


def test_a_record_of_other_inputs_names_the_command(folder):
    references.write("toy", "smollm2", {"texts": ["a"]}, {"ids": [1]})
    with pytest.raises(pytest.fail.Exception, match="inputs changed") as err:
        recorded("toy", "smollm2", {"texts": ["b"]})
    assert "python -m tests.references toy" in str(err.value)


def test_a_missing_record_names_the_command(folder):
    with pytest.raises(pytest.fail.Exception, match="python -m tests.references nothing"):
        recorded("nothing", "smollm2", {})


def test_the_same_logits_and_rounding_pass(logits):
    kept = summarize_logits(logits)
    assert_logits_match(logits, kept)
    noise = torch.randn(logits.shape, generator=torch.Generator().manual_seed(2)) * 2e-5
    assert_logits_match(logits + noise, kept)


def test_a_summary_keeps_its_numbers_exact_through_json(logits, folder):
    references.write("toy", "smollm2", {}, summarize_logits(logits))
    assert_logits_match(logits, recorded("toy", "smollm2", {}), atol=0, rtol=0)


def _outside_the_kept_ids(kept: dict) -> int:
    kept_ids = {*kept["sampled_ids"], *(i for row in kept["top_ids"] for i in row)}
    return next(i for i in range(VOCAB // 2, VOCAB) if i not in kept_ids)


@pytest.mark.parametrize("change", ["one hidden logit +2", "one hidden logit -2", "row +3e-3"])
def test_a_wrong_logit_anywhere_in_the_row_is_caught(logits, change):
    kept = summarize_logits(logits)
    wrong = logits.clone()
    if change == "row +3e-3":
        wrong[1] += 3e-3
    else:
        wrong[1, _outside_the_kept_ids(kept)] += 2.0 if "+" in change else -2.0
    with pytest.raises(AssertionError):
        assert_logits_match(wrong, kept)


def test_a_logit_rising_into_the_top_or_a_changed_top_is_caught(logits):
    kept = summarize_logits(logits)
    risen = logits.clone()
    risen[0, _outside_the_kept_ids(kept)] = logits[0].max() + 1
    with pytest.raises(AssertionError, match="outside the top|projection"):
        assert_logits_match(risen, kept)
    lowered = logits.clone()
    lowered[2, kept["top_ids"][2][0]] -= 1e-2
    with pytest.raises(AssertionError, match="top logits"):
        assert_logits_match(lowered, kept)
