"""A small training run in a background thread, watched live: the browser's "train your own".

The thread only writes into a lock-protected ``LiveRun``; a page polls ``snapshot()`` for a
consistent copy. Attention pictures are traced on a *copy* of the weights, so nothing the
page reads is ever a module the trainer is still changing. No streamlit here (model/ rule).
"""

from __future__ import annotations

import copy
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from model.analysis.induction import (
    SNAPSHOT_LENGTH,
    SNAPSHOT_N,
    SNAPSHOT_SEED,
    head_scores,
    repeated_ids,
)
from model.runtime.checkpoint import save_checkpoint
from model.runtime.lab import LabModel
from model.tasks import induction
from model.training.evaluate import EVAL_SEED, evaluate
from model.training.trainer import TrainConfig, Trainer

MAX_STEPS = 2000
TIME_LIMIT_S = 300.0  # a class server is shared: no browser run may hold a core for long
HEARTBEAT_TIMEOUT_S = 30.0  # the page refreshes it every second or so; silence = tab closed
MAX_CONCURRENT = 2  # runs in this process at once, whoever started them
EVAL_N = 48  # held-out pairs per accuracy point: small enough to take well under a second
SIZES = {  # presets small enough for a few hundred steps on one CPU core
    "tiny": dict(d_model=32, heads=2, layers=1, d_ff=64),
    "small": dict(d_model=64, heads=4, layers=2, d_ff=128),
    "medium": dict(d_model=128, heads=4, layers=2, d_ff=256),
}
# One fixed input per task, teacher-forced on its reference answer at every snapshot, so
# the pictures differ only by what the model has learnt, never by what it happened to output.
PROBES = {
    "reverse": ("a 3 k 7 b", "b 7 k 3 a"),
    "sort": ("7 2 9 4 1", "1 2 4 7 9"),
    "en2ko": ("I study math at school", "나 는 학교 에서 수학 을 공부한다"),
    "induction": ("q w e r t y u i o q w", "e r t y u i o"),
}
# Process-wide: every session's runs share these slots (a module is imported once).
_SLOTS = threading.BoundedSemaphore(MAX_CONCURRENT)


class Busy(Exception):
    """All training slots of this server are taken; try again in a few minutes."""


