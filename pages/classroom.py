"""A class: the teacher creates it and watches a live dashboard; students join with a name and
work through a fixed set of exercises, every answer stored (classroom/ does the storing).

Who sees what is decided by the link: ``?class=CODE&teacher=KEY`` is the teacher's (the key
is secret and appears on no student's page; once opened it is kept by the browser and leaves
the address bar), ``?class=CODE`` the join page (or the dashboard, for the browser that holds
the key), ``?student=KEY`` a student's own work, which resumes after a reload, on another
device or another replica. Every store call goes through ui.classroom.patient (bounded,
visible retries); no error reaches the page as a traceback.
"""

from __future__ import annotations

import contextlib

import pandas as pd
import streamlit as st

from classroom import (
    SOLUTION_POLICIES,
    BadNameError,
    ClassClosedError,
    Classroom,
    SolutionLockedError,
)
from classroom.core import MAX_ITEMS, MAX_NAME, clean_name, summarize
from practice.parse import AnswerError
from ui.a11y import announce
from ui.charts import plotly_chart
from ui.classroom import (
    CHECK_KEY,
    client,
    hidden_press_id,
    join_link,
    keep_drafts,
    patient,
    plain,
    press_guard,
    press_id,
    remember_in_browser,
    remembered,
    renew_press_id,
    results_csv,
    room_or_stop,
    save_answer,
    stored_widgets,
    student_cookie,
    student_link,
    teacher_cookie,
    teacher_link,
    trouble,
    unsaved_answer,
)
from ui.exercise import answer_text, answer_widgets, show_prompt, show_solution, tx
from ui.frame import require_frame
from ui.i18n import current_language, t, translated_widget
from ui.practice import (
    clear_answer_widgets,
    md_literal,
    raw_answer,
    read_answer,
    topic_choices,
    topic_label,
)
from viz.classroom import outcome_counts, outcomes_figure

require_frame()

REFRESH_S = 2  # the dashboard's live part reruns this often (a fragment, not the page)
GENERIC_MISTAKES = ("practice.feedback.wrong", "practice.feedback.unreadable")
SAY_KEY = "_class_say"  # what the last press changed, said once by the live region


def pressed(flag: str) -> None:
    """A button's callback: remember the press for the page below (survives a rerun that
    Streamlit or the frame makes before the page reads the button)."""
    st.session_state[flag] = True


def wide_button(where, label: str, key: str, **kwargs) -> bool:
    """A full-width button in ``where``, its press counted however it arrives (was_pressed)."""
    flag = f"{key}__pressed"
    returned = where.button(
        label, key=key, on_click=pressed, args=(flag,), width="stretch", **kwargs
    )
    return was_pressed(returned, flag)


def was_pressed(returned: bool, flag: str) -> bool:
    """A press, however it arrived, handled once. A session that has not run this page yet
    (the browser reconnected, perhaps to another replica after one died) knows no callback:
    its first press arrives only as the button's return value. A rerun before the page reads
    the button (ui.frame) keeps it only through the callback's flag. Either counts."""
    return bool(st.session_state.pop(flag, False)) or bool(returned)


def item_label(index: int, kind: str) -> str:
    return t("classroom.item_label", n=index + 1, kind=t(f"practice.kind.{kind}"))


# ---- the landing page: create or join ------------------------------------------------------


def landing(room: Classroom, code: str | None) -> None:
    join_col, create_col = st.columns(2, gap="large")
    with join_col, st.container(border=True):
        st.subheader(t("classroom.join.title"))
        if code and resume_offer(room, code):
            return
        with st.form("join_form"):
            typed_code = st.text_input(
                t("classroom.join.code"), value=code or "", max_chars=16, key="join_code"
            )
            name = st.text_input(t("classroom.join.name"), key="join_name", max_chars=MAX_NAME)
            st.caption(t("classroom.join.privacy"))
            joined = st.form_submit_button(
                t("classroom.join.button"), type="primary", on_click=pressed, args=("joined",)
            )
        if was_pressed(joined, "joined"):
            st.session_state.pop("join_pending", None)
            join(room, typed_code, name)
        elif st.session_state.get("join_pending"):
            is_this_you(room, *st.session_state["join_pending"])
        elif st.session_state.pop("join_said_its_me", False):
            st.info(t("classroom.join.its_me_help"), icon=":material/link:")
        elif code:
            try:
                info = patient(room.class_info, code, client=client())
                st.caption(t("classroom.join.joining", title=plain(info.title), n=info.n_items))
            except LookupError:
                st.error(t("classroom.unknown_code", code=plain(code[:16])))
    with create_col, st.container(border=True):
        st.subheader(t("classroom.create.title"))
        create_form(room)


