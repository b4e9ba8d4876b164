"""One student cannot stall the others (issue 46): a replica runs one long computation at a
time; the others queue, see their place and may cancel, and short requests never queue.
Functional, not timed: the stall benchmark (bench/stall.py) measures the short ones' time."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest
from streamlit.testing.v1 import AppTest

from tests.app.helpers import APP
from ui import background
from ui.i18n import translate
from ui.served import SERVED_ENV


class FakePage:
    """What with_progress draws, recorded: the bar's texts and the buttons offered."""

    def __init__(self) -> None:
        self.session_state: dict = {}
        self.texts: list[str] = []
        self.buttons: list[tuple[str, object, tuple]] = []  # label, on_click, args

    def progress(self, fraction, text=None):
        if text is not None:
            self.texts.append(text)
        return self

    def empty(self):
        return self

    def button(self, label, key=None, icon=None, on_click=None, args=()):
        self.buttons.append((label, on_click, args))
        return False


@pytest.fixture
def page(monkeypatch):
    fake = FakePage()
    monkeypatch.setattr(background, "st", fake)
    monkeypatch.setattr(background, "t", lambda key, **kw: translate(key, "en", **kw))
    yield fake
    assert background._JOBS == {} and background._WAITING == [] and background._RUNNING == []


def held(gate: threading.Event, steps: int = 2):
    """A long computation that reports each step and waits at each for ``gate``."""

    def compute(report):
        for done in range(1, steps + 1):
            report(done, steps)
            gate.wait(10)
        return "done"

    return compute


def ask(key, compute, out: dict):
    def run():
        try:
            out[key] = background.with_progress(key, compute, lambda d, n: f"{key} {d}/{n}")
        except background.Cancelled:
            out[key] = "cancelled"

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def until(condition, timeout: float = 10) -> None:
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.02)


def test_one_long_computation_runs_at_a_time_and_the_rest_see_their_place(page):
    gate, out = threading.Event(), {}
    first = ask("first", held(gate), out)
    until(lambda: background._RUNNING)
    second, third = ask("second", held(gate), out), None
    until(lambda: len(background._WAITING) == 1)
    third = ask("third", held(gate), out)
    until(lambda: len(background._WAITING) == 2)
    running = background._RUNNING[0]
    assert running.key == "first"
    assert [background.place(j) for j in background._WAITING] == [1, 2]
    # each waiting student's bar is drawn at its own next poll, which a busy machine delays
    until(lambda: translate("background.queued", "en", place=2) in page.texts)
    until(lambda: translate("background.queued", "en", place=1) in page.texts)
    gate.set()
    for thread in (first, second, third):
        thread.join(10)
    assert out == {"first": "done", "second": "done", "third": "done"}


def test_a_queued_student_may_cancel_and_leaves_the_queue(page):
    gate, out = threading.Event(), {}
    first = ask("first", held(gate), out)
    until(lambda: background._RUNNING)
    second = ask("second", held(gate), out)
    until(lambda: any(label == "Cancel" for label, _, args in page.buttons if "second" in args))
    [(on_click, args)] = [(c, a) for label, c, a in page.buttons if a and a[0] == "second"]
    on_click(*args)  # the press
    second.join(5)
    assert out["second"] == "cancelled" and background._WAITING == []
    assert "second" in page.session_state[background._CANCELLED_KEY]
    gate.set()
    first.join(10)
    assert out["first"] == "done"


def test_a_running_computation_nobody_waits_for_stops_at_its_next_layer(page):
    gate, out, layers = threading.Event(), {}, []

    def compute(report):
        for done in range(1, 100):
            report(done, 100)
            layers.append(done)
            gate.wait(0.05)
        return "all of it"

    first = ask("long", compute, out)
    until(lambda: page.buttons)
    _, on_click, args = page.buttons[0]
    on_click(*args)
    first.join(10)
    assert out["long"] == "cancelled" and len(layers) < 99


def test_two_students_asking_for_the_same_share_it_and_one_cancel_does_not_stop_it(page):
    gate = threading.Event()
    job = background._submit("same", held(gate), "student-a")
    assert background._submit("same", held(gate), "student-b") is job
    background.cancel("same", "student-a")
    assert not job.cancelled  # student b still waits for it
    gate.set()
    until(job.finished.is_set)
    assert job.value == "done"


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_a_short_input_is_drawn_while_a_long_computation_holds_the_queue(lang):
    """On the explorer page, as a student types a short sentence while another's long paste
    runs: the page draws at once, with no place in any queue."""
    gate = threading.Event()
    blocker = background._submit(("someone else's paste",), held(gate), "student-a")
    try:
        at = AppTest.from_file(APP, default_timeout=120)
        at.switch_page("pages/explorer.py")
        at.query_params.update({"lang": lang, "model": "en2ko", "text": "I study math"})
        at.run()
        assert not at.exception
        assert at.get("plotly_chart"), "the short input's map is drawn"
        queued = translate("background.queued", lang, place=1)[:20]
        assert not [p for p in at.get("progress") if queued in str(p.proto.text)]
        assert background._WAITING == []
        assert background._RUNNING[0] is blocker
    finally:
        gate.set()
        blocker.finished.wait(10)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="nice is per thread on Linux")
@pytest.mark.parametrize("served", [True, False])
def test_served_the_long_computation_yields_the_cpu_to_the_short_ones(page, monkeypatch, served):
    if served:
        monkeypatch.setenv(SERVED_ENV, "1")
    else:
        monkeypatch.delenv(SERVED_ENV, raising=False)
    own = os.getpriority(os.PRIO_PROCESS, 0)

    def compute(report):
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    nice = background.with_progress(("nice", served), compute, lambda d, n: "")
    assert nice == (background.LONG_PASS_NICE if served else own)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == own  # this thread


def test_a_waiting_student_is_redrawn_only_when_their_place_changes(page):
    """Each redraw is a message the server sends: a queued student's unchanged place is not
    sent ten times a second."""
    gate, out = threading.Event(), {}
    first = ask("first", held(gate), out)
    until(lambda: background._RUNNING)
    second = ask("second", held(gate), out)
    queued = translate("background.queued", "en", place=1)
    until(lambda: queued in page.texts)
    time.sleep(10 * background.POLL_S)  # ten polls, the place unchanged
    assert page.texts.count(queued) == 1
    gate.set()
    for thread in (first, second):
        thread.join(10)
    assert out == {"first": "done", "second": "done"}
