"""Students in real browsers pressing Check while the class's machinery fails under them.

    python -m bench.classchaos [--students 10] [--json out.json]    # part of `make bench`

`make serve`'s deployment for real: two replicas behind HAProxy and a private PostgreSQL.
Each student is a headless Chromium tab (English at 1440 px, Korean at 390 px, by turns) on
the class page, answering with answers that tell the presses apart, while faults happen:

- ``drop``: the tab's websocket is closed (no replica change); the next press is the first
  one its session sees after the reconnect;
- ``kill``: the replica the student is on is SIGKILLed just after Check (started again
  before the next fault);
- ``kill_pending``: the same while the database is down, so the dead replica surely did not
  store it: the other replica either stores it (the page sends an unanswered press again,
  with its id) or tells the student it was not saved;
- ``db_submit`` / ``db_load``: PostgreSQL is stopped during a submit / a page load and
  started again while the page says it is trying again.

Every press is then accounted for: stored exactly once (in the store, by its answer), or the
student was told on the page, in their language, that it was not saved. ``lost`` (neither)
and ``duplicates`` (stored twice) must be 0; no traceback text may appear on any page; the
typed answer stays in the box. tests/e2e/test_class_chaos.py runs the same with 2 students.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.classcore import deployment, kill_replica, restart_replica
from ui.i18n import translate

TOPIC = "mha_shapes"  # one text box ("2, 4, 7, 16"): the same form on every item
TOLD_KEYS = ("classroom.saving_failed", "classroom.student.unsaved", "classroom.store_gave_up")
RETRY_KEYS = ("classroom.saving_retry", "classroom.loading_retry")
TRACEBACK_MARKS = ("Traceback", 'File "/', "Ask Google", "Ask ChatGPT")
WAIT_S = 180.0  # a condition on a loaded 2-core machine: generous, and only ever a ceiling
_RECORD_SOCKETS = """(() => {
  const Native = window.WebSocket;
  window.__labSockets = [];
  window.WebSocket = function (...args) {
    const socket = new Native(...args);
    window.__labSockets.push(socket);
    return socket;
  };
  window.WebSocket.prototype = Native.prototype;
  Object.assign(window.WebSocket, {CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3});
})()"""
# Drawn, and nothing runs or waits: no status, no stale element, and one answer form (for a
# moment after a reconnect the old run's form and the new one's can both be there).
_SETTLED = """() => !document.querySelector('[data-testid=stStatusWidget]')
  && document.querySelectorAll('[data-stale=true]').length === 0
  && document.querySelectorAll('[data-testid=stMain] [data-testid=stForm]').length === 1"""


@dataclass
class Press:
    student: int
    item: int
    answer: list[int]
    fault: str
    told: bool = False
    stored: int = -1  # filled in by tally()


@dataclass
class Student:
    number: int
    lang: str
    width: int
    key: str
    context: object
    tab: object
    presses: list[Press] = field(default_factory=list)
    sockets_opened: int = 0

    def text(self, key: str, **params) -> str:
        return translate(key, self.lang, **params)

    @property
    def box(self):
        return self.tab.get_by_role("textbox", name=self.text("practice.field.shape"), exact=True)

    def replica(self) -> str:
        return next(c["value"] for c in self.context.cookies() if c["name"] == "SERVERID")

    def settled(self, timeout_s: float = WAIT_S) -> None:
        """Until the page is drawn and nothing runs or waits (no stale elements)."""
        self.tab.wait_for_function(_SETTLED, timeout=timeout_s * 1000, polling=250)

    def open(self, base_url: str) -> None:
        self.tab.goto(f"{base_url}/classroom?student={self.key}&lang={self.lang}")
        self.settled()

    def box_holds(self, text: str, timeout_s: float = 30.0) -> str:
        """What the answer box holds once the page has settled on ``text`` (a condition,
        waited for while the page may still be finishing a run); the last value otherwise."""
        deadline = time.monotonic() + timeout_s
        while True:
            value = None
            with contextlib.suppress(Exception):  # a page between two runs
                self.settled(timeout_s=5)
                value = self.box.input_value(timeout=5000)
            if value == text or time.monotonic() > deadline:
                return value
            self.tab.wait_for_timeout(250)

    def told(self) -> bool:
        body = self.tab.inner_text("body")
        return any(self.text(k) in body for k in TOLD_KEYS)

    def type_answer(self, answer: list[int]) -> None:
        self.box.fill(", ".join(map(str, answer)))

    def press(self, answer: list[int], fault: str) -> Press:
        self.type_answer(answer)
        self.tab.get_by_role("button", name=self.text("practice.check"), exact=True).click()
        press = Press(self.number, 0, answer, fault)
        self.presses.append(press)
        return press

    def wait_for_retry(self) -> None:
        """Until the page says it is trying again (loading or saving, try 1 of N)."""
        texts = [self.text(k, n=1, total=10)[:25] for k in RETRY_KEYS]
        either = self.tab.get_by_text(texts[0]).or_(self.tab.get_by_text(texts[1]))
        either.first.wait_for(timeout=WAIT_S * 1000)

    def traceback_shown(self) -> list[str]:
        html = self.tab.content()
        return [m for m in TRACEBACK_MARKS if m in html]

    def drop_socket(self) -> None:
        """Close the tab's websocket from the browser's side (a phone's screen going dark);
        the frontend reconnects by itself, to the same replica (HAProxy's cookie)."""
        opened = self.sockets_opened
        self.tab.evaluate("() => window.__labSockets.forEach(s => s.close())")
        deadline = time.monotonic() + WAIT_S
        while self.sockets_opened <= opened:
            assert time.monotonic() < deadline, "the page never reconnected"
            self.tab.wait_for_timeout(200)
        self.settled()


def new_student(
    browser,
    base_url: str,
    number: int,
    lang: str,
    width: int,
    key: str,
    reduced_motion: bool = False,
) -> Student:
    """A student's own browser context and tab; ``reduced_motion``: the browser asks for it,
    and the lab honours it (ui/a11y.py), so no animation is redrawn while the page waits."""
    context = browser.new_context(
        viewport={"width": width, "height": 900},
        base_url=base_url,
        reduced_motion="reduce" if reduced_motion else "no-preference",
    )
    context.set_default_timeout(WAIT_S * 1000)
    context.add_init_script(_RECORD_SOCKETS)
    tab = context.new_page()
    student = Student(number, lang, width, key, context, tab)

    def opened(_ws) -> None:
        student.sockets_opened += 1

    tab.on("websocket", opened)
    return student


def stored_answers(url: str, student_key: str) -> list[list]:
    """Every answer the store holds for the student, in order (read straight from the table)."""
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from classroom.core import _hash
    from classroom.models import StudentRow, SubmissionRow
    from classroom.store import engine_for

    with Session(engine_for(url)) as s:
        sid = s.scalar(select(StudentRow.id).where(StudentRow.key_hash == _hash(student_key)))
        rows = s.scalars(
            select(SubmissionRow.answer)
            .where(SubmissionRow.student_id == sid)
            .order_by(SubmissionRow.id)
        )
        return [json.loads(a) for a in rows]


def outcome(student: Student, press: Press, url: str, timeout_s: float = WAIT_S) -> None:
    """Until the page has answered ``press``: its answer stored and the page settled, or the
    student told it was not saved. Records whether they were told."""
    deadline = time.monotonic() + timeout_s
    while True:
        with contextlib.suppress(Exception):  # the page mid-reconnect, the store mid-restart
            student.settled(timeout_s=5)
            if student.told():
                press.told = True
                return
            if press.answer in stored_answers(url, student.key):
                return
        assert time.monotonic() < deadline, f"press {press} was never answered"
        student.tab.wait_for_timeout(250)


def tally(students: list[Student], url: str) -> dict:
    """Every press: stored exactly once, or told. lost = neither; duplicates = stored twice."""
    counts = {"presses": 0, "stored": 0, "told_not_saved": 0, "lost": 0, "duplicates": 0}
    problems: list[str] = []
    for student in students:
        answers = stored_answers(url, student.key)
        for press in student.presses:
            press.stored = sum(a == press.answer for a in answers)
            counts["presses"] += 1
            if press.stored == 1:
                counts["stored"] += 1
            elif press.stored == 0 and press.told:
                counts["told_not_saved"] += 1
            elif press.stored == 0:
                counts["lost"] += 1
                problems.append(f"lost: {press}")
            else:
                counts["duplicates"] += 1
                problems.append(f"stored {press.stored} times: {press}")
    counts["problems"] = problems
    return counts


def lesson(student: Student, lab, pg, url: str, faults: list[str], base: int) -> None:
    """One student's presses, one fault each (see the module docstring), every one answered
    (stored or told) before the next; the typed answer checked in the box after each. A
    replica a fault killed is started again before the next fault, not right after its own:
    after the class's last fault nobody needs it, and its start is a replica's whole start-up
    (torch, the models) for nothing."""
    for n, fault in enumerate(faults):
        for replica in lab.replicas:  # killed by this student's or an earlier one's fault
            if not replica.alive():
                restart_replica(lab, replica.name)
        answer = [1, 2, 3, base + n]  # wrong, and unique: the store tells the presses apart
        if fault == "drop":
            student.drop_socket()
            press = student.press(answer, fault)  # the first press of the reconnected page
        elif fault == "kill":
            victim = student.replica()
            press = student.press(answer, fault)
            kill_replica(lab, victim)
        elif fault == "kill_pending":
            victim = student.replica()
            pg.stop()
            press = student.press(answer, fault)
            student.wait_for_retry()
            kill_replica(lab, victim)
            pg.start()
        elif fault == "db_submit":
            pg.stop()
            press = student.press(answer, fault)
            student.wait_for_retry()
            pg.start()
        elif fault == "db_load":
            press = student.press(answer, fault)
            outcome(student, press, url)
            pg.stop()
            student.tab.reload()
            student.wait_for_retry()
            pg.start()
        else:
            press = student.press(answer, fault)
        outcome(student, press, url)
        in_box = student.box_holds(", ".join(map(str, answer)))
        assert in_box == ", ".join(map(str, answer)), (
            f"the typed answer is gone after {fault}: {in_box!r}, student {student.number}"
        )
        shown = student.traceback_shown()
        assert not shown, f"traceback text after {fault}: {shown}"


FAULTS = ["none", "drop", "kill", "db_submit", "db_load", "kill_pending"]


def faults_for(student: int, n: int = 3) -> list[str]:
    """Student ``i``'s faults, taken round FAULTS; a replica's death goes last, so a "not
    saved" it may bring is never taken for the answer to a later press."""
    picked = [FAULTS[(student * n + k) % len(FAULTS)] for k in range(n)]
    return sorted(picked, key=lambda f: f.startswith("kill"))


def simulate(students: int = 10, run_dir: Path | None = None, on_student: Callable | None = None):
    """The browser-mode class run for `make bench`: counts of presses, stored, told, lost,
    duplicates, and the seconds it took."""
    import tempfile

    from playwright.sync_api import sync_playwright

    from bench.classcore import CHROMIUM, CHROMIUM_ARGS
    from classroom import Classroom

    start = time.perf_counter()
    run_dir = run_dir or Path(tempfile.mkdtemp(prefix="lab-chaos-"))
    with deployment(run_dir) as (lab, pg), sync_playwright() as pw:
        room = Classroom(pg.url)
        code, _ = room.create_class("Chaos", topic=TOPIC, n_items=3, solutions="closed")
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        everyone = []
        for i in range(students):
            lang, width = [("en", 1440), ("ko", 390)][i % 2]
            s = new_student(browser, lab.url, i, lang, width, room.join(code, f"s{i}"))
            s.open(lab.url)
            everyone.append(s)
        for i, s in enumerate(everyone):
            # every student answers; the faults go round so each kind happens to several
            lesson(s, lab, pg, pg.url, faults_for(i), 100 * (i + 1))  # dims of 1 or more
            if on_student:
                on_student(s)
        result = tally(everyone, pg.url)
        browser.close()
    result["students"] = students
    result["seconds"] = round(time.perf_counter() - start, 1)
    return result


def describe(r: dict) -> str:
    return (
        f"{r['students']} students in Chromium, {r['presses']} presses of Check through "
        f"dropped websockets, killed replicas and PostgreSQL restarts: {r['stored']} stored "
        f"once, {r['told_not_saved']} told 'not saved', {r['lost']} lost, "
        f"{r['duplicates']} stored twice ({r['seconds']} s)"
    )


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=10)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    result = simulate(args.students)
    print(describe(result))
    for problem in result["problems"]:
        print("  " + problem)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