def resume_offer(room: Classroom, code: str) -> bool:
    """The join link reopened in a browser that has joined this class: offer to go on as
    that student (never automatic: a shared computer may have someone else at it)."""
    key = remembered(student_cookie(code))
    if not key or st.session_state.get("join_someone_else") == code:
        return False
    try:
        me = patient(room.student, key)
    except LookupError:
        remember_in_browser(student_cookie(code), None)
        return False
    if me.klass.code != code.strip().upper():
        return False
    st.info(t("classroom.join.remembered", name=plain(me.name)), icon=":material/history:")
    c1, c2 = st.columns(2)
    if wide_button(
        c1, t("classroom.join.continue", name=plain(me.name)), "join_continue", type="primary"
    ):
        open_student(key)
    if wide_button(c2, t("classroom.join.someone_else"), "join_other"):
        st.session_state["join_someone_else"] = code
        st.rerun()
    return True


def open_student(student_key: str) -> None:
    st.query_params.pop("class", None)
    st.query_params["student"] = student_key
    st.session_state.pop("class_index", None)
    st.session_state[SAY_KEY] = "joined"
    st.rerun()


def join(room: Classroom, code: str, name: str, *, confirmed: bool = False) -> None:
    if not code.strip():
        st.warning(t("classroom.join.need_code"))
        return
    try:
        name = clean_name(name)
        if not confirmed and patient(room.name_taken, code, name):
            st.session_state["join_pending"] = (code, name)
            is_this_you(room, code, name)
            return
        student_key = patient(room.join, code, name, client=client())
    except BadNameError as err:
        st.warning(t(f"classroom.join.bad_name.{err.reason}", limit=MAX_NAME))
        return
    except LookupError:
        st.error(t("classroom.unknown_code", code=plain(code[:16])))
        return
    except ClassClosedError:
        st.error(t("classroom.join.closed"))
        return
    open_student(student_key)


def is_this_you(room: Classroom, code: str, name: str) -> None:
    """A second join with a name already in the class: ask before splitting the work."""
    st.warning(t("classroom.join.taken", name=plain(name)), icon=":material/person_search:")
    st.caption(t("classroom.join.taken_help"))
    c1, c2 = st.columns(2)
    if wide_button(c1, t("classroom.join.its_me"), "join_its_me"):
        st.session_state.pop("join_pending", None)
        st.session_state["join_said_its_me"] = True
        st.rerun()
    if wide_button(c2, t("classroom.join.new_student"), "join_new"):
        st.session_state.pop("join_pending", None)
        join(room, code, name, confirmed=True)


def create_form(room: Classroom) -> None:
    choices = topic_choices()
    names = {c: topic_label(c) for c in choices}
    policies = {p: t(f"classroom.policy.{p}") for p in SOLUTION_POLICIES}
    with st.form("create_form"):
        title = st.text_input(t("classroom.create.name"), max_chars=200, key="create_title")
        topic = st.selectbox(
            t("practice.topic"),
            choices,
            key=translated_widget("create_topic"),
            format_func=names.__getitem__,
        )
        c1, c2 = st.columns(2)
        n_items = c1.number_input(
            t("classroom.create.items"), 1, MAX_ITEMS, 10, step=1, key="create_items"
        )
        tries = c2.number_input(t("classroom.create.tries"), 1, 10, 2, step=1, key="create_tries")
        policy = st.radio(
            t("classroom.create.policy"),
            SOLUTION_POLICIES,
            key=translated_widget("create_policy"),
            format_func=policies.__getitem__,
        )
        made = st.form_submit_button(
            t("classroom.create.button"), type="primary", on_click=pressed, args=("made",)
        )
    if not was_pressed(made, "made"):
        return
    if not title.strip():
        st.warning(t("classroom.create.need_name"))
        return
    try:
        code, teacher_key = patient(
            room.create_class,
            title,
            topic=topic,
            n_items=int(n_items),
            solutions=policy,
            solution_tries=int(tries),
        )
    except ValueError:
        st.error(t("classroom.create.bad_name"))
        return
    st.query_params["class"] = code
    st.query_params["teacher"] = teacher_key
    st.session_state["class_just_made"] = code
    st.rerun()


