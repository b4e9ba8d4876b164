"""Many students at once: N browser sessions in one headless Chromium, driven concurrently.

    python -m bench.loadtest [--sessions 16] [--url http://127.0.0.1:8501]

Each session opens the explorer, types its own sentence and waits until its heatmap shows
that sentence; then opens the decoding page on its own digits and presses Step a few
times. All sessions press Enter together (a barrier), the worst moment for the server.
Every session checks it sees only its own input, and every wait is timed: p50 / p95 are
what a student in a class of N waits for. Used by the browser test and by ``make bench``.

Chromium is Debian's (/usr/bin/chromium); playwright is imported only when this runs.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from bench import classsim
from bench.classcore import (  # noqa: F401 - serve, CHROMIUM, summary: used from here too
    CHROMIUM,
    CHROMIUM_ARGS,
    MARKERS,
    MAX_STUDENTS,
    ROOT,
    digits_for,
    launch_args,
    percentile,
    serve,
    summary,
)
from ui.i18n import translate

STEPS = 3  # Step presses per session on the decoding page
WAIT_MS = 120_000
ARRIVAL_S = 0.5  # students open the page this far apart; then all press Enter together


def student_inputs(i: int) -> tuple[str, str, str]:
    """(the session's own word, its sentence, its digits): distinct for every session."""
    word = MARKERS[i]
    digits = " ".join(digits_for(i, random.Random(i)))
    return word, f"the student wrote about the {word} today", digits


async def _student(browser, base: str, i: int, barrier, n: int, motion: str) -> dict:
    """One session: explorer with its sentence, then decoding with its digits."""
    word, sentence, digits = student_inputs(i)
    others = {student_inputs(j)[0] for j in range(n) if j != i}
    context = await browser.new_context(
        viewport={"width": 1280, "height": 900}, base_url=base, reduced_motion=motion
    )
    context.set_default_timeout(WAIT_MS)
    context.set_default_navigation_timeout(WAIT_MS)
    page = await context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"uncaught: {exc}"))
    page.on(
        "console", lambda m: m.type == "error" and "404" not in m.text and problems.append(m.text)
    )
    page.on(
        "request",
        lambda r: (
            not r.url.startswith((base, "data:", "blob:", "about:"))
            and problems.append(f"off-site: {r.url}")
        ),
    )
    waits: dict[str, list[float]] = {"explorer": [], "step": []}
    result = {"session": i, "problems": problems, "waits": waits, "mixed": []}
    try:
        await asyncio.sleep(i * ARRIVAL_S)
        start = time.perf_counter()
        await page.goto("/explorer?model=minilm")
        chart = page.get_by_test_id("stPlotlyChart").first
        await chart.locator(".xtick text").first.wait_for(timeout=WAIT_MS)
        result["first_page_s"] = time.perf_counter() - start
        box = page.get_by_label(translate("input.label", "en"), exact=True).and_(
            page.get_by_role("textbox")
        )
        await box.fill(sentence)
        async with asyncio.timeout(WAIT_MS / 1000):
            await barrier.wait()  # everyone presses Enter at once
        start = time.perf_counter()
        await box.press("Enter")
        await page.wait_for_function(
            """w => [...document.querySelectorAll('[data-testid=stPlotlyChart] .xtick text')]
                   .some(t => t.textContent === w)""",
            arg=word,
            timeout=WAIT_MS,
        )
        waits["explorer"].append(time.perf_counter() - start)
        ticks = await chart.locator(".xtick text").all_text_contents()
        result["mixed"] += [t for t in ticks if t in others]

        await page.goto("/decoding?model=sort&text=" + urllib.parse.quote(digits))
        step = page.get_by_role("button", name=translate("decoding.step", "en"), exact=True)
        await step.wait_for(timeout=WAIT_MS)
        expected = sorted(digits.split())
        total = len(expected) + 1  # the digits, then <eos>
        for k in range(1, STEPS + 1):
            start = time.perf_counter()
            await step.click()
            await page.get_by_text(
                translate("decoding.position", "en", step=k, total=total), exact=True
            ).wait_for(timeout=WAIT_MS)
            waits["step"].append(time.perf_counter() - start)
        prefix = translate("decoding.output_so_far", "en", tokens="").replace("**", "").strip()
        # The step label arrives before the output line in the same update: give the line a
        # moment to catch up before judging what this session sees.
        deadline = time.perf_counter() + 15
        while True:
            line = await page.locator("p", has_text=prefix).first.inner_text()
            shown = [tok for tok in line.removeprefix(prefix).split() if tok.isdigit()]
            if shown == expected[:STEPS] or time.perf_counter() > deadline:
                break
            await page.wait_for_timeout(200)
        if shown != expected[:STEPS]:
            result["mixed"].append(f"decoding shows {shown}, expected {expected[:STEPS]}")
        if urllib.parse.parse_qs(urllib.parse.urlparse(page.url).query).get("text") != [digits]:
            result["mixed"].append(f"address bar holds another text: {page.url}")
    except Exception as err:  # a timeout or a broken page is a result, not a crash
        await barrier.abort()  # nobody waits for a session that will never arrive
        problems.append(f"{type(err).__name__}: {str(err).splitlines()[0]}")
    finally:
        await context.close()
    return result


