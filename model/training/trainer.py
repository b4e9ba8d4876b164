"""Train a toy Transformer on one task and write a checkpoint folder.

    python -m model.train --task en2ko --out assets/checkpoints/en2ko [--steps 3000 ...]
    torchrun --nproc_per_node=2 -m model.train --task sort --out /tmp/sort   # DDP

The paper's recipe: Adam(0.9, 0.98, 1e-9), the warm-up ("Noam") schedule, label smoothing
0.1, on the fast path (fused attention, no tracing). Writes model.safetensors, config.json,
vocab.json, metrics.json and curve.csv (step, loss, lr); under torchrun only rank 0 writes.
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import shlex
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from model.analysis.induction import (
    SnapshotLog,
    circuit,
    eos_by_head,
    free_running,
    measure,
)
from model.config import TransformerConfig
from model.positional import SCHEMES
from model.runtime.checkpoint import CURVE, WEIGHTS, save_checkpoint, write_metrics
from model.runtime.device import resolve_device
from model.runtime.tokenizer import WordTokenizer, task_tokenizers
from model.runtime.types import Network
from model.schedule import noam_lambda
from model.tasks import TASKS, get_task
from model.tasks.induction import TEST_BLOCKS
from model.training.evaluate import EVAL_SEED, evaluate
from model.transformer import build_model

IGNORE = -100  # label for positions that carry no loss (padding, a decoder-only prompt)
# Per-task defaults: the shipped models, each trained in minutes on 2 CPU cores. Dropout helps
# en2ko generalise to unseen word combinations; the algorithmic tasks learn faster without it,
# and need a gentler peak rate (the Noam peak at d_model 128 is 4.4e-3) to count repeats exactly.
SMALL = dict(d_model=128, heads=4, layers=2, d_ff=256, batch=64, warmup=400)
DEFAULTS = {
    "en2ko": dict(SMALL, steps=3000, dropout=0.1, lr_factor=1.0),
    "reverse": dict(SMALL, steps=8000, dropout=0.0, lr_factor=0.5),
    "sort": dict(SMALL, steps=5000, dropout=0.0, lr_factor=0.5),
    # Two attention-only, pre-LN layers (Elhage et al. 2021), no label smoothing: the
    # induction head forms with a sudden drop of the loss (the phase change).
    "induction": dict(
        d_model=64,
        heads=4,
        layers=2,
        d_ff=0,
        batch=64,
        warmup=200,
        # The induction head forms by ~3,500 steps; learning where the repeat ends (the
        # <eos>: a duplicate-token signal read through the induction head) takes until
        # ~8,000 (README).
        steps=10000,
        dropout=0.0,
        lr_factor=1.0,
        norm="pre",
        label_smoothing=0.0,
        positions="learned",  # sinusoids let it copy through lagged pairs of heads instead
    ),
}
MAX_LEN = {"en2ko": 64, "reverse": 32, "sort": 32, "induction": 64}


@dataclass
class TrainConfig:
    """One training run: the task, the network's size, the paper's recipe, where to write.

    ``TrainConfig.for_task(task, **overrides)`` starts from the task's shipped recipe.
    """

    task: str
    out: Path | None = None  # checkpoint folder to write (None: keep the model in memory)
    d_model: int = SMALL["d_model"]
    heads: int = SMALL["heads"]
    layers: int = SMALL["layers"]  # encoder and decoder layers each
    d_ff: int = SMALL["d_ff"]
    dropout: float = 0.1
    norm: str = "post"  # LayerNorm placement: "post" (the paper) | "pre"
    positions: str = "sinusoidal"  # sinusoidal (the paper) | learned | rope | alibi | none
    kv_heads: int | None = None  # key/value heads (None: as many as heads; 1: multi-query)
    steps: int = 3000
    batch: int = SMALL["batch"]  # examples per step (per process under torchrun)
    warmup: int = SMALL["warmup"]  # warm-up steps of the Noam schedule (1 = none)
    lr_factor: float = 1.0  # scales the Noam learning rate
    label_smoothing: float = 0.1
    seed: int = 0
    device: str = "cpu"
    threads: int | None = None  # torch CPU threads (None: default_threads())
    eval_n: int = 2000  # held-out examples to evaluate
    log_every: int = 10  # steps per curve.csv row
    progress: bool = True  # tqdm progress bar

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"unknown task {self.task!r}; choose one of {', '.join(TASKS)}")
        if self.norm not in ("post", "pre"):
            raise ValueError("norm must be 'post' or 'pre'")
        if self.positions not in SCHEMES:
            raise ValueError(f"positions must be one of {', '.join(SCHEMES)}")
        if self.kv_heads is not None and (self.kv_heads < 1 or self.heads % self.kv_heads):
            raise ValueError(
                f"kv_heads={self.kv_heads} must be at least 1 and divide heads={self.heads}"
            )
        if self.out is not None:
            self.out = Path(self.out)

    @classmethod
    def for_task(cls, task: str, **overrides) -> TrainConfig:
        """The task's shipped recipe, with ``overrides`` (None values are ignored)."""
        if task not in DEFAULTS:
            raise ValueError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
        given = {k: v for k, v in overrides.items() if v is not None}
        return cls(task=task, **{**DEFAULTS[task], **given})


