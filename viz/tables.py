"""Tables from traces: per-head statistics and the long (layer, head, query, key) form."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from model.analysis.summaries import entropy, mean_distance


def head_stats_frame(attention: torch.Tensor, self_attention: bool) -> pd.DataFrame:
    """One row per (layer, head): entropy (nats), and for self-attention the mean distance.

    Layers and heads are numbered from 1, as people count them.
    """
    n_layers, n_heads = attention.shape[:2]
    layers, heads = np.divmod(np.arange(n_layers * n_heads), n_heads)
    frame = pd.DataFrame(
        {"layer": layers + 1, "head": heads + 1, "entropy": entropy(attention).flatten().numpy()}
    )
    if self_attention:
        frame["mean_distance"] = mean_distance(attention).flatten().numpy()
    return frame


def streamed_head_stats(
    trace, kind: str, n_layers: int, n_heads: int, self_attention: bool
) -> pd.DataFrame:
    """``head_stats_frame`` read one head's map at a time (Trace.attention_map), so a long
    input never holds every map of the model at once."""
    parts = [
        head_stats_frame(trace.attention_map(kind, layer, head)[None, None], self_attention).assign(
            layer=layer + 1, head=head + 1
        )
        for layer in range(n_layers)
        for head in range(n_heads)
    ]
    return pd.concat(parts, ignore_index=True)


def attention_frame(
    attention: torch.Tensor, query_tokens: list[str], key_tokens: list[str]
) -> pd.DataFrame:
    """[L, H, Lq, Lk] -> rows of (layer, head, query, query_token, key, key_token, weight).

    Layers and heads count from 1; query and key are 0-based token positions, so repeated
    tokens stay apart.
    """
    n_layers, n_heads, lq, lk = attention.shape
    index = pd.MultiIndex.from_product(
        [range(1, n_layers + 1), range(1, n_heads + 1), range(lq), range(lk)],
        names=["layer", "head", "query", "key"],
    )
    frame = pd.DataFrame({"weight": attention.reshape(-1).numpy()}, index=index).reset_index()
    frame.insert(3, "query_token", np.asarray(query_tokens, dtype=object)[frame["query"]])
    frame.insert(5, "key_token", np.asarray(key_tokens, dtype=object)[frame["key"]])
    return frame
