"""A long computation runs in a worker: a script run stopped by a click (Streamlit stops it
at its next ``st`` call, here a progress update) leaves it going, and the next run joins it
instead of starting again from nothing (ui.background)."""

from __future__ import annotations

import threading
import time

import pytest

from ui import background


class Interrupted(Exception):
    """Stands in for Streamlit's RerunException, raised at the run's next st call."""


def slow(calls: list, gate: threading.Event, steps: int = 3):
    def compute(report):
        calls.append(1)
        for done in range(1, steps + 1):
            report(done, steps)
            gate.wait(5)  # the first layer is read; the rest wait for the test
        return "the trace"

    return compute


def test_a_run_stopped_while_it_waits_leaves_the_work_going_and_the_next_run_joins_it():
    calls, gate, said = [], threading.Event(), []

    def label(done: int, n: int) -> str:
        said.append((done, n))
        raise Interrupted  # the click: this run stops at its first progress update

    with pytest.raises(Interrupted):
        background.with_progress("long text", slow(calls, gate), label)
    assert background._JOBS  # still in flight after the run that asked for it stopped
    joined, box = threading.Event(), {}

    def next_label(done: int, n: int) -> str:
        joined.set()  # the next run draws the bar of the work in flight: it has joined
        return f"{done}/{n}"

    def next_run() -> None:
        box["value"] = background.with_progress("long text", slow(calls, gate), next_label)

    runner = threading.Thread(target=next_run)
    runner.start()
    assert joined.wait(10)
    gate.set()  # only now may the work end: the join is not a race with its end
    runner.join(10)
    value = box["value"]
    assert value == "the trace" and calls == [1]  # computed once, not again from nothing
    assert said == [(1, 3)]
    assert background._JOBS == {}  # nothing in flight is kept once it ends


def test_two_runs_asking_at_once_share_one_computation_and_its_error(monkeypatch):
    calls, gate, asked = [], threading.Event(), []
    submit = background._submit

    def counted(*args):  # both runs have asked before the work may end
        asked.append(1)
        return submit(*args)

    monkeypatch.setattr(background, "_submit", counted)

    def failing(report):
        calls.append(1)
        gate.wait(5)
        raise ValueError("the text is empty")

    results = []

    def ask():
        try:
            background.with_progress("same", failing, lambda d, n: "")
        except ValueError as err:
            results.append(str(err))

    askers = [threading.Thread(target=ask) for _ in range(2)]
    for a in askers:
        a.start()
    deadline = time.monotonic() + 10
    while len(asked) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    gate.set()
    for a in askers:
        a.join(5)
    assert calls == [1] and results == ["the text is empty"] * 2
