"""The full head scan (model.analysis.heads.scan_heads) at a pretrained decoder's size.

A random-initialised model at Qwen2.5-0.5B's dimensions (its config only; nothing is
downloaded), mapped into our engine as a folder would be, scored on one and on four
sequences of 2 x 64 random tokens: what the Mechanisms page's "Find the mechanisms" tab
costs on a 0.5B folder.
"""

from __future__ import annotations

import statistics
import time

import torch

from bench.model_speed import QWEN25_05B, _sync, peak_extra_mib
from model.runtime.types import Encoded


class IdTokenizer:
    """A tokenizer over the bare ids (the scan draws ids, never reads text)."""

    special_tokens = frozenset()

    def __init__(self, eos_id: int):
        self.pad_id, self.bos_id, self.eos_id = eos_id, None, eos_id

    def encode(self, text: str, max_len: int) -> Encoded:
        return Encoded([], [])

    encode_target = encode

    def tokens(self, ids: list[int]) -> list[str]:
        return [f"t{i}" for i in ids]

    def detokenize(self, ids: list[int]) -> str:
        return " ".join(self.tokens(ids))


def qwen_sized_model(device: torch.device, dims: dict | None = None):
    """A LabModel at Qwen2.5-0.5B's dimensions with random weights, on ``device``."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from model.hf.decoder import decoder_config, decoder_from_weights
    from model.runtime.lab import LabModel

    config = Qwen2Config(**(dims or QWEN25_05B))
    torch.manual_seed(0)
    reference = Qwen2ForCausalLM(config).eval()
    network = decoder_from_weights(
        reference.state_dict(), decoder_config(config, max_len=4096), "qwen2"
    )
    info = {"engine": "attention-lab", "model_type": "qwen2"}
    return LabModel(
        "qwen2.5-0.5b-random", network, IdTokenizer(config.eos_token_id), device=device, info=info
    )


def bench_head_scan(
    device: torch.device, length: int = 64, repeats: int = 3, dims: dict | None = None
) -> dict:
    """Median seconds of the whole scan (every head's five scores and the loss of both
    copies) on 1 and on 4 sequences of 2 x ``length`` random tokens, with its memory."""
    from model.analysis.heads import scan_heads

    lm = qwen_sized_model(device, dims)
    rows = []
    for n in (1, 4):
        call = lambda n=n: scan_heads(lm, length=length, n=n)  # noqa: E731
        scan = call()  # warm-up
        times = []
        for _ in range(repeats):
            _sync(lm.device)
            start = time.perf_counter()
            call()
            _sync(lm.device)
            times.append(time.perf_counter() - start)
        rows.append(
            {
                "sequences": n,
                "tokens": 2 * scan.length,
                "scan_ms": 1e3 * statistics.median(times),
                "peak_mib": peak_extra_mib(call, lm.device),
                "heads": scan.shape[0] * scan.shape[1],
            }
        )
    layers, heads = scan.shape
    return {
        "what": f"Qwen2.5-0.5B dimensions (random weights): {layers} layers x {heads} heads",
        "device": str(lm.device),
        "params_m": sum(p.numel() for p in lm.network.parameters()) / 1e6,
        "rows": rows,
    }


def head_scan_table(r: dict) -> list[str]:
    out = [
        f"{r['what']}, {r['params_m']:.0f} M parameters, on {r['device']}.",
        "",
        "| sequences | tokens each | heads scored | scan | memory beyond the weights |",
        "|---:|---:|---:|---:|---:|",
    ]
    for row in r["rows"]:
        peak = "–" if row["peak_mib"] is None else f"{row['peak_mib']:,.0f} MiB"
        out.append(
            f"| {row['sequences']} | {row['tokens']} | {row['heads']} | "
            f"{row['scan_ms'] / 1e3:.2f} s | {peak} |"
        )
    return out
