"""The class page through AppTest: a teacher creates a class, a student joins and answers,
the work resumes from the link; wrong keys and codes get clear messages; the teacher's key
appears on no student page; hostile names are shown as typed. Runs on a private SQLite file."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from classroom import Classroom
from tests.app import helpers
from tests.app.helpers import ok
from ui.i18n import translate

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def private_store(tmp_path_factory):
    """Every Classroom() of this module (the page's cached one too) uses a private file."""
    mp = pytest.MonkeyPatch()
    mp.setenv("ATTENTION_LAB_DATABASE_URL", "")
    mp.setenv("ATTENTION_LAB_DATA", str(tmp_path_factory.mktemp("classdata")))
    from ui.classroom import _room

    _room.clear()
    yield
    _room.clear()
    mp.undo()


def open_class(**query: str) -> AppTest:
    return helpers.open_page("classroom", timeout=180, **query)


@pytest.fixture
def cookie_jar(monkeypatch) -> dict[str, str]:
    """The cookies the browser's connection carries (AppTest cannot send any): what the
    page reads through ui.classroom.remembered."""
    import ui.classroom

    jar: dict[str, str] = {}
    monkeypatch.setattr(ui.classroom, "remembered", jar.get)
    return jar


def open_dashboard(jar: dict[str, str], code: str, teacher_key: str, **query: str) -> AppTest:
    """The teacher's browser after the teacher link: its session cookie (the route's work,
    ui.teacher_session), then ?class=CODE&view=teacher, where the route redirects."""
    from ui.teacher_session import session_cookie

    jar[session_cookie(code)] = Classroom().sign_in(code, teacher_key)
    return open_class(**{"class": code, "view": "teacher"}, **query)


def everything(at: AppTest) -> str:
    """All the page shows, as text: every element's protobuf, URL included; the one script
    that hands the teacher's key to the browser's cookie jar (and removes itself) aside."""
    parts = [str(dict(at.query_params))]

    def walk(node):
        proto = getattr(node, "proto", None)
        if proto is not None and "document.cookie" not in str(proto):
            parts.append(str(proto))
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at.main)
    walk(at.sidebar)
    return "\n".join(parts)


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_a_teacher_creates_a_class_and_a_student_joins_and_answers(lang, cookie_jar):
    at = open_class(lang=lang)
    ok(at)
    assert translate("classroom.title", lang) in [x.value for x in at.title]
    at.text_input(key="create_title").set_value("Week 3 <b>attention</b>")
    at.number_input(key="create_items").set_value(3)
    [create] = [b for b in at.button if b.label == translate("classroom.create.button", lang)]
    at = create.click().run()
    ok(at)
    code, session = at.session_state["class_teacher"]
    _, teacher_key = at.session_state["class_key_shown"]
    assert len(teacher_key) >= 32 and len(session) >= 40 and session != teacher_key
    params = dict(at.query_params)
    assert params.get("class") == code and params.get("view") == "teacher"
    assert "teacher" not in params and teacher_key not in str(params)
    assert session not in everything(at), "the session token is the HttpOnly cookie's alone"
    assert teacher_key not in everything(at), "the projected dashboard shows no key"
    assert translate("classroom.teacher.made", lang) in [s.value for s in at.success]
    assert any(f"?class={code}" in c.value for c in at.code), "the students' join link"
    assert at.subheader[0].value == "Week 3 \\<b\\>attention\\<\\/b\\>", "the title, escaped"

    student = open_class(lang=lang, **{"class": code})
    ok(student)
    student.text_input(key="join_name").set_value("민수")
    [join] = [b for b in student.button if b.label == translate("classroom.join.button", lang)]
    student = join.click().run()
    ok(student)
    student_key = student.query_params["student"]
    assert "class" not in student.query_params
    position = translate("classroom.student.position", lang, i=1, n=3)
    assert f"**{position}**" in [m.value for m in student.markdown]
    page = everything(student)
    assert teacher_key not in page, "no teacher key on a student's page or URL"

    room = Classroom()
    ex = room.exercise(student_key, 0)
    assert ex.form in ("numbers", "choice", "tokens", "shape", "cells")
    fb = room.submit(student_key, 0, ex.wrong[0].answer, submission_id="t1")
    student = student.button(key="class_next").click().run()
    ok(student)
    again = open_class(lang=lang, student=student_key)  # a reload, another device
    ok(again)
    position = translate("classroom.student.position", lang, i=2, n=3)
    assert f"**{position}**" in [m.value for m in again.markdown], "resumes at its item"
    again = again.button(key="class_prev").click().run()
    # The hint as shown is markdown-escaped (a token "<bos>" reads "\<bos\>"), and the class's
    # seed, so its first exercise, differs per run: compared unescaped.
    shown = [e.value for e in again.error][0].replace("\\", "")
    verdict = f"**{translate('practice.not_right', lang)}** "
    assert shown.startswith(verdict), "wrong is said in words, not by red alone"
    assert shown[len(verdict) :].startswith(
        translate(fb.key, lang, **fb.params).replace("\\", "")[:15]
    )
    assert teacher_key not in everything(again)

    teacher = open_dashboard(cookie_jar, code, teacher_key, lang=lang)
    ok(teacher)
    assert teacher_key not in everything(teacher)
    assert [m.value for m in teacher.metric][:2] == ["1", "1"]
    teacher.switch_page("pages/home.py").run()  # another page, and back: still the dashboard
    teacher.switch_page("pages/classroom.py").run()
    ok(teacher)
    assert [m.value for m in teacher.metric][:2] == ["1", "1"]
    assert dict(teacher.query_params).get("class") == code
    grid = [d.value for d in teacher.dataframe][-1]
    assert grid.iloc[0, 0] == "✗" and grid.index[0] == "1. \u2068민수\u2069"


