"""`make bench`: every measurement in one run, written to docs/benchmarks.md and .json.

    python -m bench.benchreport [--report docs/benchmarks.md] [--json docs/benchmarks.json]
                             [--repeats 3] [--sessions 16] [--quick]
                             [--class-students 30] [--class-duration 60] [--class-only]

Model paths (bench.model_speed), the GGUF models' conversion, cached load and memory
(bench.gguf_load; ``--gguf-only`` runs it alone), SmolLM2 and Gemma 3 beside transformers
(bench.real_models; ``--real-only``), page re-render time and bytes beside the bare forward
(bench.pages), one decoding step, training tokens/s (the shipped checkpoints' metrics.json),
cold start, memory, many sessions at once (bench.loadtest), a class of simulated students
through HAProxy on 1 and on 2 replicas and a replica killed mid-class (bench.classsim; needs
HAProxy, else said and skipped) and, where installed, BertViz on the same inputs.
``--class-only`` runs the class alone and replaces just its section of the report;
``--long-only`` does the same for the long document in the explorer (bench.longinput). Numbers
taken side by side in one run on one machine: compare ratios, not absolute times, across
machines.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import torch

from bench import browser as browser_bench
from bench import classcore, head_scan, loadtest
from bench import gguf_load as gguf_bench
from bench import longinput as long_bench
from bench import model_speed as model_bench
from bench import pages as ui_bench
from bench import real_models as real_bench
from bench.reportmd import (  # noqa: F401 - the report's writers, re-exported for callers
    BROWSER_TITLE,
    CHAOS_TITLE,
    CLASS_TITLE,
    browser_markdown,
    class_chaos_markdown,
    class_markdown,
    class_store_markdown,
    class_targets,
    gpu_section,
    keep_recorded_sections,
    markdown,
    replace_class_section,
)
from model.runtime.device import configure_threads, resolve_device
from model.runtime.loading import CHECKPOINTS, SHIPPED, load

ROOT = Path(__file__).resolve().parents[1]

MEMORY_PROBE = """
import json, sys
from pathlib import Path
def rss():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
out = {"python": rss()}
import torch, streamlit, plotly, transformers  # what a server imports before any model
out["imports"] = rss()
from model import load
models = {}
for name in ("minilm", "en2ko", "reverse", "sort"):
    try:
        models[name] = load(name, "cpu")
    except Exception as err:
        out.setdefault("missing", []).append(f"{name}: {err}")
    out["after_" + name] = rss()
json.dump(out, sys.stdout)
"""


def machine() -> dict:
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model_names = [
        line.split(":", 1)[1].strip()
        for line in cpuinfo.splitlines()
        if line.startswith("model name")
    ]
    meminfo = Path("/proc/meminfo").read_text() if Path("/proc/meminfo").exists() else ""
    total_kb = next(
        (int(line.split()[1]) for line in meminfo.splitlines() if line.startswith("MemTotal:")), 0
    )
    return {
        "cpu": model_names[0] if model_names else platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "ram_gib": round(total_kb / 2**20, 1),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "cuda": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
    }


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def memory() -> dict:
    """RSS of a fresh process after imports, then after each model (MiB)."""
    done = subprocess.run(
        [sys.executable, "-c", MEMORY_PROBE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    raw = json.loads(done.stdout)
    return {k: (round(v / 2**20, 1) if isinstance(v, int) else v) for k, v in raw.items()}


def training() -> list[dict]:
    """Training speed as recorded when the shipped checkpoints were made."""
    rows = []
    for name in SHIPPED:
        path = CHECKPOINTS / name / "metrics.json"
        if not path.is_file():
            rows.append({"model": name, "missing": True})
            continue
        m = json.loads(path.read_text(encoding="utf-8"))
        rows.append(
            {
                k: m.get(k)
                for k in (
                    "tokens_per_s",
                    "train_tokens",
                    "wall_time_s",
                    "steps",
                    "batch_size",
                    "params",
                    "device",
                    "threads",
                    "world_size",
                    "load_average_before",
                    "created",
                )
            }
            | {"model": name}
        )
    return rows


def trace_seconds(model_name: str, text: str, repeats: int = 5) -> float:
    """lm.trace(text): what a page needs from the model at least (enc-dec: greedy decode too)."""
    lm = load(model_name, "cpu")
    lm.trace(text)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        lm.trace(text)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def explorer(repeats: int, quick: bool) -> list[dict]:
    plan = [
        ("en2ko", 8, ["heatmap", "heads"]),
        ("minilm", 18, ["heatmap", "heads", "model", "lines", "focus", "stats"]),
        ("minilm", 254, ["heatmap", "heads", "model"]),
    ]
    if quick:
        plan = [("en2ko", 8, ["heatmap"]), ("minilm", 18, ["heatmap"])]
    rows = []
    for model_name, n_words, views in plan:
        for row in ui_bench.bench_explorer(model_name, n_words, views, repeats):
            row["trace_ms"] = trace_seconds(model_name, ui_bench.sentence(n_words, 0)) * 1000
            rows.append(row)
    return rows


def head_views(quick: bool) -> list[dict]:
    """Our head view (one self-contained HTML) beside BertViz's, same attention, same tokens."""
    from viz.headview import head_view_html

    lm = load("minilm", "cpu")
    has_bertviz = importlib.util.find_spec("bertviz") is not None
    rows = []
    for n_words in (18,) if quick else (18, 254):
        trace = lm.trace(ui_bench.sentence(n_words, 0))
        q, k = trace.tokens("encoder")
        att = trace.attention["encoder"]  # [L, H, n, n]
        start = time.perf_counter()
        html = head_view_html(
            att[0], q, k, head_labels=[str(h) for h in range(att.shape[1])], hint=""
        )
        row = {
            "tokens": len(q),
            "ours_ms": (time.perf_counter() - start) * 1000,
            "ours_bytes": len(html.encode()),
            "bertviz": "not installed",
        }
        if has_bertviz:
            from bertviz import head_view

            start = time.perf_counter()
            out = head_view([a.unsqueeze(0) for a in att], q, html_action="return")
            row["bertviz"] = "installed"
            row["bertviz_ms"] = (time.perf_counter() - start) * 1000
            row["bertviz_bytes"] = len(str(getattr(out, "data", out)).encode())
        rows.append(row)
    return rows