def parse_args(argv: list[str]) -> TrainConfig:
    """The command line of ``python -m model.train`` as a TrainConfig."""
    p = argparse.ArgumentParser(prog="python -m model.train", description=__doc__.split("\n")[0])
    p.add_argument("--task", required=True, choices=TASKS)
    p.add_argument("--out", required=True, type=Path, help="checkpoint folder to write")
    p.add_argument("--d-model", type=int, help="model width (default per task)")
    p.add_argument("--heads", type=int, help="attention heads")
    p.add_argument("--layers", type=int, help="encoder and decoder layers each")
    p.add_argument("--d-ff", type=int, help="feed-forward inner width (0: attention-only)")
    p.add_argument("--dropout", type=float, help="dropout rate (default per task)")
    p.add_argument("--norm", choices=("post", "pre"), help="LayerNorm placement (default per task)")
    p.add_argument(
        "--positions",
        choices=SCHEMES,
        help="where order comes from (default per task; rope / alibi: inside self-attention)",
    )
    p.add_argument("--kv-heads", type=int, help="key/value heads (grouped-query; 1 = multi-query)")
    p.add_argument("--steps", type=int, help="optimizer steps")
    p.add_argument("--batch", type=int, help="examples per step (per process under torchrun)")
    p.add_argument("--warmup", type=int, help="warm-up steps of the Noam schedule")
    p.add_argument("--lr-factor", type=float, help="scales the Noam learning rate")
    p.add_argument("--label-smoothing", type=float, help="default per task (0.1 for most)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu", help="cpu | cuda | mps | auto")
    p.add_argument(
        "--threads",
        type=int,
        help="torch CPU threads (default: ATTENTION_LAB_THREADS if set, else cores / processes)",
    )
    p.add_argument("--eval-n", type=int, default=2000, help="held-out examples to evaluate")
    p.add_argument("--log-every", type=int, default=10, help="steps per curve.csv row")
    p.add_argument("--no-progress", action="store_true", help="no tqdm progress bar")
    args = vars(p.parse_args(argv))
    args["progress"] = not args.pop("no_progress")
    try:
        return TrainConfig.for_task(args.pop("task"), **args)
    except ValueError as e:  # e.g. --kv-heads 3 with 4 heads: a usage message, not a traceback
        p.error(str(e))


class Batch:
    """Padded id tensors for one step, and how many real tokens it holds."""

    def __init__(self, inputs: torch.Tensor, labels: torch.Tensor, src: torch.Tensor | None):
        self.src, self.inputs, self.labels = src, inputs, labels  # [B, Ls], [B, Lt], [B, Lt]
        self.tokens = int((labels != IGNORE).sum()) + (0 if src is None else int((src != 0).sum()))