def where(at: AppTest, found) -> tuple[int, ...] | None:
    """The place (indices from the page's root) of the first element ``found(element)``
    accepts: what Streamlit matches an element of one run to the last run's by."""

    def walk(node, path):
        if found(node):
            return path
        for i, child in getattr(node, "children", {}).items():
            place = walk(child, (*path, i))
            if place is not None:
                return place
        return None

    return walk(at.main, ())


def test_the_run_after_create_or_join_draws_the_page_where_the_next_run_does(cookie_jar):
    """The run right after Create draws the one-time script that trades a ticket for the
    session cookie, the run after Join the one that keeps the student's link in a cookie; in
    the next run (the teacher opening the key's panel, the student's Check) everything must
    keep its place, or Streamlit shows the old elements beside the new ones until that run
    ends (the key's panel twice, the exercise twice)."""
    at = open_class(lang="en")
    at.text_input(key="create_title").set_value("Week 3")
    [create] = [b for b in at.button if b.label == translate("classroom.create.button", "en")]
    at = create.click().run()
    ok(at)
    label = translate("classroom.teacher.own_link", "en")
    panel = lambda e: getattr(e, "type", None) == "expander" and e.label == label  # noqa: E731
    first = where(at, panel)
    assert first is not None
    at.run()
    ok(at)
    assert where(at, panel) == first

    code = at.session_state["class_teacher"][0]
    student = open_class(lang="en", **{"class": code})
    student.text_input(key="join_name").set_value("Ada")
    [join] = [b for b in student.button if b.label == translate("classroom.join.button", "en")]
    student = join.click().run()
    ok(student)
    nav = lambda e: getattr(e, "key", None) == "class_next"  # noqa: E731
    first = where(student, nav)
    assert first is not None
    student.run()
    ok(student)
    assert where(student, nav) == first


def test_wrong_teacher_keys_unknown_codes_and_bad_student_links_are_said_clearly():
    room = Classroom()
    code, _ = room.create_class("Guarded", n_items=1)
    at = open_class(**{"class": code, "signin": "refused"})  # where the route sends a wrong key
    assert not at.exception
    assert [e.value for e in at.error] == [translate("classroom.bad_teacher_key", "en")]
    at = open_class(**{"class": "NOPE99"})
    assert [e.value for e in at.error] == [translate("classroom.unknown_code", "en", code="NOPE99")]
    at = open_class(student="not-a-key", lang="ko")
    assert [e.value for e in at.error] == [translate("classroom.bad_student", "ko")]
    at = open_class(**{"class": "ZZZ<b>"})
    assert not at.exception
    assert [e.value for e in at.error] == [
        translate("classroom.unknown_code", "en", code="ZZZ\\<b\\>")
    ]


def test_hostile_names_are_shown_escaped_and_kept_as_typed(cookie_jar):
    room = Classroom()
    code, teacher_key = room.create_class("Names", n_items=1)
    names = ["<img src=x onerror=alert(1)>", "**bold** [link](http://x)", "مرحبا 🧑‍🎓"]
    keys = [room.join(code, name) for name in names]
    at = open_class(student=keys[0])
    ok(at)
    hello = at.markdown[0].value
    assert "\\<img src\\=x onerror\\=alert\\(1\\)\\>" in hello
    at = open_class(student=keys[1])
    # every mark escaped, ":" and "/" too: no bold, no link, no bare address made live
    assert "\\*\\*bold\\*\\* \\[link\\]\\(http\\:\\/\\/x\\)" in at.markdown[0].value
    teacher = open_dashboard(cookie_jar, code, teacher_key)
    ok(teacher)
    grid = [d.value for d in teacher.dataframe][-1]
    # each name isolated from its number (a right-to-left name keeps "3." on its left)
    assert [w.split(". \u2068", 1)[1].removesuffix("\u2069") for w in grid.index] == names


