"""What a person waits for, measured in headless Chromium against a real server.

    python -m bench.browser [--quick] [--json out.json]

Two measurements, both on a server started for the run (bench.classcore.serve) with its
script runs timed (bench.scripttiming):
- Enter → drawn: the explorer on MiniLM, a sentence of about 20, 128 and 256 tokens typed
  and Enter pressed; the clock stops when every chart on the page is drawn with the new
  sentence (plotly has laid it out and the browser has painted twice since). The real
  models (SmolLM2, Gemma 3) at about 30 tokens, warm: ``real_models_enter``, run by
  bench.real_models.
- Pages: every page's first visit after a server start (cold) and a revisit (warm): the
  time until the page is drawn, and the server time of the script runs it caused.
- First page after start: a fresh server for each page, opened as soon as the server
  answers; the clock runs from starting the process to the page drawn (what a teacher who
  types ``make run`` and opens a link waits for), with the server started as `make run`
  starts it and, beside it, as a plain ``streamlit run app.py``.
- Warm moves: a sidebar link clicked, on a warm server, to the page drawn; the server time
  of the runs it caused, split into the script's own CPU, the collector and waiting.
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

from bench import scripttiming
from bench.classcore import CHROMIUM, CHROMIUM_ARGS, cpu_seconds, serve

WAIT_MS = 120_000
ROOT = Path(__file__).resolve().parents[1]


def app_pages() -> tuple[str, ...]:
    """Every page's address (home: ""), read from app.py's navigation, so every page is
    measured, the class page and any new one included."""
    return ("", *re.findall(r'url_path="([^"]+)"', (ROOT / "app.py").read_text(encoding="utf-8")))


PAGES = app_pages()
EXPLORER_VIEWS = ("heatmap", "heads", "model", "lines", "focus", "stages", "stats")
TEXT = (
    "the student reads the lecture notes about attention and then opens the lab to see "
    "how every head of every layer looks at the other words in the sentence while it runs"
)

# True once the script has finished, nothing is still loading (an element whose code is still
# on its way is a grey skeleton, and a chart container has no plot in it yet: on a first visit
# that held for seconds after the run, so waiting for plots alone timed a half-drawn page) and
# every plotly chart has been laid out (plotly sets _fullLayout) and is not mid-redraw; the
# caller then waits two paints. The same test as tests/e2e/test_accessibility.py's.
_SETTLED = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
  if (document.querySelector('[data-testid=stStatusWidget], [data-testid=stSkeleton]')) return false;
  if (![...document.querySelectorAll('[data-testid=stPlotlyChart]')]
      .every(c => c.querySelector('.js-plotly-plot'))) return false;
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


def settle_after(page, timing_log: Path, seen: int, quiet_s: float = 0.8, probe=None):
    """perf_counter() when the page was last drawn after the script runs that followed
    ``seen``: a page may rerun itself (a permalink's frame, a query parameter), so it is
    drawn once no new run has come for ``quiet_s`` (the quiet wait is not counted). With
    ``probe``, (that time, what ``probe()`` returned at that moment)."""
    scripttiming.runs_after(timing_log, seen, timeout_s=WAIT_MS / 1000)
    while True:
        drawn(page)
        at, count = time.perf_counter(), len(scripttiming.read_runs(timing_log))
        probed = probe() if probe else None
        time.sleep(quiet_s)
        if len(scripttiming.read_runs(timing_log)) == count:
            page.wait_for_function(_SETTLED, timeout=WAIT_MS)
            return (at, probed) if probe else at


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


def page_visits(base: str, browser, timing_log: Path, pages=PAGES) -> list[dict]:
    """Each page's first visit (cold, right after the server started) and a revisit."""
    rows = []
    for visit in ("cold", "warm"):
        for name in pages:
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


def _server_split(runs: list[dict]) -> dict:
    """The runs' server time, and of it the script's CPU, the collector and the rest (waiting:
    for the interpreter lock, the event loop sending elements, or a core)."""
    server_ms = sum(r["ms"] for r in runs)
    cpu_ms = sum(r["cpu_ms"] for r in runs)
    gc_ms = sum(r["gc_ms"] for r in runs)
    return {
        "server_ms": round(server_ms, 1),
        "server_cpu_ms": round(cpu_ms, 1),
        "gc_ms": round(gc_ms, 1),
        "wait_ms": round(max(0.0, server_ms - cpu_ms - gc_ms), 1),
        "script_runs": len(runs),
    }


def first_after_start(
    browser, name: str, log_dir: Path, port: int | None = None, bare: bool = False
) -> dict:
    """A fresh server, and ``name`` opened the moment it answers: seconds from starting the
    process to the page drawn. The server starts as `make run` starts it, or with ``bare`` as
    a plain ``streamlit run app.py``."""
    timing_log = log_dir / f"bench-first-{name or 'home'}-runs.jsonl"
    timing_log.unlink(missing_ok=True)
    start = time.perf_counter()
    server = serve(
        log_dir / "bench-first-server.log",
        timing_log=timing_log,
        port=port,
        return_process=True,
        bare=bare,
    )
    with server as (base, ready, process):
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        page.goto(f"{base}/{name}", timeout=WAIT_MS)
        # The server's CPU time until the page was drawn: a busy machine stretches the wall
        # clock, this much less.
        drawn_at, cpu_s = settle_after(page, timing_log, 0, probe=lambda: cpu_seconds(process.pid))
        seconds = drawn_at - start
        runs = scripttiming.read_runs(timing_log)
        page.close()
    row = {
        "page": name or "home",
        "start": "streamlit run" if bare else "make run",
        "server_ready_s": round(ready, 2),
        "drawn_s": round(seconds, 3),
        "process_cpu_s": round(cpu_s, 2),
        **_server_split(runs),
    }
    print(
        f"first {row['page']:20s} ({row['start']:13s}) ready {ready:5.2f} s, drawn {seconds:6.2f} s after start,"
        f" server {row['server_ms']:7.1f} ms (cpu {row['server_cpu_ms']:.0f}) in {len(runs)}"
        f" runs; process cpu {cpu_s:.2f} s",
        file=sys.stderr,
    )
    return row


# Starts of `make run` per page: one start's drawn time moved by 1-2 s between runs of the
# same code on the shared 2-core machine (another process's burst lands on it or not), so a
# page's figure is the median start's, with the spread beside it.
FIRST_STARTS = 3


def first_pages(
    browser, log_dir: Path, pages=PAGES, port: int | None = None, starts: int = FIRST_STARTS
) -> list[dict]:
    """Every page as the first one opened after a server start (a fresh server each):
    ``starts`` times as `make run` starts it, kept as the median start's row with every
    start's drawn time in ``drawn_starts_s``, and once as a plain ``streamlit run``, side by
    side (it goes first for every other page, so a drift in the machine's speed touches both
    alike)."""
    # One start unmeasured: the first process after a quiet spell reads its files from disk,
    # and the first measured pair was always slower on that side alone.
    first_after_start(browser, "", log_dir, port)
    rows = []
    for i, name in enumerate(pages):
        order = [False] * starts + [True]
        page_rows = [
            first_after_start(browser, name, log_dir, port, bare=bare)
            for bare in (order if i % 2 == 0 else order[::-1])
        ]
        rows.append(median_start([r for r in page_rows if r["start"] == "make run"]))
        rows += [r for r in page_rows if r["start"] == "streamlit run"]
    return rows


def median_start(rows: list[dict]) -> dict:
    """The median start's row (by drawn time), with every start's drawn time, in order."""
    ranked = sorted(rows, key=lambda r: r["drawn_s"])
    return {**ranked[len(ranked) // 2], "drawn_starts_s": [r["drawn_s"] for r in ranked]}


_NAV_LINK = '[data-testid="stSidebarNav"] a[href$="/{name}"]'


def _nav_href(base: str, name: str) -> str:
    return (
        _NAV_LINK.format(name=name) if name else f'[data-testid="stSidebarNav"] a[href="{base}/"]'
    )


def warm_moves(base: str, browser, timing_log: Path, pages=PAGES, rounds: int = 2) -> list[dict]:
    """Each page reached by clicking its sidebar link from the page before it, in one tab,
    on a warm server (every page visited ``rounds - 1`` times before the measured round):
    seconds from the click to the page drawn, and the server time of the runs it caused."""
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    seen = len(scripttiming.read_runs(timing_log))
    page.goto(f"{base}/{pages[-1]}", timeout=WAIT_MS)
    settle_after(page, timing_log, seen)
    rows = []
    for round_ in range(rounds):
        for name in pages:
            link = page.locator(_nav_href(base, name)).first
            if not link.is_visible():  # more than 12 pages: the menu shows "View more" first
                page.get_by_test_id("stSidebarNavViewButton").click()
                link.wait_for(state="visible", timeout=WAIT_MS)
            seen = len(scripttiming.read_runs(timing_log))
            start = time.perf_counter()
            link.click()
            seconds = settle_after(page, timing_log, seen) - start
            if round_ < rounds - 1:
                continue
            runs = scripttiming.read_runs(timing_log)[seen:]
            row = {"page": name or "home", "drawn_s": round(seconds, 3), **_server_split(runs)}
            rows.append(row)
            print(
                f"move to {row['page']:20s} drawn {seconds:6.2f} s, server {row['server_ms']:6.1f}"
                f" ms (cpu {row['server_cpu_ms']:.0f}, gc {row['gc_ms']:.0f},"
                f" wait {row['wait_ms']:.0f}) in {len(runs)} runs",
                file=sys.stderr,
            )
    page.close()
    return rows


REAL_TOKENS = 32  # a sentence is cut, word by word, to at most this many tokens
REAL_TEXTS = (  # a fresh one per Enter, so no cache answers
    "The students opened the lab after the lecture on attention and typed a sentence of their "
    "own to see which words each head of the real model looks at first",
    "A small fishing village woke up early on Monday, and the old captain walked down to the "
    "harbour to check the nets before the storm arrived from the west",
    "고양이가 매트 위에 앉아서 창밖을 바라보았고, 학생들은 그 문장의 토큰이 어떻게 나뉘는지 "
    "실험실에서 직접 확인했다",
    "On the last day of the term the class compared three models side by side and wrote down "
    "how many tokens each needed for the same Korean sentence",
)


def real_models_enter(
    models=("smollm2", "gemma3"),
    repeats: int = 3,
    log_dir: Path | None = None,
    port: int | None = None,
) -> list[dict]:
    """Enter → drawn on the explorer's heatmap for each installed real model, a sentence of
    about 30 tokens, warm: the model's first drawing (load and first trace) is made before
    the clock runs, then ``repeats`` fresh sentences, each timed from Enter to the map drawn
    with the new sentence's rows. One server for all models, as a replica serves them."""
    from playwright.sync_api import sync_playwright

    from model.hf.common import load_tokenizer
    from model.runtime.gguf_cache import installed, shipped_folder

    log_dir = Path(log_dir or "tests/artifacts")
    log_dir.mkdir(parents=True, exist_ok=True)
    timing_log = log_dir / "bench-real-enter-runs.jsonl"
    timing_log.unlink(missing_ok=True)
    present = [m for m in models if installed(m)]
    rows: list[dict] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        server = serve(log_dir / "bench-real-enter-server.log", timing_log=timing_log, port=port)
        try:
            with server as (base, _ready):
                for name in present:
                    tokenizer = load_tokenizer(shipped_folder(name, progress=False))
                    page = browser.new_page(viewport={"width": 1440, "height": 1000})
                    seen = len(scripttiming.read_runs(timing_log))
                    page.goto(
                        f"{base}/explorer?model={name}&view=heatmap&gen=0&text=warm+up",
                        timeout=WAIT_MS,
                    )
                    settle_after(page, timing_log, seen)
                    times, tokens, cpu = [], [], []
                    for i in range(repeats):
                        text = f"{i + 1}. " + REAL_TEXTS[i % len(REAL_TEXTS)]
                        # about 30 tokens for this model: byte-level BPE spends 4x more on Korean
                        while len(tokenizer.encode(text, 100_000).ids) > REAL_TOKENS:
                            text = text.rsplit(" ", 1)[0]
                        n = len(tokenizer.encode(text, 100_000).ids)
                        seen = len(scripttiming.read_runs(timing_log))
                        times.append(enter_to_drawn(page, text, n, "heatmap", timing_log))
                        runs = scripttiming.read_runs(timing_log)[seen:]
                        cpu.append(_server_split(runs)["server_cpu_ms"])
                        tokens.append(n)
                    page.close()
                    row = {
                        "model": name,
                        "tokens": tokens,
                        "enter_to_drawn_s": [round(t, 3) for t in times],
                        "median_s": round(statistics.median(times), 3),
                        # the server script's own CPU per Enter: what a busy machine skews least
                        "server_cpu_ms": cpu,
                        "median_server_cpu_ms": round(statistics.median(cpu), 1),
                    }
                    rows.append(row)
                    print(
                        f"explorer {name:8s} ~{statistics.median(tokens):.0f} tokens: "
                        f"{row['median_s']:6.2f} s (median of {repeats})",
                        file=sys.stderr,
                    )
        finally:
            browser.close()
    return rows


PARTS = ("first", "pages", "moves", "explorer")


def run(
    quick: bool = False,
    log_dir: Path | None = None,
    parts=PARTS,
    port: int | None = None,
    pages=PAGES,
) -> dict:
    from playwright.sync_api import sync_playwright

    log_dir = Path(log_dir or "tests/artifacts")
    log_dir.mkdir(parents=True, exist_ok=True)
    timing_log = log_dir / "bench-browser-runs.jsonl"
    timing_log.unlink(missing_ok=True)
    sizes = [20, 128] if quick else [20, 128, 256]
    views = ("heatmap",) if quick else EXPLORER_VIEWS
    result: dict = {"pages": [], "explorer": [], "moves": [], "first": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            if "first" in parts:
                result["first"] = first_pages(browser, log_dir, pages, port)
            if {"pages", "moves", "explorer"} & set(parts):
                server = serve(
                    log_dir / "bench-browser-server.log", timing_log=timing_log, port=port
                )
                with server as (base, ready):
                    result["server_ready_s"] = round(ready, 2)
                    if "pages" in parts:
                        result["pages"] = page_visits(base, browser, timing_log, pages)
                    if "moves" in parts:
                        result["moves"] = warm_moves(base, browser, timing_log, pages)
                    if "explorer" in parts:
                        result["explorer"] = explorer_sizes(base, browser, sizes, views, timing_log)
        finally:
            browser.close()
    return result


def summary(result: dict) -> dict:
    """The figures the issue's targets name: worst cold first visit, worst warm server time."""
    cold = [r for r in result["pages"] if r["visit"] == "cold"]
    warm = [r for r in result["pages"] if r["visit"] == "warm"]
    at_256 = [r for r in result["explorer"] if r["tokens"] >= 200]
    return {
        "worst_cold_drawn_s": max((r["drawn_s"] for r in cold), default=None),
        "worst_warm_server_ms": max((r["server_ms"] for r in warm), default=None),
        "median_warm_drawn_s": (statistics.median(r["drawn_s"] for r in warm) if warm else None),
        "heatmap_256_s": next(
            (r["enter_to_drawn_s"] for r in at_256 if r["view"] == "heatmap"), None
        ),
        "worst_view_256_s": max((r["enter_to_drawn_s"] for r in at_256), default=None),
        "worst_first_after_start_s": max(
            (r["drawn_s"] for r in result.get("first") or [] if r.get("start") != "streamlit run"),
            default=None,
        ),
        "worst_first_bare_streamlit_s": max(
            (r["drawn_s"] for r in result.get("first") or [] if r.get("start") == "streamlit run"),
            default=None,
        ),
        "worst_move_drawn_s": max((r["drawn_s"] for r in result.get("moves") or []), default=None),
        "worst_move_server_ms": max(
            (r["server_ms"] for r in result.get("moves") or []), default=None
        ),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.browser", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="two sizes, the heatmap only")
    parser.add_argument("--only", choices=PARTS, action="append", help="these parts only")
    parser.add_argument("--pages", help="comma-separated page names (home: empty or 'home')")
    parser.add_argument("--port", type=int, default=int(os.environ.get("BENCH_PORT", 0)) or None)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    pages = PAGES
    if args.pages is not None:
        pages = tuple("" if n == "home" else n for n in args.pages.split(","))
    result = run(args.quick, parts=tuple(args.only or PARTS), port=args.port, pages=pages)
    if all(result[k] for k in PARTS):
        result["summary"] = summary(result)
        print(json.dumps(result["summary"], indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
