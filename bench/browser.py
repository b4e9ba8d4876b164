"""What a person waits for, measured in headless Chromium against a real server.

    python -m bench.browser [--quick] [--json out.json]

Two measurements, both on a server started for the run (bench.loadtest.serve) with its
script runs timed (bench.scripttiming):
- Enter → drawn: the explorer on MiniLM, a sentence of about 20, 128 and 256 tokens typed
  and Enter pressed; the clock stops when every chart on the page is drawn with the new
  sentence (plotly has laid it out and the browser has painted twice since).
- Pages: every page's first visit after a server start (cold) and a revisit (warm): the
  time until the page is drawn, and the server time of the script runs it caused.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from bench import scripttiming
from bench.loadtest import CHROMIUM, CHROMIUM_ARGS, serve

WAIT_MS = 120_000
PAGES = (
    "",
    "explorer",
    "decoding",
    "training",
    "concept_attention",
    "concept_positional",
    "concept_layernorm",
    "concept_warmup",
    "concept_family",
    "modern",
    "mechanisms",
    "practice",
    "find_the_bug",
)
EXPLORER_VIEWS = ("heatmap", "heads", "model", "lines", "focus", "stages", "stats")
TEXT = (
    "the student reads the lecture notes about attention and then opens the lab to see "
    "how every head of every layer looks at the other words in the sentence while it runs"
)

# True once the script has finished and every plotly chart on the page has been laid out
# (plotly sets _fullLayout) and is not mid-redraw; the caller then waits two paints.
_SETTLED = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
  const plots = [...document.querySelectorAll('.js-plotly-plot')];
  return plots.every(p => p._fullLayout && !p._transitioning && p.querySelector('.main-svg'));
}"""
_TWO_PAINTS = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"


def sentence(n_words: int) -> str:
    """A sentence of ``n_words`` plain English words (MiniLM reads each as one token)."""
    words = TEXT.split()
    return " ".join(words[i % len(words)] for i in range(n_words))


def drawn(page, check: str | None = None, arg=None) -> None:
    """Wait until the page has settled (and ``check(arg)`` holds), then two paints."""
    page.wait_for_function(_SETTLED, timeout=WAIT_MS)
    if check:
        page.wait_for_function(check, arg=arg, timeout=WAIT_MS)
        page.wait_for_function(_SETTLED, timeout=WAIT_MS)
    page.evaluate(_TWO_PAINTS)


# The first chart shows ``rows`` query rows (the new sentence, not the previous one).
_ROWS = """(rows) => {
  const p = document.querySelector('.js-plotly-plot');
  if (!p || !p._fullData) return false;
  const z = p._fullData[p._fullData.length - 1].z;
  return z && z.length === rows;
}"""


def enter_to_drawn(page, text: str, rows: int, view: str, timing_log: Path) -> float:
    """Seconds from Enter in the explorer's sentence box to the view drawn for ``text``:
    the script run it caused has finished, and the browser has laid out and painted."""
    box = page.get_by_test_id("stTextInput").locator("input").first
    box.fill(text)
    seen = len(scripttiming.read_runs(timing_log))
    start = time.perf_counter()
    box.press("Enter")
    scripttiming.runs_after(timing_log, seen, timeout_s=WAIT_MS / 1000)
    drawn(page, _ROWS if view == "heatmap" else None, rows)
    return time.perf_counter() - start


def settle_after(page, timing_log: Path, seen: int, quiet_s: float = 0.8) -> float:
    """perf_counter() when the page was last drawn after the script runs that followed
    ``seen``: a page may rerun itself (a permalink's frame, a query parameter), so it is
    drawn once no new run has come for ``quiet_s`` (the quiet wait is not counted)."""
    scripttiming.runs_after(timing_log, seen, timeout_s=WAIT_MS / 1000)
    while True:
        drawn(page)
        at, count = time.perf_counter(), len(scripttiming.read_runs(timing_log))
        time.sleep(quiet_s)
        if len(scripttiming.read_runs(timing_log)) == count:
            page.wait_for_function(_SETTLED, timeout=WAIT_MS)
            return at


