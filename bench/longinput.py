"""A long document in the explorer, in headless Chromium: what a reader waits for and what
each chart sends (issue 34's CPU targets).

    python -m bench.longinput [--size qwen0.5b|small] [--tokens 4096] [--stages-tokens 2048]
                              [--json out.json]

A random folder (tests.hf_folders' Qwen2 builder) at Qwen2.5-0.5B's dimensions: hidden 896,
24 layers, 14 query heads sharing 2 key/value heads, feed-forward 4,864. The vocabulary is
the tests' 300-token byte-level BPE, not Qwen's 151,936 (nothing is downloaded; the
embedding and the output layer are then small, so the weights are 1.4 GB, not 2 GB). The
folder's max_position_embeddings is twice ``--tokens``; the explorer reads the prompt's own
map (no generated tokens) up to that limit.

Measured in one run, against a server started for it (bench.classcore.serve, script runs timed
by bench.scripttiming):
- *first view*: the long text typed into the explorer's sentence box, Enter pressed, until
  the heatmap (pooled overview and zoom window) is drawn and painted; beside it, in this
  process, our engine's fast (fused) forward over the same input tokens (median of 3), with
  the torch threads the server runs with (model.runtime.device.configure_threads: one of
  this machine's two cores), so the two are timed alike;
- *later views*, each from its click or key press to drawn, with no new forward pass (the
  trace is kept): another layer, another head (the click on the option of an open list),
  the zoom window moved by the keyboard, mean instead of max per block, all heads, the whole
  model, token focus;
- *bytes*: the largest websocket frame the browser received for each step (Streamlit sends
  one element a frame, so this bounds the largest chart);
- *stages*: a second text of ``--stages-tokens`` tokens, then the stages view of one head.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

from bench.model_speed import QWEN25_05B
from model.trace import SUMMED_BLOCKS

DIMS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")
SIZES = {
    # bench.model_speed's Qwen2.5-0.5B config, less its vocabulary, ids and positions
    "qwen0.5b": {k: QWEN25_05B[k] for k in (*DIMS, "num_key_value_heads", "rope_theta")},
    # the tests' tiny Qwen2 (tests.hf_folders) with the layers the steps pick (up to 7):
    # proves the bench end to end in minutes
    "small": {"num_hidden_layers": 8},
}
TITLE = "## A long document in the explorer (bench.longinput)"
STATS_FIRST = "statistics, first"  # the table's first reading of every head of the model
# rollout multiplies every layer's head mean up to the one shown (seconds a layer)
ROLLOUT_FIRST, ROLLOUT_NEXT = "rollout to layer 6", "rollout, a layer deeper"
# each computes what no view before it needed: said on their own lines, not as later views
FIRST_COMPUTED = (STATS_FIRST, ROLLOUT_FIRST, ROLLOUT_NEXT)
WAIT_MS = 900_000  # a 0.5B model's first long trace on two cores takes minutes


def build_folder(folder: Path, size: str, tokens: int) -> Path:
    from tests.hf_folders import build_decoder_folder

    if not (folder / "config.json").exists():
        build_decoder_folder("qwen2", folder, max_position_embeddings=2 * tokens, **SIZES[size])
    return folder


def text_of(folder: Path, tokens: int, seed: int = 0) -> str:
    """Nonsense words that the folder's tokenizer reads as exactly ``tokens`` tokens."""
    from transformers import AutoTokenizer

    from tests.hf_folders import long_text

    tok = AutoTokenizer.from_pretrained(folder)
    ids = tok(long_text(4 * tokens, seed=seed))["input_ids"][:tokens]
    return tok.decode(ids).strip()


