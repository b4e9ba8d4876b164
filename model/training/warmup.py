"""The warm-up experiment: post-LN and pre-LN, each with and without warm-up, on one task.

Re-run the shipped result (four variants × three seeds of the reverse task)::

    python -m model.training.warmup --out assets/experiments/warmup --steps 600 --d-model 64 \
        --layers 4 --lr-factor 0.125 --seeds 0,1,2

and the shipped factor-0.5 runs of pre-LN without warm-up (its first 150 steps: the Noam rate
depends on the step alone, so they are the first steps of a full run), which show that pre-LN
fails without warm-up too at a larger rate::

    python -m model.training.warmup --out assets/experiments/warmup/factor_half --steps 150 \
        --d-model 64 --layers 4 --lr-factor 0.5 --seeds 0,1,2 --variants pre_no_warmup

Every setting that shapes the result is passed to ``python -m model.train`` explicitly, so a
change of the trainer's per-task defaults cannot change what this command re-creates.
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
import shutil
import statistics
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WARMUP_DIR = ROOT / "assets" / "experiments" / "warmup"

# --- warm-up: post-LN / pre-LN, with and without -----------------------------------------------

# Without warm-up is the same Noam schedule with warmup=1: from step W on the two schedules are
# identical (both factor · d_model^-0.5 · step^-0.5); only the first W steps differ.
# Factor 0.125 at d_model 64: without warm-up the rate starts at 0.0156 and is 0.00128 at step
# 150, the warmed-up peak. Explored on this task (4 and 6 layers, factors 0.0625 to 1, 2 seeds):
# at factor 0.5 and above pre-LN fails without warm-up too (at 0.25 it lags); at 0.125 only
# post-LN does, in every seed tried. Factor 0.5's first 150 steps ship in warmup/factor_half/.
WARMUP_STEPS = 600
WARMUP_W = 150
WARMUP_D_MODEL = 64
WARMUP_LAYERS = 4
WARMUP_HEADS = 4
WARMUP_D_FF = 256
WARMUP_BATCH = 64
WARMUP_FACTOR = 0.125
WARMUP_SEEDS = (0, 1, 2)
WARMUP_VARIANTS = {
    "post_warmup": ("post", WARMUP_W),
    "post_no_warmup": ("post", 1),
    "pre_warmup": ("pre", WARMUP_W),
    "pre_no_warmup": ("pre", 1),
}
SUMMARY = ("final_loss", "exact_match", "token_accuracy")


def warmup_argv(
    norm: str,
    warmup: int,
    out: Path,
    steps: int,
    seed: int,
    d_model: int = WARMUP_D_MODEL,
    layers: int = WARMUP_LAYERS,
    factor: float = WARMUP_FACTOR,
) -> list[str]:
    return [
        "--task",
        "reverse",
        "--out",
        str(out),
        "--norm",
        norm,
        "--warmup",
        str(warmup),
        "--steps",
        str(steps),
        "--d-model",
        str(d_model),
        "--heads",
        str(WARMUP_HEADS),
        "--layers",
        str(layers),
        "--d-ff",
        str(WARMUP_D_FF),
        "--batch",
        str(WARMUP_BATCH),
        "--lr-factor",
        f"{factor:g}",
        "--dropout",
        "0.0",
        "--log-every",
        "10",
        "--eval-n",
        "200",
        "--seed",
        str(seed),
        "--device",
        "cpu",
        "--threads",
        "1",
        "--no-progress",
    ]


def curve_file(name: str, seed: int) -> str:
    return f"{name}_seed{seed}.csv"


def rerun_command(
    out: Path,
    steps: int,
    d_model: int,
    layers: int,
    factor: float,
    seeds: tuple[int, ...],
    variants: tuple[str, ...] = tuple(WARMUP_VARIANTS),
) -> str:
    """The one command that re-creates ``out`` (relative to the repository when inside it)."""
    out = Path(out).resolve()
    shown = out.relative_to(ROOT) if out.is_relative_to(ROOT) else out
    command = (
        f"python -m model.training.warmup --out {shown.as_posix()} --steps {steps} "
        f"--d-model {d_model} --layers {layers} --lr-factor {factor:g} "
        f"--seeds {','.join(str(s) for s in seeds)}"
    )
    if set(variants) != set(WARMUP_VARIANTS):
        command += f" --variants {','.join(variants)}"
    return command


def run_warmup(
    out: Path,
    steps: int = WARMUP_STEPS,
    seeds: tuple[int, ...] = WARMUP_SEEDS,
    d_model: int = WARMUP_D_MODEL,
    layers: int = WARMUP_LAYERS,
    factor: float = WARMUP_FACTOR,
    jobs: int = 1,
    variants: tuple[str, ...] = tuple(WARMUP_VARIANTS),
) -> dict:
    """Train each of ``variants`` (every one by default) once per seed with
    ``python -m model.train``; write <variant>_seed<k>.csv and metadata.json into ``out``.
    Returns the metadata."""
    chosen = {name: WARMUP_VARIANTS[name] for name in variants}
    from model.training.trainer import main as train_main

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.csv"):
        old.unlink()
    meta: dict = {
        "task": "reverse",
        "steps": steps,
        "seeds": list(seeds),
        "d_model": d_model,
        "layers": layers,
        "heads": WARMUP_HEADS,
        "d_ff": WARMUP_D_FF,
        "batch": WARMUP_BATCH,
        "lr_factor": factor,
        "warmup_steps": WARMUP_W,
        "platform": platform.platform(),
        "variants": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        jobs_argv = {
            (name, seed): warmup_argv(
                norm, warmup, Path(tmp) / f"{name}_{seed}", steps, seed, d_model, layers, factor
            )
            for name, (norm, warmup) in chosen.items()
            for seed in seeds
        }
        for (name, seed), argv in jobs_argv.items():
            print(f"{name}, seed {seed}: python -m model.train {' '.join(argv)}", file=sys.stderr)
        # Each run uses one thread and its own seed, so running them side by side (--jobs)
        # gives the same numbers as one after another.
        if jobs > 1:
            with ProcessPoolExecutor(jobs) as pool:
                done = dict(zip(jobs_argv, pool.map(train_main, jobs_argv.values())))
        else:
            done = {job: train_main(argv) for job, argv in jobs_argv.items()}
        for name, (norm, warmup) in chosen.items():
            runs = []
            for seed in seeds:
                metrics = done[(name, seed)] or {}
                folder = Path(tmp) / f"{name}_{seed}"
                shutil.copyfile(folder / "curve.csv", out / curve_file(name, seed))
                shown = warmup_argv(norm, warmup, Path("OUT"), steps, seed, d_model, layers, factor)
                runs.append(
                    {
                        "seed": seed,
                        "command": "python -m model.train " + " ".join(shown),
                        **{key: metrics.get(key) for key in SUMMARY},
                        "wall_time_s": metrics.get("wall_time_s"),
                        "torch_version": metrics.get("torch_version"),
                    }
                )
            meta["variants"][name] = {
                "norm": norm,
                "warmup": warmup,
                "runs": runs,
                # mean, min and max over the seeds: what the page's table shows
                **{key: statistics.fmean(r[key] for r in runs) for key in SUMMARY},
                **{f"{key}_min": min(r[key] for r in runs) for key in SUMMARY},
                **{f"{key}_max": max(r[key] for r in runs) for key in SUMMARY},
            }
    meta["rerun"] = rerun_command(out, steps, d_model, layers, factor, tuple(seeds), tuple(chosen))
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


def load_warmup(
    folder: Path = WARMUP_DIR,
) -> tuple[dict, dict[str, dict[int, dict[str, list[float]]]]]:
    """(metadata, variant -> seed -> curve) of a finished warm-up experiment; ({}, {}) if none."""
    folder = Path(folder)
    meta_path = folder / "metadata.json"
    if not meta_path.is_file():
        return {}, {}
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    curves: dict[str, dict[int, dict[str, list[float]]]] = {}
    for name in WARMUP_VARIANTS:
        for seed in meta.get("seeds", []):
            path = folder / curve_file(name, int(seed))
            if path.is_file():
                curves.setdefault(name, {})[int(seed)] = load_curve(path)
    return meta, curves


def seed_band(runs: dict[int, dict[str, list[float]]]) -> dict[str, list[float]]:
    """Per logged step: the mean, min and max loss over the seeds (steps every run logged)."""
    steps = sorted(set.intersection(*(set(c["step"]) for c in runs.values())))
    by_step = [{s: loss for s, loss in zip(c["step"], c["loss"])} for c in runs.values()]
    losses = [[run[s] for run in by_step] for s in steps]
    return {
        "step": steps,
        "mean": [statistics.fmean(v) for v in losses],
        "min": [min(v) for v in losses],
        "max": [max(v) for v in losses],
    }


def parse_seeds(text: str) -> tuple[int, ...]:
    try:
        seeds = tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError as err:
        raise argparse.ArgumentTypeError(
            f"seeds must be integers separated by commas: {text}"
        ) from err
    if not seeds:
        raise argparse.ArgumentTypeError("give at least one seed")
    return seeds


def parse_variants(text: str) -> tuple[str, ...]:
    variants = tuple(v.strip() for v in text.split(",") if v.strip())
    unknown = [v for v in variants if v not in WARMUP_VARIANTS]
    if unknown or not variants:
        raise argparse.ArgumentTypeError(
            f"variants must be some of {','.join(WARMUP_VARIANTS)}, separated by commas: {text}"
        )
    return variants


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m model.training.warmup", description=__doc__)
    parser.add_argument("--out", type=Path, default=WARMUP_DIR)
    parser.add_argument("--steps", type=int, default=WARMUP_STEPS)
    parser.add_argument("--d-model", type=int, default=WARMUP_D_MODEL)
    parser.add_argument("--layers", type=int, default=WARMUP_LAYERS)
    parser.add_argument("--lr-factor", type=float, default=WARMUP_FACTOR)
    parser.add_argument(
        "--seeds", type=parse_seeds, default=WARMUP_SEEDS, help="comma-separated, e.g. 0,1,2"
    )
    parser.add_argument(
        "--variants",
        type=parse_variants,
        default=tuple(WARMUP_VARIANTS),
        help=f"comma-separated, some of {','.join(WARMUP_VARIANTS)} (default: all four)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="runs side by side (one thread each); the numbers do not change",
    )
    args = parser.parse_args(argv)
    meta = run_warmup(
        args.out,
        args.steps,
        args.seeds,
        args.d_model,
        args.layers,
        args.lr_factor,
        max(1, args.jobs),
        args.variants,
    )
    for name, info in meta["variants"].items():
        print(
            f"{name}: mean final loss {info['final_loss']:.3f}, "
            f"mean exact match {info['exact_match']:.3f}"
        )


if __name__ == "__main__":
    main()