def _pad(rows: list[list[int]], value: int) -> torch.Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor([r + [value] * (width - len(r)) for r in rows], dtype=torch.long)


def make_batch(
    pairs: list[tuple[str, str]],
    src_tok: WordTokenizer | None,
    tgt_tok: WordTokenizer,
    max_len: int,
) -> Batch:
    """Teacher forcing: the decoder reads <bos> y1..yn and learns to say y1..yn <eos>."""
    bos, eos = tgt_tok.bos_id, tgt_tok.eos_id
    srcs, inputs, labels = [], [], []
    for source, target in pairs:
        y = tgt_tok.encode_target(target, max_len).ids
        if src_tok is None:  # decoder-only: <bos> x <sep> y <eos>; loss on y <eos> only
            prompt = tgt_tok.encode(source, max_len).ids
            seq = (prompt + y + [eos])[:max_len]
            inputs.append(seq[:-1])
            labels.append([IGNORE] * (len(prompt) - 1) + seq[len(prompt) :])
        else:
            srcs.append(src_tok.encode(source, max_len).ids)
            inputs.append([bos, *y][:max_len])
            labels.append([*y, eos][:max_len])
    src = _pad(srcs, src_tok.pad_id) if src_tok is not None else None
    return Batch(_pad(inputs, tgt_tok.pad_id), _pad(labels, IGNORE), src)


class LossModel(nn.Module):
    """The network plus its loss, so DistributedDataParallel wraps one forward returning a scalar."""

    def __init__(self, network: Network, label_smoothing: float):
        super().__init__()
        self.network, self.label_smoothing = network, label_smoothing

    def forward(self, src: torch.Tensor | None, inputs: torch.Tensor, labels: torch.Tensor):
        args = (inputs,) if src is None else (src, inputs)
        logits = self.network(*args).logits  # fast path: no tracing  [B, Lt, vocab]
        return F.cross_entropy(
            logits.flatten(0, 1),
            labels.flatten(),
            ignore_index=IGNORE,
            label_smoothing=self.label_smoothing,
        )


def build_config(args: TrainConfig, task: ModuleType, src_tok, tgt_tok) -> TransformerConfig:
    decoder_only = task.KIND == "decoder"
    return TransformerConfig(
        kind=task.KIND,
        src_vocab_size=len(tgt_tok if decoder_only else src_tok),
        tgt_vocab_size=len(tgt_tok),
        d_model=args.d_model,
        n_heads=args.heads,
        n_encoder_layers=0 if decoder_only else args.layers,
        n_decoder_layers=args.layers,
        d_ff=args.d_ff,
        dropout=args.dropout,
        norm_placement=args.norm,
        positions=args.positions,
        n_kv_heads=args.kv_heads,
        max_len=MAX_LEN[args.task],
    )