def fast_forward_s(folder: Path, text: str, repeats: int = 3) -> tuple[float, int]:
    """Median seconds of our engine's fused forward over ``text``'s tokens, and their count."""
    import torch

    from model import load
    from model.runtime.device import configure_threads

    configure_threads()  # as the server does: the first view's pass ran with these threads
    lm = load(str(folder), "cpu")
    ids = torch.tensor([lm.encode(text).ids])
    times = []
    with torch.inference_mode():
        lm.network(ids[:, :256])  # warm-up (the kernels, not the timing)
        for _ in range(repeats):
            start = time.perf_counter()
            lm.network(ids)
            times.append(time.perf_counter() - start)
    return statistics.median(times), ids.shape[1]


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def run(size: str, tokens: int, stages_tokens: int, log_dir: Path) -> dict:
    from playwright.sync_api import sync_playwright

    from bench import browser as browser_bench
    from bench import scripttiming
    from bench.browser import settle_after
    from bench.classcore import CHROMIUM, CHROMIUM_ARGS, serve
    from ui.i18n import translate

    # bench.browser's waits are sized for short pages; a long first trace takes minutes.
    browser_bench.WAIT_MS = max(browser_bench.WAIT_MS, WAIT_MS)
    log_dir.mkdir(parents=True, exist_ok=True)
    folder = build_folder(log_dir / f"bench-long-{size}-{tokens}", size, tokens)
    text, short = text_of(folder, tokens), text_of(folder, stages_tokens, seed=1)
    timing_log = log_dir / "bench-long-runs.jsonl"
    timing_log.unlink(missing_ok=True)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    dims = {k: config[k] for k in (*DIMS, "num_key_value_heads")}
    result: dict = {"size": size, "dims": dims, "tokens_asked": tokens, "steps": []}
    frames: list[int] = []

    def en(key: str, **kw) -> str:
        return translate(key, "en", **kw)

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        with serve(log_dir / "bench-long-server.log", timing_log=timing_log) as (base, _):
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            page.set_default_timeout(60_000)  # finding an element; drawing waits WAIT_MS
            page.on("websocket", lambda ws: ws.on("framereceived", lambda b: frames.append(len(b))))
            seen = len(scripttiming.read_runs(timing_log))
            page.goto(f"{base}/explorer?model=folder&text=warm+up", timeout=WAIT_MS)
            folder_box = page.get_by_label(en("sidebar.folder"))
            folder_box.fill(str(folder))
            folder_box.press("Enter")  # the model loads here, on a short text: not timed
            settle_after(page, timing_log, seen)
            main = page.get_by_test_id("stMain")

            def step(name: str, act, prepare=None) -> dict:
                if prepare:  # what a reader does before the click that asks for the view
                    prepare()
                seen, mark = len(scripttiming.read_runs(timing_log)), len(frames)
                start = time.perf_counter()
                act()
                seconds = settle_after(page, timing_log, seen) - start
                runs = scripttiming.read_runs(timing_log)[seen:]
                row = {
                    "step": name,
                    "drawn_s": round(seconds, 3),
                    "server_ms": round(sum(r["ms"] for r in runs), 1),
                    "max_frame_bytes": max(frames[mark:], default=0),
                }
                print(
                    f"long {name:12s} drawn {seconds:7.2f} s, server {row['server_ms']:9.1f} ms,"
                    f" largest frame {row['max_frame_bytes'] / 1e6:5.2f} MB",
                    file=sys.stderr,
                )
                result["steps"].append(row)
                return row

            sentence = main.get_by_test_id("stTextInput").locator("input").first

            def enter(value: str):
                def act():
                    sentence.fill(value)
                    sentence.press("Enter")

                return act

            def open_list(box: int, option: str):
                def prepare():  # a click on a busy page can miss the list opening: try again
                    choice = page.get_by_role("option", name=option, exact=True)
                    for _ in range(5):
                        main.get_by_test_id("stSelectbox").nth(box).click()
                        try:
                            choice.wait_for(timeout=10_000)
                            break
                        except Exception:  # noqa: BLE001 - Playwright's TimeoutError
                            page.keyboard.press("Escape")

                return prepare

            def choose(option: str):  # the click on the option: the clock starts here
                return lambda: page.get_by_role("option", name=option, exact=True).click()

            def press_button(label: str):
                only = re.compile(rf"^\s*{re.escape(label)}\s*$")
                return lambda: main.locator("button").filter(has_text=only).first.click()

            def view(key: str):
                return lambda: main.locator("button", has_text=en(key)).first.click()

            def key_handle():  # the key range's lower handle
                return main.get_by_test_id("stSlider").nth(1).get_by_role("slider").first

            def settled_on(act):  # an untimed step: done, and drawn, before the timed one
                def prepare():
                    seen = len(scripttiming.read_runs(timing_log))
                    act()
                    settle_after(page, timing_log, seen)

                return prepare

            def pick(name: str, box: int, option: str):
                step(name, choose(option), prepare=open_list(box, option))

            first = step("first view", enter(text))
            # Each later view a few times over (another layer, head, window each time): one
            # click is within the run-to-run noise of a shared two-core machine.
            for n in (2, 3, 4):
                pick("layer", 0, en("common.layer_n", n=n))
            for n in (2, 3, 4):
                pick("head", 1, en("common.head_n", n=n))
            for _ in range(3):  # the window's first key one further each time: a new window
                step("zoom", lambda: key_handle().press("ArrowRight"), prepare=key_handle().focus)
            for reduce in ("mean", "max", "mean"):
                step("mean / max blocks", press_button(en(f"explorer.reduce.{reduce}")))
            step("all heads", view("explorer.view.heads"))
            for n in (5, 6):
                pick("all heads", 0, en("common.layer_n", n=n))
            step("whole model", view("explorer.view.model"))
            step("token focus", view("explorer.view.focus"))
            # every head of every layer: one fused pass a layer, then kept with the trace
            step(STATS_FIRST, view("explorer.view.stats"))
            step("heatmap", view("explorer.view.heatmap"))
            step("statistics again", view("explorer.view.stats"))
            # rollout up to the layer chosen last (all heads' list: layer 6), then one deeper
            step(
                ROLLOUT_FIRST,
                press_button(en("explorer.aggregate.rollout")),
                prepare=settled_on(view("explorer.view.heatmap")),
            )
            pick(ROLLOUT_NEXT, 0, en("common.layer_n", n=7))
            step("one head again", press_button(en("explorer.aggregate.head")))
            step(f"{stages_tokens}-token text", enter(short))
            stages = step("stages", view("explorer.view.stages"))
            # four stage charts, or the explorer's word that they would not fit in memory
            stages_drawn = main.get_by_test_id("stPlotlyChart").count() >= 4
            page.close()
        browser.close()
    fast, n = fast_forward_s(folder, text)
    result.update(
        {
            "load_average": [round(x, 1) for x in os.getloadavg()],
            "tokens": n,
            "fast_forward_s": round(fast, 3),
            "threads": torch_threads(),
            "first_view_s": first["drawn_s"],
            "first_view_vs_fast": round(first["drawn_s"] / fast, 2),
            "stages_tokens": stages_tokens,
            "stages_s": stages["drawn_s"],
            "stages_drawn": stages_drawn,
            "worst_later_view_s": max(r["drawn_s"] for r in later_steps(result["steps"])),
            **{
                key: next(r["drawn_s"] for r in result["steps"] if r["step"] == name)
                for key, name in zip(
                    ("stats_first_s", "rollout_s", "rollout_next_s"), FIRST_COMPUTED
                )
            },
            "max_frame_bytes": max(r["max_frame_bytes"] for r in result["steps"]),
        }
    )
    return result