def test_the_self_study_page_has_no_open_teacher_view_and_holds_the_solution_back():
    at = helpers.open_page("practice", timeout=180, seed="77", topic="noam", teacher="1")
    ok(at)
    assert not at.info and not at.toggle, "no teacher toggle, no answer on ?teacher=1"
    solution = translate("practice.solution", "en")
    import practice

    ex = practice.make(*practice.item(77, "noam", 0))
    wrong = ex.wrong[0].answer

    def answer(at, value):
        at.text_input(key="answer_lr").set_value(repr(value[0]))
        at.text_input(key="answer_peak").set_value(str(int(value[1])))
        [button] = [b for b in at.button if b.proto.is_form_submitter]
        return button.click().run()

    at = answer(at, wrong)
    assert at.error, "the specific hint"
    assert f"**{solution}**" not in [m.value for m in at.markdown], "not on the first wrong try"
    at = answer(at, wrong)
    assert f"**{solution}**" in [m.value for m in at.markdown], "after the second wrong try"

    fresh = helpers.open_page("practice", timeout=180, seed="77", topic="noam")
    fresh = fresh.button(key="show_solution_0").click().run()
    assert f"**{solution}**" in [m.value for m in fresh.markdown], "or when asked for"


def join_as(at: AppTest, lang: str, name: str) -> AppTest:
    at.text_input(key="join_name").set_value(name)
    [join] = [b for b in at.button if b.label == translate("classroom.join.button", lang)]
    return join.click().run()


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_names_are_cleaned_and_a_taken_name_asks_is_this_you(lang):
    room = Classroom()
    code, teacher_key = room.create_class("Names", n_items=1)
    at = join_as(open_class(lang=lang, **{"class": code}), lang, "  김철수 ")
    ok(at)
    key = at.query_params["student"]
    assert room.student(key).name == "김철수", "trimmed"
    for bad, reason in [("a\u202eb", "invisible"), ("\u200b", "invisible")]:
        refused = join_as(open_class(lang=lang, **{"class": code}), lang, bad)
        ok(refused)
        assert "student" not in refused.query_params, (bad, [w.value for w in refused.warning])
        said = translate(f"classroom.join.bad_name.{reason}", lang, limit=40)
        assert said in [w.value for w in refused.warning]
    again = join_as(open_class(lang=lang, **{"class": code}), lang, "김철수")
    ok(again)
    assert "student" not in again.query_params, "no second student without asking"
    asked = translate("classroom.join.taken", lang, name="김철수")
    assert asked in [w.value for w in again.warning]
    mine = again.button(key="join_its_me").click().run()
    assert translate("classroom.join.its_me_help", lang) in [i.value for i in mine.info]
    assert len(room.results(code, teacher_key)) == 1
    again = join_as(open_class(lang=lang, **{"class": code}), lang, "김철수")
    again = again.button(key="join_new").click().run()
    ok(again)
    assert again.query_params["student"] != key, "a new student, once asked"