# ---- the student -------------------------------------------------------------------------


def go(room: Classroom, student_key: str, index: int) -> None:
    st.session_state["class_index"] = index
    clear_answer_widgets()
    renew_press_id()
    with contextlib.suppress(Exception):  # a lost position costs a click, never the page
        room.set_position(student_key, index)
    st.rerun()


def student_view(room: Classroom, student_key: str) -> None:
    try:
        me = patient(room.student, student_key)
    except LookupError:
        st.error(t("classroom.bad_student"))
        st.page_link("pages/classroom.py", label=t("classroom.to_join"), icon=":material/login:")
        return
    klass = me.klass
    remember_in_browser(student_cookie(klass.code), student_key)  # the join link resumes
    n = klass.n_items
    index = st.session_state.get("class_index")
    if not isinstance(index, int) or not 0 <= index < n:
        index = min(max(me.position, 0), n - 1)
        st.session_state["class_index"] = index

    st.subheader(plain(klass.title))
    st.markdown(t("classroom.student.hello", name=plain(me.name), code=klass.code))
    with st.expander(t("classroom.student.resume_title"), icon=":material/bookmark:"):
        st.caption(t("classroom.student.resume_help"))
        st.code(student_link(student_key), language=None)
    answered_slot = st.empty()  # drawn last: it counts the answer this run may store

    # A press counts by the button's return value as well as its callback (was_pressed): a
    # session new to this page (a reconnect) would otherwise lose its first press unsaid.
    c1, c2, c3 = st.columns([1, 2, 1], vertical_alignment="center")
    back = c1.button(
        t("classroom.student.previous"),
        icon=":material/arrow_back:",
        key="class_prev",
        disabled=index == 0,
        width="stretch",
        on_click=pressed,
        args=("went_back",),
    )
    if was_pressed(back, "went_back") and index > 0:
        go(room, student_key, index - 1)
    c2.markdown(f"**{t('classroom.student.position', i=index + 1, n=n)}**")
    forward = c3.button(
        t("classroom.student.next"),
        icon=":material/arrow_forward:",
        key="class_next",
        disabled=index == n - 1,
        width="stretch",
        on_click=pressed,
        args=("went_on",),
    )
    if was_pressed(forward, "went_on") and index < n - 1:
        go(room, student_key, index + 1)

    ex = patient(room.exercise, student_key, index)
    states = patient(room.progress, student_key)
    with st.container(border=True, key="class_exercise"):
        st.subheader(
            t(
                "practice.exercise_title",
                n=index + 1,
                kind=t(f"practice.kind.{ex.kind}"),
                topic=t(f"practice.topic.{ex.topic}"),
            )
        )
        show_prompt(ex, index)
        if klass.closed:
            st.info(t("classroom.student.closed"), icon=":material/lock:")
        else:
            with st.form(f"class_form_{index}"):
                answer_widgets(ex, stored_widgets(ex, states[index].last_answer))
                hidden_press_id(pressing=bool(st.session_state.get("sent")))
                sent = st.form_submit_button(
                    t("practice.check"),
                    type="primary",
                    key=CHECK_KEY,
                    on_click=pressed,
                    args=("sent",),
                )
            if was_pressed(sent, "sent"):
                if submit(room, student_key, index, ex):
                    st.session_state[SAY_KEY] = "saved"
                    # Drawn again at once, the form with the next press's id: renewed in
                    # the next press's own run instead, the id would not be the one the
                    # browser sent (hidden_press_id).
                    st.rerun()
            elif unsaved_answer(ex, raw_answer(ex), states[index].last_answer):
                st.warning(t("classroom.student.unsaved"), icon=":material/cloud_off:")
        state = states[index]
        said = []
        if state.feedback is not None:
            fb = state.feedback
            with st.container(key="class_feedback"):
                if fb.correct:
                    said.append(tx(fb.key, **fb.params))
                    st.success(said[-1], icon=":material/check_circle:")
                else:
                    verdict, hint = t("practice.not_right"), tx(fb.key, **fb.params)
                    said.append(f"{verdict} {hint}")
                    st.error(f"**{verdict}** {hint}", icon=":material/lightbulb:")
                st.caption(t("classroom.student.attempts", n=state.attempts))
        solution(room, student_key, index, ex, state, klass)
    answered = sum(s.attempts > 0 for s in states)
    answered_slot.progress(answered / n, text=t("classroom.student.answered", done=answered, n=n))
    if not klass.closed:
        press_guard()
        boxes = stored_widgets(ex, state.last_answer)
        keep_drafts(klass.code, student_key, index, "class_exercise", boxes, state.attempts)
    # Last on the page: what the press changed, read out once by the live region, with the
    # keyboard focus moved to it (the feedback after Check, the exercise after Join).
    say = st.session_state.pop(SAY_KEY, None)
    if say == "saved" and said:
        announce(f"{t('classroom.said.saved')} {' '.join(said)}", focus=".st-key-class_feedback")
    elif say == "joined":
        announce(
            t("classroom.said.joined", title=klass.title, name=me.name, i=index + 1, n=n),
            focus=".st-key-class_exercise",
        )