def served(sessions: int) -> dict:
    """Cold start of a fresh server, then a class of ``sessions`` at once, then its memory."""
    out: dict = {}
    start = time.perf_counter()
    with classcore.serve(return_process=True) as (url, health_s, server):
        out["health_s"] = health_s
        try:
            from playwright.sync_api import sync_playwright
        except ImportError:
            out["first_page"] = "playwright not installed"
            return out
        if not classcore.CHROMIUM.exists():
            out["first_page"] = f"no Chromium at {classcore.CHROMIUM}"
            return out
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=str(classcore.CHROMIUM), args=classcore.CHROMIUM_ARGS
            )
            page = browser.new_page()
            page.goto(f"{url}/explorer?model=minilm")
            page.get_by_test_id("stPlotlyChart").first.locator(".xtick text").first.wait_for(
                timeout=loadtest.WAIT_MS
            )
            out["first_page_s"] = time.perf_counter() - start
            browser.close()
        out["rss_idle_mib"] = process_rss_mib(server.pid)
        if sessions:
            out["class"] = loadtest.run_sessions(url, sessions)
            out["rss_after_class_mib"] = process_rss_mib(server.pid)
    return out


def class_simulation(students: int, duration_s: float) -> dict:
    """bench.classsim through HAProxy: 1 replica, 2 replicas, then 2 with r1 killed halfway."""
    from bench import classsim
    from deploy.serve import INSTALL_HINT, haproxy_path

    if haproxy_path() is None:
        return {"skipped": f"HAProxy is not installed ({INSTALL_HINT})"}
    out: dict = {
        "students": students,
        "duration_s": duration_s,
        "runs": [],
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "cores": os.cpu_count(),
    }
    for replicas in (1, 2):
        out["runs"].append(classsim.simulate(replicas, students, duration_s))
    out["failover"] = classsim.simulate(2, students, duration_s, kill_after_s=duration_s / 2)
    return out


