"""Benchmark: tokens/s of the fast (fused SDPA) and traced (fused SDPA + query/key record) paths.

    python -m bench.model_speed [--device auto] [--repeats 7] [--minilm-lengths 20,256]
        [--decoder-length 64] [--long-length 4096] [--json out.json]

The MiniLM section times our mapped encoder beside transformers' own BertModel on the same
weights and the same input, so the cost of running a real model through our code is visible.
The pretrained-decoder section does the same for a random-initialised model at
Qwen2.5-0.5B's dimensions (its config only; nothing is downloaded): our traced path, which
keeps what every attention map is recomputed from, beside transformers' eager forward asked
for its attentions.

The long-input section (--long-length 4096) traces that model's size over one long text on
the CPU: the fast forward beside the traced one (fused attention + the query/key record),
the memory each needs, and what a view costs afterwards. bench.gpu_long does the same on a
GPU at 8k-32k tokens.

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


def time_side_by_side_cpu(
    fns: dict[str, Callable[[], object]], repeats: int
) -> tuple[dict[str, float], dict[str, float]]:
    """(median wall seconds, median CPU seconds of this thread) per call, interleaved.

    With one torch thread all the work runs on the calling thread, so its CPU time does not
    count the time other processes held the cores: on a shared machine the fairer ratio."""
    for fn in fns.values():
        fn()
    wall: dict[str, list[float]] = {name: [] for name in fns}
    cpu: dict[str, list[float]] = {name: [] for name in fns}
    names = list(fns)
    for r in range(repeats):
        # The order turns every repeat, so no path always runs after the same other one.
        for name in names[r % len(names) :] + names[: r % len(names)]:
            fn = fns[name]
            start, start_cpu = time.perf_counter(), time.thread_time()
            fn()
            cpu[name].append(time.thread_time() - start_cpu)
            wall[name].append(time.perf_counter() - start)
    return (
        {name: statistics.median(ts) for name, ts in wall.items()},
        {name: statistics.median(ts) for name, ts in cpu.items()},
    )


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


# Qwen2.5-0.5B's dimensions (its config.json), so the figures are a real small model's.
QWEN25_05B = dict(
    vocab_size=151936,
    hidden_size=896,
    intermediate_size=4864,
    num_hidden_layers=24,
    num_attention_heads=14,
    num_key_value_heads=2,
    max_position_embeddings=32768,
    rope_theta=1_000_000.0,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
    bos_token_id=151643,
    eos_token_id=151643,
)


def _peak_reset() -> bool:
    """Reset this process's peak RSS (Linux: /proc/self/clear_refs), so the next reading of
    VmHWM is the peak of what runs after it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _rss_mib(field: str = "VmRSS") -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def peak_extra_mib(fn: Callable[[], object], device: torch.device) -> float | None:
    """Memory one call needs beyond what is already held, in MiB: the CUDA allocator's peak,
    or on CPU the rise of the process's peak RSS over its RSS before the call."""
    import gc

    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        fn()
        torch.cuda.synchronize()
        return (torch.cuda.max_memory_allocated() - base) / 2**20
    before = _rss_mib()
    if before is None or not _peak_reset():
        return None
    fn()
    peak = _rss_mib("VmHWM")
    return None if peak is None else max(0.0, peak - before)


