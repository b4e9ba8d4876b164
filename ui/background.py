"""Long computations (a long input's first pass, every head's statistics, a rollout) run in
a worker thread while the script run that asked for them draws a progress bar.

A click during the wait starts a new script run and Streamlit stops the old one at its next
``st`` call, here a progress update. Computed in the script thread, the work would stop with
it and the new run would start it again from nothing: 50 s at 4,096 tokens of a 0.5B
model. In a worker it goes on. The new run (or another session asking for the same thing)
joins it, and the result goes to the cache the computation itself fills.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any

import streamlit as st

POLL_S = 0.1  # how often the bar is redrawn while the worker runs


class _Job:
    def __init__(self) -> None:
        self.finished = threading.Event()
        self.done = self.total = 0
        self.value: Any = None
        self.error: BaseException | None = None

    def report(self, done: int, total: int) -> None:
        self.done, self.total = done, total


_JOBS: dict[Hashable, _Job] = {}  # in flight only: a worker removes its job when it ends
_LOCK = threading.Lock()


def _work(key: Hashable, job: _Job, compute: Callable) -> None:
    try:
        job.value = compute(job.report)
    except BaseException as err:  # noqa: BLE001 - handed to the run that waits for it
        job.error = err
    finally:
        with _LOCK:
            if _JOBS.get(key) is job:
                del _JOBS[key]
        job.finished.set()


def with_progress(
    key: Hashable,
    compute: Callable[[Callable[[int, int], None]], Any],
    label: Callable[[int, int], str],
):
    """``compute(report)`` in a worker thread, one per ``key`` (a second caller joins the
    first's), while this run shows a bar labelled ``label(done, total)`` from what
    ``compute`` reports. The bar goes when the work ends; a job that ends within one poll
    shows none. Its error, if any, is raised here, in the script run."""
    with _LOCK:
        job = _JOBS.get(key)
        if job is None:
            job = _JOBS[key] = _Job()
            worker = threading.Thread(target=_work, args=(key, job, compute), daemon=True)
            worker.start()
    bar = None
    while not job.finished.wait(POLL_S):
        if job.total:
            bar = bar or st.progress(0.0)
            bar.progress(job.done / job.total, label(job.done, job.total))
    if bar is not None:
        bar.empty()
    if job.error is not None:
        raise job.error
    return job.value
