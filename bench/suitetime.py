"""How long the test suite takes: one timed run of `make test`'s pytest, kept in docs/suite.json.

    python -m bench.suitetime --label after [--record docs/suite.json] [-- PYTEST ARGS]

Runs pytest as `make test` does (``-n 2 --dist loadgroup``, every test) with
``--durations=10``, and records the wall time, the machine's load average before and after
(a busy machine stretches every figure: compare runs with their load), the machine's speed
before and after (``machine_speed``), pytest's own summary line and its ten slowest test
phases. Each label keeps its newest run, so the file holds the
suite before and after a change side by side; docs/benchmarks.md shows it (bench.reportmd).
The run is the measurement: it is never part of `make bench`, which would double its time.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "docs" / "suite.json"
TITLE = "## The test suite (bench.suitetime)"
BUDGET_S = {"make test": 8 * 60, "make test-fast": 3 * 60}  # issue 45's targets, pytest alone

# "12.34s call     tests/e2e/test_x.py::test_y[en]" under pytest's "slowest N durations"
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)s (setup|call|teardown)\s+(\S.*)$")
# "1702 passed, 40 skipped in 431.50s (0:07:11)", between "=" rules unless -q
_SUMMARY = re.compile(r"^=* ?(\d+ (?:passed|failed|error).*?) in ([\d.]+)s\b")


def slowest(output: str, n: int = 10) -> list[dict]:
    """The ``n`` slowest phases pytest listed (``--durations``), slowest first."""
    rows = []
    for line in output.splitlines():
        if m := _DURATION.match(line.strip()):
            rows.append({"seconds": float(m[1]), "phase": m[2], "test": m[3]})
    return sorted(rows, key=lambda r: -r["seconds"])[:n]


def summary_line(output: str) -> tuple[str, float | None]:
    """pytest's closing line ("1,702 passed, 40 skipped") and its own seconds."""
    for line in reversed(output.splitlines()):
        if m := _SUMMARY.match(line.strip()):
            return m[1], float(m[2])
    return "", None


# A fixed piece of the suite's kind of work on one core: Python bytecode (the tests, Streamlit's
# script runs) and a single-threaded float32 matmul (the models). 0.7-0.8 s on this project's
# 2-core machines; printed in seconds, the best of three.
_SPEED_PROBE = """
import time, torch
torch.set_num_threads(1)
a = torch.randn(384, 384)
best = float("inf")
for _ in range(3):
    start = time.perf_counter()
    total = 0
    for i in range(1_500_000):
        total += i * i % 7
    for _ in range(150):
        a = torch.tanh(a @ a)
    best = min(best, time.perf_counter() - start)
print(round(best, 3))
"""


def machine_speed() -> float:
    """Wall seconds of a fixed one-core workload (``_SPEED_PROBE``) in a fresh interpreter:
    more on a slower or busier machine. Nearly the same code's suite took 10 min 34 s and
    14 min 51 s on this host on different days: a run's time means something only beside
    its speed."""
    done = subprocess.run(
        [sys.executable, "-c", _SPEED_PROBE], capture_output=True, text=True, check=True
    )
    return float(done.stdout.strip())


def measure(label: str, target: str, pytest_args: list[str]) -> dict:
    """One run of pytest with ``pytest_args``, timed from outside, with the machine's load."""
    command = [sys.executable, "-m", "pytest", "--durations=10", "-q", *pytest_args]
    speed_before = machine_speed()
    load_before = list(os.getloadavg())
    start = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.monotonic() - start
    output = done.stdout + done.stderr
    said, pytest_s = summary_line(output)
    return {
        "label": label,
        "target": target,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": "python -m pytest " + " ".join(pytest_args),
        "exit_code": done.returncode,
        "wall_s": round(wall, 1),
        "pytest_s": pytest_s,
        "summary": said,
        "cores": os.cpu_count(),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "speed_s": [speed_before, machine_speed()],
        "slowest": slowest(output),
    }


def recorded(path: Path = RECORD) -> list[dict]:
    """Every run kept in ``path`` (none: an empty list)."""
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else []