def explorer_sizes(
    base: str, browser, sizes: list[int], views: tuple[str, ...], timing_log: Path
) -> list[dict]:
    """Enter → drawn per view and sentence size; MiniLM, each view opened once first."""
    from model import load

    lm = load("minilm", device="cpu")
    rows = []
    for view in views:
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        seen = len(scripttiming.read_runs(timing_log))
        page.goto(f"{base}/explorer?model=minilm&view={view}&text=warm+up", timeout=WAIT_MS)
        settle_after(page, timing_log, seen)
        for n in sizes:
            # A fresh sentence each time, so no cache can answer for the model.
            text = f"{n} " + sentence(n - 3)
            tokens = len(lm.encode(text).tokens)
            seconds = enter_to_drawn(page, text, tokens, view, timing_log)
            rows.append({"view": view, "tokens": tokens, "enter_to_drawn_s": round(seconds, 3)})
            print(f"explorer {view:8s} {tokens:4d} tokens: {seconds:6.2f} s", file=sys.stderr)
        page.close()
    return rows


def page_visits(base: str, browser, timing_log: Path) -> list[dict]:
    """Each page's first visit (cold, right after the server started) and a revisit."""
    rows = []
    for visit in ("cold", "warm"):
        for name in PAGES:
            seen = len(scripttiming.read_runs(timing_log))
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            url = f"{base}/{name}"
            start = time.perf_counter()
            page.goto(url, timeout=WAIT_MS)
            seconds = settle_after(page, timing_log, seen) - start
            runs = scripttiming.read_runs(timing_log)[seen:]
            server_ms = sum(r["ms"] for r in runs)
            cpu_ms = sum(r["cpu_ms"] for r in runs)
            gc_ms = sum(r["gc_ms"] for r in runs)
            rows.append(
                {
                    "page": name or "home",
                    "visit": visit,
                    "drawn_s": round(seconds, 3),
                    "server_ms": round(server_ms, 1),
                    "server_cpu_ms": round(cpu_ms, 1),
                    "gc_ms": round(gc_ms, 1),
                    "script_runs": len(runs),
                }
            )
            print(
                f"{visit} {name or 'home':20s} drawn {seconds:6.2f} s, server {server_ms:7.1f} ms"
                f" (cpu {cpu_ms:.0f}, gc {gc_ms:.0f}) in {len(runs)} runs",
                file=sys.stderr,
            )
            page.close()
    return rows


def run(quick: bool = False, log_dir: Path | None = None, parts=("pages", "explorer")) -> dict:
    from playwright.sync_api import sync_playwright

    log_dir = Path(log_dir or "tests/artifacts")
    log_dir.mkdir(parents=True, exist_ok=True)
    timing_log = log_dir / "bench-browser-runs.jsonl"
    timing_log.unlink(missing_ok=True)
    sizes = [20, 128] if quick else [20, 128, 256]
    views = ("heatmap",) if quick else EXPLORER_VIEWS
    server = serve(log_dir / "bench-browser-server.log", timing_log=timing_log)
    with server as (base, ready), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            visits = page_visits(base, browser, timing_log) if "pages" in parts else []
            sizes_rows = (
                explorer_sizes(base, browser, sizes, views, timing_log)
                if "explorer" in parts
                else []
            )
        finally:
            browser.close()
    return {"server_ready_s": round(ready, 2), "pages": visits, "explorer": sizes_rows}


def summary(result: dict) -> dict:
    """The figures the issue's targets name: worst cold first visit, worst warm server time."""
    cold = [r for r in result["pages"] if r["visit"] == "cold"]
    warm = [r for r in result["pages"] if r["visit"] == "warm"]
    at_256 = [r for r in result["explorer"] if r["tokens"] >= 200]
    return {
        "worst_cold_drawn_s": max(r["drawn_s"] for r in cold),
        "worst_warm_server_ms": max(r["server_ms"] for r in warm),
        "median_warm_drawn_s": statistics.median(r["drawn_s"] for r in warm),
        "heatmap_256_s": next(
            (r["enter_to_drawn_s"] for r in at_256 if r["view"] == "heatmap"), None
        ),
        "worst_view_256_s": max((r["enter_to_drawn_s"] for r in at_256), default=None),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.browser", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="two sizes, the heatmap only")
    parser.add_argument("--only", choices=("pages", "explorer"), help="one of the two parts")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    result = run(args.quick, parts=(args.only,) if args.only else ("pages", "explorer"))
    if result["pages"] and result["explorer"]:
        result["summary"] = summary(result)
        print(json.dumps(result["summary"], indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