def process_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def run(args) -> dict:
    started = datetime.now(UTC).isoformat(timespec="seconds")
    load_before = load_average()
    threads = configure_threads()
    result: dict = {
        "started": started,
        "load_average_before": load_before,
        "machine": machine(),
        "app_threads": threads,
    }
    repeats = 1 if args.quick else args.repeats
    lengths = "20" if args.quick else "20,256"
    with contextlib.redirect_stdout(io.StringIO()):
        result["model"] = model_bench.main(
            ["--repeats", str(max(3, repeats * 2)), "--minilm-lengths", lengths]
            + ["--long-length", "1024" if args.quick else "4096"]
        )
    configure_threads()  # bench.model_speed sets all cores; the pages run as the app would
    result["head_scan"] = head_scan.bench_head_scan(
        resolve_device("auto"), length=64, repeats=1 if args.quick else 3
    )
    result["explorer"] = explorer(repeats, args.quick)
    result["decoding_step"] = ui_bench.bench_decoding_step(
        "en2ko", "I study math at school", 3 if args.quick else 9
    )
    result["decoding_step_served"] = (
        ui_bench.bench_decoding_step_served(
            "en2ko", "I study math at school", 1 if args.quick else 3
        )
        if classcore.CHROMIUM.exists()
        else f"no Chromium at {classcore.CHROMIUM}"
    )
    result["head_view"] = head_views(args.quick)
    result["training"] = training()
    result["memory"] = memory()
    result["served"] = served(args.sessions)
    result["browser"] = (
        browser_bench.run(args.quick)
        if classcore.CHROMIUM.exists()
        else f"no Chromium at {classcore.CHROMIUM}"
    )
    result["long_input"] = long_input(args)
    result["gguf"] = gguf_bench.run()
    configure_threads()
    result["real_models"] = real_bench.run(repeats=max(3, repeats))
    configure_threads()
    if args.class_students:
        result["class"] = class_simulation(args.class_students, args.class_duration)
    if args.store_students:
        result["class_store"] = class_store_simulation(args.store_students, args.quick)
    if args.chaos_students:
        result["class_chaos"] = class_chaos(args.chaos_students)
    result["load_average_after"] = load_average()
    return result


def class_chaos(students: int) -> dict | str:
    """bench.classchaos: students in Chromium pressing Check through faults (needs Chromium,
    HAProxy and PostgreSQL's binaries; what is missing is said instead)."""
    from bench import classchaos
    from deploy import postgres
    from deploy.serve import haproxy_path

    missing = [
        why
        for why in (
            None if classcore.CHROMIUM.exists() else f"no Chromium at {classcore.CHROMIUM}",
            None if haproxy_path() else "no HAProxy",
            postgres.missing_reason(),
        )
        if why
    ]
    return "; ".join(missing) if missing else classchaos.simulate(students)


def class_store_simulation(students: int, quick: bool) -> dict:
    """bench.classroomsim: a class answering on 2 replicas over PostgreSQL, r1 killed and
    PostgreSQL restarted mid-class (on SQLite when no PostgreSQL server can start here); and
    the same class on SQLite, the default store, beside it (issue 46: p95 <= 500 ms on both)."""
    from bench import classroomsim
    from deploy import postgres

    reason = postgres.missing_reason()
    items = 4 if quick else 10
    result = classroomsim.simulate(
        students,
        2,
        items,
        "sqlite" if reason else "postgres",
        kill_after_s=3.0,
        restart_db_after_s=None if reason else 6.0,
    )
    if reason:
        result["note"] = f"on SQLite: {reason}"
    else:
        result["sqlite"] = classroomsim.simulate(students, 2, items, "sqlite", kill_after_s=3.0)
    return result


