"""Benchmark: tokens/s of the fast (fused SDPA) and traced (explicit softmax) forward paths.

    python -m bench.model_speed [--device auto] [--repeats 7] [--minilm-lengths 20,256] [--json out.json]

The MiniLM section times our mapped encoder beside transformers' own BertModel on the same
weights and the same input, so the cost of running a real model through our code is visible.

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
from model.runtime.decoding import greedy_decode
from model.runtime.device import configure_threads, resolve_device
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


def bench_minilm(device: torch.device, lengths: list[int], repeats: int) -> list[dict]:
    """Latency of one sentence (batch 1) through MiniLM: our fast and traced paths, and
    transformers' bare BertModel forward (its default attention) on the same ids."""
    from model.hf.bert import minilm_path, transformers_bert
    from model.runtime.loading import load_minilm

    lm = load_minilm(device)
    reference = transformers_bert(minilm_path(), device, attn_implementation="sdpa")
    text = " ".join(["Attention lets every token look at every other token."] * 64)
    ids = lm.encode(text).ids  # [CLS] ... [SEP], 512 tokens
    rows = []
    for n in lengths:
        x = torch.tensor([ids[: n - 1] + ids[-1:]], device=device)  # real words, [SEP] last
        with torch.inference_mode():
            t = time_side_by_side(
                {
                    "fast": lambda x=x: lm.network(x),
                    "traced": lambda x=x: lm.network(x, trace=True),
                    "transformers": lambda x=x: reference(input_ids=x),
                },
                repeats,
                device,
            )
        rows.append(
            {
                "what": f"MiniLM, {n} tokens",
                "tokens": n,
                "ours_fast_ms": 1e3 * t["fast"],
                "ours_traced_ms": 1e3 * t["traced"],
                "transformers_ms": 1e3 * t["transformers"],
                "traced_over_transformers": t["traced"] / t["transformers"],
            }
        )
    return rows


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument(
        "--minilm-lengths", default="20,256", help="comma-separated token counts; '' skips MiniLM"
    )
    parser.add_argument("--json", default=None, help="also write the results to this file")
    args = parser.parse_args(argv)
    lengths = [int(n) for n in args.minilm_lengths.split(",") if n.strip()]
    if any(not 2 <= n <= 512 for n in lengths):
        parser.error("MiniLM lengths must lie between 2 ([CLS] [SEP]) and 512 tokens")

    device = resolve_device(args.device)
    threads = configure_threads(
        args.threads or (torch.get_num_threads() if device.type == "cpu" else 1)
    )
    forward = bench_forward(device, args.batch, args.length, args.repeats)
    decoding = bench_decoding(device, 4, 48, max(3, args.repeats // 2))
    minilm = bench_minilm(device, lengths, args.repeats) if lengths else []
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
    if minilm:
        print(
            "\n| MiniLM, batch 1 | ours fast ms | ours traced ms | transformers ms "
            "| traced / transformers time |"
        )
        print("|---|---:|---:|---:|---:|")
        for r in minilm:
            print(
                f"| {r['what']} | {r['ours_fast_ms']:.2f} | {r['ours_traced_ms']:.2f} | "
                f"{r['transformers_ms']:.2f} | {r['traced_over_transformers']:.2f}x |"
            )
    result = {"machine": machine, "forward": forward, "decoding": decoding, "minilm": minilm}
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
    return result


if __name__ == "__main__":
    main()
