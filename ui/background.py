"""Long computations (a long input's first pass, every head's statistics, a rollout) run in
a worker thread while the script run that asked for them draws a progress bar, one at a
time per server process, the others queued with their place shown.

A click during the wait starts a new script run and Streamlit stops the old one at its next
``st`` call, here a progress update. Computed in the script thread, the work would stop with
it and the new run would start it again from nothing: 50 s at 4,096 tokens of a 0.5B
model. In a worker it goes on. The new run (or another session asking for the same thing)
joins it, and the result goes to the cache the computation itself fills.

On a class server one student's 4,096-token paste would otherwise hold a replica's cores
for a minute while every other student on it waits (issue 46). So a replica runs one long
computation at a time, and served, at the lowest CPU priority (the threads it starts inherit
it), so the short requests, which never come here and are never queued, take the cores
whenever they need them and the long pass has the rest. Fewer torch threads for the long
pass would not do it: torch's thread count is in effect process-wide (the script threads
started after it inherit it), so halving it halved the short requests' threads too, and
bench.stall measured them slower (p50 1.14 s beside a paste, against 0.53 s with the
priority alone). Nor did making the long pass give way at each layer while any page's script
ran (a CPU priority does not reach the interpreter's lock, and bench.stall's split shows a
short run beside a paste blocked a little longer than alone): in three before / after pairs
it changed the p95 beside a paste by less than the machine's noise, and was dropped. Whoever
waits sees their place in the queue and may cancel; a computation nobody waits for any more
stops at its next layer.
"""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from collections.abc import Callable, Hashable
from typing import Any

import streamlit as st

from ui.i18n import t

POLL_S = 0.1  # how often the bar is redrawn while the worker runs
_ASKER_KEY = "_background_asker"  # this session's id among a job's askers
_CANCELLED_KEY = "_background_cancelled"  # keys this session cancelled, until started again


class Cancelled(Exception):  # noqa: N818 (a request, not an error)
    """Every session that asked for a computation cancelled it: it stops at its next report."""


class _Job:
    def __init__(self, key: Hashable, compute: Callable) -> None:
        self.key, self.compute = key, compute
        self.finished = threading.Event()
        self.done = self.total = 0
        self.value: Any = None
        self.error: BaseException | None = None
        self.askers: set[str] = set()
        self.cancelled = False

    def report(self, done: int, total: int) -> None:
        if self.cancelled:
            raise Cancelled(str(self.key))
        self.done, self.total = done, total


_JOBS: dict[Hashable, _Job] = {}  # in flight only (running or queued); removed when it ends
_WAITING: list[_Job] = []  # queued, first in first out
_RUNNING: list[_Job] = []  # the one job running, if any
_LOCK = threading.Lock()


LONG_PASS_NICE = 19  # the lowest priority: the long pass gets the CPU no one else wants


def _yield_cpu() -> None:
    """Served, this thread (a fresh one per job) and the threads it starts run at the lowest
    CPU priority; a lab on one's own machine keeps its full speed. Linux makes nice a per-
    thread value; elsewhere, or where it cannot be changed, nothing happens."""
    from ui.served import served

    if not served():
        return
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), LONG_PASS_NICE)


def _work(job: _Job) -> None:
    _yield_cpu()
    try:
        job.value = job.compute(job.report)
    except BaseException as err:  # noqa: BLE001 - handed to the run that waits for it
        job.error = err
    finally:
        with _LOCK:
            if _JOBS.get(job.key) is job:
                del _JOBS[job.key]
            _RUNNING.clear()
            _start_next()
        job.finished.set()


def _start_next() -> None:
    """The next queued job, if nothing runs (under _LOCK)."""
    if _RUNNING or not _WAITING:
        return
    job = _WAITING.pop(0)
    _RUNNING.append(job)
    threading.Thread(target=_work, args=(job,), daemon=True, name="long-pass").start()


def _submit(key: Hashable, compute: Callable, asker: str) -> _Job:
    """The job in flight for ``key`` (joined), else a new one queued (under _LOCK)."""
    job = _JOBS.get(key)
    if job is None or job.cancelled:
        job = _JOBS[key] = _Job(key, compute)
        _WAITING.append(job)
        _start_next()
    job.askers.add(asker)
    return job


def place(job: _Job) -> int:
    """0 while ``job`` runs (or has ended), else its place in the queue: 1 = next."""
    with _LOCK:
        return _WAITING.index(job) + 1 if job in _WAITING else 0


def cancel(key: Hashable, asker: str) -> None:
    """``asker`` no longer waits for ``key``; once nobody does, a queued job leaves the queue
    and a running one stops at its next report."""
    with _LOCK:
        job = _JOBS.get(key)
        if job is None:
            return
        job.askers.discard(asker)
        if job.askers:
            return
        job.cancelled = True
        if job in _WAITING:
            _WAITING.remove(job)
            del _JOBS[key]
            job.error = Cancelled(str(key))
            job.finished.set()


def _asker() -> str:
    return st.session_state.setdefault(_ASKER_KEY, uuid.uuid4().hex)


def _on_cancel(key: Hashable, asker: str) -> None:
    cancel(key, asker)
    st.session_state.setdefault(_CANCELLED_KEY, set()).add(key)


def _on_start_again(key: Hashable) -> None:
    st.session_state.get(_CANCELLED_KEY, set()).discard(key)


def _button_key(key: Hashable) -> str:
    return f"_background_{abs(hash(key))}"


def with_progress(
    key: Hashable,
    compute: Callable[[Callable[[int, int], None]], Any],
    label: Callable[[int, int], str],
):
    """``compute(report)`` in a worker thread, one per ``key`` (a second caller joins the
    first's) and one at a time in this process (the rest queued), while this run shows a
    bar labelled ``label(done, total)`` from what ``compute`` reports, or its place in the
    queue, and a button to cancel. The bar goes when the work ends; a job that ends within
    one poll shows none. Its error, if any, is raised here, in the script run. Cancelled,
    the page says so and stops, until "start again"."""
    if key in st.session_state.get(_CANCELLED_KEY, ()):
        st.info(t("background.cancelled"), icon=":material/cancel:")
        st.button(
            t("background.start_again"),
            key=_button_key(key) + "_again",
            on_click=_on_start_again,
            args=(key,),
        )
        st.stop()
    asker = _asker()
    with _LOCK:
        job = _submit(key, compute, asker)
    bar, button = _wait(job, key, asker, label)
    for shown in (bar, button):
        if shown is not None:
            shown.empty()
    if job.error is not None:
        raise job.error
    return job.value


def _wait(job: _Job, key: Hashable, asker: str, label: Callable[[int, int], str]):
    """The bar and the cancel button while ``job`` runs or waits; redrawn only on a change
    (each redraw is a message the server's event loop sends, ten a second otherwise)."""
    bar = button = shown = None
    while not job.finished.wait(POLL_S):
        waiting = place(job)
        if waiting:
            fraction, text = 0.0, t("background.queued", place=waiting)
        elif job.total:
            fraction, text = job.done / job.total, label(job.done, job.total)
        else:
            continue
        bar = bar or st.progress(0.0)
        if shown != (fraction, text):
            bar.progress(fraction, text)
            shown = (fraction, text)
        if button is None:
            button = st.empty()
            button.button(
                t("background.cancel"),
                key=_button_key(key),
                icon=":material/cancel:",
                on_click=_on_cancel,
                args=(key, asker),
            )
    return bar, button