def submit(room: Classroom, student_key: str, index: int, ex) -> bool:
    """Check and store the boxes' answer; True once it is stored (the page then shows it)."""
    try:
        answer = read_answer(ex, raw_answer(ex))
    except AnswerError as err:
        # what was typed, echoed as code: never a live link or bold (ui.practice.md_literal)
        st.warning(
            t(err.key, **{k: md_literal(v) for k, v in err.params.items()}),
            icon=":material/edit_note:",
        )
        return False
    # The press's id comes from the form (the browser keeps it with the answer), so pressing
    # Check again after a failed save, or the press sent again after a replica died, is
    # kept once however often it arrives, on whichever replica.
    try:
        fb = save_answer(room, student_key, index, answer, press_id(index, answer))
    except ClassClosedError:
        st.info(t("classroom.student.closed"), icon=":material/lock:")
        return False
    if fb is None:
        return False
    renew_press_id()
    return True


def solution(room, student_key, index, ex, state, klass) -> None:
    """The worked solution as the teacher's policy allows; every first showing the student
    sees while the class is open is recorded. A closed class shows what its policy allows
    and records nothing on the student's behalf (they may only be looking back)."""
    if klass.closed:
        if state.solution_shown or state.solution_available:
            st.markdown(f"**{t('practice.solution')}**")
            show_solution(ex, index)
        return
    if not state.solution_shown and state.solution_available and klass.solutions != "on_request":
        try:
            patient(room.reveal, student_key, index, reason=klass.solutions)
        except SolutionLockedError:
            return
        state = patient(room.progress, student_key)[index]
    if state.solution_shown:
        st.markdown(f"**{t('practice.solution')}**")
        show_solution(ex, index)
    elif state.solution_available:
        if st.button(t("practice.show_solution"), icon=":material/visibility:", key="reveal"):
            patient(room.reveal, student_key, index, reason="request")
            st.rerun()
    elif klass.solutions == "closed":
        st.caption(t("classroom.student.solution_when_closed"))
    else:
        st.caption(t("classroom.student.solution_after", n=klass.solution_tries))


# ---- the teacher -------------------------------------------------------------------------


def teacher_key_for(code: str) -> str | None:
    """The teacher's key for ``code`` this browser holds: in this session, else its cookie."""
    held = st.session_state.get("class_teacher")
    if held and held[0] == code.strip().upper():
        return held[1]
    return remembered(teacher_cookie(code))


def forget_teacher(code: str) -> None:
    st.session_state.pop("class_teacher", None)
    remember_in_browser(teacher_cookie(code), None)


