"""Practice: predict, compute, check. Exercises from the lab's own numbers, class sets by link."""

from __future__ import annotations

import secrets

import streamlit as st

import practice
from practice.core import Exercise
from practice.parse import AnswerError
from ui.a11y import announce
from ui.exercise import answer_widgets, show_prompt, show_solution, tx
from ui.frame import require_frame
from ui.i18n import t
from ui.practice import (
    cached_exercise,
    class_seed,
    class_topic,
    clear_answer_widgets,
    md_literal,
    raw_answer,
    read_answer,
)

require_frame()

WRONG_TRIES_BEFORE_SOLUTION = 2  # the specific hint gets its chance first


SAY_KEY = "_practice_say"  # what the last press changed, said once by the live region


def on_check(ex: Exercise, feedback_key: str, key: tuple) -> None:
    """Read and check the answer before the rerun, so the score drawn above counts it."""
    st.session_state[SAY_KEY] = "check"
    try:
        answer = read_answer(ex, raw_answer(ex))
    except AnswerError as err:
        st.session_state[feedback_key] = err
        return
    fb = ex.check(answer)
    st.session_state[feedback_key] = fb
    st.session_state.setdefault("practice_results", {}).setdefault(key, fb.correct)  # 1st try
    if not fb.correct:
        wrongs = st.session_state.setdefault("practice_wrongs", {})
        wrongs[key] = wrongs.get(key, 0) + 1


def ask_solution(key: tuple) -> None:
    st.session_state.setdefault("practice_asked", set()).add(key)
    st.session_state[SAY_KEY] = "solution"


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
topic = class_topic()
index = st.session_state.setdefault("practice_index", 0)
results: dict = st.session_state.setdefault("practice_results", {})
key = (seed, topic, index)

kind, sub = practice.item(seed, topic, index)
ex = cached_exercise(kind, sub)

done = [result for (s, tp, _), result in results.items() if (s, tp) == (seed, topic)]
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
    said = []  # what the live region says after this press
    # The feedback in its own box, so the focus can move there after Check.
    feedback = st.container(key="practice_feedback")
    if isinstance(fb, AnswerError):
        message = t(fb.key, **{name: md_literal(value) for name, value in fb.params.items()})
        feedback.warning(message, icon=":material/edit_note:")
        said.append(t(fb.key, **fb.params))
        fb = None
    elif fb is not None:
        if fb.correct:  # its own text says so ("Correct!")
            feedback.success(tx(fb.key, **fb.params), icon=":material/check_circle:")
            said.append(tx(fb.key, **fb.params))
        else:  # "Not right" in words: the red and the lightbulb alone do not say it
            verdict = t("practice.not_right")
            feedback.error(f"**{verdict}** {tx(fb.key, **fb.params)}", icon=":material/lightbulb:")
            said.append(f"{verdict} {tx(fb.key, **fb.params)}")
    # The worked solution: once right, after a second wrong try, or when asked for; never on
    # the first wrong answer (its specific hint comes first).
    solved = fb is not None and fb.correct
    wrong_tries = st.session_state.get("practice_wrongs", {}).get(key, 0)
    asked = key in st.session_state.get("practice_asked", set())
    if solved or asked or wrong_tries >= WRONG_TRIES_BEFORE_SOLUTION:
        st.markdown(f"**{t('practice.solution')}**")
        show_solution(ex, index)
        said.append(t("practice.solution_shown"))
    else:
        st.button(
            t("practice.show_solution"),
            icon=":material/visibility:",
            key=f"show_solution_{index}",
            on_click=ask_solution,
            args=(key,),
        )

b1, b2 = st.columns(2)
b1.button(
    t("practice.another"),
    icon=":material/arrow_forward:",
    key="another",
    on_click=move_on,
    args=(index + 1,),
)
b2.button(t("practice.new_set"), icon=":material/shuffle:", key="new_set", on_click=new_set)

st.page_link("pages/find_the_bug.py", label=t("practice.to_bugs"), icon=":material/bug_report:")

# Last on the page, so nothing below it moves: what the press changed, read out once, and
# after Check the focus on the feedback.
pressed = st.session_state.pop(SAY_KEY, None)
if pressed == "check" and said:
    announce(" ".join(said), focus=".st-key-practice_feedback")
elif pressed == "solution":
    announce(t("practice.solution_shown"))