def _distributed(device_arg: str) -> tuple[int, int, torch.device]:
    """(rank, world size, device); starts the process group when launched by torchrun."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    device = resolve_device(device_arg)
    if world == 1:
        return 0, 1, device
    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    if device.type == "cuda":
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return rank, world, device


def induction_metrics(network: Network, task: ModuleType, tgt_tok, eval_n: int) -> dict:
    """What the Mechanisms page states about an induction model, measured once here:
    head scores and accuracies on 500 repeated sequences of a held-out block length,
    where free-running continuations of the held-out prompts stop, and the circuit's heads
    with what removing each does (README)."""
    if network.config.n_decoder_layers < 2:  # the one-layer contrast has no circuit to cut
        extra = {}
    else:
        extra = {
            "circuit": circuit(network, tgt_tok, 500, TEST_BLOCKS[1], EVAL_SEED),
            "eos_by_head": eos_by_head(network, tgt_tok, 300, EVAL_SEED),
        }
    return {
        "induction": measure(network, tgt_tok, 500, TEST_BLOCKS[1], EVAL_SEED),
        "free_running": free_running(
            network, tgt_tok, task.sample(eval_n, EVAL_SEED, split="test")
        ),
        **extra,
    }


def _command(argv: list[str], world: int) -> str:
    launcher = f"torchrun --nproc_per_node={world} -m" if world > 1 else "python -m"
    return f"{launcher} model.train {shlex.join(argv)}"


def _load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else []


@dataclass
class StepResult:
    """What one optimizer step reports: its loss, the rate it used, the tokens it saw."""

    step: int  # 1-based
    loss: float
    lr: float
    tokens: int  # real (non-padding) tokens in this step's batch, summed over ranks


class Trainer:
    """The paper's recipe as a reusable loop, so the CLI and the live page train the same way.

    ``args`` is the run's TrainConfig (the CLI's, or one the live page builds).
    """

    def __init__(self, args: TrainConfig, device: torch.device, rank: int = 0, world: int = 1):
        self.args, self.device, self.rank, self.world = args, device, rank, world
        torch.manual_seed(args.seed)  # the same initial weights on every rank
        self.task = get_task(args.task)
        self.src_tok, self.tgt_tok = task_tokenizers(self.task)
        self.config = build_config(args, self.task, self.src_tok, self.tgt_tok)
        self.network = build_model(self.config).to(device)
        self.model: nn.Module = LossModel(self.network, args.label_smoothing)
        if world > 1:
            self.model = nn.parallel.DistributedDataParallel(self.model)
        # lr=1.0: the schedule is the whole learning rate (paper eq. 3); update s (from 1) uses lr(s).
        self.optimizer = torch.optim.Adam(
            self.network.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9
        )
        noam = noam_lambda(args.d_model, args.warmup, args.lr_factor)
        self.schedule = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda i: noam(i + 1))

    @property
    def src_side(self) -> WordTokenizer | None:
        """The source tokenizer to save / evaluate with (None for decoder-only models)."""
        return None if self.task.KIND == "decoder" else self.src_tok

    def steps(self, should_stop: Callable[[], bool] | None = None) -> Iterator[StepResult]:
        """Run steps 1..args.steps, yielding after each; stops early when ``should_stop()``."""
        args, device = self.args, self.device
        self.model.train()
        for step in range(1, args.steps + 1):
            if should_stop is not None and should_stop():
                return
            # Each rank and step draws its own examples from the training split.
            data_seed = (args.seed * 1009 + self.rank) * 10_000_019 + step
            pairs = self.task.sample(args.batch, data_seed)
            batch = make_batch(pairs, self.src_tok, self.tgt_tok, self.config.max_len)
            src = None if batch.src is None else batch.src.to(device)
            lr = self.schedule.get_last_lr()[0]
            loss = self.model(src, batch.inputs.to(device), batch.labels.to(device))
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
            self.schedule.step()
            yield StepResult(step, loss.item(), lr, batch.tokens * self.world)


def main(argv: list[str] | None = None) -> dict | None:
    """Train, evaluate on the held-out split, write the folder; returns metrics on rank 0."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    rank, world, device = _distributed(args.device)
    before = torch.get_num_threads()
    if device.type == "cpu":
        torch.set_num_threads(args.threads or default_threads(world))
    try:
        return _train(args, argv, rank, world, device)
    finally:
        # Called in-process too (the warm-up experiment, the tests): the caller's thread
        # count comes back, so later work there does not run with ours.
        torch.set_num_threads(before)


