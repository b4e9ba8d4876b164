"""Tables from traces: per-head statistics and the long (layer, head, query, key) form."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from model.analysis.summaries import entropy, first_token_share, mean_distance


def head_stats_frame(attention: torch.Tensor, self_attention: bool) -> pd.DataFrame:
    """One row per (layer, head): entropy (nats), for self-attention the mean distance, and
    the weight on the first token.

    Layers and heads are numbered from 1, as people count them.
    """
    stats = {"entropy": entropy(attention)}
    if self_attention:
        stats["mean_distance"] = mean_distance(attention)
    stats["first_token"] = first_token_share(attention)
    return _stats_table(stats)


def head_stats_table(stats: dict[str, torch.Tensor]) -> pd.DataFrame:
    """One row per (layer, head) of per-head statistics, each [layers, heads] (an attention
    view's ``statistics()``), layers and heads counted from 1."""
    return _stats_table(stats)


def _stats_table(stats: dict[str, torch.Tensor]) -> pd.DataFrame:
    n_layers, n_heads = stats["entropy"].shape
    layers, heads = np.divmod(np.arange(n_layers * n_heads), n_heads)
    frame = pd.DataFrame({"layer": layers + 1, "head": heads + 1})
    for name, values in stats.items():
        frame[name] = values.flatten().numpy()
    return frame


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


def window_frame(trace, kind: str, layer: int, rows: slice, cols: slice) -> pd.DataFrame:
    """``attention_frame`` of one window of one layer, every head (a long input's CSV):
    layer counted from 1, query and key positions in the whole text, not the window."""
    from model.analysis.export import window_maps

    found = window_maps(trace, kind, layer, rows, cols)
    frame = attention_frame(
        torch.from_numpy(found["attention"])[None],
        found["query_tokens"].tolist(),
        found["key_tokens"].tolist(),
    )
    frame["layer"] = layer + 1
    frame["query"] += rows.start
    frame["key"] += cols.start
    return frame
