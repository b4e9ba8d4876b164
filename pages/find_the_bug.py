"""Find the bug: classic attention bugs injected into the reverse model, correct beside buggy."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from practice import bugs
from ui.frame import require_frame
from ui.i18n import t, translated_widget
from ui.practice import attention_map, cached_bug_case, class_seed, say

require_frame()

KINDS = ("encoder", "decoder", "cross")


def side_map(side: bugs.Side, kind: str, title: str, key: str, where) -> None:
    weights = side.attention[kind][-1].mean(0)  # last layer, heads averaged
    rows = side.src_tokens if kind == "encoder" else side.dec_tokens
    cols = side.dec_tokens if kind == "decoder" else side.src_tokens
    attention_map(weights, rows, cols, key=key, title=title, where=where)


def outputs_table(case: bugs.BugCase) -> pd.DataFrame:
    c, b = case.correct, case.buggy
    return pd.DataFrame(
        {
            t("bugs.col.position"): list(range(1, len(c.labels) + 1)),
            t("bugs.col.label"): c.labels,
            t("bugs.col.correct"): c.predictions,
            t("bugs.col.buggy"): b.predictions[: len(c.labels)],
        }
    )


def measures(case: bugs.BugCase, kind: str) -> pd.DataFrame:
    rows = []
    for name, side in ((t("bugs.col.correct"), case.correct), (t("bugs.col.buggy"), case.buggy)):
        lo, hi = side.row_sums[kind]
        rows.append(
            {
                "": name,
                t("bugs.measure.accuracy"): f"{100 * side.accuracy:.0f}%",
                t("bugs.measure.loss"): f"{side.loss:.3f}",
                t("bugs.measure.row_sums"): f"{lo:.2f} – {hi:.2f}",
                t("bugs.measure.sharpness"): f"{side.sharpness[kind]:.2f}",
            }
        )
    return pd.DataFrame(rows)


st.title(t("bugs.title"))
st.caption(t("bugs.intro"))
seed = class_seed()
drawn = bugs.draws(seed)  # (bug, case seed) of each case, without running the model
case_names = {i: t("bugs.case_n", n=i + 1) for i in range(len(drawn))}
number = st.segmented_control(
    t("bugs.case"),
    list(case_names),
    key=translated_widget("bug_case"),
    default=0,
    format_func=case_names.__getitem__,
)
number = 0 if number is None else number
with st.spinner(t("bugs.running")):
    case = cached_bug_case(*drawn[number])
st.markdown(t("bugs.case_text", source=" ".join(case.source.split())))
kind_names = {k: t(f"bugs.kind.{k}") for k in KINDS}
kind = st.segmented_control(
    t("bugs.which_attention"),
    KINDS,
    key=translated_widget(f"bug_kind_{number}"),
    default=bugs.NEUTRAL_KIND,
    format_func=kind_names.__getitem__,
)
kind = kind or bugs.NEUTRAL_KIND
left, right = st.columns(2)
side_map(case.correct, kind, t("bugs.correct_title"), f"bug_ok_{number}", left)
side_map(case.buggy, kind, t("bugs.buggy_title"), f"bug_bad_{number}", right)
st.caption(t("bugs.map_caption"))
st.table(measures(case, kind), hide_index=True)  # a static table: it scrolls, never cuts a column
st.caption(t("bugs.measure_caption"))
st.dataframe(outputs_table(case), hide_index=True)

verdict_key = f"bug_verdict_{seed}_{number}"


def on_pick() -> None:
    choice = st.session_state.get(f"bug_choice_{number}")
    st.session_state[verdict_key] = "pick_one" if choice is None else case.check(choice)


with st.form(f"bug_form_{number}"):
    bug_names = {b: t(f"practice.bugs.name.{b}") for b in bugs.BUGS}
    st.radio(
        t("bugs.pick"),
        bugs.BUGS,
        index=None,
        key=translated_widget(f"bug_choice_{number}"),
        format_func=bug_names.__getitem__,
    )
    st.form_submit_button(t("practice.check"), type="primary", on_click=on_pick)
verdict = st.session_state.get(verdict_key)
if verdict == "pick_one":
    st.warning(t("practice.input.pick_one"), icon=":material/edit_note:")
elif verdict is not None:
    if verdict.correct:
        st.success(say(verdict), icon=":material/check_circle:")
        for step in case.solution:
            st.markdown(t(step.key, **step.params) if step.params else t(step.key))
        wrong, fixed = bugs.FIXES[case.bug]
        f1, f2 = st.columns(2)
        f1.markdown(f"**{t('bugs.buggy_code')}**")
        f1.code(wrong, language="python")
        f2.markdown(f"**{t('bugs.fixed_code')}**")
        f2.code(fixed, language="python")
    else:
        st.error(say(verdict), icon=":material/lightbulb:")
st.page_link("pages/practice.py", label=t("bugs.to_practice"), icon=":material/quiz:")
