"""Length generalisation: the same small decoder trained on sequences of at most 16 symbols
with each position scheme, then asked to copy or reverse sequences of 8 .. 64.

    python -m model.training.lengths --task reverse --seeds 0 1 2 --out assets/experiments/positions

Every scheme gets the same model size, data and seeds; only ``TransformerConfig.positions``
differs. Each (scheme, seed) trains until it fits its training lengths (teacher-forced token
accuracy at least ``fit_accuracy`` at the longest trained length, checked every
``check_every`` steps) or ``max_steps`` run out; how many steps it took and whether it fitted
are recorded. One seed is an anecdote: the page draws the mean and the range over seeds.
Writes results.csv (scheme, seed, length, token accuracy, exact match) and metadata.json (the
command, seeds, settings, steps and fit per run, timings) into ``--out``.
Token accuracy is teacher-forced (each answer position given the right prefix); exact match
decodes greedily with the key/value cache and needs every answer token and the <eos> right.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import platform
import shlex
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import torch
import torch.nn.functional as F

from model.config import TransformerConfig
from model.positional import SCHEMES
from model.runtime.decoding import greedy_decode
from model.transformer import DecoderModel, build_model

ROOT = Path(__file__).resolve().parents[2]
OUT_DIR = ROOT / "assets" / "experiments" / "positions"
RESULTS, METADATA = "results.csv", "metadata.json"
TASKS = ("copy", "reverse")
PAD, BOS, SEP, EOS = 0, 1, 2, 3
FIRST_SYMBOL = 4
IGNORE = -100


@dataclass
class Settings:
    """Everything that decides the result, recorded next to it."""

    task: str = "reverse"
    schemes: list[str] = field(default_factory=lambda: list(SCHEMES))
    train_max_len: int = 16  # sequences of 1 .. train_max_len symbols in training
    eval_lengths: list[int] = field(default_factory=lambda: [8, 16, 24, 32, 40, 48, 56, 64])
    symbols: int = 10
    d_model: int = 64
    n_heads: int = 4
    layers: int = 2
    d_ff: int = 256
    max_steps: int = 3000  # the most steps a scheme gets to fit its training lengths
    check_every: int = 250  # steps between checks of the fit
    fit_accuracy: float = 0.98  # token accuracy at train_max_len that counts as fitted
    batch: int = 64
    lr: float = 1e-3
    warmup: int = 100
    eval_n: int = 100  # sequences per evaluated length
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])

    @property
    def max_len(self) -> int:
        """Longest sequence the model must read: <bos> x <sep> y <eos> at the longest length."""
        return 2 * max(*self.eval_lengths, self.train_max_len) + 3


def target(task: str, x: list[int]) -> list[int]:
    return list(x) if task == "copy" else list(reversed(x))


def make_sequences(task: str, n: int, lengths: list[int], symbols: int, gen: torch.Generator):
    """``n`` sequences <bos> x <sep> y <eos>, lengths drawn from ``lengths``; (ids, labels).

    Labels are -100 except on y and <eos>: the model is scored only on its answer.
    """
    rows, labels = [], []
    picks = torch.randint(len(lengths), (n,), generator=gen).tolist()
    for i in range(n):
        length = lengths[picks[i]]
        x = (torch.randint(symbols, (length,), generator=gen) + FIRST_SYMBOL).tolist()
        y = target(task, x)
        seq = [BOS, *x, SEP, *y, EOS]
        rows.append(seq[:-1])
        labels.append([IGNORE] * (length + 1) + y + [EOS])
    width = max(len(r) for r in rows)
    ids = torch.tensor([r + [PAD] * (width - len(r)) for r in rows])
    lab = torch.tensor([r + [IGNORE] * (width - len(r)) for r in labels])
    return ids, lab


def build(settings: Settings, positions: str, seed: int) -> DecoderModel:
    torch.manual_seed(seed)  # the same initial weights wherever shapes agree
    cfg = TransformerConfig(
        kind="decoder",
        src_vocab_size=FIRST_SYMBOL + settings.symbols,
        tgt_vocab_size=FIRST_SYMBOL + settings.symbols,
        d_model=settings.d_model,
        n_heads=settings.n_heads,
        n_encoder_layers=0,
        n_decoder_layers=settings.layers,
        d_ff=settings.d_ff,
        dropout=0.0,
        norm_placement="pre",  # trains reliably at this size without a long warm-up
        positions=positions,
        max_len=settings.max_len,
        pad_id=PAD,
    )
    return build_model(cfg)


@torch.no_grad()
def fit_accuracy(model: DecoderModel, settings: Settings, seed: int) -> float:
    """Teacher-forced token accuracy at the longest trained length (its own fixed sequences)."""
    gen = torch.Generator().manual_seed(seed + 500)
    ids, labels = make_sequences(
        settings.task, settings.eval_n, [settings.train_max_len], settings.symbols, gen
    )
    model.eval()
    pred = model(ids).logits.argmax(-1)
    model.train()
    scored = labels != IGNORE
    return float((pred[scored] == labels[scored]).float().mean())


def train(settings: Settings, positions: str, seed: int) -> tuple[DecoderModel, list[float], dict]:
    """Adam with a linear warm-up until the model fits its training lengths; the same batches,
    in the same order, for every scheme of one seed.

    Each batch holds one length (drawn uniformly from 1 .. train_max_len), so no step pays
    for padding. Returns (model, losses, {"steps", "fit", "train_accuracy"}).
    """
    model = build(settings, positions, seed).train()
    opt = torch.optim.Adam(model.parameters(), lr=settings.lr, betas=(0.9, 0.98), eps=1e-9)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: min(1.0, (i + 1) / settings.warmup))
    gen = torch.Generator().manual_seed(seed + 1)
    lengths = list(range(1, settings.train_max_len + 1))
    losses: list[float] = []
    accuracy = 0.0
    for step in range(1, settings.max_steps + 1):
        length = lengths[int(torch.randint(len(lengths), (1,), generator=gen))]
        ids, labels = make_sequences(settings.task, settings.batch, [length], settings.symbols, gen)
        logits = model(ids).logits
        loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % settings.check_every == 0 or step == settings.max_steps:
            accuracy = fit_accuracy(model, settings, seed)
            if accuracy >= settings.fit_accuracy:
                break
    fit = {
        "steps": len(losses),
        "fit": accuracy >= settings.fit_accuracy,
        "train_accuracy": round(accuracy, 4),
    }
    return model.eval(), losses, fit


@torch.no_grad()
def evaluate_length(
    model: DecoderModel, settings: Settings, length: int, seed: int
) -> dict[str, float]:
    """Teacher-forced token accuracy and greedy (cached) exact match at one length."""
    gen = torch.Generator().manual_seed(seed + 1000 + length)  # not the training stream
    ids, labels = make_sequences(settings.task, settings.eval_n, [length], settings.symbols, gen)
    pred = model(ids).logits.argmax(-1)
    scored = labels != IGNORE
    token_acc = float((pred[scored] == labels[scored]).float().mean())
    prompts = ids[:, : length + 2]  # <bos> x <sep>
    out, _ = greedy_decode(model, prompts, BOS, EOS, length + 1, use_cache=True)
    answers = labels[:, length + 1 :]  # y <eos>
    if out.shape[1] < answers.shape[1]:  # every row stopped early (at <eos>): pad the rest
        out = F.pad(out, (0, answers.shape[1] - out.shape[1]), value=PAD)
    exact = float((out[:, : answers.shape[1]] == answers).all(dim=1).float().mean())
    return {"token_accuracy": token_acc, "exact_match": exact}


def run_scheme(settings: Settings, scheme: str, seed: int, threads: int = 1) -> dict:
    """Train one scheme with one seed and evaluate it at every length: rows, fit, timings."""
    torch.set_num_threads(threads)
    t0, cpu0 = time.perf_counter(), time.process_time()
    model, losses, fit = train(settings, scheme, seed)
    trained = time.perf_counter() - t0
    rows = [
        {"scheme": scheme, "seed": seed, "length": n, **evaluate_length(model, settings, n, seed)}
        for n in settings.eval_lengths
    ]
    return {
        "rows": rows,
        **fit,
        "final_loss": round(sum(losses[-50:]) / len(losses[-50:]), 4),
        # Wall time depends on who else uses the machine; CPU time (this process) does not.
        "timings": {
            "train_s": round(trained, 1),
            "total_s": round(time.perf_counter() - t0, 1),
            "cpu_s": round(time.process_time() - cpu0, 1),
        },
    }


def _run_scheme(job: tuple[Settings, str, int, int]) -> dict:
    return run_scheme(*job)


def run(
    settings: Settings,
    out: Path | None,
    command: str = "",
    log=print,
    jobs: int = 1,
    threads: int = 1,
) -> list[dict]:
    """Train and evaluate every scheme; write results.csv and metadata.json into ``out``.

    ``jobs`` > 1 trains schemes in parallel processes; each scheme seeds itself, so the
    numbers are the same either way.
    """
    started = time.perf_counter()
    load_before = [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else []
    work = [
        (settings, scheme, seed, threads) for seed in settings.seeds for scheme in settings.schemes
    ]
    if jobs > 1:
        import multiprocessing

        with multiprocessing.get_context("spawn").Pool(min(jobs, len(work))) as pool:
            results = pool.map(_run_scheme, work)
    else:
        results = [_run_scheme(job) for job in work]
    rows, runs = [], []
    for (_, scheme, seed, _), result in zip(work, results):
        rows += result["rows"]
        runs.append(
            {
                "scheme": scheme,
                "seed": seed,
                **{k: result[k] for k in ("steps", "fit", "train_accuracy", "final_loss")},
                **result["timings"],
            }
        )
        accs = " ".join(f"{r['token_accuracy']:.2f}" for r in result["rows"])
        log(
            f"{scheme:>10} seed {seed}: {result['steps']} steps, fit {result['fit']} "
            f"({result['train_accuracy']:.3f}), token accuracy by length {accs}  "
            f"({result['timings']['total_s']} s)"
        )
    if out is not None:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        with open(out / RESULTS, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(
                f, fieldnames=["scheme", "seed", "length", "token_accuracy", "exact_match"]
            )
            writer.writeheader()
            for r in rows:
                writer.writerow(
                    {
                        **r,
                        "token_accuracy": f"{r['token_accuracy']:.4f}",
                        "exact_match": f"{r['exact_match']:.4f}",
                    }
                )
        meta = {
            "settings": asdict(settings),
            "command": command,
            "seeds": settings.seeds,
            "runs": runs,
            "wall_time_s": round(time.perf_counter() - started, 1),
            "cpu_time_s": round(sum(r["cpu_s"] for r in runs), 1),
            "load_average_before": load_before,
            "jobs": jobs,
            "threads_per_job": threads,
            "torch_version": torch.__version__,
            "python_version": platform.python_version(),
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            # the numbers depend on the host (README.md beside them): record which it was
            "host": host_description(),
        }
        (out / METADATA).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return rows


def host_description() -> dict[str, object]:
    """The machine a run's numbers came from: its platform, CPU model and the instruction
    sets PyTorch's CPU kernels pick their code path by (AVX2, AVX-512, ...)."""
    cpu = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": cpu or platform.processor(),
        "cpu_count": os.cpu_count(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
    }


