"""A class in a real browser, in English and Korean at 1440 and 390 px: the teacher creates
it, three students join and answer (one reloads halfway and resumes), the teacher's live
dashboard shows their answers within 3 s and the CSV holds them. On the shared class server
(tests/e2e/conftest.py: a private class store); screenshots in tests/artifacts/."""

from __future__ import annotations

import csv
import io
import time
from pathlib import Path

import pytest

from tests.e2e.servers import GROUP
from ui.i18n import translate

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group(GROUP)]

TIMEOUT_MS = 120_000
DASHBOARD_MS = 3_000  # the dashboard's fragment refreshes every 2 s
TOPIC = "mha_shapes"  # one text box, "2, 4, 7, 16": the same form on every item
# Nothing in a class's flow depends on the pair of language and width (the layout of every
# class page in both languages at both widths is the page sweep's, in
# tests/e2e/test_accessibility.py): one class takes each of them in turn, and the drafts'
# browser script, which reads no text, runs once.


def idle(tab) -> None:
    tab.wait_for_function(
        "() => !document.querySelector('[data-testid=stStatusWidget]')", timeout=TIMEOUT_MS
    )


def new_tab(browser, url: str, width: int):
    # Reduced motion, which the lab honours (ui/a11y.py): the dashboard's refreshes and the
    # pages' waits redraw no animation frame by frame; nothing checked here moves.
    context = browser.new_context(
        viewport={"width": width, "height": 900}, base_url=url, reduced_motion="reduce"
    )
    context.set_default_timeout(TIMEOUT_MS)  # a cold server on a busy machine
    tab = context.new_page()
    tab.problems = []
    tab.on("pageerror", lambda exc: tab.problems.append(f"uncaught: {exc}"))
    return context, tab


def answer(tab, lang: str, text: str) -> None:
    box = tab.get_by_role("textbox", name=translate("practice.field.shape", lang), exact=True)
    box.fill(text)
    box.press("Tab")
    tab.get_by_role("button", name=translate("practice.check", lang)).click()


def shape(value) -> str:
    return ", ".join(str(v) for v in value)


def csv_rows(teacher, lang: str) -> list[dict[str, str]]:
    """The results file the dashboard's CSV button gives, read as a spreadsheet would."""
    with teacher.expect_download(timeout=TIMEOUT_MS) as download:
        teacher.get_by_role("button", name=translate("classroom.teacher.csv", lang)).click()
    text = Path(download.value.path()).read_text(encoding="utf-8-sig")
    return list(csv.DictReader(io.StringIO(text)))


