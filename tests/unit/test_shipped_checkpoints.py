"""The trained checkpoints in assets/checkpoints: small, reproducible, as good as recorded, and
with attention worth looking at."""

import json
from pathlib import Path

import pytest

from model import load
from model.tasks import en2ko, get_task
from model.training.evaluate import evaluate

ROOT = Path(__file__).resolve().parents[2] / "assets" / "checkpoints"
TARGETS = {"en2ko": 0.99, "reverse": 0.995, "sort": 0.995}


@pytest.fixture(scope="module", params=sorted(TARGETS))
def shipped(request):
    return request.param, load(request.param, device="cpu")


@pytest.fixture(scope="module")
def translator():
    return load("en2ko", device="cpu")


def test_each_checkpoint_is_small_and_records_how_it_was_made(shipped):
    name, lm = shipped
    folder = ROOT / name
    assert sum(f.stat().st_size for f in folder.iterdir()) < 10 * 2**20
    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["command"].startswith(f"python -m model.train --task {name} ")
    assert f"--seed {metrics['seed']}" in metrics["command"]
    assert metrics["exact_match"] >= TARGETS[name] and metrics["eval_n"] >= 2000
    assert metrics["evaluated_by"].startswith("python -m model.training.evaluate")
    assert lm.info["metrics"] == metrics and (folder / "curve.csv").is_file()


@pytest.mark.slow  # among the slowest of its folder (docs/benchmarks.md, the suite)
def test_each_checkpoint_scores_as_recorded_on_fresh_held_out_examples(shipped):
    name, lm = shipped
    src = None if lm.kind == "decoder" else lm.src_tokenizer
    result = evaluate(lm.network, get_task(name), src, lm.tgt_tokenizer, n=200, seed=7)
    recorded = lm.info["metrics"]
    assert result["exact_match"] >= recorded["exact_match"] - 0.02
    assert result["token_accuracy"] >= recorded["token_accuracy"] - 0.02


def test_en2ko_translates_the_lecture_sentence_as_the_reference_does(translator):
    for english in ["I study math at school", "I study math", "Yesterday, Tom ate an apple"]:
        assert translator.translate(english) == en2ko.translate(english)


@pytest.mark.slow  # among the slowest of its folder (docs/benchmarks.md, the suite)
def test_en2ko_cross_attention_points_at_the_english_word_being_translated(translator):
    """Last layer, heads averaged: the query that produces a content word looks at its source."""
    aligned = en2ko.alignment()
    hits = total = 0
    for english, korean in en2ko.sample(60, seed=3, split="test"):
        trace = translator.trace(english, target=korean)
        cross = trace.attention["cross"][-1].mean(0)  # [tgt, src]; row j reads y_j, predicts y_j+1
        for j, token in enumerate(korean.split()):
            if token in aligned:
                total += 1
                hits += trace.src_tokens[int(cross[j].argmax())] in aligned[token]
    assert hits / total >= 0.9


def test_reverse_cross_attention_is_an_anti_diagonal():
    lm = load("reverse", device="cpu")
    for text in ["a b c d e f", "3 k 9 z 0 q 1 7"]:
        trace = lm.trace(text)
        n = len(text.split())
        assert trace.src_tokens == [*text.split(), "<eos>"]  # the source's end anchor
        cross = trace.attention["cross"][-1].mean(0)  # row i produces output i
        assert [int(cross[i].argmax()) for i in range(n)] == list(range(n - 1, -1, -1))
        assert lm.translate(text) == " ".join(reversed(text.split()))


def test_sort_continues_a_prompt_with_the_sorted_digits():
    lm = load("sort", device="cpu")
    assert lm.encode("3 1 2").tokens == ["<bos>", "3", "1", "2", "<sep>"]
    assert lm.translate("3 1 2") == "1 2 3"
    assert lm.translate("9 0 5 5 1 7") == "0 1 5 5 7 9"