def teacher_view(room: Classroom, code: str, teacher_key: str, *, from_memory=False) -> bool:
    """The dashboard; False (and nothing drawn) when a remembered key no longer opens it."""
    try:
        info = patient(room.teacher_class, code, teacher_key, client=client())
    except (PermissionError, LookupError) as err:
        if from_memory:
            forget_teacher(code)
            return False
        if isinstance(err, PermissionError):
            st.error(t("classroom.bad_teacher_key"), icon=":material/key_off:")
        else:
            st.error(t("classroom.unknown_code", code=plain(code[:16])))
        return True
    # The key leaves the address bar (a projected dashboard shows no secret): the browser
    # keeps it, and this session too, so a reload or another page and back stay here.
    st.session_state["class_teacher"] = (info.code, teacher_key)
    remember_in_browser(teacher_cookie(info.code), teacher_key)
    st.query_params.pop("teacher", None)
    st.query_params["class"] = info.code
    code = info.code
    st.subheader(plain(info.title))
    status = t("classroom.status.closed") if info.closed else t("classroom.status.open")
    st.caption(
        t(
            "classroom.teacher.facts",
            code=code,
            n=info.n_items,
            topic=plain(topic_label(info.topic)),
            policy=t(f"classroom.policy.{info.solutions}"),
            status=status,
        )
    )
    if st.session_state.get("class_just_made") == code:
        st.success(t("classroom.teacher.made"), icon=":material/celebration:")

    links, controls = st.columns([3, 2], gap="large")
    with links:
        st.markdown(f"**{t('classroom.teacher.join_link')}**")
        st.code(join_link(code), language=None)
        st.markdown(t("classroom.teacher.code_aloud", code=code))
        shown = st.expander(
            t("classroom.teacher.own_link"),
            icon=":material/key:",
            key="class_own_link",
            on_change="rerun",
        )
        with shown:  # drawn only while open: the page holds no key until "show"
            st.warning(t("classroom.teacher.own_link_help"), icon=":material/lock:")
            if shown.open:
                st.code(teacher_link(code, teacher_key), language=None)
    with controls:
        if info.closed:
            if st.button(t("classroom.teacher.reopen"), icon=":material/lock_open:", key="reopen"):
                patient(room.reopen, code, teacher_key, client=client())
                st.rerun()
        elif st.button(t("classroom.teacher.close"), icon=":material/lock:", key="close"):
            patient(room.close, code, teacher_key, client=client())
            st.rerun()
        with st.expander(t("classroom.teacher.delete_title"), icon=":material/delete:"):
            sure = st.checkbox(t("classroom.teacher.delete_sure"), key="delete_sure")
            if st.button(
                t("classroom.teacher.delete"), type="primary", disabled=not sure, key="delete"
            ):
                patient(room.delete, code, teacher_key, client=client())
                forget_teacher(code)
                for key in ("class", "teacher"):
                    st.query_params.pop(key, None)
                st.session_state["class_deleted"] = info.title
                st.rerun()

    live_dashboard(room, code, teacher_key)
    answer_key(room, code, teacher_key)
    return True