def default_threads(world: int = 1) -> int:
    """torch CPU threads when ``--threads`` is not given: ``ATTENTION_LAB_THREADS`` where it
    is set (the lab's cap, e.g. 1 per pytest-xdist worker: two workers each running two
    threads on two cores made a short run 10 times slower), else the cores shared among the
    ``world`` processes."""
    env = os.environ.get("ATTENTION_LAB_THREADS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    return max(1, (os.cpu_count() or 1) // world)


def _train(
    args: TrainConfig, argv: list[str], rank: int, world: int, device: torch.device
) -> dict | None:
    """main's run once its threads are set."""
    load_before = _load_average()
    trainer = Trainer(args, device, rank, world)
    task, src_tok, tgt_tok = trainer.task, trainer.src_tok, trainer.tgt_tok
    config, network = trainer.config, trainer.network
    curve: list[tuple[int, float, float]] = []
    tokens, interval_loss, interval_steps = 0, 0.0, 0
    # The induction task also logs its heads' scores as it trains (snapshots.json).
    heads = SnapshotLog(tgt_tok, every=2 * args.log_every) if args.task == "induction" else None
    if heads is not None and rank == 0:
        heads(0, network)
    start, cpu_start = time.perf_counter(), time.process_time()
    bar = tqdm(
        total=args.steps,
        disable=rank != 0 or not args.progress,
        desc=f"{args.task}",
        mininterval=1.0,
        dynamic_ncols=True,
    )
    for report in trainer.steps():
        step, lr = report.step, report.lr
        tokens += report.tokens
        interval_loss += report.loss
        interval_steps += 1
        if step % args.log_every == 0 or step == args.steps:
            mean = interval_loss / interval_steps
            curve.append((step, mean, lr))
            bar.set_postfix(loss=f"{mean:.3f}", lr=f"{lr:.2e}", refresh=False)
            interval_loss, interval_steps = 0.0, 0
        if heads is not None and rank == 0:
            heads(step, network, force=step == args.steps)
        bar.update(1)
    train_time = time.perf_counter() - start
    train_cpu = time.process_time() - cpu_start  # this process's CPU time (all its threads)
    bar.close()
    metrics = None
    if rank == 0:
        eval_start = time.perf_counter()
        src_side = None if task.KIND == "decoder" else src_tok
        result = evaluate(network, task, src_side, tgt_tok, args.eval_n, EVAL_SEED)
        metrics = {
            "task": args.task,
            "kind": config.kind,
            **result,
            "eval_time_s": round(time.perf_counter() - eval_start, 2),
            # 500 fresh "block block" sequences of a held-out block length (README).
            **(
                induction_metrics(network, task, tgt_tok, args.eval_n)
                if args.task == "induction"
                else {}
            ),
            "steps": args.steps,
            "batch_size": args.batch,
            "world_size": world,
            "warmup": args.warmup,
            "lr_factor": args.lr_factor,
            "label_smoothing": args.label_smoothing,
            "final_loss": round(curve[-1][1], 4),
            "wall_time_s": round(train_time, 2),
            "cpu_time_s": round(train_cpu, 2),
            "train_tokens": tokens,
            "tokens_per_s": round(tokens / train_time, 1),
            "params": sum(p.numel() for p in network.parameters()),
            "device": str(device),
            "threads": torch.get_num_threads(),
            "load_average_before": load_before,
            "load_average_after": _load_average(),
            "command": _command(argv, world),
            "seed": args.seed,
            "torch_version": torch.__version__,
            "python_version": platform.python_version(),
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        src_save = None if task.KIND == "decoder" else src_tok
        save_checkpoint(args.out, network, src_save, tgt_tok, metrics)
        metrics["size_bytes"] = (args.out / WEIGHTS).stat().st_size
        write_metrics(args.out, metrics)
        if heads is not None:
            heads.write(args.out)
        with open(args.out / CURVE, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["step", "loss", "lr"])
            writer.writerows((s, f"{loss:.5f}", f"{lr:.6g}") for s, loss, lr in curve)
        print(
            f"{args.task}: exact match {metrics['exact_match']:.4f}, token accuracy "
            f"{metrics['token_accuracy']:.4f} on {metrics['eval_n']} held-out; "
            f"{train_time:.1f} s, {metrics['tokens_per_s']:.0f} tokens/s -> {args.out}",
            file=sys.stderr,
        )
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
    return metrics


if __name__ == "__main__":
    main()
