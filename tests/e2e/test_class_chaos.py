"""No press of Check lost, in a real browser, on `make serve`'s real deployment: two replicas
behind HAProxy and a real PostgreSQL. Two students (English at 1440 px, Korean at 390 px)
answer while their websocket is dropped and restored (no replica change), the replica they
are on is SIGKILLed just after Check (once while the store is down, so the dead replica
surely did not store it), and PostgreSQL is stopped during a submit and during a page load,
then started again. Afterwards every press is stored exactly once or the student was told, in their
language, that it was not saved; no traceback text appeared; the typed answer stayed in the
box. bench.classchaos runs the same with 10 students in `make bench`."""

from __future__ import annotations

import pytest

from bench import classchaos
from deploy.serve import ServeError
from tests import pg_server
from tests.e2e.test_balancer import need_haproxy

pytestmark = [pytest.mark.slow, pytest.mark.browser]

LESSONS = [
    ("en", 1440, ["none", "drop", "kill"]),
    ("ko", 390, ["db_submit", "db_load", "kill_pending"]),
]


@pytest.fixture(scope="module")
def deployment(artifacts_dir):
    need_haproxy()
    with pg_server.server():  # skips, saying why, without PostgreSQL's binaries
        pass
    try:
        with classchaos.deployment(artifacts_dir / "chaos-serve") as (lab, pg):
            yield lab, pg
    except ServeError as err:
        pytest.fail(str(err))


def test_every_press_is_stored_once_or_the_student_is_told(
    browser, deployment, artifacts_dir, screenshot_whole_page
):
    from classroom import Classroom

    lab, pg = deployment
    room = Classroom(pg.url)
    code, _ = room.create_class("Chaos", topic=classchaos.TOPIC, n_items=3, solutions="closed")
    students = []
    try:
        for i, (lang, width, _) in enumerate(LESSONS):
            key = room.join(code, ["Ada", "민수"][i])
            student = classchaos.new_student(browser, lab.url, i, lang, width, key)
            students.append(student)
            student.open(lab.url)
        for student, (lang, width, faults) in zip(students, LESSONS):
            classchaos.lesson(student, lab, pg, pg.url, faults, 100 * (student.number + 1))
            screenshot_whole_page(student.tab, artifacts_dir / f"class-chaos-{lang}-{width}.png")
        counts = classchaos.tally(students, pg.url)
        assert counts["problems"] == [], counts
        assert counts["presses"] == 6 and counts["lost"] == 0 and counts["duplicates"] == 0
        told = {p.fault for s in students for p in s.presses if p.told and p.stored == 0}
        assert told <= {"kill", "kill_pending"}, "only a dead replica may cost a press"
        for student in students:
            assert student.traceback_shown() == []
    finally:
        for student in students:
            student.context.close()