@st.fragment(run_every=REFRESH_S)
def live_dashboard(room: Classroom, code: str, teacher_key: str) -> None:
    try:
        results = room.results(code, teacher_key, client=client())
        mistakes = room.mistakes(code, teacher_key, client=client())
    except (PermissionError, LookupError):
        st.warning(t("classroom.teacher.gone"))
        return
    except ConnectionError:
        st.warning(t("classroom.teacher.store_retry"), icon=":material/sync_problem:")
        return
    except Exception as err:  # noqa: BLE001 - never a traceback on a projected screen
        trouble(err, key="class_dashboard_again")
        return
    students = results["student"].nunique()
    answers = int(results["attempts"].sum())
    m1, m2 = st.columns(2)
    m1.metric(t("classroom.teacher.students"), students)
    m2.metric(t("classroom.teacher.answers"), answers)
    if students == 0:
        st.info(t("classroom.teacher.no_students"), icon=":material/hourglass_empty:")
        return
    summary = summarize(results)
    labels = [item_label(i, k) for i, k in zip(summary["index"], summary["kind"])]

    st.markdown(f"#### {t('classroom.teacher.items_title')}")
    counts = outcome_counts(summary)
    outcome_names = {o: t(f"classroom.outcome.{o}") for o in counts.columns}
    hardest = summary.assign(rate=summary["first_try_correct"] / summary["students"])
    worst = hardest.sort_values("rate").iloc[0]
    chart_summary = t(
        "classroom.teacher.chart_summary",
        students=students,
        hardest=item_label(int(worst["index"]), worst["kind"]),
        first=int(worst["first_try_correct"]),
    )
    st.caption(chart_summary)
    fig = outcomes_figure(summary, labels, outcome_names, t("classroom.teacher.chart_title"))
    # the text alternative names the exercise (the computed one read the bars' axis as 0, 1…)
    plotly_chart(fig, key="class_outcomes", summary=chart_summary)
    table = pd.DataFrame(
        {
            t("classroom.col.item"): labels,
            t("classroom.col.tried"): summary["tried"],
            t("classroom.col.first_try"): summary["first_try_correct"],
            t("classroom.col.correct"): summary["correct"],
            t("classroom.col.solutions"): summary["solution_shown"],
        }
    )
    st.dataframe(table, hide_index=True)

    st.markdown(f"#### {t('classroom.teacher.mistakes_title')}")
    if mistakes.empty:
        st.caption(t("classroom.teacher.no_mistakes"))
    else:
        kinds = dict(zip(summary["index"], summary["kind"]))
        rows = []
        for m in mistakes.itertuples():
            if m.mistake in GENERIC_MISTAKES or m.mistake.endswith(".generic"):
                said = t("classroom.teacher.other_wrong")
            else:
                said = tx(m.mistake, **m.params) if m.params else t(m.mistake)
            rows.append(
                {
                    t("classroom.col.item"): item_label(m.index, kinds[m.index]),
                    t("classroom.col.mistake"): said,
                    t("classroom.col.students"): m.students,
                    t("classroom.col.examples"): "; ".join(
                        f"{answer[:60]} ×{n}" for answer, n in m.examples
                    ),
                }
            )
        st.dataframe(pd.DataFrame(rows), hide_index=True)

    st.markdown(f"#### {t('classroom.teacher.grid_title')}")
    st.caption(t("classroom.teacher.grid_help"))
    grid = results.assign(
        # the name isolated (U+2068 ... U+2069): a right-to-left name must not carry its
        # number to the wrong side ("3. مرحبا", not ".3 مرحبا")
        who=results["student"].astype(str)
        + ". \u2068"
        + results["name"].str.slice(0, 40)
        + "\u2069",
        cell=[grid_cell(r) for r in results.itertuples()],
    ).pivot(index=["student", "who"], columns="index", values="cell")
    grid.columns = [str(i + 1) for i in grid.columns]
    grid.index = grid.index.get_level_values("who")
    grid.index.name = t("classroom.col.student")
    st.dataframe(grid)
    english = st.checkbox(t("classroom.teacher.csv_english"), key="class_csv_english")
    csv = results_csv(results, current_language(), english_headers=english)
    st.download_button(
        t("classroom.teacher.csv"),
        csv,
        file_name=f"class-{code}-results.csv",
        mime="text/csv",
        icon=":material/download:",
        key="class_csv",
        on_click="ignore",
    )


def grid_cell(row) -> str:
    if row.attempts == 0:
        return "·"
    mark = "✓" if row.correct else "✗"
    return mark if row.attempts == 1 else f"{mark} {row.attempts}"


def answer_key(room: Classroom, code: str, teacher_key: str) -> None:
    with st.expander(t("classroom.teacher.key_title"), icon=":material/print:"):
        exercises = patient(room.answer_key, code, teacher_key, client=client())
        lines = [f"# {t('classroom.teacher.key_title')} · {code}", ""]
        for i, ex in enumerate(exercises):
            lines.append(  # the label carries the number: one numbering, not "1. **1. …**"
                f"- **{item_label(i, ex.kind)}**: "
                f"{tx('classroom.teacher.key_answer', answer=answer_text(ex))}"
            )
        text = "\n".join(lines)
        st.markdown(text)
        st.download_button(
            t("classroom.teacher.key_download"),
            text.encode("utf-8"),
            file_name=f"class-{code}-answer-key.md",
            mime="text/markdown",
            icon=":material/download:",
            key="class_key_download",
            on_click="ignore",
        )


# ---- the page ----------------------------------------------------------------------------


def page() -> None:
    room = room_or_stop()
    params = st.query_params
    if "class_deleted" in st.session_state:
        title = st.session_state.pop("class_deleted")
        st.success(t("classroom.teacher.deleted", title=plain(title)))
    code = params.get("class")
    if params.get("student"):
        student_view(room, params["student"])
        return
    if code and params.get("teacher"):  # the teacher's link: its key is kept, then hidden
        teacher_view(room, code, params["teacher"])
        return
    if not code and st.session_state.get("class_teacher"):
        code = st.session_state["class_teacher"][0]  # back from another page
    held = teacher_key_for(code) if code else None
    if held and teacher_view(room, code, held, from_memory=True):
        return
    st.caption(t("classroom.intro"))
    landing(room, params.get("class"))


st.title(t("classroom.title"))
try:
    page()
except Exception as err:  # noqa: BLE001 - a plain message and a retry; the log has the rest
    trouble(err)