def test_a_class_from_the_teachers_link_to_the_csv(
    browser, class_server, artifacts_dir, screenshot_whole_page
):
    """One class in both languages at both widths: the teacher creates it and watches it in
    Korean at 390 px, then reads it in English at 1440 px; the students' pages alternate
    between the two (each a browser of its own, as in a classroom), so every step of the
    flow is taken in each language and at each width."""
    url, room, log_path = class_server.url, class_server.room, class_server.log_path
    lang, width = "ko", 390  # the teacher's, until the end
    contexts = []
    try:
        ctx, teacher = new_tab(browser, url, width)
        contexts.append(ctx)
        teacher.goto(f"/classroom?lang={lang}")
        teacher.get_by_label(translate("classroom.create.name", lang)).fill("Week 3")
        teacher.get_by_test_id("stMain").get_by_test_id("stSelectbox").first.click()
        teacher.keyboard.type(translate("practice.kind.mha_shapes", lang))  # filters the list
        teacher.keyboard.press("Enter")
        items = teacher.get_by_label(translate("classroom.create.items", lang))
        items.fill("2")
        items.press("Tab")
        teacher.get_by_role("button", name=translate("classroom.create.button", lang)).click()
        teacher.get_by_text(translate("classroom.teacher.made", lang)).wait_for(timeout=TIMEOUT_MS)
        idle(teacher)
        params = dict(p.split("=", 1) for p in teacher.url.split("?", 1)[1].split("&"))
        code = params["class"]
        assert "teacher" not in params, "the key is not in the address bar"
        own_link = teacher.get_by_text(translate("classroom.teacher.own_link", lang), exact=True)
        own_link.click()  # the key, drawn only while its panel is open
        link = teacher.get_by_test_id("stCode").filter(has_text="/lab/teacher?").inner_text()
        teacher_key = dict(p.split("=", 1) for p in link.strip().split("?", 1)[1].split("&"))["key"]
        # the rerun that drew the key is over: until then the panel's old copy may still be
        # on the page beside the new one (the layout above it changed), and a click on the
        # label would find two
        idle(teacher)
        own_link.click()
        teacher.get_by_test_id("stCode").filter(has_text="/lab/teacher?").wait_for(state="detached")
        idle(teacher)
        assert teacher_key not in teacher.inner_text("body"), "nor on the projected page"
        # the browser holds an HttpOnly session (ui.teacher_session), never the key
        deadline = time.monotonic() + 30
        while not [c for c in teacher.context.cookies() if c["name"] == f"lab_teach_{code}"]:
            assert time.monotonic() < deadline, "the session cookie never arrived"
            teacher.wait_for_timeout(200)
        assert all(teacher_key not in c["value"] for c in teacher.context.cookies())
        teacher.reload()  # a reload keeps the teacher on the dashboard
        teacher.get_by_text(translate("classroom.teacher.join_link", lang)).wait_for()
        idle(teacher)

        names = ["민수", "Ada <b>", "مرحبا"]
        pages = [("en", 1440), ("ko", 390), ("en", 1440)]  # the students' language and width
        students = []
        for name, (s_lang, s_width) in zip(names, pages):
            ctx, tab = new_tab(browser, url, s_width)
            contexts.append(ctx)
            tab.goto(f"/classroom?class={code}&lang={s_lang}")
            tab.get_by_label(translate("classroom.join.name", s_lang)).fill(name)
            tab.get_by_role("button", name=translate("classroom.join.button", s_lang)).click()
            # exact: the live region says it too, inside "You joined … Exercise 1 of 2 is …"
            tab.get_by_text(
                translate("classroom.student.position", s_lang, i=1, n=2), exact=True
            ).wait_for(timeout=TIMEOUT_MS)
            idle(tab)
            assert "student=" in tab.url and teacher_key not in tab.url
            assert teacher_key not in tab.content(), "no teacher key on a student's page"
            students.append(tab)

        key_of = {
            n: dict(p.split("=", 1) for p in tab.url.split("?", 1)[1].split("&"))["student"]
            for n, tab in zip(names, students)
        }
        ex0 = room.exercise(key_of[names[0]], 0)
        ex1 = room.exercise(key_of[names[0]], 1)
        assert ex0.kind == ex1.kind == TOPIC, "the teacher's choice of topic"

        def correct(i: int) -> str:
            return translate("practice.feedback.correct", pages[i][0])

        # Student 1: right at once. Student 2: wrong (the checker's named mistake), then right.
        answer(students[0], pages[0][0], shape(ex0.answer))
        students[0].get_by_test_id("stAlert").get_by_text(correct(0)).wait_for(timeout=TIMEOUT_MS)
        wrong = ex0.wrong[0]
        answer(students[1], pages[1][0], shape(wrong.answer))
        hint = translate(wrong.key, pages[1][0], **wrong.params)
        students[1].get_by_test_id("stAlert").get_by_text(hint[:20]).wait_for(timeout=TIMEOUT_MS)
        # Student 3 answers item 1, reloads halfway, resumes there, goes on to item 2.
        s_lang = pages[2][0]
        answer(students[2], s_lang, shape(ex0.answer))
        students[2].get_by_test_id("stAlert").get_by_text(correct(2)).wait_for(timeout=TIMEOUT_MS)
        students[2].get_by_role("button", name=translate("classroom.student.next", s_lang)).click()
        students[2].get_by_text(
            translate("classroom.student.position", s_lang, i=2, n=2), exact=True
        ).wait_for(timeout=TIMEOUT_MS)
        idle(students[2])
        students[2].reload()
        students[2].get_by_text(
            translate("classroom.student.position", s_lang, i=2, n=2), exact=True
        ).wait_for(timeout=TIMEOUT_MS)
        idle(students[2])
        answer(students[2], s_lang, shape(ex1.answer))
        students[2].get_by_test_id("stAlert").get_by_text(correct(2)).wait_for(timeout=TIMEOUT_MS)
        answered_at = time.monotonic()

        # The teacher's dashboard shows the four answers within 3 s, without a reload.
        answers_label = translate("classroom.teacher.answers", lang)
        metric = teacher.get_by_test_id("stMetric").filter(has_text=answers_label)
        metric.get_by_text("4", exact=True).wait_for(timeout=DASHBOARD_MS + 500)
        assert time.monotonic() - answered_at <= DASHBOARD_MS + 0.5
        idle(teacher)
        teacher.get_by_text(translate("classroom.teacher.mistakes_title", lang)).wait_for()
        screenshot_whole_page(teacher, artifacts_dir / f"class-teacher-{lang}-{width}.png")
        for tab, (s_lang, s_width) in zip(students[1:], pages[1:]):
            screenshot_whole_page(tab, artifacts_dir / f"class-student-{s_lang}-{s_width}.png")

        def check_csv(lang: str) -> None:
            rows = csv_rows(teacher, lang)
            assert len(rows) == 3 * 2

            def col(name: str) -> str:  # headers in the page's language
                return translate(f"classroom.csv.{name}", lang)

            cell = {(r[col("name")], int(r[col("index")])): r for r in rows}
            assert cell[(names[0], 1)][col("first_try_correct")] == "True", "items from 1"
            assert cell[(names[1], 1)][col("correct")] == "False"
            assert cell[(names[1], 1)][col("last_answer")] == "[" + shape(wrong.answer) + "]"
            assert cell[(names[2], 2)][col("attempts")] == "1"
            assert cell[(names[2], 2)][col("correct")] == "True"

        check_csv(lang)
        # The same dashboard in English at 1440 px: the session cookie opens it again.
        lang, width = "en", 1440
        teacher.set_viewport_size({"width": width, "height": 900})
        teacher.goto(f"/classroom?class={code}&view=teacher&lang={lang}")
        metric = teacher.get_by_test_id("stMetric").filter(
            has_text=translate("classroom.teacher.answers", lang)
        )
        metric.get_by_text("4", exact=True).wait_for()
        idle(teacher)
        teacher.get_by_text(translate("classroom.teacher.mistakes_title", lang)).wait_for()
        screenshot_whole_page(teacher, artifacts_dir / f"class-teacher-{lang}-{width}.png")
        check_csv(lang)

        for tab in [teacher, *students]:
            assert tab.problems == []
        for tab in students:
            assert teacher_key not in tab.content()
        assert teacher_key not in teacher.url and teacher_key not in teacher.inner_text("body")
        assert teacher_key not in log_path.read_text(errors="replace"), "no key in the log"
    finally:
        for ctx in contexts:
            ctx.close()