def later_steps(steps: list[dict]) -> list[dict]:
    """The views after the first, on the long text (not the second text or its stages, nor
    the statistics table's or a rollout's first computation: a progress bar, not a view)."""
    second = next(i for i, r in enumerate(steps) if r["step"].endswith("-token text"))
    return [r for r in steps[1:second] if r["step"] not in FIRST_COMPUTED]


def grouped(steps: list[dict]) -> list[tuple[str, list[dict]]]:
    """Steps by name, in the order they first ran."""
    names = list(dict.fromkeys(r["step"] for r in steps))
    return [(name, [r for r in steps if r["step"] == name]) for name in names]


def markdown(r: dict) -> list[str]:
    """The report's section (bench.benchreport)."""
    title = TITLE
    if not isinstance(r, dict):
        return ["", title, "", f"Not measured: {r}."]
    dims = r["dims"]
    out = [
        "",
        title,
        "",
        f"A random Qwen2 folder ({r['size']}: hidden {dims['hidden_size']}, "
        f"{dims['num_hidden_layers']} layers, {dims['num_attention_heads']} heads sharing "
        f"{dims['num_key_value_heads']} key/value heads; the tests' 300-token vocabulary, "
        f"not Qwen's) read {r['tokens']} tokens of a {r['tokens_asked']}-token text in "
        "headless Chromium. *Drawn*: from the click or Enter until the script has run and "
        "every chart is laid out and painted; *largest frame*: the biggest websocket message "
        "the browser received in that step (one chart each).",
        "",
        f"- Our fast forward over the same {r['tokens']} tokens: {r['fast_forward_s']:.2f} s "
        f"({r.get('threads', '?')} torch thread(s), as the server runs); "
        f"the explorer's first view drawn: {r['first_view_s']:.2f} s "
        f"({r['first_view_vs_fast']:.2f}× the fast forward: the traced pass, which also "
        f"sums each head's weights over {SUMMED_BLOCKS} × {SUMMED_BLOCKS} blocks, then the view).",
        f"- Slowest later view (of every one timed below): {r['worst_later_view_s']:.2f} s; "
        "stages of one head at "
        f"{r['stages_tokens']} tokens: {r['stages_s']:.2f} s"
        + ("" if r.get("stages_drawn", True) else " (not drawn: too big for memory, said so)")
        + "; largest frame: "
        f"{r['max_frame_bytes'] / 1e6:.2f} MB.",
        *(
            [
                f"- The statistics table over every head of every layer, the first time: "
                f"{r['stats_first_s']:.2f} s (one fused pass a layer, with a progress bar; "
                "then kept with the trace)."
            ]
            if "stats_first_s" in r
            else []
        ),
        *(
            [
                f"- Rollout to layer 6 (every head's mean of six layers, multiplied): "
                f"{r['rollout_s']:.2f} s; a layer deeper (one more layer multiplied in): "
                f"{r['rollout_next_s']:.2f} s."
            ]
            if "rollout_s" in r
            else []
        ),
        f"- Load average at the end (1, 5, 15 min): {r.get('load_average', '—')}.",
        *([f"- Note: {r['note']}."] if r.get("note") else []),
        "",
        "| step | times | drawn (median, slowest) | server (median) | largest frame |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, runs in grouped(r["steps"]):
        drawn = sorted(s["drawn_s"] for s in runs)
        server = statistics.median(s["server_ms"] for s in runs) / 1e3
        slowest = f", {drawn[-1]:.2f} s" if len(drawn) > 1 else ""
        out.append(
            f"| {name} | {len(runs)} | {statistics.median(drawn):.2f} s{slowest} | "
            f"{server:.2f} s | {max(s['max_frame_bytes'] for s in runs) / 1e6:.2f} MB |"
        )
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.longinput", description=__doc__)
    parser.add_argument("--size", choices=SIZES, default="qwen0.5b")
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--stages-tokens", type=int, default=2048)
    parser.add_argument("--log-dir", type=Path, default=Path("tests/artifacts"))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    result = run(args.size, args.tokens, args.stages_tokens, args.log_dir)
    print("\n".join(markdown(result)))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