def load_results(folder: Path = OUT_DIR) -> tuple[dict, list[dict]]:
    """(metadata, rows) of a finished run; ({}, []) when the folder holds none."""
    folder = Path(folder)
    if not (folder / METADATA).is_file() or not (folder / RESULTS).is_file():
        return {}, []
    meta = json.loads((folder / METADATA).read_text(encoding="utf-8"))
    with open(folder / RESULTS, newline="", encoding="utf-8") as f:
        rows = [
            {
                "scheme": r["scheme"],
                "seed": int(r.get("seed") or 0),
                "length": int(r["length"]),
                "token_accuracy": float(r["token_accuracy"]),
                "exact_match": float(r["exact_match"]),
            }
            for r in csv.DictReader(f)
        ]
    return meta, rows


def parse_args(argv: list[str]) -> tuple[Settings, Path, int, int]:
    d = Settings()
    p = argparse.ArgumentParser(
        prog="python -m model.training.lengths", description=__doc__.split("\n")[0]
    )
    p.add_argument("--task", choices=TASKS, default=d.task)
    p.add_argument("--schemes", nargs="+", choices=SCHEMES, default=d.schemes)
    p.add_argument("--out", type=Path, default=OUT_DIR)
    p.add_argument("--max-steps", type=int, default=d.max_steps, help="cap per scheme and seed")
    p.add_argument("--check-every", type=int, default=d.check_every)
    p.add_argument("--fit-accuracy", type=float, default=d.fit_accuracy)
    p.add_argument("--train-max-len", type=int, default=d.train_max_len)
    p.add_argument("--eval-lengths", type=int, nargs="+", default=d.eval_lengths)
    p.add_argument("--eval-n", type=int, default=d.eval_n)
    p.add_argument("--d-model", type=int, default=d.d_model)
    p.add_argument("--heads", type=int, default=d.n_heads)
    p.add_argument("--layers", type=int, default=d.layers)
    p.add_argument("--symbols", type=int, default=d.symbols)
    p.add_argument("--batch", type=int, default=d.batch)
    p.add_argument("--warmup", type=int, default=d.warmup)
    p.add_argument("--lr", type=float, default=d.lr)
    p.add_argument("--seeds", type=int, nargs="+", default=d.seeds)
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads per job")
    p.add_argument("--jobs", type=int, default=1, help="schemes trained at once (2 on 2 cores)")
    a = p.parse_args(argv)
    if min(a.max_steps, a.check_every, a.train_max_len, a.eval_n, a.batch, a.warmup) < 1 or (
        min(a.eval_lengths) < 1
    ):
        p.error("steps, lengths and --eval-n must be positive")
    if not 0 < a.fit_accuracy <= 1:
        p.error("--fit-accuracy must be in (0, 1]")
    settings = Settings(
        task=a.task,
        schemes=list(a.schemes),
        train_max_len=a.train_max_len,
        eval_lengths=sorted(set(a.eval_lengths)),
        symbols=a.symbols,
        d_model=a.d_model,
        n_heads=a.heads,
        layers=a.layers,
        d_ff=4 * a.d_model,
        max_steps=a.max_steps,
        check_every=a.check_every,
        fit_accuracy=a.fit_accuracy,
        batch=a.batch,
        warmup=a.warmup,
        lr=a.lr,
        eval_n=a.eval_n,
        seeds=sorted(set(a.seeds)),
    )
    if a.jobs < 1 or a.threads < 1:
        p.error("--jobs and --threads must be at least 1")
    return settings, a.out, a.jobs, a.threads


