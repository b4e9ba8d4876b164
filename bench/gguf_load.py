"""The shipped GGUF models: first conversion, cached load and resident memory (make bench).

    python -m bench.gguf_load [--models smollm2,gemma3] [--json out.json]

Each number comes from a fresh Python process, as a server replica starts: the conversion
into an empty cache (a temporary ``ATTENTION_LAB_CACHE``), then a load from that cache, then
one replica holding MiniLM, SmolLM2 and Gemma 3 with its resident memory after each (each
model loaded and run once, so every weight it has was read). Wall
time and the process's CPU time are both kept: on a shared machine the wall time says how
busy it was, the CPU time what the work costs. Targets: cached load <= 3 s (SmolLM2) and
<= 5 s (Gemma 3), first conversion <= 30 s, the three-model replica <= 2.5 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TITLE = "## GGUF models: conversion, cached load, memory"
TARGETS = {"smollm2": 3.0, "gemma3": 5.0}
FIRST_CONVERSION_TARGET = 30.0
REPLICA_TARGET_GB = 2.5

LOAD_PROBE = """
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
import torch, transformers  # what a server has imported before any model
from model import load
t1, c1 = time.perf_counter(), time.process_time()
lm = load(sys.argv[1], "cpu")
t2, c2 = time.perf_counter(), time.process_time()
json.dump({"imports_s": t1 - t0, "load_s": t2 - t1, "load_cpu_s": c2 - c1,
           "engine": lm.info.get("engine"), "model_type": lm.info.get("model_type")},
          sys.stdout)
"""

MEMORY_PROBE = """
import json, sys
from pathlib import Path
def rss():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
out = {"python": rss()}
import torch, streamlit, plotly, transformers
out["imports"] = rss()
from model import load
keep = []
for name in sys.argv[1].split(","):
    lm = load(name, "cpu")
    lm.trace("The cat sat on the mat. 고양이가 매트 위에 앉았다.")  # every weight read once
    keep.append(lm)
    out["after_" + name] = rss()
json.dump(out, sys.stdout)
"""


def _probe(code: str, arg: str, cache: Path | None = None) -> dict:
    """``code`` in a fresh Python (this tree's model package; ``cache`` as its model cache,
    else the user's), its last line of output as json."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    if cache is not None:
        env["ATTENTION_LAB_CACHE"] = str(cache)
    done = subprocess.run(
        [sys.executable, "-c", code, arg],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=900,
    )
    if done.returncode:
        raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr else "failed")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(models: tuple[str, ...] = ("smollm2", "gemma3")) -> dict:
    """First conversion and cached load per model, then the replica's memory."""
    from model.runtime.gguf_cache import installed

    present = tuple(m for m in models if installed(m))
    out: dict = {"models": {}, "missing": [m for m in models if m not in present]}
    with tempfile.TemporaryDirectory(prefix="gguf-bench-") as tmp:
        cache = Path(tmp)
        for name in present:
            first = _probe(LOAD_PROBE, name, cache)
            cached = _probe(LOAD_PROBE, name, cache)
            size = sum(p.stat().st_size for p in (cache / "gguf" / name).iterdir())
            out["models"][name] = {"first": first, "cached": cached, "folder_bytes": size}
        out["memory"] = _probe(MEMORY_PROBE, ",".join(("minilm", *present)), cache)
    return out


def markdown(r: dict) -> list[str]:
    lines = [
        "",
        TITLE,
        "",
        "Fresh processes, an empty cache first. Wall time on this shared machine, and the "
        "process's CPU time; the load includes reading the cached folder, building our "
        "network and the tokenizer (imports of torch and transformers excluded).",
        "",
        "| model | first conversion + load | CPU | cached load | CPU | target | engine | folder |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, m in r.get("models", {}).items():
        first, cached = m["first"], m["cached"]
        lines.append(
            f"| {name} | {first['load_s']:.1f} s | {first['load_cpu_s']:.1f} s "
            f"| {cached['load_s']:.2f} s | {cached['load_cpu_s']:.2f} s "
            f"| ≤ {TARGETS.get(name, 5.0):.0f} s (first ≤ {FIRST_CONVERSION_TARGET:.0f} s) "
            f"| {cached['engine']} ({cached['model_type']}) | {m['folder_bytes'] / 2**20:.0f} MiB |"
        )
    mem = r.get("memory") or {}
    if mem:
        steps = ", ".join(
            f"{k.removeprefix('after_')} {v / 2**30:.2f} GB"
            for k, v in mem.items()
            if k != "python"
        )
        last = max(mem.values()) / 2**30
        lines += [
            "",
            f"Resident memory of one replica, step by step: {steps} "
            f"(target ≤ {REPLICA_TARGET_GB} GB with the three models: "
            f"{'met' if last <= REPLICA_TARGET_GB else 'missed'}). Weights are stored and run in "
            "float32 on the CPU: bfloat16 storage would halve the file but round the "
            "dequantised weights (parity with transformers is 1e-4).",
        ]
    if r.get("missing"):
        lines.append(f"\nNot installed, not measured: {', '.join(r['missing'])}.")
    return lines


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="smollm2,gemma3")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    result = run(tuple(args.models.split(",")))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2), encoding="utf-8")
    print("\n".join(markdown(result)))
    return result


if __name__ == "__main__":
    main()
