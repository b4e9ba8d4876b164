"""A Trace as files people can take away: JSON for any tool, NPZ for NumPy."""

from __future__ import annotations

import io
import json

import numpy as np

from model.trace import Trace


def trace_to_json(trace: Trace, model: str = "", text: str = "") -> str:
    """Tokens and every attention map as nested lists ([layers][heads][queries][keys])."""
    payload = {
        "model": model,
        "text": text,
        "src_tokens": trace.src_tokens,
        "tgt_tokens": trace.tgt_tokens,
        "attention": {kind: a.round(decimals=5).tolist() for kind, a in trace.attention.items()},
        "axes": ["layer", "head", "query", "key"],
    }
    return json.dumps(payload, ensure_ascii=False)


def trace_to_npz(trace: Trace) -> bytes:
    """attention_<kind> float32 arrays plus src_tokens / tgt_tokens, compressed."""
    buffer = io.BytesIO()
    arrays = {f"attention_{kind}": a.numpy() for kind, a in trace.attention.items()}
    np.savez_compressed(
        buffer,
        src_tokens=np.array(trace.src_tokens, dtype=str),
        tgt_tokens=np.array(trace.tgt_tokens, dtype=str),
        **arrays,
    )
    return buffer.getvalue()