def drafts(tab) -> dict[str, str]:
    """The answer drafts this browser keeps (ui.classroom.keep_drafts), by storage key."""
    return tab.evaluate(
        "() => Object.fromEntries(Object.keys(localStorage)"
        ".filter((k) => k.startsWith('lab-draft|')).map((k) => [k, localStorage.getItem(k)]))"
    )


def test_a_typed_answer_not_yet_checked_survives_a_reload(
    browser, class_server, artifacts_dir, screenshot_whole_page
):
    url, room = class_server.url, class_server.room
    lang, width = "ko", 390
    code, _ = room.create_class(f"Drafts {lang}", topic=TOPIC, seed=7, n_items=2)
    student_key = room.join(code, f"Draft {lang}")
    ex = room.exercise(student_key, 0)
    typed = ",".join(str(v) for v in ex.answer)  # as typed; stored, it reads "2, 4, ..."
    ctx, tab = new_tab(browser, url, width)
    try:
        position = translate("classroom.student.position", lang, i=1, n=2)
        box = tab.get_by_role("textbox", name=translate("practice.field.shape", lang), exact=True)

        def show_again() -> None:
            tab.get_by_text(position, exact=True).wait_for(timeout=TIMEOUT_MS)
            idle(tab)
            box.wait_for()

        tab.goto(f"/classroom?student={student_key}&lang={lang}")
        show_again()
        box.fill(typed)  # typed only: no Enter, no Check
        tab.reload()
        show_again()
        tab.wait_for_function(
            "([name, want]) => [...document.querySelectorAll('input')]"
            ".some((i) => i.getAttribute('aria-label') === name && i.value === want)",
            arg=[translate("practice.field.shape", lang), typed],
            timeout=TIMEOUT_MS,
        )
        assert box.input_value() == typed, "the typed answer is back in its box"
        assert room.progress(student_key)[0].attempts == 0, "typed, never sent: nothing stored"
        screenshot_whole_page(tab, artifacts_dir / f"class-draft-{lang}-{width}.png")

        # Check sends the restored text (Streamlit heard of it) and stores it ...
        tab.get_by_role("button", name=translate("practice.check", lang)).click()
        correct = translate("practice.feedback.correct", lang)
        tab.get_by_test_id("stAlert").get_by_text(correct).wait_for(timeout=TIMEOUT_MS)
        idle(tab)
        state = room.progress(student_key)[0]
        assert state.attempts == 1 and list(state.last_answer) == list(ex.answer)
        assert drafts(tab) == {}, "the draft is forgotten once its answer is stored"
        # ... and a further reload shows the stored answer, not the draft as it was typed.
        tab.reload()
        show_again()
        tab.get_by_test_id("stAlert").get_by_text(correct).wait_for(timeout=TIMEOUT_MS)
        assert box.input_value() == shape(ex.answer) != typed
        assert drafts(tab) == {}
        assert tab.problems == []
    finally:
        ctx.close()


