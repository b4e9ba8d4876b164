"""Shared by the concept pages: a model that is always there (MiniLM when the chosen toy
checkpoint is not), and cached runs, so a rerun that moves a slider never reruns a model."""

from __future__ import annotations

import numpy as np
import streamlit as st

from model.analysis.concepts import (
    attention_cost,
    feed_forward_walk,
    permutation_demo,
    qk_products,
    qk_variance,
    softmax_example,
    softmax_saturation,
)
from model.analysis.walkthrough import Walkthrough, cross_walkthrough, record_inputs, walkthrough
from model.runtime.lab import LabModel
from model.runtime.types import ModelLoadError
from model.trace import Recorder
from ui.i18n import t
from ui.models import (
    TRACES,
    load_model,
    model_label,
    selected_device,
    selected_model,
    show_engine_line,
    show_load_detail,
)
from ui.sentence import sentence_input

FALLBACK = "minilm"
LOAD_ERRORS = (ModelLoadError, ValueError, OSError)


def try_model(name: str) -> tuple[LabModel | None, str]:
    """(model, "") or (None, why): no message drawn, for pages that show several models."""
    try:
        with st.spinner(t("model.loading", name=model_label(name))):
            return load_model(name, selected_device()), ""
    except LOAD_ERRORS as err:
        return None, str(err)


@st.cache_data(show_spinner=False)
def minilm_position_table() -> np.ndarray | None:
    """MiniLM's learned position embeddings [positions, d_model], or None when it cannot load
    (the positional and "since 2017" pages compare them with the sinusoids)."""
    lm, _ = try_model("minilm")
    if lm is None:
        return None
    return lm.network.embed.position.table.detach().float().cpu().numpy()


def concept_model() -> tuple[LabModel | None, str]:
    """The sidebar's model, or MiniLM with a clear note when that one cannot be used here.

    Our own networks only (toy checkpoints, MiniLM, BERT folders): the pages open the
    layers up, which a model run inside transformers does not allow.
    """
    name = selected_model() or FALLBACK
    lm, why = try_model(name)
    if lm is not None and not hasattr(lm, "network"):
        lm, why = None, t("concepts.not_our_network")
    if lm is not None:
        show_engine_line(lm)
        return lm, name
    label = model_label(name) if name in ("en2ko", "reverse", "sort", "minilm") else name
    if name == FALLBACK:
        st.error(t("model.load_failed", name=label), icon=":material/error:")
        show_load_detail(why)
        return None, name
    st.info(t("concepts.fallback", name=label), icon=":material/swap_horiz:")
    show_load_detail(why)
    lm, why = try_model(FALLBACK)
    if lm is None:
        st.error(t("model.load_failed", name=model_label(FALLBACK)), icon=":material/error:")
        show_load_detail(why)
    else:
        show_engine_line(lm)
    return lm, FALLBACK


def concept_sentence(lm: LabModel, name: str, key: str, default: str | None = None) -> str | None:
    """The shared sentence box, starting from the lecture's example where the model reads it."""
    fresh = key not in st.session_state and st.query_params.get(key) is None
    if fresh and default and not lm.encode(default).unknown:
        st.session_state[key] = default
        st.session_state[f"{key}_model"] = name
    return sentence_input(lm, name, key=key)


@st.cache_data(show_spinner=False, max_entries=64)
def cached_walkthrough(name: str, device: str, text: str, layer: int) -> Walkthrough:
    return walkthrough(load_model(name, device), text, layer)


@st.cache_data(show_spinner=False, max_entries=64)
def cached_cross_walkthrough(name: str, device: str, text: str, layer: int) -> Walkthrough:
    return cross_walkthrough(load_model(name, device), text, layer)


def layer_inputs(name: str, device: str, text: str) -> tuple[list[str], Recorder]:
    """One traced pass over ``text`` that keeps every attention's and FFN's input, kept
    beside the traces (ui.models.TRACES: bounded by bytes, read-only). The layer-norm page
    reads the first attention's input and one FFN's from it: its first visit runs the model
    once for both, and another FFN layer runs none."""
    lm = load_model(name, device)
    key = ("layer inputs", name, device, text, id(lm))
    return TRACES.get_or_compute(key, lambda: record_inputs(lm, text))


@st.cache_data(show_spinner=False, max_entries=64)
def cached_feed_forward(name: str, device: str, text: str, layer: int) -> dict:
    recorded = layer_inputs(name, device, text)
    return feed_forward_walk(load_model(name, device), text, layer, recorded=recorded)


def ffn_formula(ffn: dict) -> str:
    """The FFN as the model computes it (feed_forward_walk's sizes and activation), in two
    lines so a phone does not cut it: the paper's ReLU or GELU MLP, or a gated one (SwiGLU,
    GeGLU) whose third matrix V multiplies the activation element-wise (LLaMA and Gemma
    have no biases in it)."""
    d_m, d_f, act = ffn["d_model"], ffn["d_ff"], ffn["activation"]
    if ffn["gated"]:
        b = ("+ b_1", "+ b_V", "+ b_2") if ffn["bias"] else ("", "", "")
        return (
            rf"\begin{{gathered}} \mathrm{{FFN}}(x_i) = \big(\mathrm{{{act}}}(xW_1 {b[0]})"
            rf" \odot (xV {b[1]})\big)\,W_2 {b[2]} \\ W_1, V: {d_m} \times {d_f},\quad"
            rf" W_2: {d_f} \times {d_m} \end{{gathered}}"
        )
    inner = r"\max(0,\ xW_1 + b_1)" if act == "ReLU" else r"\mathrm{GELU}(xW_1 + b_1)"
    return (
        rf"\begin{{gathered}} \mathrm{{FFN}}(x_i) = {inner}\,W_2 + b_2 \\ "
        rf"W_1: {d_m} \times {d_f},\quad W_2: {d_f} \times {d_m} \end{{gathered}}"
    )


@st.cache_data(show_spinner=False, max_entries=64)
def cached_hidden(name: str, device: str, text: str, layer: int) -> tuple[list[str], np.ndarray]:
    """(tokens, [L, D]) the input of self-attention ``layer``."""
    lm = load_model(name, device)
    tokens, rec = layer_inputs(name, device, text)
    kind = "decoder" if lm.kind == "decoder" else "encoder"
    return tokens, rec.inputs[kind][layer]["query"][0].float().cpu().numpy()


@st.cache_data(show_spinner=False)
def cached_qk_variance() -> dict:
    return qk_variance([2**i for i in range(11)])


@st.cache_data(show_spinner=False, max_entries=16)
def cached_qk_products(d_k: int) -> np.ndarray:
    return qk_products(d_k, 4000, seed=d_k).numpy()


@st.cache_data(show_spinner=False)
def cached_saturation() -> dict:
    return softmax_saturation([2**i for i in range(11)])


@st.cache_data(show_spinner=False, max_entries=16)
def cached_softmax_example(d_k: int) -> dict:
    return softmax_example(d_k)


@st.cache_data(show_spinner=False)
def cached_attention_cost() -> dict:
    return attention_cost([16, 32, 64, 128, 256, 512, 1024], repeats=3)


@st.cache_data(show_spinner=False)
def cached_permutation_demo(a: tuple[str, ...], b: tuple[str, ...]):
    return permutation_demo(list(a), list(b))
