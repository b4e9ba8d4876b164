"""Where the traced forward's time goes, beyond the fast forward, on one GPU.

    python -m bench.gpu_trace_parts [--out parts.json] [--small]

bench.gpu_long found the traced forward (fused attention + the query/key record + the Trace a
page reads) 1.14x transformers' SDPA forward at 8,192 tokens of a LLaMA-1B-size model in
bfloat16 (issue 34's target: 1.1x). This script splits the difference, everything timed side
by side in one process (medians of interleaved calls):

1. the traced path as model.trace has it now; with torch.topk over whole rows for the
   predictions' top-k (as before); without statistics; without predictions; the forward with
   the record alone; beside transformers' SDPA forward and our fast forward;
2. the predictions (checked equal both ways) and one hidden state's statistics, alone;
3. the ten kernels or ops with the most self time in one traced call (torch.profiler).

--small runs tiny sizes on the CPU, to see the script work.
"""

from __future__ import annotations

import contextlib
import json
import time

import torch

from bench.gpu_long import LLAMA_1B, SMALL, build, device_name, gpu_args, trace_ids
from bench.model_speed import time_side_by_side
from model import trace as trace_module
from model.trace import Predictions, Recorder


def top_k_torch(x: torch.Tensor, k: int) -> torch.Tensor:
    """The predictions' top-k before: torch.topk over every whole row."""
    return x.topk(k, dim=-1).indices


@contextlib.contextmanager
def patched(**parts):
    """model.trace with some functions replaced for the duration: name -> function."""
    saved = {name: getattr(trace_module, name) for name in parts}
    try:
        for name, fn in parts.items():
            setattr(trace_module, name, fn)
        yield
    finally:
        for name, fn in saved.items():
            setattr(trace_module, name, fn)


def _with(fn, **parts):
    def run():
        with patched(**parts):
            return fn()

    return run


def _no_stats(self, *args):
    return None


@contextlib.contextmanager
def nothing_recorded():
    """The traced path without the per-token statistics."""
    saved = (Recorder.add_norm, Recorder.add_residual)
    Recorder.add_norm = Recorder.add_residual = _no_stats
    try:
        yield
    finally:
        Recorder.add_norm, Recorder.add_residual = saved


def _without_stats(fn):
    def run():
        with nothing_recorded():
            return fn()

    return run


def same_predictions(a: Predictions, b: Predictions) -> bool:
    """Equal probabilities, best first (ids may differ only among tied logits)."""
    ok = torch.allclose(a.top_probs, b.top_probs, rtol=1e-4, atol=1e-7)
    if a.next_probs is not None:
        ok = ok and torch.allclose(a.next_probs, b.next_probs, rtol=1e-4, atol=1e-7)
    return bool(ok)


def top_kernels(fn, device: torch.device, n: int = 10) -> list[dict]:
    """The ``n`` kernels (or CPU ops) with the most self time in one call of ``fn``."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    fn()
    with profile(activities=activities) as prof:
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
    key = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    events = sorted(prof.key_averages(), key=lambda e: getattr(e, key, 0), reverse=True)
    return [
        {"name": e.key[:90], "calls": e.count, "ms": getattr(e, key, 0) / 1e3} for e in events[:n]
    ]


def measure(device, dtype, dims, n: int, repeats: int) -> dict:
    reference, ours = build("llama", dims, dtype, device, "sdpa")
    ids = torch.randint(0, dims["vocab_size"], (1, n), device=device)
    id_list = ids[0].tolist()
    row: dict = {"what": f"LLaMA-1B dimensions, {dtype}, {n} tokens", "tokens": n}
    old_top_k = {"top_k": top_k_torch}
    with torch.inference_mode():
        whole = lambda: trace_ids(ours, ids, id_list)  # noqa: E731
        calls = {
            "transformers_sdpa": lambda: reference(input_ids=ids),
            "ours_fast": lambda: ours(ids),
            "ours_traced": whole,
            "traced, top-k by torch.topk": _with(whole, **old_top_k),
            "traced without statistics": _without_stats(whole),
            "traced without predictions": _with(whole, Predictions=_NoPredictions),
            "forward with the record only": lambda: ours(ids, trace=True),
        }
        t = time_side_by_side(calls, repeats, device)
        row["ms"] = {k: 1e3 * v for k, v in t.items()}
        row["vs_sdpa"] = {k: v / t["transformers_sdpa"] for k, v in t.items()}
        logits = ours(ids).logits[0]
        now = Predictions.from_logits(logits, id_list)
        with patched(**old_top_k):
            before = Predictions.from_logits(logits, id_list)
        row["predictions_equal_before"] = same_predictions(now, before)
        alone = {
            "predictions": lambda: Predictions.from_logits(logits, id_list),
            "predictions, top-k by torch.topk": _with(
                lambda: Predictions.from_logits(logits, id_list), **old_top_k
            ),
        }
        hidden = torch.randn(1, n, dims["hidden_size"], device=device, dtype=dtype)
        alone["statistics of one hidden state"] = lambda: trace_module._token_stats(hidden)
        row["alone_ms"] = {k: 1e3 * v for k, v in time_side_by_side(alone, repeats, device).items()}
        row["top_kernels"] = top_kernels(whole, device)
    print(json.dumps(row), flush=True)
    return row


class _NoPredictions(Predictions):
    """Predictions that cost nothing: the traced path without them."""

    @classmethod
    def on_device(cls, logits, ids=None):
        return None


def main(argv: list[str] | None = None) -> dict:
    args = gpu_args(argv, __doc__.split("\n")[0], repeats=7)
    started = time.perf_counter()
    if args.small:
        device, dtype, dims, lengths, repeats = torch.device("cpu"), torch.float32, SMALL, [256], 2
    else:
        device, dtype, dims, lengths = torch.device("cuda"), torch.bfloat16, LLAMA_1B, [8192, 32768]
        repeats = args.repeats
    result = {
        "device": device_name(device),
        "torch": torch.__version__,
        "small": bool(args.small),
        "rows": [measure(device, dtype, dims, n, repeats) for n in lengths],
    }
    result["seconds"] = time.perf_counter() - started
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    main()
