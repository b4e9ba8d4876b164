"""One long paste beside a class on one replica: do the short requests still draw in time?

    python -m bench.stall [--students 10] [--size small|medium] [--tokens 2048]
                          [--folder DIR] [--json out.json]

One server, started as a `make serve` replica is (bench.loadtest.serve through deploy.launch,
ATTENTION_LAB_SERVED=1, its torch threads as deploy.serve gives them). ``--students``
simulated students (bench.classsim's Student: Streamlit's own websocket protocol, no browser)
open the explorer on MiniLM with a sentence of about 20 tokens and type another one every
second or two. Once every student has its page and the class has run alone for 15 s, one
more session pastes a ``--tokens``-token text into the explorer on a random Qwen2 folder
(bench.longinput's builder; ``small`` is the tests' tiny Qwen2 with 8 layers, ``medium``
wider), and a second paste (half as long) follows: it must wait its turn and be told its
place.

Reported: every short request's time (its BackMsg to its script_finished) in the class
alone and while a long pass runs, as n / p50 / p95 / max; how long each paste took; and
whether the second was shown its place in the queue (issue 46's target: <= 1.5 s for the
short ones while the long one runs). Where the time goes: the server times every script
run (bench.scripttiming), and the short ones' runs, alone and beside the long pass, are
split into the run thread's own CPU, its wait for a core (queued) and the rest (blocked:
in this server, mostly waiting for the GIL), the slowest tenth apart from the whole.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

from bench.classsim import MARKERS, Clock, Student, progress_texts, run_async, sentence
from bench.loadtest import summary
from ui.i18n import translate

TARGET_S = 1.5
SIZES = {
    "small": {"num_hidden_layers": 8},
    "medium": {
        "num_hidden_layers": 8,
        "hidden_size": 256,
        "intermediate_size": 688,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
    },
}
ALONE_S = 15.0  # the class alone, once every student has opened its page: the baseline
SECOND_PASTE_AFTER_S = 2.0  # after the first paste: it finds the first one running
TYPE_EVERY_S = (1.0, 2.0)
LONG_TIMEOUT_S = 900.0


def build(folder: Path, size: str, tokens: int) -> str:
    """The long folder (built once) and a text its tokenizer reads as ``tokens`` tokens."""
    from bench.longinput import text_of
    from tests.hf_folders import build_decoder_folder

    if not (folder / "config.json").exists():
        build_decoder_folder("qwen2", folder, max_position_embeddings=2 * tokens, **SIZES[size])
    return text_of(folder, tokens)


async def _short_student(s: Student, stop: asyncio.Event, times: list, opened: list) -> None:
    """Open the explorer on MiniLM, then type a new sentence every second or two, timing
    each run; (start, seconds) go to ``times``."""
    s.text = sentence(s.marker, s.rng)
    s.query_string = urllib.parse.urlencode({"model": "minilm", "text": s.text})
    await s.connect()
    await s.act("open", s.client_state(), s.check_explorer)
    opened.append(s.i)
    while not stop.is_set():
        await asyncio.sleep(s.rng.uniform(*TYPE_EVERY_S))
        s.set_text(sentence(s.marker, s.rng))
        started = time.perf_counter()
        result = await s.act("explorer", s.client_state(), s.check_explorer)
        if result is not None:
            times.append((started, result.seconds))
    await s.conn.close()


async def _paste(s: Student, text: str, go: asyncio.Event, after_s: float, spans: list):
    """Paste the long text (in the URL, as a link would carry it) ``after_s`` after ``go``;
    the progress texts the page showed while it waited, and (start, end) into ``spans``."""
    await go.wait()
    await asyncio.sleep(after_s)
    s.query_string = urllib.parse.urlencode({"model": "folder:long", "text": text})
    await s.connect()
    started = time.perf_counter()
    result = await s.conn.rerun(s.client_state(), timeout=LONG_TIMEOUT_S)
    spans.append((started, time.perf_counter()))
    await s.conn.close()
    return progress_texts(result.elements)


async def _class(base: str, students: int, text: str, second_text: str) -> dict:
    clock = Clock()
    stop = asyncio.Event()
    times: list = []
    spans: list = []
    shorts = [Student(i, base, MARKERS, 7, clock) for i in range(students)]
    pasters = [Student(students + i, base, MARKERS, 7, clock) for i in range(2)]
    opened: list = []
    go = asyncio.Event()
    tasks = [asyncio.create_task(_short_student(s, stop, times, opened)) for s in shorts]
    first = asyncio.create_task(_paste(pasters[0], text, go, 0.0, spans))
    second = asyncio.create_task(_paste(pasters[1], second_text, go, SECOND_PASTE_AFTER_S, spans))
    while len(opened) < students and not all(t.done() for t in tasks):
        await asyncio.sleep(0.2)
    alone_from = time.perf_counter()
    await asyncio.sleep(ALONE_S)
    go.set()
    first_texts, second_texts = await first, await second
    await asyncio.sleep(2.0)  # a few short requests after the long ones, too
    stop.set()
    await asyncio.gather(*tasks)
    begin = min(a for a, _ in spans)
    during = [sec for start, sec in times if any(a + 0.5 <= start <= b for a, b in spans)]
    before = [sec for start, sec in times if alone_from <= start and start + sec < begin]
    queued = translate("background.queued", "en", place=1)
    told = [queued in texts for texts in (first_texts, second_texts)]
    return {
        "short_class_alone": summary(before),
        "short_during_long_pass": summary(during),
        # from each paste's request to its page drawn, its wait in the queue included
        "pastes_s": [round(b - a, 1) for a, b in sorted(spans)],
        # the pastes overlap: exactly one of them must wait, told its place (1)
        "one_paste_waited_told_its_place": sorted(told) == [False, True],
        "errors": sorted({e for s in shorts + pasters for e in s.errors})[:10],
        # wall-clock spans, for the server's own record of its script runs
        "_spans_epoch": [(a - time.perf_counter() + time.time(), b - a) for a, b in spans],
        "_alone_from_epoch": alone_from - time.perf_counter() + time.time(),
    }


def where_it_went(runs: list[dict]) -> dict:
    """Mean ms of a script run: its thread's CPU, its wait for a core, the rest (blocked),
    over all ``runs`` and over their slowest tenth (what a p95 is made of)."""

    def split(some: list[dict]) -> dict:
        if not some:
            return {"n": 0}
        n = len(some)
        ms = sum(r["ms"] for r in some) / n
        cpu = sum(r["cpu_ms"] for r in some) / n
        queued = sum(r.get("queued_ms") or 0.0 for r in some) / n
        gc = sum(r.get("gc_ms") or 0.0 for r in some) / n
        return {
            "n": n,
            "ms": round(ms),
            "cpu_ms": round(cpu),
            "queued_ms": round(queued),
            "blocked_ms": round(ms - cpu - queued),
            "gc_ms": round(gc),
        }

    slowest = sorted(runs, key=lambda r: r["ms"])[-max(1, len(runs) // 10) :] if runs else []
    return {"all": split(runs), "slowest_tenth": split(slowest)}


def server_split(timing_log: Path, result: dict) -> dict:
    """The short script runs the server timed, alone and beside a long pass (the pastes'
    own runs, which last the whole paste, left out)."""
    from bench.scripttiming import read_runs

    runs = [r for r in read_runs(timing_log) if "start" in r]
    spans = result.pop("_spans_epoch")
    alone_from = result.pop("_alone_from_epoch")
    begin = min(a for a, _ in spans)
    longest = max(d for _, d in spans)
    short = [r for r in runs if r["ms"] < 1000 * longest / 2]
    during = [r for r in short if any(a + 0.5 <= r["start"] <= a + d for a, d in spans)]
    alone = [r for r in short if alone_from <= r["start"] and r["start"] + r["ms"] / 1000 < begin]
    return {"alone": where_it_went(alone), "during_long_pass": where_it_went(during)}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--students", type=int, default=10)
    parser.add_argument("--size", choices=list(SIZES), default="small")
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--folder", default=None, help="where the long folder is built/kept")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    if args.students + 2 > len(MARKERS):
        parser.error(f"at most {len(MARKERS) - 2} students")
    from bench.loadtest import serve
    from deploy.serve import replica_threads

    base_dir = Path(args.folder or tempfile.mkdtemp(prefix="stall-"))
    root = base_dir / "models"
    folder = root / "long"
    text = build(folder, args.size, args.tokens)
    second = build(folder, args.size, args.tokens // 2)  # another text: not a join
    os.environ.update(
        {
            "ATTENTION_LAB_MODELS": str(root),
            "ATTENTION_LAB_SERVED": "1",
            "ATTENTION_LAB_THREADS": os.environ.get("ATTENTION_LAB_THREADS") or replica_threads(1),
        }
    )
    random.seed(0)
    timing_log = base_dir / "script-runs.jsonl"
    timing_log.unlink(missing_ok=True)
    with serve(base_dir / "server.log", timing_log=timing_log) as (url, _ready):
        result = run_async(_class(url, args.students, text, second))
    result["server_script_runs"] = server_split(timing_log, result)
    result.update(
        students=args.students,
        size=args.size,
        tokens=args.tokens,
        threads=os.environ["ATTENTION_LAB_THREADS"],
        cpus=os.cpu_count(),
        target_s=TARGET_S,
    )
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2), encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
    sys.exit(0)
