"""Benchmark: tokens/s of the fast (fused SDPA) and traced (explicit softmax) forward paths.

    python -m model.bench [--device auto] [--repeats 7] [--json out.json]

Paths are timed side by side, interleaved, in one run, and compared as a ratio: absolute
numbers on a shared machine are noisy, ratios taken together are not (much).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import Callable

import torch

from model.config import TransformerConfig
from model.decoding import greedy_decode
from model.device import configure_threads, resolve_device
from model.transformer import build_model

SMALL = dict(
    d_model=128,
    n_heads=4,
    n_encoder_layers=2,
    n_decoder_layers=2,
    d_ff=512,
    dropout=0.0,
    max_len=256,
    src_vocab_size=1000,
    tgt_vocab_size=1000,
)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def time_side_by_side(
    fns: dict[str, Callable[[], object]], repeats: int, device: torch.device
) -> dict[str, float]:
    """Median seconds per call of each function, calls interleaved so drift hits all alike."""
    for fn in fns.values():  # warm-up: allocator, kernels, caches
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            _sync(device)
            start = time.perf_counter()
            fn()
            _sync(device)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(ts) for name, ts in times.items()}


def bench_forward(device: torch.device, batch: int, length: int, repeats: int) -> list[dict]:
    rows = []
    for kind in ("encoder-decoder", "encoder", "decoder"):
        torch.manual_seed(0)
        model = build_model(TransformerConfig(kind=kind, **SMALL)).to(device).eval()
        ids = torch.randint(4, SMALL["src_vocab_size"], (batch, length), device=device)
        args = (ids, ids) if kind == "encoder-decoder" else (ids,)
        tokens = batch * length * len(args)
        with torch.inference_mode():
            t = time_side_by_side(
                {
                    "fast": lambda m=model, a=args: m(*a),
                    "traced": lambda m=model, a=args: m(*a, trace=True),
                },
                repeats,
                device,
            )
        rows.append(
            {
                "what": f"forward, {kind}",
                "fast_tok_s": tokens / t["fast"],
                "traced_tok_s": tokens / t["traced"],
                "traced_over_fast": t["traced"] / t["fast"],
            }
        )
    return rows


def bench_decoding(device: torch.device, batch: int, steps: int, repeats: int) -> dict:
    torch.manual_seed(0)
    model = build_model(TransformerConfig(kind="encoder-decoder", **SMALL)).to(device).eval()
    src = torch.randint(4, SMALL["src_vocab_size"], (batch, 32), device=device)
    # eos_id = -1 never matches, so every run generates exactly ``steps`` tokens.
    t = time_side_by_side(
        {
            "cached": lambda: greedy_decode(model, src, 1, -1, steps, use_cache=True),
            "full": lambda: greedy_decode(model, src, 1, -1, steps, use_cache=False),
        },
        repeats,
        device,
    )
    return {
        "what": f"greedy decoding, {steps} tokens",
        "cached_tok_s": batch * steps / t["cached"],
        "full_tok_s": batch * steps / t["full"],
        "full_over_cached": t["full"] / t["cached"],
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--json", default=None, help="also write the results to this file")
    args = parser.parse_args(argv)

    device = resolve_device(args.device)
    threads = configure_threads(
        args.threads or (torch.get_num_threads() if device.type == "cpu" else 1)
    )
    forward = bench_forward(device, args.batch, args.length, args.repeats)
    decoding = bench_decoding(device, 4, 48, max(3, args.repeats // 2))
    machine = {
        "device": str(device) if device.type != "cuda" else torch.cuda.get_device_name(),
        "cpu": platform.processor() or platform.machine(),
        "threads": threads,
        "torch": torch.__version__,
        "batch": args.batch,
        "length": args.length,
        "config": SMALL,
    }
    print(
        f"# Attention Lab benchmark — {machine['device']}, torch {torch.__version__}, "
        f"{threads} thread(s), batch {args.batch} x {args.length} tokens\n"
    )
    print("| path | fast tok/s | traced tok/s | traced / fast time |")
    print("|---|---:|---:|---:|")
    for r in forward:
        print(
            f"| {r['what']} | {r['fast_tok_s']:,.0f} | {r['traced_tok_s']:,.0f} | "
            f"{r['traced_over_fast']:.2f}x |"
        )
    print("\n| decoding | cached tok/s | recomputed tok/s | recomputed / cached time |")
    print("|---|---:|---:|---:|")
    print(
        f"| {decoding['what']} | {decoding['cached_tok_s']:,.0f} | {decoding['full_tok_s']:,.0f} "
        f"| {decoding['full_over_cached']:.2f}x |"
    )
    result = {"machine": machine, "forward": forward, "decoding": decoding}
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
    return result


if __name__ == "__main__":
    main()