def main(argv: list[str] | None = None) -> list[dict]:
    argv = sys.argv[1:] if argv is None else list(argv)
    settings, out, jobs, threads = parse_args(argv)
    command = f"python -m model.training.lengths {shlex.join(argv)}".strip()
    return run(settings, out, command, lambda s: print(s, file=sys.stderr), jobs, threads)


if __name__ == "__main__":
    main()


def fit_summary(meta: dict) -> dict[str, dict]:
    """Per scheme, over its seeds: how many fitted their training lengths, the fewest and
    most steps trained, and the lowest and highest training-length accuracy reached."""
    out: dict[str, dict] = {}
    for r in meta.get("runs", []):
        s = out.setdefault(
            r["scheme"],
            {"seeds": 0, "fit": 0, "steps": [], "train_accuracy": []},
        )
        s["seeds"] += 1
        s["fit"] += bool(r["fit"])
        s["steps"].append(r["steps"])
        s["train_accuracy"].append(r["train_accuracy"])
    return out


def training_seconds(meta: dict) -> tuple[float, float]:
    """The shortest and longest run, in seconds of wall time from start to scored
    (``total_s``), as recorded: what "trained for ..." on the page says, never a guess."""
    times = [r.get("total_s", r.get("train_s", 0.0)) for r in meta.get("runs", [])]
    return (min(times), max(times)) if times else (0.0, 0.0)


def seed_values(rows: list[dict], metric: str, scheme: str, length: int) -> dict[int, float]:
    """{seed: value} of one scheme at one length."""
    return {
        r.get("seed", 0): r[metric] for r in rows if r["scheme"] == scheme and r["length"] == length
    }


def above_in_every_seed(rows: list[dict], metric: str, length: int, a: str, b: str) -> bool:
    """True when scheme ``a`` scores higher than ``b`` at ``length`` in every seed."""
    va, vb = seed_values(rows, metric, a, length), seed_values(rows, metric, b, length)
    return bool(va) and va.keys() == vb.keys() and all(va[s] > vb[s] for s in va)


def robust_pairs(rows: list[dict], metric: str, length: int, schemes: list[str]) -> list:
    """(a, b) for every two schemes where a scores above b at ``length`` in every seed: the
    only orderings the page states."""
    return [
        (a, b)
        for a in schemes
        for b in schemes
        if a != b and above_in_every_seed(rows, metric, length, a, b)
    ]
