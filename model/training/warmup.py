"""The warm-up experiment: post-LN and pre-LN, each with and without warm-up, on one task.

Re-run the shipped result (four short trainings of the reverse task)::

    python -m model.training.warmup --out assets/experiments/warmup
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WARMUP_DIR = ROOT / "assets" / "experiments" / "warmup"

# --- warm-up: post-LN / pre-LN, with and without -----------------------------------------------

# Without warm-up is the same Noam schedule with warmup=1: from step W on the two schedules are
# identical (both d_model^-0.5 · step^-0.5); only the first W steps differ.
WARMUP_STEPS = 600
WARMUP_W = 150
WARMUP_VARIANTS = {
    "post_warmup": ("post", WARMUP_W),
    "post_no_warmup": ("post", 1),
    "pre_warmup": ("pre", WARMUP_W),
    "pre_no_warmup": ("pre", 1),
}


def warmup_argv(norm: str, warmup: int, out: Path, steps: int, seed: int) -> list[str]:
    return [
        "--task", "reverse", "--out", str(out), "--norm", norm, "--warmup", str(warmup),
        "--steps", str(steps), "--layers", "4", "--dropout", "0.0", "--log-every", "10",
        "--eval-n", "200", "--seed", str(seed), "--device", "cpu", "--threads", "1",
        "--no-progress",
    ]  # fmt: skip


def run_warmup(out: Path, steps: int = WARMUP_STEPS, seed: int = 0) -> dict:
    """Train the four variants with ``python -m model.train``; write <variant>.csv and
    metadata.json into ``out``. Returns the metadata."""
    from model.training.trainer import main as train_main

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    meta: dict = {"steps": steps, "seed": seed, "variants": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (norm, warmup) in WARMUP_VARIANTS.items():
            folder = Path(tmp) / name
            argv = warmup_argv(norm, warmup, folder, steps, seed)
            print(f"{name}: python -m model.train {' '.join(argv)}", file=sys.stderr)
            metrics = train_main(argv) or {}
            shutil.copyfile(folder / "curve.csv", out / f"{name}.csv")
            meta["variants"][name] = {
                "norm": norm,
                "warmup": warmup,
                "command": "python -m model.train " + " ".join(argv),
                "final_loss": metrics.get("final_loss"),
                "exact_match": metrics.get("exact_match"),
                "token_accuracy": metrics.get("token_accuracy"),
                "wall_time_s": metrics.get("wall_time_s"),
                "torch_version": metrics.get("torch_version"),
            }
    meta["rerun"] = f"python -m model.training.warmup --out {out} --steps {steps}"
    (out / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return meta


def load_curve(path: Path) -> dict[str, list[float]]:
    """A training curve.csv (step, loss, lr) as columns."""
    cols: dict[str, list[float]] = {"step": [], "loss": [], "lr": []}
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            for key in cols:
                cols[key].append(float(row[key]))
    return cols


def load_warmup(folder: Path = WARMUP_DIR) -> tuple[dict, dict[str, dict[str, list[float]]]]:
    """(metadata, variant -> curve) of a finished warm-up experiment; ({}, {}) if none."""
    folder = Path(folder)
    meta_path = folder / "metadata.json"
    if not meta_path.is_file():
        return {}, {}
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    curves = {
        name: load_curve(folder / f"{name}.csv")
        for name in WARMUP_VARIANTS
        if (folder / f"{name}.csv").is_file()
    }
    return meta, curves


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m model.training.warmup", description=__doc__)
    parser.add_argument("--out", type=Path, default=WARMUP_DIR)
    parser.add_argument("--steps", type=int, default=WARMUP_STEPS)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    meta = run_warmup(args.out, args.steps, args.seed)
    for name, info in meta["variants"].items():
        print(f"{name}: final loss {info['final_loss']}, exact match {info['exact_match']}")


if __name__ == "__main__":
    main()
