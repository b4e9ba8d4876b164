"""Benchmark of the pages themselves: server time to re-render, and bytes sent to the browser.

    python -m bench.pages [--json out.json]

Each view is opened once in a headless AppTest session; then new sentences are typed into
it and only those reruns are timed (what a student waits for after pressing Enter), beside
the bare forward pass of the same model on the same input, in the same run.
Bytes are the serialized size of every element the page emits (what the websocket carries,
before compression).
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

import torch
from streamlit.testing.v1 import AppTest

from bench import classcore, loadtest, scripttiming
from model.runtime.device import configure_threads
from model.runtime.loading import load
from ui.i18n import translate

APP = str(Path(__file__).resolve().parents[1] / "app.py")
WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "students",
    "watch",
    "attention",
    "heads",
    "learn",
    "which",
    "words",
    "matter",
    "in",
    "every",
    "sentence",
    "they",
    "read",
]


def sentence(n_words: int, salt: int) -> str:
    """A fresh sentence (so no cache helps) of about ``n_words`` words."""
    words = [WORDS[(i * 7 + salt) % len(WORDS)] for i in range(n_words)]
    return " ".join([f"run{salt}", *words[1:]])


def page_bytes(at: AppTest) -> int:
    total = 0

    def walk(node) -> None:
        nonlocal total
        proto = getattr(node, "proto", None)
        if proto is not None and hasattr(proto, "ByteSize"):
            total += proto.ByteSize()
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    return total


def bare_forward_seconds(model_name: str, text: str, repeats: int = 5) -> float:
    lm = load(model_name, "cpu")
    ids = torch.tensor([lm.encode(text).ids])
    args = (ids,)
    if lm.kind == "encoder-decoder":  # a target as long as the source, for one pass
        args = (ids, torch.full_like(ids, lm.tgt_tokenizer.bos_id))
    with torch.inference_mode():
        lm.network(*args)  # warm-up
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            lm.network(*args)
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def open_explorer(model_name: str, view: str, text: str) -> AppTest:
    """One browser session on the explorer, already showing ``view`` for ``text``."""
    at = AppTest.from_file(APP, default_timeout=300)
    at.switch_page("pages/explorer.py")
    at.query_params.update({"model": model_name, "view": view, "text": text})
    at.run()
    if at.exception:
        raise RuntimeError(f"the explorer failed: {at.exception[0].value}")
    return at


def retype(at: AppTest, text: str) -> tuple[float, int]:
    """Type a new sentence into an open session: (server seconds for the rerun, page bytes)."""
    box = at.text_input(key="text").set_value(text)
    start = time.perf_counter()
    box.run()
    seconds = time.perf_counter() - start
    if at.exception:
        raise RuntimeError(f"the explorer failed: {at.exception[0].value}")
    return seconds, page_bytes(at)


def bench_explorer(model_name: str, n_words: int, views: list[str], repeats: int) -> list[dict]:
    rows = []
    for view in views:
        at = open_explorer(model_name, view, sentence(n_words, 999))
        # Each rerun gets a sentence never seen before, so no trace cache helps.
        runs = [retype(at, sentence(n_words, 100 * len(rows) + salt)) for salt in range(repeats)]
        text = sentence(n_words, 0)
        n_tokens = len(load(model_name, "cpu").encode(text).ids)
        forward = bare_forward_seconds(model_name, text)
        render = statistics.median(r[0] for r in runs)
        rows.append(
            {
                "model": model_name,
                "tokens": n_tokens,
                "view": view,
                "render_ms": render * 1000,
                "forward_ms": forward * 1000,
                "budget_ms": (5 * forward + 0.1) * 1000,
                "bytes": statistics.median(r[1] for r in runs),
            }
        )
    return rows


def bench_decoding_step(model_name: str, text: str, repeats: int) -> dict:
    """Server time of one Step press on the decoding page, beside the model's own cost.

    AppTest reruns the whole page on a click, so this is an upper bound: in a browser only
    the step fragment reruns. The decoding run itself is cached after the first press.
    """
    at = AppTest.from_file(APP, default_timeout=300)
    at.switch_page("pages/decoding.py")
    at.query_params.update({"model": model_name, "text": text})
    at.run()
    if at.exception:
        raise RuntimeError(f"the decoding page failed: {at.exception[0].value}")
    step = next(b for b in at.button if b.label == "Step")
    times = []
    for _ in range(repeats):
        if at.session_state["step"] >= 6:
            next(b for b in at.button if b.label == "Reset").click().run()
        start = time.perf_counter()
        step.click().run()
        times.append(time.perf_counter() - start)
    lm = load(model_name, "cpu")
    start = time.perf_counter()
    n = len(list(lm.decode(text)))
    per_token = (time.perf_counter() - start) / max(1, n)
    return {
        "model": model_name,
        "step_ms": statistics.median(times) * 1000,
        "model_per_token_ms": per_token * 1000,
        "tokens": n,
    }


def bench_decoding_step_served(model_name: str, text: str, rounds: int) -> dict:
    """One Step press on a real server, driven from Chromium: the server time of the run it
    causes (bench.scripttiming), whether that run was the step fragment alone, and how long the
    browser took from the click to the new mask row drawn.

    Each round steps through the whole output, then presses Reset; the very first press of
    the session is reported apart (figure code and plotly's validators warm up there).
    """
    from playwright.sync_api import sync_playwright

    total = len(list(load(model_name, "cpu").decode(text)))
    server, browser_s, full_page_runs, first_ms, first_browser_ms = [], [], 0, None, None
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "runs.jsonl"
        with classcore.serve(timing_log=log) as (url, _), sync_playwright() as pw:
            chromium = pw.chromium.launch(
                executable_path=str(classcore.CHROMIUM), args=classcore.CHROMIUM_ARGS
            )
            page = chromium.new_page(viewport={"width": 1440, "height": 900})
            page.goto(f"{url}/decoding?model={model_name}&lang=en&text={quote(text)}")
            step = page.get_by_role("button", name=translate("decoding.step", "en"), exact=True)
            reset = page.get_by_role("button", name=translate("decoding.reset", "en"), exact=True)
            step.wait_for(timeout=loadtest.WAIT_MS)
            scripttiming.settled(log)  # the page's own first runs have finished
            for _ in range(rounds):
                for k in range(1, total + 1):
                    seen = len(scripttiming.read_runs(log))
                    start = time.perf_counter()
                    step.click()
                    loadtest.wait_for_mask_rows(page, k)
                    elapsed = time.perf_counter() - start
                    runs = scripttiming.runs_after(log, seen)
                    full_page_runs += sum(not r["fragment"] for r in runs)
                    if first_ms is None:  # cold: plotly.js loads for the page's first chart
                        first_ms, first_browser_ms = runs[0]["ms"], elapsed * 1000
                        continue
                    server += [r["ms"] for r in runs]
                    browser_s.append(elapsed)
                seen = len(scripttiming.read_runs(log))
                reset.click()
                loadtest.wait_for_mask_rows(page, 0)
                scripttiming.runs_after(log, seen)
            chromium.close()
    return {
        "model": model_name,
        "text": text,
        "tokens": total,
        "presses": len(browser_s) + 1,
        "first_ms": first_ms,
        "first_browser_ms": first_browser_ms,
        "server_ms": statistics.median(server),
        "server_p90_ms": statistics.quantiles(server, n=10)[-1] if len(server) > 1 else server[0],
        "browser_ms": statistics.median(browser_s) * 1000,
        "full_page_runs": full_page_runs,
    }


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    logging.getLogger("streamlit").setLevel(logging.ERROR)
    configure_threads()
    views = ["heatmap", "heads", "model", "lines", "focus", "stats"]
    rows = bench_explorer("minilm", 18, views, args.repeats)
    rows += bench_explorer("minilm", 254, ["heatmap", "heads", "model"], args.repeats)
    print(
        "\n| page | model | tokens | view | server time | bare forward | 5x forward + 100 ms | sent |"
    )
    print("|---|---|---:|---|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| explorer | {r['model']} | {r['tokens']} | {r['view']} | {r['render_ms']:.0f} ms "
            f"| {r['forward_ms']:.1f} ms | {r['budget_ms']:.0f} ms | {r['bytes'] / 1e6:.2f} MB |"
        )
    step = bench_decoding_step("en2ko", "I study math at school", max(5, args.repeats * 3))
    print("\n| page | model | one Step press (whole page, upper bound) | model, per token |")
    print("|---|---|---:|---:|")
    print(
        f"| decoding | {step['model']} | {step['step_ms']:.0f} ms | "
        f"{step['model_per_token_ms']:.1f} ms |"
    )
    served = None
    if classcore.CHROMIUM.exists():
        served = bench_decoding_step_served("en2ko", "I study math at school", 2)
        print(
            f"| decoding, served | {served['model']} | {served['server_ms']:.0f} ms "
            f"(fragment only: {served['full_page_runs'] == 0}) | browser {served['browser_ms']:.0f} ms |"
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {"explorer": rows, "decoding_step": step, "decoding_step_served": served}, indent=2
            ),
            encoding="utf-8",
        )
    return rows


if __name__ == "__main__":
    main()
