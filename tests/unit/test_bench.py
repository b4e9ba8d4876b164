"""The benchmark runs end to end (speed itself is reported by `make bench`, never asserted)."""

import json

from model import bench


def test_bench_reports_both_paths_for_every_kind(tmp_path, capsys):
    out = tmp_path / "bench.json"
    result = bench.main(["--repeats", "1", "--batch", "2", "--length", "8", "--json", str(out)])
    assert [r["what"] for r in result["forward"]] == [
        "forward, encoder-decoder",
        "forward, encoder",
        "forward, decoder",
    ]
    assert all(r["fast_tok_s"] > 0 and r["traced_tok_s"] > 0 for r in result["forward"])
    assert json.loads(out.read_text())["decoding"]["cached_tok_s"] > 0
    assert "traced / fast" in capsys.readouterr().out
