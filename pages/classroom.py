"""A class: the teacher creates it and watches a live dashboard; students join with a name and
work through a fixed set of exercises, every answer stored (classroom/ does the storing).

Who sees what is decided by the link and the browser's session. The teacher's link goes to
the cookie route (ui.teacher_session), which trades the key for an HttpOnly session cookie
and redirects to ``?class=CODE&view=teacher``, the dashboard, so the key is in no history
entry; a class made here gets its cookie the same way, from a one-time ticket, and the key
never enters the address bar. ``?class=CODE`` is the join page, on the teacher's browser too
(a shared computer): there "Open the dashboard" asks for the session. ``?student=KEY`` is a
student's own work, which resumes after a reload, on another device or another replica.
Every store call goes through ui.classroom.patient (bounded, visible retries); no error
reaches the page as a traceback.
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
    go_to_html,
    hidden_press_id,
    join_link,
    keep_drafts,
    page_script,
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
    session_cookie_html,
    sign_out_html,
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
from ui.teacher_session import SESSION_HOURS, session_cookie
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
        if code:
            dashboard_offer(room, code)
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


def dashboard_offer(room: Classroom, code: str) -> None:
    """The join link opened on a browser signed in as this class's teacher: the join form
    stays (a student may be at the teacher's computer), and the dashboard opens only when
    asked, with the session checked then."""
    if not teacher_token_for(code):
        return
    st.info(t("classroom.join.teacher_here"), icon=":material/co_present:")
    if wide_button(st, t("classroom.join.open_dashboard"), "open_dashboard"):
        st.query_params["view"] = "teacher"
        st.rerun()


def resume_offer(room: Classroom, code: str) -> bool:
    """The join link reopened in a browser that has joined this class: offer to go on as
    that student (never automatic: a shared computer may have someone else at it)."""
    key = remembered(student_cookie(code))
    if not key or st.session_state.get("join_someone_else") == code:
        return False
    try:
        me = patient(room.student, key, client=client())
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
        if not confirmed and patient(room.name_taken, code, name, client=client()):
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
    # The key stays on the server, in this session, to be shown behind "Show"; the address
    # gets only the code (Streamlit records it with pushState: a key there would stay behind
    # Back). The browser's cookie comes from a one-time ticket (hand_over_session).
    signed_in(room, code, teacher_key)
    st.session_state["class_just_made"] = code
    st.query_params["class"] = code
    st.query_params["view"] = "teacher"
    st.rerun()


# ---- the student -------------------------------------------------------------------------


def go(room: Classroom, student_key: str, index: int) -> None:
    st.session_state["class_index"] = index
    clear_answer_widgets()
    renew_press_id()
    with contextlib.suppress(Exception):  # a lost position costs a click, never the page
        patient(room.set_position, student_key, index, client=client())
    st.rerun()


def student_view(room: Classroom, student_key: str) -> None:
    try:
        me = patient(room.student, student_key, client=client())
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
    student_nav(room, student_key, index, n)

    ex = patient(room.exercise, student_key, index, client=client())
    states = patient(room.progress, student_key, client=client())
    state = states[index]
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
            answer_form(room, student_key, index, ex, state)
        said = show_feedback(state)
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


def student_nav(room: Classroom, student_key: str, index: int, n: int) -> None:
    """Previous, where the student is, next. A press counts by the button's return value as
    well as its callback (was_pressed): a session new to this page (a reconnect) would
    otherwise lose its first press unsaid."""
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


def answer_form(room: Classroom, student_key: str, index: int, ex, state) -> None:
    """The answer boxes (the stored answer in them) and Check; an answer typed but not
    stored says so."""
    with st.form(f"class_form_{index}"):
        answer_widgets(ex, stored_widgets(ex, state.last_answer))
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
            # Drawn again at once, the form with the next press's id: renewed in the next
            # press's own run instead, the id would not be the one the browser sent
            # (hidden_press_id).
            st.rerun()
    elif unsaved_answer(ex, raw_answer(ex), state.last_answer):
        st.warning(t("classroom.student.unsaved"), icon=":material/cloud_off:")


def show_feedback(state) -> list[str]:
    """The stored answer's feedback and attempts; returns what the live region may say."""
    said = []
    if state.feedback is None:
        return said
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
    return said


def submit(room: Classroom, student_key: str, index: int, ex) -> bool:
    """Check and store the boxes' answer; True once it is stored (the page then shows it)."""
    try:
        answer = read_answer(ex, raw_answer(ex))
    except AnswerError as err:
        # what was typed, echoed as code: never a live link or bold (ui.practice.md_literal)
        st.warning(
            t(err.key, **{name: md_literal(value) for name, value in err.params.items()}),
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
            patient(room.reveal, student_key, index, reason=klass.solutions, client=client())
        except SolutionLockedError:
            return
        state = patient(room.progress, student_key, client=client())[index]
    if state.solution_shown:
        st.markdown(f"**{t('practice.solution')}**")
        show_solution(ex, index)
    elif state.solution_available:
        if st.button(t("practice.show_solution"), icon=":material/visibility:", key="reveal"):
            patient(room.reveal, student_key, index, reason="request", client=client())
            st.rerun()
    elif klass.solutions == "closed":
        st.caption(t("classroom.student.solution_when_closed"))
    else:
        st.caption(t("classroom.student.solution_after", n=klass.solution_tries))


# ---- the teacher -------------------------------------------------------------------------


def teacher_token_for(code: str) -> str | None:
    """The teacher's session for ``code`` this browser holds: this session's, else the
    HttpOnly cookie its connection carried (checked by whoever uses it)."""
    held = st.session_state.get("class_teacher")
    if held and held[0] == code.strip().upper():
        return held[1]
    if st.session_state.get("class_signed_out") == code.strip().upper():
        return None  # this connection still carries the cookie the sign-out cleared
    return remembered(session_cookie(code))


def signed_in(room: Classroom, code: str, teacher_key: str) -> None:
    """This session signs in with the key (kept here to be shown behind "Show" or after a
    new key) and hands the browser its session cookie (hand_over_session)."""
    token = patient(room.sign_in, code, teacher_key, client=client())
    st.session_state["class_teacher"] = (code, token)
    st.session_state["class_key_shown"] = (code, teacher_key)
    st.session_state["class_cookie_ticket"] = patient(room.ticket, code, token, client=client())
    st.session_state.pop("class_signed_out", None)


def hand_over_session() -> None:
    """The browser trades a one-time ticket for its HttpOnly session cookie (a page script
    cannot set one), so a reload or a new tab opens the dashboard too."""
    ticket = st.session_state.pop("class_cookie_ticket", None)
    page_script(session_cookie_html(ticket) if ticket else None)


def forget_teacher(code: str) -> None:
    """This browser's session of ``code`` ends here: in this session, and its cookie is
    cleared by the cookie route (the browser's script asks; it cannot clear it itself)."""
    st.session_state.pop("class_teacher", None)
    st.session_state.pop("class_key_shown", None)
    st.session_state["class_signed_out"] = code.strip().upper()
    st.session_state["class_clear_cookie"] = code  # drawn by the next run (clear_cookie)


def clear_cookie() -> None:
    """After a sign-out (or a session found dead): the browser asks the cookie route to clear
    its session cookie. Drawn at the start of the run after, since the run that signed out
    ends in a rerun that would take a script drawn there off the page before it ran."""
    code = st.session_state.pop("class_clear_cookie", None)
    slot = st.container()  # one element every run (ui.classroom.page_script): nothing moves
    if code:
        with slot:
            page_script(sign_out_html(code))
            remember_in_browser(teacher_cookie(code), None)  # a key an older lab kept


def teacher_view(room: Classroom, code: str, token: str) -> bool:
    """The dashboard; False (and nothing drawn) when the session no longer opens it."""
    try:
        info = patient(room.teacher_class, code, token, client=client())
    except (PermissionError, LookupError):
        forget_teacher(code)
        return False
    st.session_state["class_teacher"] = (info.code, token)
    hand_over_session()
    if st.query_params.get("class") != info.code or st.query_params.get("view") != "teacher":
        st.query_params["class"] = info.code  # no key here, ever: Streamlit pushes this
        st.query_params["view"] = "teacher"
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
        own_link(room, code, token)
        new_student_link(room, code, token)
    with controls:
        if info.closed:
            if st.button(t("classroom.teacher.reopen"), icon=":material/lock_open:", key="reopen"):
                patient(room.reopen, code, token, client=client())
                st.rerun()
        elif st.button(t("classroom.teacher.close"), icon=":material/lock:", key="close"):
            patient(room.close, code, token, client=client())
            st.rerun()
        if wide_button(st, t("classroom.teacher.sign_out"), "sign_out", icon=":material/logout:"):
            patient(room.sign_out, token)
            forget_teacher(code)
            st.session_state["class_said_signed_out"] = True
            st.query_params.pop("view", None)
            st.rerun()
        with st.expander(t("classroom.teacher.delete_title"), icon=":material/delete:"):
            sure = st.checkbox(t("classroom.teacher.delete_sure"), key="delete_sure")
            if st.button(
                t("classroom.teacher.delete"), type="primary", disabled=not sure, key="delete"
            ):
                patient(room.delete, code, token, client=client())
                forget_teacher(code)
                for key in ("class", "view"):
                    st.query_params.pop(key, None)
                st.session_state["class_deleted"] = info.title
                st.rerun()

    live_dashboard(room, code, token)
    answer_key(room, code, token)
    return True


def own_link(room: Classroom, code: str, token: str) -> None:
    """The teacher's link, shown only behind "Show" and only where the key is known (the
    browser that made the class or its newest key); "New teacher key" anywhere."""
    shown = st.expander(
        t("classroom.teacher.own_link"),
        icon=":material/key:",
        key="class_own_link",
        on_change="rerun",
    )
    with shown:  # drawn only while open: the page holds no key until "show"
        st.warning(t("classroom.teacher.own_link_help"), icon=":material/lock:")
        held = st.session_state.get("class_key_shown")
        if shown.open:
            if held and held[0] == code:
                if st.session_state.pop("class_new_key_said", False):
                    st.success(t("classroom.teacher.new_key_done"), icon=":material/key:")
                st.code(teacher_link(code, held[1]), language=None)
            else:
                st.caption(t("classroom.teacher.own_link_gone"))
            st.caption(t("classroom.teacher.new_key_help"))
            if wide_button(
                st, t("classroom.teacher.new_key"), "new_key", icon=":material/autorenew:"
            ):
                new_key = patient(room.new_teacher_key, code, token, client=client())
                signed_in(room, code, new_key)
                st.session_state["class_new_key_said"] = True
                st.rerun()


def new_student_link(room: Classroom, code: str, token: str) -> None:
    """A student who lost their personal link gets a new one; the old one stops working."""
    with st.expander(t("classroom.teacher.relink_title"), icon=":material/link:"):
        names = patient(room.students, code, token, client=client())
        if not names:
            st.caption(t("classroom.teacher.relink_none"))
            return
        number = st.selectbox(
            t("classroom.teacher.relink_student"),
            range(1, len(names) + 1),
            format_func=lambda n: f"{n}. \u2068{names[n - 1]}\u2069",
            key="relink_student",
        )
        if wide_button(st, t("classroom.teacher.relink_button"), "relink", icon=":material/link:"):
            key = patient(room.new_student_link, code, token, number, client=client())
            st.session_state["class_relinked"] = (number, names[number - 1], key)
        done = st.session_state.get("class_relinked")
        if done and done[0] == number:
            st.info(t("classroom.teacher.relink_done", name=plain(done[1])), icon=":material/link:")
            st.code(student_link(done[2]), language=None)


@st.fragment(run_every=REFRESH_S)
def live_dashboard(room: Classroom, code: str, teacher_key: str) -> None:
    try:
        results = patient(room.results, code, teacher_key, client=client())
        mistakes = patient(room.mistakes, code, teacher_key, client=client())
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
    show_item_outcomes(summary, students)
    show_mistakes(mistakes, summary)
    show_student_grid(results, code)


def show_item_outcomes(summary: pd.DataFrame, students: int) -> None:
    """How each exercise went (first try, later, solution shown) as bars and a table."""
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


def show_mistakes(mistakes: pd.DataFrame, summary: pd.DataFrame) -> None:
    """The class's common mistakes per exercise, with a few answers that made them."""
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


def show_student_grid(results: pd.DataFrame, code: str) -> None:
    """One row per student, one column per exercise, and the results as a CSV file."""
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
    clear_cookie()
    if "class_deleted" in st.session_state:
        title = st.session_state.pop("class_deleted")
        st.success(t("classroom.teacher.deleted", title=plain(title)))
    if st.session_state.pop("class_said_signed_out", False):
        st.success(t("classroom.teacher.signed_out"), icon=":material/logout:")
    code = params.get("class")
    if params.get("student"):
        student_view(room, params["student"])
        return
    if code and params.get("teacher"):
        # A teacher link of an older lab (?class=CODE&teacher=KEY): this history entry is
        # replaced by the cookie route's address, which redirects to the dashboard; the key
        # is left in no entry. Nothing is written to the address before (that would push).
        st.caption(t("classroom.teacher.opening"))
        st.html(go_to_html(teacher_link(code, params["teacher"])), unsafe_allow_javascript=True)
        return
    if code and params.get("signin") == "refused":
        st.error(t("classroom.bad_teacher_key"), icon=":material/key_off:")
    wants_dashboard = params.get("view") == "teacher"
    if not code and st.session_state.get("class_teacher"):
        code = st.session_state["class_teacher"][0]  # back from another page
        wants_dashboard = True
    if code and wants_dashboard:
        held = teacher_token_for(code)
        if held and teacher_view(room, code, held):
            return
        st.warning(
            t("classroom.teacher.signin_needed", hours=SESSION_HOURS), icon=":material/key_off:"
        )
        clear_cookie()  # a dead session's cookie, if that is what the browser sent
    st.caption(t("classroom.intro"))
    landing(room, params.get("class"))


st.title(t("classroom.title"))
try:
    page()
except Exception as err:  # noqa: BLE001 - a plain message and a retry; the log has the rest
    trouble(err)