def record(run: dict, path: Path = RECORD) -> list[dict]:
    """``run`` kept in ``path``, replacing an older run of the same label and target."""
    runs = [r for r in recorded(path) if (r["label"], r["target"]) != (run["label"], run["target"])]
    runs.append(run)
    path.write_text(json.dumps(runs, indent=2) + "\n", encoding="utf-8")
    return runs


def _minutes(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    return f"{int(seconds // 60)} min {seconds % 60:02.0f} s"


def markdown(runs: list[dict]) -> list[str]:
    """The report's section: every recorded run with its load, then each run's ten slowest
    test phases. No runs: no section."""
    if not runs:
        return []
    out = [
        "",
        TITLE,
        "",
        "Each run timed once by `python -m bench.suitetime` on the machine named, with its load "
        "average (1, 5, 15 min) before and after: on a shared machine the load, not the code, "
        "can double a figure. *pytest*: pytest's own time (the budget: "
        + ", ".join(f"`{k}` ≤ {_minutes(v)}" for k, v in BUDGET_S.items())
        + "); *wall*: with the interpreter's start and collection; *speed*: seconds of a fixed "
        "one-core workload before and after the run (`bench.suitetime.machine_speed`: more is "
        "a slower machine; runs compare fairly at the same speed, and runs recorded before "
        "2026-12-02 have none).",
        "",
        "| run | target | date | pytest | wall | result | cores | load before → after "
        "| speed before → after |",
        "|---|---|---|---:|---:|---|---:|---|---|",
    ]
    for r in runs:
        speed = " → ".join(f"{s:.2f} s" for s in r["speed_s"]) if r.get("speed_s") else "—"
        out.append(
            f"| {r['label']} | `{r['target']}` | {r['date'][:16].replace('T', ' ')} "
            f"| {_minutes(r['pytest_s'])} | {_minutes(r['wall_s'])} | {r['summary'] or 'failed'} "
            f"| {r['cores']} | {r['load_average_before']} → {r['load_average_after']} | {speed} |"
        )
    for r in runs:
        if r.get("note"):
            out += ["", f"{r['label']}, `{r['target']}`: {r['note']}"]
    for r in runs:
        if not r["slowest"]:
            continue
        out += [
            "",
            f"The ten slowest test phases of {r['label']}, `{r['target']}`:",
            "",
            "| seconds | phase | test |",
            "|---:|---|---|",
        ]
        out += [f"| {x['seconds']:.1f} | {x['phase']} | `{x['test']}` |" for x in r["slowest"]]
    return out


def write_section(report: Path, runs: list[dict]) -> None:
    """docs/benchmarks.md with its suite section replaced by ``runs`` (the rest as `make
    bench` last wrote it; the section is added at the end when it is not there yet). Done
    here, not with bench.reportmd's helper: reportmd shows this section, so it imports us."""
    section = "\n".join(markdown(runs)).lstrip("\n") + "\n"
    old = (
        report.read_text(encoding="utf-8") if report.exists() else "# Attention Lab — benchmarks\n"
    )
    start = old.find(TITLE)
    if start < 0:
        new = old.rstrip("\n") + "\n\n" + section
    else:
        end = old.find("\n## ", start + len(TITLE))
        rest = old[end + 1 :] if end >= 0 else ""
        new = old[:start] + section + ("\n" + rest if rest else "")
    report.write_text(new, encoding="utf-8")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--label", required=True, help="before / after / a date: what this run is")
    parser.add_argument("--target", default="make test", choices=sorted(BUDGET_S))
    parser.add_argument("--record", default=str(RECORD))
    parser.add_argument("--note", default="", help="a sentence kept beside the run")
    parser.add_argument("--report", default=str(ROOT / "docs" / "benchmarks.md"))
    parser.add_argument("pytest_args", nargs="*", help="after --: pytest's arguments")
    args = parser.parse_args(argv)
    default = ["-n", "2", "--dist", "loadgroup"]
    if args.target == "make test-fast":
        default += ["-m", "not slow", "tests/unit", "tests/app"]
    run = measure(args.label, args.target, args.pytest_args or default)
    if args.note:
        run["note"] = args.note
    runs = record(run, Path(args.record))
    write_section(Path(args.report), runs)
    print("\n".join(markdown([run])))
    return run


if __name__ == "__main__":
    main()
