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


def window_maps(trace: Trace, kind: str, layer: int, rows: slice, cols: slice) -> dict:
    """One window of one layer, every head, as arrays: what a long input's downloads hold
    (every map together would be gigabytes). Positions count from 0, as the trace does."""
    q_tokens, k_tokens = trace.tokens(kind)
    q_pos, k_pos = np.arange(len(q_tokens))[rows], np.arange(len(k_tokens))[cols]
    return {
        "attention": trace.attention_heads(kind, layer, rows=rows, cols=cols).numpy(),
        "query_positions": q_pos,
        "key_positions": k_pos,
        "query_tokens": np.array([q_tokens[i] for i in q_pos], dtype=str),
        "key_tokens": np.array([k_tokens[i] for i in k_pos], dtype=str),
    }


def window_to_json(
    trace: Trace, kind: str, layer: int, rows: slice, cols: slice, model: str = "", text: str = ""
) -> str:
    """``window_maps`` as JSON: attention [heads][queries][keys], layer counted from 1."""
    found = window_maps(trace, kind, layer, rows, cols)
    payload = {
        "model": model,
        "text": text,
        "kind": kind,
        "layer": layer + 1,
        **{name: x.tolist() for name, x in found.items() if name != "attention"},
        "attention": found["attention"].round(decimals=5).tolist(),
        "axes": ["head", "query", "key"],
    }
    return json.dumps(payload, ensure_ascii=False)


def window_to_npz(trace: Trace, kind: str, layer: int, rows: slice, cols: slice) -> bytes:
    """``window_maps`` as a compressed NPZ (attention float32 [heads, queries, keys])."""
    buffer = io.BytesIO()
    np.savez_compressed(
        buffer, layer=np.int64(layer + 1), **window_maps(trace, kind, layer, rows, cols)
    )
    return buffer.getvalue()