@pytest.mark.parametrize("renewed", [False, True], ids=["not-stored", "stored"])
def test_a_press_is_sent_again_after_a_reconnect_only_if_its_id_was_not_renewed(browser, renewed):
    """press_guard's script on its own: Check pressed, then the connection comes back. If
    the server had renewed the press's id (it stored the press, but the page's end never
    arrived: the replica died), sending it again would store it twice under the new id
    (the chaos bench's two duplicates); if not, the press is sent again with its own id."""
    from ui.classroom import CHECK_KEY, SID_KEY, resend_html

    after_ms = 100  # the page's 4 s (RESEND_AFTER_MS) is a choice, not what is held here
    context = browser.new_context()
    try:
        page = context.new_page()
        page.set_content(
            f'<div class="st-key-{SID_KEY}"><input value="first-id"></div>'
            f'<div class="st-key-{CHECK_KEY}"><button onclick="window.presses = '
            f'(window.presses || 0) + 1">Check</button></div>' + resend_html("n1", after_ms)
        )
        page.click("button")  # the student's press
        if renewed:  # the stored press's page had come as far as its new id
            page.fill("input", "second-id")
        page.evaluate(
            "() => { const s = new WebSocket('ws://127.0.0.1:9/');"
            " s.dispatchEvent(new Event('open')); }"  # the reconnected socket opens
        )
        # A timer of the page's own, due after the script's: once it fires, the script has
        # decided whether to send the press again.
        page.evaluate("(ms) => new Promise((done) => setTimeout(done, ms))", after_ms + 200)
        assert page.evaluate("window.presses") == (1 if renewed else 2)
    finally:
        context.close()
