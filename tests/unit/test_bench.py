"""The benchmark runs end to end (speed itself is reported by `make bench`, never asserted)."""

import contextlib
import io
import json
import sys
from pathlib import Path

import pytest
import torch

from bench import model_speed as bench


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[dict, dict, str]:
    """One small run of the whole benchmark: (returned result, --json file, printed tables)."""
    out = tmp_path_factory.mktemp("bench") / "bench.json"
    args = ["--repeats", "1", "--batch", "2", "--length", "8", "--minilm-lengths", "6,9"]
    args += ["--decoder-length", "0"]  # the 0.5B-sized decoder: its own test, at a tiny size
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


def test_the_pretrained_decoder_section_times_ours_beside_transformers_and_renders():
    from bench.benchreport import markdown

    tiny = {**bench.QWEN25_05B, "vocab_size": 300, "hidden_size": 64, "intermediate_size": 96}
    tiny.update(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
    tiny.update(bos_token_id=0, eos_token_id=0)
    d = bench.bench_pretrained_decoder(torch.device("cpu"), 8, 1, dims=tiny, label="tiny")
    assert d["what"] == "tiny (random weights), 8 tokens, batch 1"
    assert d["max_logit_difference"] < 1e-4  # the same weights, mapped: the same model
    for path in ("ours_traced", "ours_fast", "transformers_eager"):
        assert d[f"{path}_ms"] > 0
    lines = "\n".join(bench.decoder_table(d))
    assert "| transformers, eager with attentions |" in lines and "x transformers' eager" in lines
    # benchreport puts the section into docs/benchmarks.md (the rest of a run faked minimal).
    saved = Path(bench.__file__).resolve().parents[1] / "docs" / "benchmarks.json"
    old = json.loads(saved.read_text(encoding="utf-8"))
    old["model"]["pretrained_decoder"] = d
    assert "## A pretrained decoder's size: our engine beside transformers" in markdown(old)


def test_the_browser_section_tables_every_page_and_every_view_by_size():
    from bench.benchreport import browser_markdown
    from bench.browser import summary

    result = {
        "pages": [
            {"page": "home", "visit": "cold", "drawn_s": 3.2, "server_ms": 900.0},
            {
                "page": "home",
                "visit": "warm",
                "drawn_s": 0.8,
                "server_ms": 40.0,
                "server_cpu_ms": 31.0,
                "gc_ms": 2.4,
            },
            {"page": "explorer", "visit": "cold", "drawn_s": 4.1, "server_ms": 1200.0},
            {"page": "explorer", "visit": "warm", "drawn_s": 1.0, "server_ms": 120.0},
        ],
        "explorer": [
            {"view": "heatmap", "tokens": 22, "enter_to_drawn_s": 0.4},
            {"view": "heatmap", "tokens": 256, "enter_to_drawn_s": 1.1},
            {"view": "heads", "tokens": 256, "enter_to_drawn_s": 2.5},
        ],
    }
    text = "\n".join(browser_markdown(result))
    assert "| home | 3.2 s | 900 ms | 0.8 s | 40 ms | 31 / 2 ms |" in text
    assert "| explorer | 4.1 s | 1,200 ms | 1.0 s | 120 ms | — |" in text
    assert "| heatmap | 0.40 s | 1.10 s |" in text and "| heads | — | 2.50 s |" in text
    assert summary(result) == {
        "worst_cold_drawn_s": 4.1,
        "worst_warm_server_ms": 120.0,
        "median_warm_drawn_s": 0.9,
        "heatmap_256_s": 1.1,
        "worst_view_256_s": 2.5,
        "worst_first_after_start_s": None,
        "worst_first_bare_streamlit_s": None,
        "worst_move_drawn_s": None,
        "worst_move_server_ms": None,
    }
    assert "Not measured: no Chromium" in "\n".join(browser_markdown("no Chromium at /x"))


def test_the_first_visit_after_a_start_is_measured_for_every_page_the_class_page_included():
    from bench.browser import PAGES

    root = Path(__file__).resolve().parents[2]
    files = {p.stem for p in (root / "pages").glob("*.py")} - {"home"}
    assert "" in PAGES and "classroom" in PAGES
    assert set(PAGES) - {""} == files, "one first visit per page of the app"


def test_a_pages_first_visit_is_its_median_start_with_every_start_beside_it(monkeypatch):
    """One start on the shared machine can be seconds off: the page's figure is the middle
    of its `make run` starts, and the plain `streamlit run` start stays a row of its own."""
    from bench import browser

    drawn = iter([7.9, 5.6, 5.2, 6.3])  # three `make run` starts, then the plain one
    monkeypatch.setattr(
        browser,
        "first_after_start",
        lambda b, name, log_dir, port=None, bare=False: {
            "page": name or "home",
            "start": "streamlit run" if bare else "make run",
            "drawn_s": 1.0 if not name else next(drawn),
        },
    )
    rows = browser.first_pages(None, Path("/tmp"), pages=("modern",), starts=3)
    assert rows == [
        {"page": "modern", "start": "make run", "drawn_s": 5.6, "drawn_starts_s": [5.2, 5.6, 7.9]},
        {"page": "modern", "start": "streamlit run", "drawn_s": 6.3},
    ]
    assert (
        browser.summary({"pages": [], "explorer": [], "first": rows})["worst_first_after_start_s"]
        == 5.6
    )


def test_the_browser_section_shows_first_pages_after_start_and_warm_moves():
    from bench.benchreport import browser_markdown
    from bench.browser import summary

    split = {"server_ms": 180.0, "server_cpu_ms": 90.0, "gc_ms": 10.0, "wait_ms": 80.0}
    result = {
        "pages": [],
        "explorer": [],
        "first": [
            {
                "page": "home",
                "server_ready_s": 0.7,
                "drawn_s": 2.9,
                "process_cpu_s": 2.4,
                **split,
                "server_ms": 1500.0,
                "server_cpu_ms": 1400.0,
            },
            {
                "page": "modern",
                "server_ready_s": 0.8,
                "drawn_s": 5.6,
                "drawn_starts_s": [5.2, 5.6, 7.9],
                "process_cpu_s": 5.1,
                **split,
                "server_ms": 4100.0,
            },
            {
                "page": "modern",
                "start": "streamlit run",
                "server_ready_s": 0.4,
                "drawn_s": 6.3,
                "process_cpu_s": 5.0,
                **split,
            },
        ],
        "moves": [
            {"page": "home", "drawn_s": 0.31, **split},
            {"page": "modern", "drawn_s": 0.84, **split, "server_ms": 150.0, "wait_ms": 50.0},
        ],
    }
    text = "\n".join(browser_markdown(result))
    # each page's make-run start, with the plain `streamlit run` beside it where measured
    assert "| home | 0.7 s | 2.9 s | 2.9 | 1,500 ms | 1,400 ms | 2.4 s | — |" in text
    assert "| modern | 0.8 s | 5.6 s | 5.2 / 5.6 / 7.9 | 4,100 ms | 90 ms | 5.1 s | 6.3 s |" in text
    assert "Slowest: modern, 5.6 s." in text
    assert "Slowest with a plain `streamlit run`: modern, 6.3 s." in text
    assert "| modern | 0.84 s | 150 ms | 90 ms | 10 ms | 50 ms |" in text
    assert "Slowest drawn: 0.84 s; most server time: 180 ms." in text
    assert "cold: drawn" not in text  # no cold/warm visits measured: no empty table
    worst = summary(
        {**result, "explorer": [{"view": "heatmap", "tokens": 20, "enter_to_drawn_s": 1}]}
    )
    assert worst["worst_first_after_start_s"] == 5.6 and worst["worst_move_drawn_s"] == 0.84
    assert worst["worst_first_bare_streamlit_s"] == 6.3


def test_a_script_run_log_says_how_much_was_its_own_work_and_how_much_the_collector(
    tmp_path, monkeypatch
):
    """A slow warm visit in the browser bench must be explainable from the log alone."""
    import gc
    from types import SimpleNamespace

    from streamlit.runtime.scriptrunner import script_runner

    from bench import scripttiming

    def busy_run(self, rerun_data):
        sum(i * i for i in range(300_000))  # work on this thread
        gc.collect()  # and a full collection in the middle of it

    monkeypatch.setattr(script_runner.ScriptRunner, "_run_script", busy_run)
    log = tmp_path / "runs.jsonl"
    scripttiming.install(log)
    try:
        script_runner.ScriptRunner._run_script(None, SimpleNamespace(fragment_id_queue=[]))
    finally:  # leave the test process's collector as it was
        gc.callbacks.remove(scripttiming._time_collections)
    (run,) = scripttiming.read_runs(log)
    assert run["fragment"] is False
    assert run["cpu_ms"] > 0 and run["gc_ms"] > 0
    assert run["gc_ms"] <= run["ms"] and run["cpu_ms"] <= run["ms"] * 1.05 + 1
    if sys.platform.startswith("linux"):  # the wait for a core, from the kernel's schedstat
        assert run["queued_ms"] is not None and 0 <= run["queued_ms"] <= run["ms"] * 1.05 + 1


def test_the_stall_bench_splits_a_runs_time_into_its_work_its_wait_for_a_core_and_the_rest():
    from bench.stall import where_it_went

    runs = [{"ms": 100.0 * i, "cpu_ms": 10.0, "queued_ms": 20.0, "gc_ms": 0.0} for i in (1, 10)]
    split = where_it_went(runs)
    assert split["all"] == {
        "n": 2,
        "ms": 550,
        "cpu_ms": 10,
        "queued_ms": 20,
        "blocked_ms": 520,
        "gc_ms": 0,
    }
    assert split["slowest_tenth"]["n"] == 1 and split["slowest_tenth"]["blocked_ms"] == 970


def test_the_long_document_section_sets_the_first_view_beside_the_fast_forward_and_lists_steps():
    from bench.longinput import SIZES, later_steps, markdown

    steps = [
        {"step": name, "drawn_s": s, "server_ms": 1000 * s / 2, "max_frame_bytes": 1_800_000}
        for name, s in (
            ("first view", 12.0),
            ("layer", 0.8),
            ("layer", 0.6),
            ("layer", 0.7),
            ("zoom", 0.5),
            ("statistics, first", 11.6),
            ("statistics again", 0.4),
            ("rollout to layer 6", 12.5),
            ("rollout, a layer deeper", 2.2),
            ("2048-token text", 9.0),
            ("stages", 1.2),
        )
    ]
    result = {
        "size": "qwen0.5b",
        "dims": {**SIZES["qwen0.5b"], "num_key_value_heads": 2},
        "tokens_asked": 4096,
        "tokens": 4096,
        "steps": steps,
        "fast_forward_s": 10.0,
        "first_view_s": 12.0,
        "first_view_vs_fast": 1.2,
        "stages_tokens": 2048,
        "stages_s": 1.2,
        "worst_later_view_s": 0.8,
        "stats_first_s": 11.6,
        "rollout_s": 12.5,
        "rollout_next_s": 2.2,
        "max_frame_bytes": 1_800_000,
    }
    text = "\n".join(markdown(result))
    assert "hidden 896, 24 layers, 14 heads sharing 2 key/value heads" in text
    assert "10.00 s" in text and "12.00 s (1.20× the fast forward" in text
    assert all(f"| {s['step']} |" in text for s in steps)
    # a view timed several times: how often, its median and its slowest
    assert "| layer | 3 | 0.70 s, 0.80 s | 0.35 s |" in text and "| zoom | 1 | 0.50 s |" in text
    # the table's first reading of every head, and a rollout's, have lines of their own
    assert [r["drawn_s"] for r in later_steps(steps)] == [0.8, 0.6, 0.7, 0.5, 0.4]
    assert "every head of every layer, the first time: 11.60 s" in text
    assert "multiplied): 12.50 s; a layer deeper (one more layer multiplied in): 2.20 s" in text
    assert "largest frame: 1.80 MB" in text
    assert "Not measured: no Chromium" in "\n".join(markdown("no Chromium at /x"))


def test_the_head_scan_section_times_the_whole_scan_and_renders():
    from bench.benchreport import markdown
    from bench.head_scan import bench_head_scan

    tiny = {**bench.QWEN25_05B, "vocab_size": 300, "hidden_size": 64, "intermediate_size": 96}
    tiny.update(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
    tiny.update(bos_token_id=0, eos_token_id=0)
    r = bench_head_scan(torch.device("cpu"), length=16, repeats=1, dims=tiny)
    assert [row["sequences"] for row in r["rows"]] == [1, 4]
    assert all(
        row["tokens"] == 32 and row["heads"] == 8 and row["scan_ms"] > 0 for row in r["rows"]
    )
    saved = Path(bench.__file__).resolve().parents[1] / "docs" / "benchmarks.json"
    old = json.loads(saved.read_text(encoding="utf-8"))
    old["head_scan"] = r
    text = markdown(old)
    assert "## Finding the mechanisms in a 0.5B folder" in text and "| 4 | 32 | 8 |" in text


def test_the_report_shows_the_recorded_gpu_run_with_each_target_met_or_missed(tmp_path):
    from bench.benchreport import gpu_section

    assert gpu_section(tmp_path) == []  # nothing recorded: no section, no made-up figures
    recorded = sorted((Path(bench.__file__).resolve().parents[1] / "docs" / "gpu").glob("*.json"))
    assert recorded, "the GPU run of 2026-11-26 is kept in docs/gpu/"
    g = json.loads(recorded[-1].read_text(encoding="utf-8"))
    text = "\n".join(gpu_section(recorded[-1].parent))
    assert g["date"] in text and g["device"] in text
    for check in g["gpu_long"]["checks"]:
        verdict = "met" if check["met"] else "**missed**"
        assert f"| {check['value']:.3f} | {check['target']} | {verdict} |" in text
    for row in g.get("trace_parts", {}).get("as_landed", {}).get("rows", []):
        traced = row["vs_sdpa"]["ours_traced"]  # the landed traced path beside SDPA
        assert f"| {row['tokens']:,} | ours traced / SDPA |" in text and f"{traced:.3f} |" in text


def test_the_suite_timing_reads_pytests_slowest_tests_and_keeps_one_run_per_label(tmp_path):
    from bench import suitetime

    output = "\n".join(
        [
            "....s.. [100%]",
            "============================= slowest 10 durations =============================",
            "61.20s call     tests/e2e/test_sweep.py::test_every_page[ko]",
            "3.10s setup    tests/app/test_modern.py::test_page",
            "0.40s teardown tests/unit/test_x.py::test_y",
            "========== 1702 passed, 40 skipped in 431.50s (0:07:11) ==========",
        ]
    )
    slow = suitetime.slowest(output)
    assert [s["seconds"] for s in slow] == [61.2, 3.1, 0.4]
    assert slow[0] == {
        "seconds": 61.2,
        "phase": "call",
        "test": "tests/e2e/test_sweep.py::test_every_page[ko]",
    }
    assert suitetime.summary_line(output) == ("1702 passed, 40 skipped", 431.5)
    quiet = "2 failed, 886 passed, 23 skipped in 3407.05s (0:56:47)"  # -q: no rules
    assert suitetime.summary_line(quiet) == ("2 failed, 886 passed, 23 skipped", 3407.05)

    path = tmp_path / "suite.json"
    run = {
        "label": "before",
        "target": "make test",
        "date": "2026-11-27T16:00:00+00:00",
        "wall_s": 1900.0,
        "pytest_s": 1880.0,
        "summary": "1702 passed",
        "cores": 2,
        "load_average_before": [2.0, 2.0, 2.0],
        "load_average_after": [3.0, 2.5, 2.0],
        "slowest": slow,
    }
    suitetime.record(run, path)
    suitetime.record({**run, "pytest_s": 1800.0}, path)  # the same label again: replaced
    after = {**run, "label": "after", "date": "2026-11-27T17:45:00+00:00", "speed_s": [0.74, 0.8]}
    suitetime.record(after, path)
    runs = suitetime.recorded(path)
    assert [(r["label"], r["pytest_s"]) for r in runs] == [("before", 1800.0), ("after", 1880.0)]
    text = "\n".join(suitetime.markdown(runs))
    assert "| before | `make test` | 2026-11-27 16:00 | 30 min 00 s |" in text
    # the machine's speed beside the load; a run recorded before it was measured has none
    assert "[2.0, 2.0, 2.0] → [3.0, 2.5, 2.0] | — |" in text
    assert "[3.0, 2.5, 2.0] | 0.74 s → 0.80 s |" in text
    assert "| 61.2 | call | `tests/e2e/test_sweep.py::test_every_page[ko]` |" in text
    assert suitetime.markdown([]) == []


def test_a_full_report_keeps_the_sections_it_does_not_write_as_they_were_recorded():
    from bench.reportmd import keep_recorded_sections

    old = (
        "# Attention Lab — benchmarks\n\n## Memory\n\nold memory\n\n"
        "## Issue 46: recorded by hand\n\np95 288 ms\n\n| a | b |\n\n"
        "## The test suite (bench.suitetime)\n\n7.9 min\n"
    )
    new = "# Attention Lab — benchmarks\n\n## Memory\n\nnew memory\n"
    out = keep_recorded_sections(old, new)
    assert "new memory" in out and "old memory" not in out  # what the run writes is new
    assert "## Issue 46: recorded by hand\n\np95 288 ms\n\n| a | b |" in out  # kept whole
    assert "## The test suite (bench.suitetime)\n\n7.9 min" in out
    assert out.count("## Memory") == 1
    assert keep_recorded_sections("", new) == new  # a first report is the run alone
