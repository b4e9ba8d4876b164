"""Practice: predict, compute, check. Exercises from the lab's own numbers, class sets by link."""

from __future__ import annotations

import secrets

import pandas as pd
import streamlit as st

import practice
from practice.core import Exercise, fmt_vec
from practice.parse import AnswerError
from ui.exercise_prompts import show_block_prompt
from ui.frame import require_frame
from ui.i18n import t, translated_widget
from ui.practice import (
    attention_map,
    cached_exercise,
    class_seed,
    class_topic,
    clear_answer_widgets,
    md_literal,
    raw_answer,
    read_answer,
    teacher_view,
)

require_frame()

ANSWER_KEY_ROWS = 10  # how many items of the set the teacher's key lists


def esc(value: object) -> object:
    """Markdown-safe text for a parameter (tokens such as <bos> stay visible)."""
    if isinstance(value, str):
        return value.replace("\\", "\\\\").replace("<", "\\<").replace(">", "\\>")
    return value


def tx(key: str, /, **params: object) -> str:
    return t(key, **{k: esc(v) for k, v in params.items()}) if params else t(key)


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
                t("practice.sdpa_row.col.vector"): [fmt_list(v) for v in d["keys"]],
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


def answer_widgets(ex: Exercise) -> None:
    """The answer boxes of ``ex``'s form (their values are read from the session state)."""
    if ex.form == "numbers":
        for f in ex.fields:
            label = t(f"practice.field.{f.name}", step=ex.data.get("step", ""))
            hint = t("practice.field.list_help", n=f.size) if f.size > 1 else None
            st.text_input(label, key=f"answer_{f.name}", placeholder=hint)
    elif ex.form == "shape":
        st.text_input(
            t("practice.field.shape"),
            key="answer_shape",
            placeholder=t("practice.field.shape_help"),
        )
    elif ex.form == "tokens":
        st.text_input(
            t("practice.field.tokens"),
            key="answer_tokens",
            placeholder=t("practice.field.tokens_help"),
        )
    elif ex.form == "choice":
        labels = {o: option_label(ex, o) for o in ex.options}  # fixed during the run
        st.radio(
            t("practice.field.choice"),
            ex.options,
            index=None,
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
        for f, v in zip(ex.fields, a):
            if isinstance(v, tuple):
                parts.append(fmt_vec(v))  # (no "-0.000")
            elif f.integer:
                parts.append(str(int(v)))
            else:
                parts.append(f"{v:.4g}")
        return " ; ".join(parts)
    if ex.form == "choice":
        return option_label(ex, a)
    if ex.form == "tokens":
        return " ".join(a)
    if ex.form == "shape":
        return str(list(a))
    keys = ex.data["keys"]
    return ", ".join(f"{q}→{keys[j]}" for q, j in zip(ex.data["queries"], a))


def on_check(ex: Exercise, feedback_key: str, key: tuple) -> None:
    """Read and check the answer before the rerun, so the score drawn above counts it."""
    try:
        answer = read_answer(ex, raw_answer(ex))
    except AnswerError as err:
        st.session_state[feedback_key] = err
        return
    fb = ex.check(answer)
    st.session_state[feedback_key] = fb
    st.session_state.setdefault("practice_results", {}).setdefault(key, fb.correct)  # 1st try


def move_on(index: int) -> None:
    st.session_state["practice_index"] = index
    clear_answer_widgets()


def new_set() -> None:
    st.session_state["practice_seed"] = secrets.randbelow(1_000_000)
    st.session_state["practice_index"] = 0
    clear_answer_widgets()


# --- the page ---------------------------------------------------------------------------------

st.title(t("practice.title"))
st.caption(t("practice.intro"))

seed = class_seed()
c1, c2 = st.columns([3, 2])
with c1:
    topic = class_topic()
with c2:
    teacher = teacher_view()
index = st.session_state.setdefault("practice_index", 0)
results: dict = st.session_state.setdefault("practice_results", {})
key = (seed, topic, index)

kind, sub = practice.item(seed, topic, index)
ex = cached_exercise(kind, sub)

done = [v for (s, tp, _), v in results.items() if (s, tp) == (seed, topic)]
m1, m2, m3 = st.columns(3)
m1.metric(t("practice.score"), f"{sum(done)} / {len(done)}", help=t("practice.score_help"))
m2.metric(t("practice.set"), seed)
m3.metric(t("practice.number"), index + 1)
st.caption(
    tx(
        "practice.share",
        link=f"?seed={seed}" + ("" if topic == practice.MIXED else f"&topic={topic}"),
    )
)

with st.container(border=True):
    st.subheader(
        t(
            "practice.exercise_title",
            n=index + 1,
            kind=t(f"practice.kind.{kind}"),
            topic=t(f"practice.topic.{ex.topic}"),
        )
    )
    show_prompt(ex, index)
    feedback_key = f"feedback_{seed}_{topic}_{index}"
    with st.form(f"answer_form_{index}"):
        answer_widgets(ex)
        st.form_submit_button(
            t("practice.check"), type="primary", on_click=on_check, args=(ex, feedback_key, key)
        )
    fb = st.session_state.get(feedback_key)
    if isinstance(fb, AnswerError):
        st.warning(
            t(fb.key, **{k: md_literal(v) for k, v in fb.params.items()}),
            icon=":material/edit_note:",
        )
        fb = None
    elif fb is not None:
        if fb.correct:
            st.success(tx(fb.key, **fb.params), icon=":material/check_circle:")
        else:
            st.error(tx(fb.key, **fb.params), icon=":material/lightbulb:")
    if fb is not None or teacher:
        st.markdown(f"**{t('practice.solution')}**")
        if teacher:
            st.info(tx("practice.teacher_answer", answer=answer_text(ex)), icon=":material/school:")
        show_solution(ex, index)

b1, b2 = st.columns(2)
b1.button(
    t("practice.another"),
    icon=":material/arrow_forward:",
    key="another",
    on_click=move_on,
    args=(index + 1,),
)
b2.button(t("practice.new_set"), icon=":material/shuffle:", key="new_set", on_click=new_set)

if teacher:
    st.subheader(t("practice.answer_key", n=ANSWER_KEY_ROWS, seed=seed))
    rows = []
    for i in range(ANSWER_KEY_ROWS):
        k_i, s_i = practice.item(seed, topic, i)
        e_i = cached_exercise(k_i, s_i)
        rows.append(
            {
                t("practice.number"): i + 1,
                t("practice.kind_col"): t(f"practice.kind.{k_i}"),
                t("practice.answer_col"): answer_text(e_i),
            }
        )
    st.dataframe(pd.DataFrame(rows), hide_index=True)

st.page_link("pages/find_the_bug.py", label=t("practice.to_bugs"), icon=":material/bug_report:")
