"""Induction heads, measured: previous-token and prefix-matching scores, repeat accuracy.

Both scores are read on sequences "<bos> t1 .. tn t1 .. tn" of different random tokens
(Olsson et al., 2022): a previous-token head puts its weight on the position just before the
query; an induction (prefix-matching) head, at a token of the second copy, puts it on the
token that followed the same token in the first copy. Plain functions of a network and a
tokenizer, so the trainer logs them while training and the page reads them afterwards.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import torch

from model.runtime.types import Network, Tokenizer
from model.tasks import induction

SNAPSHOTS = "snapshots.json"  # written beside curve.csv by the trainer for the induction task
SNAPSHOT_N, SNAPSHOT_SEED, SNAPSHOT_LENGTH = 64, 4242, 11  # a held-out block length


def repeated_ids(tokenizer: Tokenizer, sequences: list[list[str]]) -> torch.Tensor:
    """Sequences of letters (all the same length) as ids [B, 1 + L], "<bos>" first."""
    rows = [tokenizer.encode(" ".join(s), 10_000).ids for s in sequences]
    if len({len(r) for r in rows}) != 1:
        raise ValueError("the sequences must all have the same length")
    return torch.tensor(rows, dtype=torch.long)


@torch.no_grad()
def head_scores(network: Network, ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per head, on repeated sequences ids [B, 1 + 2n]: {"previous_token", "prefix_matching"},
    each [layers, heads], the mean attention weight on the position that score is about."""
    was_training = network.training
    network.eval()
    try:
        record = network(ids.to(network.device), trace=True).record
    finally:
        network.train(was_training)
    attention = torch.stack(record.attention["decoder"]).float().cpu()  # [Ly, B, H, L, L]
    n = (ids.shape[1] - 1) // 2
    q = torch.arange(2, 2 * n + 1)  # every token after the first: key = the one before it
    previous = attention[..., q, q - 1].mean(dim=(1, 3))
    j = torch.arange(1, n)  # second-copy t_j (position n + j) -> first-copy t_{j+1} (j + 1)
    prefix = attention[..., n + j, j + 1].mean(dim=(1, 3))
    return {"previous_token": previous, "prefix_matching": prefix}


@torch.no_grad()
def repeat_accuracy(network: Network, ids: torch.Tensor) -> dict[str, float]:
    """Teacher-forced next-token accuracy on ids [B, 1 + 2n]: in the repeated half (the
    predictions of t2 .. tn from the second copy) and in the first half (t2 .. tn from the
    first copy, which nothing before can tell: chance is about 1 / vocabulary)."""
    was_training = network.training
    network.eval()
    try:
        logits = network(ids.to(network.device)).logits.float().cpu()  # [B, L, V]
    finally:
        network.train(was_training)
    n = (ids.shape[1] - 1) // 2
    predicted = logits.argmax(-1)  # position p predicts the token at p + 1
    first = predicted[:, 1:n] == ids[:, 2 : n + 1]
    second = predicted[:, n + 1 : 2 * n] == ids[:, n + 2 :]
    return {"repeat": second.float().mean().item(), "first_half": first.float().mean().item()}


def measure(
    network: Network, tokenizer: Tokenizer, n: int = 500, length: int = 11, seed: int = 0
) -> dict:
    """Accuracy and head scores on ``n`` fresh repeated sequences of block ``length``."""
    ids = repeated_ids(tokenizer, induction.repeated(n, seed, length))
    scores = head_scores(network, ids)
    best = scores["prefix_matching"].flatten().argmax().item()
    n_heads = scores["prefix_matching"].shape[1]
    return {
        **{f"{k}_accuracy": v for k, v in repeat_accuracy(network, ids).items()},
        "chance": 1 / len(induction.SYMBOLS),
        "previous_token": scores["previous_token"].tolist(),
        "prefix_matching": scores["prefix_matching"].tolist(),
        "best_head": [best // n_heads, best % n_heads],
        "best_prefix_matching": scores["prefix_matching"].max().item(),
        "n": n,
        "block_length": length,
        "seed": seed,
    }


@dataclass
class SnapshotLog:
    """Head scores and repeat accuracy every ``every`` steps while training (snapshots.json)."""

    tokenizer: Tokenizer
    every: int = 20
    ids: torch.Tensor = field(init=False)
    rows: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        sequences = induction.repeated(SNAPSHOT_N, SNAPSHOT_SEED, SNAPSHOT_LENGTH)
        self.ids = repeated_ids(self.tokenizer, sequences)

    def __call__(self, step: int, network: Network, force: bool = False) -> None:
        if step % self.every and not force:
            return
        scores = head_scores(network, self.ids)
        acc = repeat_accuracy(network, self.ids)
        self.rows.append(
            {
                "step": step,
                "repeat_accuracy": round(acc["repeat"], 4),
                "first_half_accuracy": round(acc["first_half"], 4),
                "previous_token": [
                    [round(v, 4) for v in r] for r in scores["previous_token"].tolist()
                ],
                "prefix_matching": [
                    [round(v, 4) for v in r] for r in scores["prefix_matching"].tolist()
                ],
            }
        )

    def write(self, folder: str | Path) -> None:
        data = {
            "probe": {"n": SNAPSHOT_N, "seed": SNAPSHOT_SEED, "block_length": SNAPSHOT_LENGTH},
            "snapshots": self.rows,
        }
        (Path(folder) / SNAPSHOTS).write_text(json.dumps(data) + "\n", encoding="utf-8")


def load_snapshots(folder: str | Path) -> dict | None:
    """snapshots.json of a checkpoint folder, or None when it has none (or it is damaged)."""
    path = Path(folder) / SNAPSHOTS
    if not path.is_file() or path.stat().st_size > 4 * 2**20:
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("snapshots"), list) else None