def test_close_and_reopen_record_nothing_and_progress_and_resume_show_the_stored_answer():
    room = Classroom()
    code, teacher_key = room.create_class(
        "Closing", topic="mha_shapes", n_items=2, solutions="after_tries", solution_tries=2
    )
    student_key = room.join(code, "Ada")
    at = open_class(student=student_key)
    ex = room.exercise(student_key, 0)
    typed = ", ".join(map(str, ex.wrong[0].answer))
    at.text_input(key="answer_shape").set_value(typed)
    [check] = [b for b in at.button if b.proto.is_form_submitter]
    at = check.click().run()
    assert not at.exception
    answered = translate("classroom.student.answered", "en", done=1, n=2)
    assert answered in [p.proto.text for p in at.get("progress")], "counts this very answer"

    room.close(code, teacher_key)
    closed = open_class(student=student_key)
    assert not closed.exception
    closed = closed.button(key="class_next").click().run()
    assert not closed.exception
    assert not closed.warning, "no false 'enter an answer first'"
    room.reopen(code, teacher_key)
    shown = room.results(code, teacher_key)["solution_shown"]
    assert not shown.any(), "looking while closed records no solution as shown"

    resumed = open_class(student=student_key)  # a reload, another device
    resumed = resumed.button(key="class_prev").click().run()
    assert not resumed.exception
    assert resumed.text_input(key="answer_shape").value == typed, "the stored answer, back"
    solution = translate("practice.solution", "en")
    assert f"**{solution}**" not in [m.value for m in resumed.markdown], "hidden again"


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_csv_is_safe_in_a_spreadsheet_counts_items_from_1_and_speaks_the_ui_language(lang):
    import io

    import pandas as pd

    from ui.classroom import FORMULA_STARTS, results_csv

    room = Classroom()
    code, teacher_key = room.create_class("CSV", topic="mha_shapes", n_items=2)
    hostile = ['=HYPERLINK("http://x","click")', "+1", "-2", "@SUM(A1)", "\tTab"]
    for name in hostile:
        key = room.join(code, name.strip())
        room.submit(key, 0, room.exercise(key, 0).answer)
    results = room.results(code, teacher_key)
    for english in (False, True):
        frame = pd.read_csv(
            io.BytesIO(results_csv(results, lang, english_headers=english)),
            encoding="utf-8-sig",
            dtype=str,
            keep_default_na=False,
        )
        cells = frame.to_numpy().ravel().tolist() + list(frame.columns)
        assert not [c for c in cells if c.startswith(FORMULA_STARTS)], "no formula cell"
        item = "index" if english else translate("classroom.csv.index", lang)
        assert sorted(set(frame[item])) == ["1", "2"], "items counted from 1, as on the page"
        name = "name" if english else translate("classroom.csv.name", lang)
        assert frame[name][0] == "'" + hostile[0], "kept, as text"
    korean = pd.read_csv(io.BytesIO(results_csv(results, "ko")), encoding="utf-8-sig")
    assert "이름" in korean.columns


def spoken(at: AppTest) -> list[str]:
    """What the page's live region is handed this run (ui.a11y.announce), as sent."""
    return [h.proto.body for h in at.get("html") if "<span data-lab-announce=" in h.proto.body]


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_join_and_check_are_read_out_and_focus_moves_to_what_changed(lang):
    room = Classroom()
    code, _ = room.create_class("Spoken", topic="mha_shapes", n_items=2)
    at = open_class(lang=lang, **{"class": code})
    at.text_input(key="join_name").set_value("Ada")
    [join] = [b for b in at.button if b.label == translate("classroom.join.button", lang)]
    at = join.click().run()
    ok(at)
    [said] = spoken(at)
    joined = translate("classroom.said.joined", lang, title="Spoken", name="Ada", i=1, n=2)
    assert joined in said and ".st-key-class_exercise" in said
    assert not spoken(at.run()), "said once, not on every rerun"

    student_key = at.query_params["student"]
    ex = room.exercise(student_key, 0)
    at.text_input(key="answer_shape").set_value(", ".join(map(str, ex.wrong[0].answer)))
    [check] = [b for b in at.button if b.proto.is_form_submitter]
    at = check.click().run()
    assert not at.exception
    [said] = spoken(at)
    assert translate("classroom.said.saved", lang) in said
    assert translate("practice.not_right", lang) in said and ".st-key-class_feedback" in said


def test_each_press_is_stored_under_the_id_the_browser_held_when_it_was_pressed():
    """The press id in the form is what a press sent again after a reconnect carries: the
    store must have kept the press under that very id, the second press (a renewal pending
    from the first) included, or a press sent again is stored twice."""
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from classroom.core import _hash
    from classroom.models import StudentRow, SubmissionRow
    from ui.classroom import SID_KEY

    room = Classroom()
    code, _ = room.create_class("Ids", topic="mha_shapes", n_items=2)
    student_key = room.join(code, "Ada")
    at = open_class(student=student_key)
    ex = room.exercise(student_key, 0)
    held = []
    for wrong in ex.wrong[:2]:
        held.append(at.text_input(key=SID_KEY).value)  # what the browser would send
        at.text_input(key="answer_shape").set_value(", ".join(map(str, wrong.answer)))
        [check] = [b for b in at.button if b.proto.is_form_submitter]
        at = check.click().run()
        assert not at.exception
    with Session(room.engine) as s:
        me = s.scalar(select(StudentRow.id).where(StudentRow.key_hash == _hash(student_key)))
        stored = list(
            s.scalars(
                select(SubmissionRow.submission_id)
                .where(SubmissionRow.student_id == me)
                .order_by(SubmissionRow.id)
            )
        )
    assert [sid.split(":")[0] for sid in stored] == held
    assert held[0] != held[1], "a stored press renews the id for the next one"
