"""Shared by the practice pages: the class set in the URL (?seed=, ?topic=),
cached exercises, and how each answer form is asked and read."""

from __future__ import annotations

import re
import secrets

import streamlit as st

import practice
from practice import bugs
from practice.core import Exercise, Feedback
from practice.parse import (
    AnswerError,
    parse_int,
    parse_number,
    parse_numbers,
    parse_shape,
    parse_tokens,
)
from ui.charts import plotly_chart
from ui.i18n import t, translated_widget
from viz.concepts import matrix_heatmap

SEED_KEY, TOPIC_KEY = "seed", "topic"
_PUBLISHED = "_practice_published"  # what this session last wrote into the URL, per key


def topic_choices() -> tuple[str, ...]:
    return tuple(dict.fromkeys((practice.MIXED, *practice.TOPICS, *practice.KINDS)))


def topic_label(topic: str) -> str:
    if topic in practice.KINDS and topic not in practice.TOPICS:
        return f"{t(f'practice.topic.{practice.topic_of(topic)}')} · {t(f'practice.kind.{topic}')}"
    return t(f"practice.topic.{topic}")


def _from_link(key: str) -> str | None:
    """The URL's value for ``key`` when a link brought it (not when this session wrote it)."""
    value = st.query_params.get(key)
    published = st.session_state.setdefault(_PUBLISHED, {})
    if value is None or published.get(key) == value:
        return None
    return value


def _publish(key: str, value: str | None) -> None:
    published = st.session_state.setdefault(_PUBLISHED, {})
    if value is None:
        if key in st.query_params:
            del st.query_params[key]
    elif st.query_params.get(key) != value:
        st.query_params[key] = value
    published[key] = value


def parse_seed(text: str) -> int | None:
    text = text.strip()
    if not text.isdigit() or len(text) > 10:
        return None
    seed = int(text)
    return seed if seed <= practice.MAX_SEED else None


def class_seed() -> int:
    """This session's class-set seed: from ?seed= (a shared link) or a fresh random one.

    A seed that is not a whole number from 0 to 10⁹ gets a message and a fresh seed.
    """
    linked = _from_link(SEED_KEY)
    if linked is not None:
        seed = parse_seed(linked)
        if seed is None:
            st.warning(
                t("practice.bad_seed", value=md_literal(linked[:40]), max=practice.MAX_SEED),
                icon=":material/warning:",
            )
        elif st.session_state.get("practice_seed") != seed:
            st.session_state["practice_seed"] = seed
            st.session_state["practice_index"] = 0
    if "practice_seed" not in st.session_state:
        st.session_state["practice_seed"] = secrets.randbelow(1_000_000)
        st.session_state["practice_index"] = 0
    seed = st.session_state["practice_seed"]
    _publish(SEED_KEY, str(seed))
    return seed


def class_topic() -> str:
    """The topic box, seeded from ?topic= when a link (a concept page's, a teacher's) brings one."""
    choices = topic_choices()
    linked = _from_link(TOPIC_KEY)
    if linked is not None:
        if linked in choices:
            if st.session_state.get("ptopic") != linked:
                st.session_state["ptopic"] = linked
                st.session_state["practice_index"] = 0
        else:
            st.warning(
                t("practice.bad_topic", value=md_literal(linked[:40])), icon=":material/warning:"
            )
    st.session_state.setdefault("ptopic", practice.MIXED)
    if st.session_state["ptopic"] not in choices:
        st.session_state["ptopic"] = practice.MIXED
    names = {c: topic_label(c) for c in choices}  # labels fixed during the run (see ui.permalink)
    topic = st.selectbox(
        t("practice.topic"),
        choices,
        key=translated_widget("ptopic"),
        format_func=names.__getitem__,
        on_change=reset_index,
    )
    _publish(TOPIC_KEY, None if topic == practice.MIXED else topic)
    return topic


def reset_index() -> None:
    st.session_state["practice_index"] = 0
    clear_answer_widgets()


def clear_answer_widgets() -> None:
    for key in [k for k in st.session_state if str(k).startswith("answer_")]:
        del st.session_state[key]


@st.cache_data(show_spinner=False, max_entries=256)
def cached_exercise(kind: str, seed: int) -> Exercise:
    return practice.make(kind, seed)


@st.cache_data(show_spinner=False, max_entries=64)
def cached_bug_case(bug: str, case_seed: int) -> bugs.BugCase:
    """One case of a gallery (bugs.draws names them): a page runs the case it shows, not all
    five of a fresh visitor's gallery."""
    return bugs.case(bug, case_seed)


def say(feedback: Feedback) -> str:
    return t(feedback.key, **feedback.params) if feedback.params else t(feedback.key)


def raw_answer(ex: Exercise) -> dict[str, object]:
    """What the answer widgets of ``ex`` hold, unparsed (keys as ``read_answer`` wants them)."""
    state = st.session_state
    if ex.form == "cells":
        return {f"cell_{i}": state.get(f"answer_cell_{i}") for i in range(len(ex.answer))}
    names = [f.name for f in ex.fields] if ex.form == "numbers" else [ex.form]
    if ex.form == "choice":
        names = ["choice"]
    return {name: state.get(f"answer_{name}") for name in names}


def read_answer(ex: Exercise, raw: dict[str, object]):
    """The typed answer, parsed; raises AnswerError with the message's key."""
    if ex.form == "numbers":
        values = []
        for f in ex.fields:
            text = raw.get(f.name)
            if f.size > 1:
                values.append(parse_numbers(text, f.size))
            elif f.integer:
                values.append(parse_int(text, f.unit))
            else:
                values.append(parse_number(text, f.unit))
        return tuple(values)
    if ex.form == "shape":
        return parse_shape(raw.get("shape"))
    if ex.form == "tokens":
        return parse_tokens(raw.get("tokens"))
    if ex.form == "choice":
        choice = raw.get("choice")
        if choice is None:
            raise AnswerError("practice.input.pick_one")
        return choice
    if ex.form == "cells":
        picks = [raw.get(f"cell_{i}") for i in range(len(ex.answer))]
        if all(p is None for p in picks):
            raise AnswerError("practice.input.pick_cells")
        return picks
    raise ValueError(f"unknown form {ex.form!r}")


def attention_map(weights, rows, cols, *, key: str, title: str = "", where=st) -> None:
    """An attention-weight heatmap with the practice pages' labels (queries down, keys across)."""
    fig = matrix_heatmap(
        weights,
        rows,
        cols,
        probability=True,
        title=title,
        value_name=t("practice.weight"),
        row_title=t("practice.queries"),
        col_title=t("practice.keys"),
    )
    plotly_chart(fig, key=key, where=where)


def md_literal(value: object) -> object:
    """Text the user typed, safe to echo in Markdown: shown as inline code, where nothing is
    Markdown (no link, no bold, no bare address made live; backslash escapes would not stop
    GitHub-style autolinks), with a backtick fence longer than any run of backticks in it."""
    if not isinstance(value, str):
        return value
    longest = max((len(run) for run in re.findall(r"`+", value)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{fence}{pad}{value}{pad}{fence}"
