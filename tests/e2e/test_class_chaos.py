"""No press of Check lost, in a real browser, on `make serve`'s real deployment: two replicas
behind HAProxy and a real PostgreSQL. Two students (English at 1440 px, Korean at 390 px)
answer while their websocket is dropped and restored (no replica change), the replica they
are on is SIGKILLed just after Check (once while the store is down, so the dead replica
surely did not store it), and PostgreSQL is stopped during a submit and during a page load,
then started again. Afterwards every press is stored exactly once or the student was told, in their
language, that it was not saved; no traceback text appeared; the typed answer stayed in the
box. bench.classchaos runs the same with 10 students in `make bench`.

The students' browsers ask for reduced motion, which the lab honours (ui/a11y.py): pages
waiting through a dead replica or database redraw no animation frame by frame, and what is
checked (every press stored once or told, in words) does not move."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from bench import classchaos
from bench.classcore import chromium_for_tests
from deploy import postgres
from deploy.serve import haproxy_path
from tests.e2e.servers import DEPLOYMENT_GROUP

pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.xdist_group(DEPLOYMENT_GROUP)]

LESSONS = [
    ("en", 1440, ["none", "drop", "kill"]),
    ("ko", 390, ["db_submit", "db_load", "kill_pending"]),
]


def missing_parts(chromium: Path | None = None) -> list[str]:
    """What this test needs and this machine lacks: Chromium, Playwright, HAProxy, a
    PostgreSQL server it can start."""
    missing = []
    chromium = chromium or chromium_for_tests()
    if not chromium.exists():
        missing.append(f"Chromium at {chromium}")
    if importlib.util.find_spec("playwright") is None:
        missing.append("the playwright package")
    if haproxy_path() is None:
        missing.append("HAProxy")
    reason = postgres.missing_reason()
    if reason:
        missing.append(f"PostgreSQL ({reason})")
    return missing


def require_parts_under_ci(chromium: Path | None = None) -> None:
    """Under CI=true a missing part fails this test: CI installs every part, so one missing
    is a broken set-up, and a skip there would hide that no press was tried at all.
    Elsewhere the fixtures skip, each saying what to install."""
    missing = missing_parts(chromium)
    if missing and os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail("the chaos test needs " + ", ".join(missing) + " (CI=true: no skipping)")


@pytest.fixture(scope="session", autouse=True)
def parts_under_ci():
    """Session scope: checked before the session's browser fixture could skip."""
    require_parts_under_ci()


def test_under_ci_a_missing_part_fails_rather_than_skips(monkeypatch, tmp_path):
    absent = tmp_path / "no-chromium"
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="Chromium"):
        require_parts_under_ci(absent)
    monkeypatch.delenv("CI")
    require_parts_under_ci(absent)  # a developer's machine: the fixtures skip instead


@pytest.fixture(scope="module")
def deployment(shared_deployment):
    """The deployment test_balancer used (tests/e2e/servers.py), every replica alive again;
    stopped after this module, its last user: these faults come last."""
    reason = postgres.missing_reason()
    if reason:
        pytest.skip(f"no PostgreSQL server to test on: {reason}")
    lab, pg = shared_deployment.get()
    yield lab, pg
    shared_deployment.close()


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
            student = classchaos.new_student(
                browser, lab.url, i, lang, width, key, reduced_motion=True
            )
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