async def _run(base: str, n: int, chromium: Path, motion: str) -> list[dict]:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(
            executable_path=str(chromium), args=launch_args(chromium)
        )
        try:
            barrier = asyncio.Barrier(n)
            students = (_student(browser, base, i, barrier, n, motion) for i in range(n))
            return await asyncio.gather(*students)
        finally:
            await browser.close()


def run_sessions(
    base_url: str, n: int = 16, chromium: Path = CHROMIUM, reduced_motion: bool = False
) -> dict:
    """Drive ``n`` concurrent sessions against a running app; latencies in seconds. The
    benchmark times the full browser as a person has it; a test may pass
    ``chromium_for_tests()`` and ``reduced_motion`` (the pages as for a reader who asked for
    less motion, which the lab honours, ui/a11y.py: no running or loading animation redrawn
    while a page waits, most of Chromium's compositing work with four pages waiting at once)."""
    if not 1 <= n <= MAX_STUDENTS:
        raise ValueError(f"1 to {MAX_STUDENTS} sessions (one marker word each)")
    # The teacher opens the lab before class: MiniLM and sort loaded on the server, not timed.
    # Through Streamlit's own protocol (bench.classsim), not a Chromium page: only the server
    # needs warming (each student's browser context starts with an empty cache anyway).
    classsim.warm(base_url.rstrip("/"))
    started = time.perf_counter()
    motion = "reduce" if reduced_motion else "no-preference"
    sessions = asyncio.run(_run(base_url.rstrip("/"), n, chromium, motion))
    explorer = [w for s in sessions for w in s["waits"]["explorer"]]
    step = [w for s in sessions for w in s["waits"]["step"]]
    every = explorer + step

    return {
        "sessions": n,
        "wall_s": time.perf_counter() - started,
        "errors": [f"session {s['session']}: {p}" for s in sessions for p in s["problems"]],
        "mixed": [f"session {s['session']}: {m}" for s in sessions for m in s["mixed"]],
        "first_page": summary([s["first_page_s"] for s in sessions if "first_page_s" in s]),
        "explorer_enter": summary(explorer),
        "decoding_step": summary(step),
        "all": summary(every),
    }


def wait_for_mask_rows(page, rows: int, timeout_ms: float = WAIT_MS) -> None:
    """(Sync playwright page.) Until the decoding page's growing mask, its first chart, draws
    ``rows`` query labels; 0 rows: until no chart is left (step 0, after Reset)."""
    page.wait_for_function(
        """rows => {
            const chart = document.querySelector('[data-testid=stPlotlyChart]');
            return rows === 0 ? !chart : !!chart && chart.querySelectorAll('.ytick text').length === rows;
        }""",
        arg=rows,
        timeout=timeout_ms,
    )


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=16)
    parser.add_argument("--url", default=None, help="a running app; default: start one")
    args = parser.parse_args(argv)
    if args.url:
        result = run_sessions(args.url, args.sessions)
    else:
        with serve() as (url, _):
            result = run_sessions(url, args.sessions)
    for what in ("first_page", "explorer_enter", "decoding_step", "all"):
        s = result[what]
        if s["n"]:
            print(f"{what}: n={s['n']} p50 {s['p50_s']:.2f} s, p95 {s['p95_s']:.2f} s")
    print(f"errors: {len(result['errors'])}, mixed: {len(result['mixed'])}")
    for line in result["errors"] + result["mixed"]:
        print("  ", line)
    return result


if __name__ == "__main__":
    main()
