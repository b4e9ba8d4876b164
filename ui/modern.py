"""Cached runs behind "Attention since 2017", so moving a slider never reruns a model and a
second visit costs only drawing. Plain data (numpy, lists) comes out, safe to cache."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st
import torch

from model.analysis.concepts import (
    attention_facts,
    attention_memory,
    cache_nbytes,
    farthest_reach,
    online_softmax_example,
    qk_by_distance,
    rope_rotation,
)
from model.analysis.summaries import sink_share
from model.attention import AttentionConfig, MultiHeadAttention
from model.runtime.decoding import greedy_decode
from model.training.lengths import load_results
from ui.concepts import minilm_position_table
from ui.i18n import t
from ui.models import load_model, model_label, show_engine_line
from viz.memo import memo_figure
from viz.modern import (
    human_bytes,
    length_figure,
    memory_figure,
    online_softmax_figure,
    qk_distance_figure,
    rope_rotation_figure,
    sink_figure,
)

MEMORY_NS = (64, 128, 256, 512, 1024)  # measuring every allocation: ~2 s at block 64
WINDOW_TEXT_TOKENS = 1024  # twice Gemma 3's window: a local layer must leave half a row out
WINDOW_SIDE = 128  # the pooled maps' blocks a side (8 positions a block at 1,024 tokens)


@st.cache_data(show_spinner=False)
def length_results() -> tuple[dict, list[dict]]:
    """The shipped length-generalisation result (assets/experiments/positions)."""
    return load_results()


@st.cache_data(show_spinner=False)
def qk_rows(with_learned: bool) -> list[dict]:
    table = minilm_position_table() if with_learned else None
    return qk_by_distance(learned_table=None if table is None else torch.from_numpy(table))


@st.cache_data(show_spinner=False, max_entries=64)
def rotation(pair: int, d_k: int, positions: int) -> list[dict]:
    return rope_rotation(pair, d_k, positions)


@dataclass
class CacheRun:
    """Greedy decoding of one input, with the cache and without, for the KV-cache section."""

    generated: list[str]  # tokens chosen, one per step
    fed: list[str]  # tokens fed to the decoder, one per cache row (prefix, then generated)
    prefix: int  # cache rows present before the first step (1 = <bos>, or the prompt)
    keys: list[np.ndarray]  # per layer, the final self-attention key cache [kv_heads, rows, d_k]
    # [steps]: each step's largest |logit| gap between the cached run and one recomputing the
    # whole prefix (what the equality check reads; the two [steps, vocab] arrays were 48 MiB
    # a sentence for Gemma 3's 262k-token vocabulary, up to 32 sentences kept)
    logit_gap: np.ndarray
    same_tokens: bool
    self_bytes: int  # bytes the self-attention cache holds at the end, measured
    cross_bytes: int  # encoder keys / values, computed once (encoder-decoder only)
    layers: int
    d_model: int
    n_heads: int
    kv_heads: int
    bytes_per_value: int


@st.cache_data(show_spinner=False, max_entries=32)
def cache_run(name: str, device: str, text: str, max_new: int = 24) -> CacheRun | None:
    lm = load_model(name, device)
    if lm.kind == "encoder":
        return None
    net, tgt = lm.network, lm.tgt_tokenizer
    enc = lm.encode(text)
    ids = torch.tensor([enc.ids], dtype=torch.long, device=lm.device)
    prefix_ids = [tgt.bos_id] if lm.kind == "encoder-decoder" else list(enc.ids)
    room = lm.max_len - len(prefix_ids)
    budget = max(0, min(max_new, room))
    if budget == 0:
        return None
    cache = net.new_cache()
    out, cached = greedy_decode(net, ids, tgt.bos_id, tgt.eos_id, budget, True, cache)
    full_out, full = greedy_decode(net, ids, tgt.bos_id, tgt.eos_id, budget, use_cache=False)
    generated = out[0].tolist()
    fed_ids = prefix_ids + generated[:-1]
    keys = [layer["self"]["k"][0].float().cpu().numpy() for layer in cache["layers"]]
    steps = min(cached.shape[1], full.shape[1])  # a run that chose otherwise may stop sooner
    gap = (cached[0, :steps].float() - full[0, :steps].float()).abs().amax(dim=-1)
    sizes = cache_nbytes(cache)
    first = keys[0]
    cfg = net.config
    return CacheRun(
        generated=tgt.tokens(generated),
        fed=tgt.tokens(fed_ids),
        prefix=len(prefix_ids),
        keys=keys,
        logit_gap=gap.cpu().numpy(),
        same_tokens=torch.equal(out, full_out),
        self_bytes=sizes["self"],
        cross_bytes=sizes.get("cross", 0),
        layers=len(keys),
        d_model=cfg.n_heads * cfg.d_k,  # the attention's width (d_model unless head_dim is set)
        n_heads=cfg.n_heads,
        kv_heads=first.shape[0],
        bytes_per_value=cache["layers"][0]["self"]["k"].element_size(),
    )


@st.cache_data(show_spinner=False, max_entries=8)
def gqa_demo(n_kv_heads: int, seed: int = 0) -> dict:
    """A random 8-head attention with ``n_kv_heads`` key/value heads: its weights' shape, its
    key/value parameter count, and (for 8) the gap to the plain multi-head module."""
    torch.manual_seed(seed)
    x = torch.randn(1, 6, 64)
    grouped = MultiHeadAttention(AttentionConfig(64, 8, n_kv_heads=n_kv_heads)).eval()
    with torch.no_grad():
        found = grouped(x, x, x)
        gap = None
        if n_kv_heads == 8:
            plain = MultiHeadAttention(AttentionConfig(64, 8)).eval()
            plain.load_state_dict(grouped.state_dict())
            ref = plain(x, x, x)
            gap = float(
                max(
                    (found.output - ref.output).abs().max(),
                    (found.weights - ref.weights).abs().max(),
                )
            )
    kv_params = sum(p.numel() for m in (grouped.k_proj, grouped.v_proj) for p in m.parameters())
    return {"shape": list(found.weights.shape), "kv_params": kv_params, "gap": gap}


@st.cache_data(show_spinner=False, max_entries=64)
def online_example(n_keys: int, block: int, seed: int):
    return online_softmax_example(n_keys, block, seed=seed)


@st.cache_data(show_spinner=False, max_entries=8)
def memory(block: int) -> dict[str, list[float]]:
    return attention_memory(list(MEMORY_NS), block_size=block)


@st.cache_data(show_spinner=False, max_entries=32)
def sinks(device: str, text: str) -> tuple[list[str], np.ndarray] | None:
    lm = load_model("minilm", device)
    trace = lm.trace(text)
    tokens = trace.src_tokens
    layers, heads, _, _ = trace.shape("encoder")
    # Each head's weight on each key averaged over queries, one map at a time: [L, H, 1, n]
    # (sink_share averages over queries itself, so one row is the same to it).
    per_key = torch.stack(
        [
            torch.stack([trace.attention_map("encoder", layer, h).mean(0) for h in range(heads)])
            for layer in range(layers)
        ]
    )[:, :, None, :]
    return tokens, sink_share(per_key, tokens).numpy()


# --- figures, built once per input and language ---------------------------------------------------
# A figure is a pure function of its (small, hashable) inputs and labels, so it is kept as its
# JSON with every other figure (viz.memo.memo_figure, bounded by bytes): a revisit then only
# sends it, instead of rebuilding every subplot.


@memo_figure
def length_chart(metric: str, names: dict, x_title: str, y_title: str, trained: str):
    meta, rows = length_results()
    train_max = meta.get("settings", {}).get("train_max_len", 16)
    return length_figure(
        rows,
        metric=metric,
        train_max_len=train_max,
        names=names,
        x_title=x_title,
        y_title=y_title,
        trained_label=trained,
    )


@memo_figure
def qk_chart(with_learned: bool, names: dict, series: dict, x_title: str, y_title: str):
    return qk_distance_figure(
        qk_rows(with_learned), names=names, series_names=series, x_title=x_title, y_title=y_title
    )


@memo_figure
def rope_chart(pairs: tuple[tuple[str, int], ...], n_pos: int, position_label: str):
    return rope_rotation_figure(
        {name: rotation(i, 64, n_pos) for name, i in pairs}, position_label=position_label
    )


@memo_figure
def flash_chart(n_keys: int, block: int, seed: int, tile: int, labels: dict):
    steps, scores, final_out, _ = online_example(n_keys, block, seed)
    return online_softmax_figure(steps, scores, final_out, upto=tile, **labels)


@memo_figure
def memory_chart(block: int, names: dict, x_title: str, y_title: str):
    return memory_figure(memory(block), names=names, x_title=x_title, y_title=y_title)


@memo_figure
def sink_chart(device: str, text: str, labels: dict):
    found = sinks(device, text)
    return sink_figure(found[1], **labels)


@dataclass
class WindowMaps:
    """A sliding-window layer beside a global one, one head each, over one long text."""

    n_tokens: int
    layers: tuple[int, int]  # (sliding, global), 0-based
    windows: tuple[int | None, int | None]
    maps: list  # two Overviews (model.trace.Overview): pooled weights, queries x keys
    reach: tuple[int, int]  # the farthest key (positions back) any query weighs, per layer


def passage(lm, n_tokens: int) -> str:
    """A text the model reads as at least ``n_tokens`` tokens: the lab's example sentences,
    numbered, over and over (a repeat also gives induction heads something to find)."""
    from ui.sentence import examples_for

    sentences = [s for name in ("en2ko", "minilm", "gemma3") for s in examples_for(name)]
    parts: list[str] = []
    while True:
        for sentence in sentences:
            parts.append(f"{len(parts) + 1}. {sentence}")
        text = " ".join(parts)
        if len(lm.encode(text).ids) >= n_tokens:
            return text


@st.cache_data(show_spinner=False, max_entries=2)
def window_maps(name: str, device: str, n_tokens: int = WINDOW_TEXT_TOKENS) -> WindowMaps:
    """The first sliding layer and the first global layer of ``name`` on a long passage, head
    1 each, pooled to WINDOW_SIDE blocks a side; computed once per model (about a second of
    wall time for Gemma 3, three with all 18 layers)."""
    lm = load_model(name, device)
    cfg = lm.config
    windows = [cfg.layer_window(i) for i in range(cfg.n_decoder_layers)]
    local = next(i for i, w in enumerate(windows) if w is not None)
    wide = next(i for i, w in enumerate(windows) if w is None)
    ids = lm.encode(passage(lm, n_tokens)).ids[:n_tokens]
    text = lm.input_tokenizer.detokenize(ids)
    # the maps alone, up to the global layer: Gemma 3's first 6 of 18 (a third of the work)
    trace = lm.trace(text, max_new_tokens=0, predictions=False, n_layers=max(local, wide) + 1)
    maps = [trace.attention_overview("decoder", i, 0, WINDOW_SIDE, "max") for i in (local, wide)]
    reach = tuple(farthest_reach(trace.attention_map("decoder", i, 0)) for i in (local, wide))
    return WindowMaps(
        n_tokens=trace.shape("decoder")[-1],
        layers=(local, wide),
        windows=(windows[local], windows[wide]),
        maps=maps,
        reach=reach,
    )


def show_model_facts(folder: str, device: str) -> None:
    """The sidebar's own model, in numbers its config sets (attention_facts): positions and
    rotary base (both, where sliding layers have their own), query and key/value heads, and
    its cache. Metrics in one wrapping row, each as wide as its value: in thirds of a
    1024 px page or a phone, "RoPE (rotary)" and "360.0 MiB" were cut off."""
    lm = load_model(folder, device)
    facts = attention_facts(lm.config)
    with st.container(border=True):
        st.subheader(t("models.yours.header", name=model_label(folder)))
        show_engine_line(lm)
        row = st.container(horizontal=True, gap="medium")
        row.metric(
            t("models.yours.positions"), t(f"modern.scheme.{facts['positions']}"), width="content"
        )
        base, local = facts["rope_base"], facts["rope_local_base"]
        if local is not None:
            row.metric(t("models.yours.rope_base_local"), f"{local:,.0f}", width="content")
            row.metric(t("models.yours.rope_base_global"), f"{base:,.0f}", width="content")
        else:
            row.metric(
                t("models.yours.rope_base"), f"{base:,.0f}" if base else "–", width="content"
            )
        row.metric(
            t("models.yours.heads"),
            t("models.yours.heads_value", q=facts["n_heads"], kv=facts["kv_heads"]),
            width="content",
        )
        row.metric(
            t("models.yours.per_token"), human_bytes(facts["cache_per_token"]), width="content"
        )
        row.metric(
            t("models.yours.at_max", n=f"{facts['max_len']:,}"),
            human_bytes(facts["cache_at_max_len"]),
            width="content",
        )
        st.caption(
            t(
                f"models.yours.{facts['attention']}",
                layers=facts["layers"],
                kv=facts["kv_heads"],
                group=facts["group"],
                d_k=facts["d_k"],
                mha=human_bytes(facts["cache_if_mha"]),
            )
        )
        if facts["sliding_layers"]:
            st.caption(
                t(
                    "models.yours.windows",
                    local=facts["sliding_layers"],
                    glob=facts["layers"] - facts["sliding_layers"],
                    w=f"{facts['window']:,}",
                    past=human_bytes(facts["cache_per_token_past_window"]),
                    n=f"{facts['max_len']:,}",
                    all_global=human_bytes(facts["cache_if_all_global"]),
                )
            )