@dataclass(frozen=True)
class Settings:
    task: str = "reverse"
    size: str = "tiny"
    steps: int = 300
    warmup: bool = True
    norm: str = "post"
    lr_factor: float = 1.0
    batch: int = 32
    seed: int = 0

    def __post_init__(self) -> None:
        if self.task not in PROBES:
            raise ValueError(f"unknown task {self.task!r}")
        if self.size not in SIZES:
            raise ValueError(f"unknown size {self.size!r}")
        if not 1 <= self.steps <= MAX_STEPS:
            raise ValueError(f"steps must be 1..{MAX_STEPS}")
        if self.norm not in ("post", "pre"):
            raise ValueError("norm must be 'post' or 'pre'")
        if not 0 < self.lr_factor <= 10:
            raise ValueError("lr_factor must be in (0, 10]")

    @property
    def every(self) -> int:
        """Steps between accuracy points and attention snapshots (about 20 per run)."""
        return max(5, self.steps // 20)

    @property
    def warmup_steps(self) -> int:
        # Warm-up off = Noam with warmup 1: the rate starts at its peak and only decays.
        return max(1, min(400, self.steps // 4)) if self.warmup else 1

    def train_config(self) -> TrainConfig:
        """The run as the Trainer reads it: the task's recipe at this size and these settings.

        Induction keeps its recipe's shape (attention-only, no label smoothing) at every size:
        "tiny" has one layer, so it shows the model that cannot form an induction head.
        """
        size = dict(SIZES[self.size])
        attention_only = self.task == "induction"
        if attention_only:
            size["d_ff"] = 0
        return TrainConfig.for_task(
            self.task,
            **size,
            norm=self.norm,
            steps=self.steps,
            batch=self.batch,
            warmup=self.warmup_steps,
            lr_factor=self.lr_factor,
            dropout=0.0,  # short runs: dropout only slows the picture down
            label_smoothing=0.0 if attention_only else 0.1,
            seed=self.seed,
            progress=False,
        )


@dataclass
class Snapshot:
    """Attention of the probe input at one step: [layers, heads, queries, keys] on the CPU."""

    step: int
    kind: str  # "cross" (encoder-decoder) | "decoder" (decoder-only)
    attention: torch.Tensor
    query_tokens: list[str]
    key_tokens: list[str]
    mask: torch.Tensor | None = None  # [queries, keys] the model's own, True = may attend


@dataclass
class Progress:
    """Everything the page shows; copied out under the lock, so a reader never sees it torn."""

    state: str = "starting"  # starting | running | done | cancelled | timeout | abandoned | failed
    step: int = 0
    total: int = 0
    loss: list[tuple[int, float]] = field(default_factory=list)  # (step, mean loss since last)
    lr: list[tuple[int, float]] = field(default_factory=list)
    accuracy: list[tuple[int, float]] = field(default_factory=list)  # held-out token accuracy
    snapshots: list[Snapshot] = field(default_factory=list)
    # induction only: (step, best prefix-matching score, best previous-token score)
    heads: list[tuple[int, float, float]] = field(default_factory=list)
    folder: str | None = None  # the saved checkpoint, once there is one
    error: str = ""
    elapsed_s: float = 0.0

    @property
    def active(self) -> bool:
        return self.state in ("starting", "running")


class LiveRun:
    """One training run of one session; ``start()`` launches it, the rest is read by the UI."""

    def __init__(
        self,
        settings: Settings,
        out_root: str | Path | None = None,
        time_limit_s: float | None = None,
        heartbeat_timeout_s: float | None = None,
    ):
        self.settings = settings
        self.out_root = Path(out_root) if out_root else None
        # Looked up now, not at import, so a test can shorten or lengthen them.
        self.time_limit_s = TIME_LIMIT_S if time_limit_s is None else time_limit_s
        self.heartbeat_timeout_s = (
            HEARTBEAT_TIMEOUT_S if heartbeat_timeout_s is None else heartbeat_timeout_s
        )
        self._lock = threading.Lock()
        self._progress = Progress(total=settings.steps)
        self._cancel = threading.Event()
        self._beat = time.monotonic()
        self._thread: threading.Thread | None = None
        self._repeats: torch.Tensor | None = None  # induction: the head-score probe

    # ---- called from the page -------------------------------------------------------------
    def start(self) -> None:
        """Take a process-wide slot and start the thread; raises Busy when none is free."""
        if not _SLOTS.acquire(blocking=False):
            raise Busy
        self._beat = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="attention-lab-train", daemon=True)
        try:
            self._thread.start()
        except RuntimeError:
            _SLOTS.release()
            raise

    def cancel(self) -> None:
        self._cancel.set()

    def heartbeat(self) -> None:
        """The page is still open (the thread stops after heartbeat_timeout_s without one)."""
        self._beat = time.monotonic()

    def snapshot(self) -> Progress:
        with self._lock:
            p = self._progress
            return replace(
                p,
                loss=list(p.loss),
                lr=list(p.lr),
                accuracy=list(p.accuracy),
                snapshots=list(p.snapshots),
                heads=list(p.heads),
            )

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    # ---- the thread -----------------------------------------------------------------------
    def _update(self, **changes) -> None:
        with self._lock:
            for key, value in changes.items():
                setattr(self._progress, key, value)

    def _stop_reason(self, started: float) -> str | None:
        if self._cancel.is_set():
            return "cancelled"
        if time.monotonic() - self._beat > self.heartbeat_timeout_s:
            return "abandoned"
        if time.monotonic() - started > self.time_limit_s:
            return "timeout"
        return None

    def _run(self) -> None:
        # Threads: torch's setting is process-wide, so the run keeps the cap the app set for
        # everyone (model.device.configure_threads) instead of changing it for every session.
        started, reason = time.monotonic(), None
        try:
            with torch.random.fork_rng(devices=[]):  # keep the app's global RNG untouched
                trainer = Trainer(self.settings.train_config(), torch.device("cpu"))
                self._update(state="running")
                self._snap(trainer, 0)
                every, window = self.settings.every, []

                def should_stop() -> bool:
                    nonlocal reason
                    reason = self._stop_reason(started)
                    return reason is not None

                for report in trainer.steps(should_stop):
                    window.append(report.loss)
                    with self._lock:
                        self._progress.step = report.step
                        self._progress.elapsed_s = time.monotonic() - started
                        self._progress.lr.append((report.step, report.lr))
                    if report.step % every == 0 or report.step == self.settings.steps:
                        with self._lock:
                            self._progress.loss.append((report.step, sum(window) / len(window)))
                        window = []
                        self._snap(trainer, report.step)
                folder = None
                if reason in (None, "timeout"):  # a finished (or time-limited) model is kept
                    folder = self._save(trainer)
                self._update(
                    state=reason or "done",
                    folder=folder,
                    elapsed_s=time.monotonic() - started,
                )
        except Exception as err:  # the page shows it; a thread's traceback would go nowhere
            self._update(state="failed", error=f"{type(err).__name__}: {err}")
        finally:
            _SLOTS.release()

    def _snap(self, trainer: Trainer, step: int) -> None:
        """Held-out accuracy and the probe's attention, on a frozen copy of the weights."""
        network = copy.deepcopy(trainer.network)  # the UI never sees a module still training
        task = self.settings.task
        acc = evaluate(network, trainer.task, trainer.src_side, trainer.tgt_tok, EVAL_N, EVAL_SEED)
        lm = LabModel(task, network, trainer.src_side, trainer.tgt_tok, device="cpu")
        source, target = PROBES[task]
        trace = lm.trace(source, target=target)
        kind = "decoder" if lm.kind == "decoder" else "cross"
        keys = trace.tgt_tokens if kind == "decoder" else trace.src_tokens
        snap = Snapshot(
            step, kind, trace.attention[kind].clone(), trace.tgt_tokens, keys, trace.mask(kind)
        )
        heads = None
        if task == "induction":
            scores = head_scores(network, self._probe_ids(trainer))
            heads = (
                step,
                scores["prefix_matching"].max().item(),
                scores["previous_token"].max().item(),
            )
        with self._lock:
            self._progress.accuracy.append((step, acc["token_accuracy"]))
            self._progress.snapshots.append(snap)
            if heads is not None:
                self._progress.heads.append(heads)

    def _probe_ids(self, trainer: Trainer) -> torch.Tensor:
        if self._repeats is None:
            sequences = induction.repeated(SNAPSHOT_N, SNAPSHOT_SEED, SNAPSHOT_LENGTH)
            self._repeats = repeated_ids(trainer.tgt_tok, sequences)
        return self._repeats

    def _save(self, trainer: Trainer) -> str:
        root = self.out_root or Path(tempfile.gettempdir())
        root.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix=f"trained-{self.settings.task}-", dir=root))
        s = self.settings
        info = {
            "task": s.task,
            "kind": trainer.config.kind,
            "steps": self.snapshot().step,
            "trained_in": "browser",
            "size": s.size,
            "norm": s.norm,
            "warmup": s.warmup_steps,
            "lr_factor": s.lr_factor,
            "batch_size": s.batch,
            "seed": s.seed,
        }
        save_checkpoint(folder, trainer.network, trainer.src_side, trainer.tgt_tok, info)
        return str(folder)
