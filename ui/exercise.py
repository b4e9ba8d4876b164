"""How an exercise is drawn, shared by the self-study practice page and the class page:
its prompt, its answer boxes, its worked solution and its answer as the answer key prints it."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from practice.core import Exercise, fmt_vec
from ui.exercise_prompts import show_block_prompt
from ui.i18n import t, translated_widget
from ui.practice import attention_map


def esc(value: object) -> object:
    """Markdown-safe text for a parameter (tokens such as <bos> stay visible)."""
    if isinstance(value, str):
        return value.replace("\\", "\\\\").replace("<", "\\<").replace(">", "\\>")
    return value


def tx(key: str, /, **params: object) -> str:
    return t(key, **{name: esc(value) for name, value in params.items()}) if params else t(key)


def fmt_list(xs) -> str:
    return "[" + ", ".join(f"{x:g}" for x in xs) + "]"


# --- the prompt of each kind ------------------------------------------------------------------


def show_prompt(ex: Exercise, index: int) -> None:
    d = ex.data
    k = ex.kind
    if show_block_prompt(ex):
        return
    if k == "sdpa_row":
        n = len(d["keys"])
        st.markdown(tx(ex.prompt_key, n=n, d_k=d["d_k"]))
        st.markdown(f"q = `{fmt_list(d['q'])}`")
        frame = pd.DataFrame(
            {
                t("practice.sdpa_row.col.key"): [f"k{j + 1}" for j in range(n)],
                t("practice.sdpa_row.col.vector"): [fmt_list(key) for key in d["keys"]],
                t("practice.sdpa_row.col.allowed"): [
                    t("practice.yes") if a else t("practice.no") for a in d["allowed"]
                ],
            }
        )
        st.dataframe(frame, hide_index=True)
        st.caption(t(f"practice.sdpa_row.mask.{d['mask_kind']}", position=d["position"] + 1))
    elif k == "qk_variance":
        st.markdown(tx(ex.prompt_key, s2=d["s2"], d_k=d["d_k"]))
    elif k == "mha_shapes":
        st.markdown(
            tx(ex.prompt_key, b=d["b"], lq=d["lq"], lk=d["lk"], d_model=d["d_model"], h=d["h"])
        )
    elif k == "which_mask":
        st.markdown(tx(ex.prompt_key))
        attention_map(d["weights"], d["tokens"], d["tokens"], key=f"q_heat_{index}")
    elif k == "shift_right":
        st.markdown(tx(ex.prompt_key, target=" ".join(d["target"]), bos=d["bos"], eos=d["eos"]))
    elif k == "pe_dot":
        st.markdown(tx(ex.prompt_key, d_model=d["d_model"]))
    elif k == "pe_permutation":
        st.markdown(
            tx(
                ex.prompt_key,
                words=" ".join(d["words"]),
                words_b=" ".join(d["words_b"]),
                j=d["j"] + 1,
                word=d["words_b"][d["j"]],
                d=len(d["x"][0]),
            )
        )
        frame = pd.DataFrame(
            d["out_a"],
            index=[f"{i + 1}: {w}" for i, w in enumerate(d["words"])],
            columns=[f"y{c + 1}" for c in range(len(d["x"][0]))],
        )
        st.dataframe(frame.style.format("{:.3f}"))
    elif k == "layernorm":
        st.markdown(
            tx(
                ex.prompt_key,
                x=fmt_list(d["x"]),
                gamma=f"{d['gamma']:g}",
                beta=f"{d['beta']:g}",
                d=len(d["x"]),
            )
        )
    elif k == "noam":
        st.markdown(tx(ex.prompt_key, d_model=d["d_model"], warmup=d["warmup"], step=d["step"]))
    elif k == "attention_kind":
        st.markdown(tx(ex.prompt_key, layer=d["layer"] + 1, head=d["head"] + 1))
        attention_map(d["weights"], d["queries"], d["keys"], key=f"q_heat_{index}")
    elif k == "family_task":
        st.markdown(tx(ex.prompt_key, task=t(f"practice.family_task.task.{d['task']}")))
    elif k == "cross_attention":
        st.markdown(tx(ex.prompt_key, source=d["source"]))


def option_label(ex: Exercise, option: str) -> str:
    if ex.kind == "pe_dot":
        a, b = ex.data["pairs"][int(option)]
        return t("practice.pe_dot.option", a=a, b=b)
    if ex.kind == "family_task":
        return t(f"practice.family.option.{option}")
    return t(f"practice.{ex.kind}.option.{option}")


def answer_widgets(ex: Exercise, defaults: dict[str, object] | None = None) -> None:
    """The answer boxes of ``ex``'s form (their values are read from the session state).

    ``defaults``: what a box starts with where the session holds no value of its own (the
    class page puts a student's stored answer back), by widget key ("answer_shape", ...).
    A value the browser already holds wins over it."""
    defaults = defaults or {}

    def start(key: str, name: str = "value") -> dict[str, object]:
        value = defaults.get(key)
        return {} if value is None or key in st.session_state else {name: value}

    if ex.form == "numbers":
        for f in ex.fields:
            label = t(f"practice.field.{f.name}", step=ex.data.get("step", ""))
            hint = t("practice.field.list_help", n=f.size) if f.size > 1 else None
            key = f"answer_{f.name}"
            st.text_input(label, key=key, placeholder=hint, **start(key))
    elif ex.form == "shape":
        st.text_input(
            t("practice.field.shape"),
            key="answer_shape",
            placeholder=t("practice.field.shape_help"),
            **start("answer_shape"),
        )
    elif ex.form == "tokens":
        st.text_input(
            t("practice.field.tokens"),
            key="answer_tokens",
            placeholder=t("practice.field.tokens_help"),
            **start("answer_tokens"),
        )
    elif ex.form == "choice":
        labels = {o: option_label(ex, o) for o in ex.options}  # fixed during the run
        chosen = start("answer_choice").get("value")
        st.radio(
            t("practice.field.choice"),
            ex.options,
            index=ex.options.index(chosen) if chosen in ex.options else None,
            key=translated_widget("answer_choice"),
            format_func=labels.__getitem__,
        )
    elif ex.form == "cells":
        keys = ex.data["keys"]
        cell_names = {j: esc(f"{j + 1}:{k}") for j, k in enumerate(keys)}
        st.caption(t("practice.cross_attention.how"))
        for i, query in enumerate(ex.data["queries"]):
            st.segmented_control(
                f"{i + 1}. {esc(query)}",
                list(range(len(keys))),
                key=f"answer_cell_{i}",
                format_func=cell_names.__getitem__,
                **start(f"answer_cell_{i}", "default"),
            )


def show_solution(ex: Exercise, index: int) -> None:
    lines = [f"{i + 1}. {tx(step.key, **step.params)}" for i, step in enumerate(ex.solution)]
    st.markdown("\n".join(lines))
    if ex.kind == "cross_attention":
        d = ex.data
        attention_map(
            d["weights"],
            d["queries"],
            d["keys"],
            key=f"s_heat_{index}",
            title=t("practice.cross_attention.model_title"),
        )


def answer_text(ex: Exercise) -> str:
    """The answer as the teacher's key prints it."""
    a = ex.answer
    if ex.form == "numbers":
        parts = []
        for f, answer in zip(ex.fields, a):
            if isinstance(answer, tuple):
                parts.append(fmt_vec(answer))  # (no "-0.000")
            elif f.integer:
                parts.append(str(int(answer)))
            else:
                parts.append(f"{answer:.4g}")
        return " ; ".join(parts)
    if ex.form == "choice":
        return option_label(ex, a)
    if ex.form == "tokens":
        return " ".join(a)
    if ex.form == "shape":
        return str(list(a))
    keys = ex.data["keys"]
    return ", ".join(f"{q}→{keys[j]}" for q, j in zip(ex.data["queries"], a))