def long_input(args):
    """A long document in the explorer (bench.longinput); --quick: the tiny folder."""
    if not classcore.CHROMIUM.exists():
        return f"no Chromium at {classcore.CHROMIUM}"
    if args.quick:
        return long_bench.run("small", 2048, 1024, ROOT / "tests" / "artifacts")
    return long_bench.run(
        args.long_size, args.long_tokens, args.long_stages_tokens, ROOT / "tests" / "artifacts"
    )


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--report", default=str(ROOT / "docs" / "benchmarks.md"))
    parser.add_argument("--json", default=str(ROOT / "docs" / "benchmarks.json"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=16, help="0 skips the class run")
    parser.add_argument("--quick", action="store_true", help="fewer views and repeats (a check)")
    parser.add_argument(
        "--class-students",
        type=int,
        default=30,
        help="simulated students through HAProxy (bench.classsim); 0 skips",
    )
    parser.add_argument("--class-duration", type=float, default=60.0, help="seconds per class run")
    parser.add_argument(
        "--store-students",
        type=int,
        default=60,
        help="students answering a class through the class store (bench.classroomsim); 0 skips",
    )
    parser.add_argument("--long-size", choices=long_bench.SIZES, default="qwen0.5b")
    parser.add_argument("--long-tokens", type=int, default=4096)
    parser.add_argument("--long-stages-tokens", type=int, default=2048)
    parser.add_argument(
        "--long-only",
        action="store_true",
        help="run only the long document in the explorer; replace its section of the report",
    )
    parser.add_argument(
        "--chaos-students",
        type=int,
        default=10,
        help="students in Chromium through faults (bench.classchaos); 0 skips",
    )
    parser.add_argument(
        "--chaos-only",
        action="store_true",
        help="run only the students in Chromium through faults; replace its section of the report",
    )
    parser.add_argument(
        "--gguf-only",
        action="store_true",
        help="run only the GGUF models' conversion, cached load and memory (bench.gguf_load)",
    )
    parser.add_argument(
        "--real-only",
        action="store_true",
        help="run only the real models beside transformers (bench.real_models); replace its "
        "section of the report",
    )
    parser.add_argument(
        "--browser-only",
        action="store_true",
        help="run only what a person waits for in Chromium (bench.browser: first pages after "
        "a start, visits, moves, Enter → drawn); replace its section of the report",
    )
    parser.add_argument(
        "--class-only",
        action="store_true",
        help="run only the class simulation; replace its section of the report",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.class_students = min(args.class_students, 8)
        args.class_duration = min(args.class_duration, 20.0)
        args.store_students = min(args.store_students, 10)
        args.chaos_students = min(args.chaos_students, 2)
    import logging

    logging.getLogger("streamlit").setLevel(logging.ERROR)
    if args.class_only:
        return class_only(args)
    if args.long_only:
        return long_only(args)
    if args.chaos_only:
        return chaos_only(args)
    if args.gguf_only:
        return gguf_only(args)
    if args.real_only:
        return real_only(args)
    if args.browser_only:
        return browser_only(args)
    result = run(args)
    report = Path(args.report)
    report.parent.mkdir(parents=True, exist_ok=True)
    old = report.read_text(encoding="utf-8") if report.exists() else ""
    report.write_text(keep_recorded_sections(old, markdown(result)), encoding="utf-8")
    Path(args.json).write_text(json.dumps(result, indent=2, default=str), encoding="utf-8")
    print(markdown(result))
    return result


def one_section(args, key: str, data, section: str, title: str) -> dict:
    """``data`` under ``key`` and ``section`` under ``title`` of the existing report and json,
    every other section kept as it was recorded."""
    report, stored = Path(args.report), Path(args.json)
    old = (
        report.read_text(encoding="utf-8") if report.exists() else "# Attention Lab — benchmarks\n"
    )
    report.write_text(replace_class_section(old, section, title), encoding="utf-8")
    result = json.loads(stored.read_text(encoding="utf-8")) if stored.exists() else {}
    result[key] = data
    stored.write_text(json.dumps(result, indent=2, default=str), encoding="utf-8")
    print(section)
    return result


def long_only(args) -> dict:
    """Only the long document in the explorer, into the existing report and json."""
    data = long_input(args)
    section = "\n".join(long_bench.markdown(data)).lstrip("\n") + "\n"
    return one_section(args, "long_input", data, section, long_bench.TITLE)


def gguf_only(args) -> dict:
    """Only the GGUF models (bench.gguf_load), into the existing report and json."""
    data = gguf_bench.run()
    data["machine"] = machine()
    data["load_average"] = load_average()
    section = "\n".join(gguf_bench.markdown(data)).lstrip("\n") + "\n"
    return one_section(args, "gguf", data, section, gguf_bench.TITLE)


def real_only(args) -> dict:
    """Only the real models beside transformers (bench.real_models), into the existing
    report and json."""
    data = real_bench.run(repeats=max(3, args.repeats))
    data["machine"] = machine()
    section = "\n".join(real_bench.markdown(data)).lstrip("\n") + "\n"
    return one_section(args, "real_models", data, section, real_bench.TITLE)


def browser_only(args) -> dict:
    """Only the browser measures (bench.browser), into the existing report and json, with the
    machine and its load before and after."""
    load_before = load_average()
    data = browser_bench.run(args.quick)
    data["machine"] = machine()
    data["load_average"] = [load_before, load_average()]
    data["measured"] = datetime.now(UTC).isoformat(timespec="seconds")
    section = "\n".join(browser_markdown(data)).lstrip("\n") + "\n"
    return one_section(args, "browser", data, section, BROWSER_TITLE)


def class_only(args) -> dict:
    """Only the class simulation, into the existing report and json (other sections kept)."""
    data = class_simulation(args.class_students or 30, args.class_duration)
    data["machine"] = machine()
    data["class_only"] = True
    return one_section(args, "class", data, class_markdown(data), CLASS_TITLE)


def chaos_only(args) -> dict:
    """Only the students in Chromium through faults (bench.classchaos), into the existing
    report and json, with the machine and its load, as the run was measured."""
    load_before = load_average()
    data = class_chaos(args.chaos_students or 10)
    if isinstance(data, dict):
        data["machine"] = machine()
        data["load_average"] = [load_before, load_average()]
    return one_section(args, "class_chaos", data, class_chaos_markdown(data), CHAOS_TITLE)


if __name__ == "__main__":
    main()