def bench_pretrained_decoder(
    device: torch.device,
    length: int,
    repeats: int,
    dims: dict | None = None,
    label: str = "Qwen2.5-0.5B dimensions",
) -> dict:
    """One ``length``-token trace through our engine beside transformers' eager forward, on
    the same random weights at Qwen2.5-0.5B's size (mapped by model.hf.decoder, shared, not
    copied), with the memory each forward needs on top of the weights."""

    from transformers import Qwen2Config, Qwen2ForCausalLM

    from model.hf.decoder import decoder_config, decoder_from_weights

    config = Qwen2Config(**(dims or QWEN25_05B))
    config._attn_implementation = "eager"  # the implementation that returns attention weights
    torch.manual_seed(0)
    reference = Qwen2ForCausalLM(config).eval()
    cfg = decoder_config(config, max_len=4096)
    ours = decoder_from_weights(reference.state_dict(), cfg, "qwen2")
    reference, ours = reference.to(device), ours.to(device)
    ids = torch.randint(0, config.vocab_size, (1, length), device=device)
    calls = {
        "ours_traced": lambda: ours(ids, trace=True),
        "ours_fast": lambda: ours(ids),
        "transformers_eager": lambda: reference(input_ids=ids, output_attentions=True),
    }
    one_thread = device.type == "cpu" and torch.get_num_threads() == 1
    with torch.inference_mode():
        if one_thread:
            t, cpu = time_side_by_side_cpu(calls, repeats)
        else:
            t, cpu = time_side_by_side(calls, repeats, device), None
        memory = {name: peak_extra_mib(fn, device) for name, fn in calls.items()}
        logits_gap = float((ours(ids).logits - reference(input_ids=ids).logits).abs().max())
    weights_mib = sum(p.numel() * p.element_size() for p in ours.parameters()) / 2**20
    result = {
        "what": f"{label} (random weights), {length} tokens, batch 1",
        "tokens": length,
        "params_m": sum(p.numel() for p in ours.parameters()) / 1e6,
        "weights_mib": weights_mib,
        **{f"{name}_ms": 1e3 * t[name] for name in calls},
        **{f"{name}_peak_mib": memory[name] for name in calls},
        "speed_vs_transformers": t["transformers_eager"] / t["ours_traced"],
        # One torch thread: the same ratio in CPU time, which other processes cannot skew.
        "cpu_speed_vs_transformers": (
            cpu["transformers_eager"] / cpu["ours_traced"] if cpu else None
        ),
        "threads": torch.get_num_threads(),
        "max_logit_difference": logits_gap,
    }
    return result


def bench_long_trace(length: int, repeats: int, vocab: int = 32000) -> dict:
    """One long input through a Qwen2.5-0.5B-sized decoder (random weights; the vocabulary
    cut from 151,936 to ``vocab`` so [L, vocab] logits stay small on a laptop): the fast
    forward beside the traced one (fused attention + the query/key record and, as the
    explorer's pass on a CPU, the block sums; to the Trace a page reads), peak memory beyond
    the weights of each, and what a view then costs: one head's 1,024 x 1,024 overview, a
    512-row zoom, that zoom's four stages and every head's statistics."""
    from transformers import Qwen2Config

    from model.analysis.summaries import trace_head_statistics
    from model.hf.decoder import decoder_config
    from model.trace import summed_blocks_for

    device = torch.device("cpu")
    dims = {**QWEN25_05B, "vocab_size": vocab, "bos_token_id": None, "eos_token_id": None}
    cfg = decoder_config(Qwen2Config(**dims))
    torch.manual_seed(0)
    ours = build_model(cfg).eval()
    ids = torch.randint(0, vocab, (1, length))
    tokens = ["t"] * length

    def trace_pass():  # as the explorer's pass: with the block sums a long CPU input records
        blocks = summed_blocks_for(length, device)
        return ours(ids, trace=True, summed_blocks=blocks).trace(0, [], tokens, ids[0].tolist())

    calls = {"ours_fast": lambda: ours(ids), "ours_traced": trace_pass}
    with torch.inference_mode():
        t = time_side_by_side(calls, repeats, device)
        memory = {name: peak_extra_mib(fn, device) for name, fn in calls.items()}
        trace = trace_pass()
    layer, head, zoom = cfg.n_decoder_layers // 2, 3, slice(length - 512, length)
    views = {
        "overview": lambda: trace.attention_overview("decoder", layer, head, size=1024),
        "zoom": lambda: trace.attention_map("decoder", layer, head, rows=zoom, cols=zoom),
        "stages": lambda: trace.attention_stages("decoder", layer, head, rows=zoom, cols=zoom),
        "statistics": lambda: trace_head_statistics(trace, "decoder"),
    }
    view_s = time_side_by_side(views, max(1, repeats), device)
    record_mib = trace.record_bytes / 2**20
    fast, traced_peak = memory["ours_fast"], memory["ours_traced"]
    return {
        "what": f"Qwen2.5-0.5B dimensions (vocabulary {vocab:,}), {length} tokens, batch 1",
        "tokens": length,
        "weights_mib": sum(p.numel() * p.element_size() for p in ours.parameters()) / 2**20,
        **{f"{name}_ms": 1e3 * v for name, v in t.items()},
        **{f"{name}_peak_mib": v for name, v in memory.items()},
        "record_mib": record_mib,
        "all_maps_mib": cfg.n_decoder_layers * cfg.n_heads * length * length * 4 / 2**20,
        "traced_over_fast_time": t["ours_traced"] / t["ours_fast"],
        "traced_peak_over_fast_plus_record": (
            traced_peak / (fast + record_mib) if fast is not None and traced_peak else None
        ),
        **{f"{name}_s": v for name, v in view_s.items()},
        "threads": torch.get_num_threads(),
    }


