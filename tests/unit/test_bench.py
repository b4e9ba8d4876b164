"""The benchmark runs end to end (speed itself is reported by `make bench`, never asserted)."""

import contextlib
import io
import json

import pytest

from bench import model_speed as bench


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[dict, dict, str]:
    """One small run of the whole benchmark: (returned result, --json file, printed tables)."""
    out = tmp_path_factory.mktemp("bench") / "bench.json"
    args = ["--repeats", "1", "--batch", "2", "--length", "8", "--minilm-lengths", "6,9"]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        result = bench.main([*args, "--json", str(out)])
    return result, json.loads(out.read_text()), printed.getvalue()


def test_bench_reports_both_paths_for_every_kind(report):
    result, written, printed = report
    assert [r["what"] for r in result["forward"]] == [
        "forward, encoder-decoder",
        "forward, encoder",
        "forward, decoder",
    ]
    assert all(r["fast_tok_s"] > 0 and r["traced_tok_s"] > 0 for r in result["forward"])
    assert written["decoding"]["cached_tok_s"] > 0
    assert "traced / fast" in printed


def test_bench_times_minilm_beside_transformers_for_each_length(report):
    result, written, printed = report
    assert [r["tokens"] for r in written["minilm"]] == [6, 9]
    assert written["minilm"] == result["minilm"]
    assert all(
        r["ours_fast_ms"] > 0 and r["ours_traced_ms"] > 0 and r["transformers_ms"] > 0
        for r in written["minilm"]
    )
    assert "traced / transformers" in printed and "| MiniLM, 9 tokens |" in printed
