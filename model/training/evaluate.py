"""Held-out evaluation: exact match and token accuracy of batched greedy decoding (KV cache).

    python -m model.training.evaluate DIR [--n 2000] [--seed 20240] [--record]

``--record`` writes the result into DIR/metrics.json, with the command that measured it.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections import defaultdict
from pathlib import Path
from types import ModuleType

import torch

from model.runtime.checkpoint import METRICS, load_checkpoint, write_metrics
from model.runtime.decoding import greedy_decode
from model.runtime.tokenizer import WordTokenizer
from model.runtime.types import Network
from model.tasks import get_task

EVAL_SEED = 20240  # the held-out split is disjoint from training whatever the seed


def _pad(rows: list[list[int]], pad_id: int, device: torch.device) -> torch.Tensor:
    width = max(len(r) for r in rows)
    out = torch.full((len(rows), width), pad_id, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    return out.to(device)


@torch.no_grad()
def evaluate(
    network: Network,
    task: ModuleType,
    src_tok: WordTokenizer | None,
    tgt_tok: WordTokenizer,
    n: int = 1000,
    seed: int = EVAL_SEED,
    batch_size: int = 250,
) -> dict:
    """Exact match (whole output right, <eos> included) and token accuracy on ``n`` held-out pairs.

    Token accuracy compares the greedy output with reference + <eos> position by position.
    Decoder-only prompts are grouped by length, so a batch needs no padding on the left.
    """
    network.eval()
    device = next(network.parameters()).device
    max_len = network.config.max_len
    pairs = task.sample(n, seed, split="test")
    decoder_only = network.config.kind == "decoder"
    enc = tgt_tok if decoder_only else src_tok
    assert enc is not None
    groups: dict[int, list[tuple[list[int], list[int]]]] = defaultdict(list)
    for source, target in pairs:
        prompt = enc.encode(source, max_len).ids
        ref = [*tgt_tok.encode_target(target, max_len).ids, tgt_tok.eos_id]
        groups[len(prompt) if decoder_only else 0].append((prompt, ref))
    exact = matched = total = 0
    for group in groups.values():
        for start in range(0, len(group), batch_size):
            chunk = group[start : start + batch_size]
            prompts = _pad([p for p, _ in chunk], tgt_tok.pad_id, device)
            longest = max(len(r) for _, r in chunk) + 1
            budget = min(longest, max_len - (prompts.shape[1] if decoder_only else 1))
            out, _ = greedy_decode(network, prompts, tgt_tok.bos_id, tgt_tok.eos_id, budget)
            for row, (_, ref) in zip(out.tolist(), chunk):
                got = row[: len(ref)]
                exact += got == ref
                matched += sum(a == b for a, b in zip(got, ref))
                total += len(ref)
    return {
        "exact_match": exact / len(pairs),
        "token_accuracy": matched / total,
        "eval_n": len(pairs),
        "eval_seed": seed,
        "eval_split": "test",
    }


def main(argv: list[str] | None = None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m model.training.evaluate", description=__doc__)
    parser.add_argument("folder", type=Path, help="a checkpoint folder written by model.train")
    parser.add_argument("--n", type=int, default=2000, help="held-out examples (default 2000)")
    parser.add_argument("--seed", type=int, default=EVAL_SEED)
    parser.add_argument("--batch", type=int, default=250)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--record", action="store_true", help="write the result to metrics.json")
    args = parser.parse_args(argv)
    lm = load_checkpoint(args.folder, args.device)
    task = get_task(lm.info["task"])
    start = time.perf_counter()
    src = lm.src_tokenizer if lm.kind != "decoder" else None
    result = evaluate(lm.network, task, src, lm.tgt_tokenizer, args.n, args.seed, args.batch)
    result["eval_time_s"] = round(time.perf_counter() - start, 2)
    result["evaluated_by"] = "python -m model.training.evaluate " + shlex.join(argv)
    print(json.dumps(result, indent=1))
    if args.record:
        path = args.folder / METRICS
        metrics = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        write_metrics(args.folder, {**metrics, **result})
    return result


if __name__ == "__main__":
    main()