def long_trace_table(d: dict) -> list[str]:
    """Markdown lines for the long-input section (also used by bench.benchreport)."""
    ratio = d["traced_peak_over_fast_plus_record"]
    return [
        f"{d['what']}, {d['threads']} torch thread(s): the traced forward keeps each layer's "
        f"queries and keys ({_mib(d['record_mib'])}), not the maps ({_mib(d['all_maps_mib'])} "
        "for every layer and head).",
        "",
        "| path | time | memory beyond the weights (peak) |",
        "|---|---:|---:|",
        f"| fast (fused attention) | {d['ours_fast_ms']:,.0f} ms | {_mib(d['ours_fast_peak_mib'])} |",
        f"| traced (fused attention + record, to the Trace) | {d['ours_traced_ms']:,.0f} ms "
        f"| {_mib(d['ours_traced_peak_mib'])} |",
        "",
        f"**Traced / fast: {d['traced_over_fast_time']:.2f}x the time**"
        + (f", {ratio:.2f}x the fast path's memory + the record." if ratio else ".")
        + f" Then one head's 1,024 x 1,024 overview takes {d['overview_s']:.2f} s, a 512 x 512 "
        f"zoom {d['zoom_s']:.2f} s and that zoom's four stages {d['stages_s']:.2f} s, with no "
        "new forward pass"
        + (
            f"; the statistics of every head of every layer {d['statistics_s']:.2f} s."
            if "statistics_s" in d
            else "."
        ),
    ]


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
    parser.add_argument(
        "--decoder-length",
        type=int,
        default=64,
        help="tokens for the Qwen2.5-0.5B-sized decoder; 0 skips it",
    )
    parser.add_argument(
        "--long-length",
        type=int,
        default=0,
        help="tokens for the long-input trace on the CPU (Qwen2.5-0.5B size); 0 skips it",
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
    decoder = (
        bench_pretrained_decoder(device, args.decoder_length, args.repeats)
        if args.decoder_length > 0
        else None
    )
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
    if decoder:
        print("\n" + "\n".join(decoder_table(decoder)))
    long_trace = (
        bench_long_trace(args.long_length, max(1, args.repeats // 3))
        if args.long_length > 0 and device.type == "cpu"
        else None
    )
    if long_trace:
        print("\n" + "\n".join(long_trace_table(long_trace)))
    result = {
        "machine": machine,
        "forward": forward,
        "decoding": decoding,
        "minilm": minilm,
        "pretrained_decoder": decoder,
        "long_trace": long_trace,
    }
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
    return result


def _mib(x: float | None) -> str:
    return "n/a" if x is None else f"{x:,.0f} MiB"


def decoder_table(d: dict) -> list[str]:
    """Markdown lines for the pretrained-decoder section (also used by bench.benchreport)."""
    return [
        f"{d['what']}: {d['params_m']:,.0f} M parameters, {_mib(d['weights_mib'])} of float32 "
        f"weights; our logits differ from transformers' by at most {d['max_logit_difference']:.1e}.",
        "",
        "| path | time | memory beyond the weights (peak) |",
        "|---|---:|---:|",
        f"| ours, traced (query/key record; any map on demand) | {d['ours_traced_ms']:,.0f} ms "
        f"| {_mib(d['ours_traced_peak_mib'])} |",
        f"| ours, fast (fused attention) | {d['ours_fast_ms']:,.0f} ms "
        f"| {_mib(d['ours_fast_peak_mib'])} |",
        f"| transformers, eager with attentions | {d['transformers_eager_ms']:,.0f} ms "
        f"| {_mib(d['transformers_eager_peak_mib'])} |",
        "",
        f"**Our traced path runs at {d['speed_vs_transformers']:.2f}x transformers' eager speed** "
        "(its time divided by ours; the goal is at least 0.9x)"
        + (
            f"; in CPU time of the one torch thread, which other processes cannot skew, "
            f"{d['cpu_speed_vs_transformers']:.2f}x."
            if d.get("cpu_speed_vs_transformers")
            else "."
        ),
    ]


if __name__ == "__main__":
    main()
