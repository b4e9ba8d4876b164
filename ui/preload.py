"""Start-up work, once per server process and in the background: the models the pages need
are loaded, and the concept pages' slow numbers computed, before a person asks for them.

A teacher who opens a concept page right after ``make run`` would otherwise wait for MiniLM
to load and for attention to be timed at seven sizes. The first page itself is not held
up: the work runs on a thread of its own and yields to the pages' script runs (app.py runs
each page inside ``script_run()``): it starts once the first page has been drawn, and waits
between its items while a page is running. The page being opened computes what it needs
itself, first, without a second thread competing for the interpreter; Streamlit's caches
give a request that arrives mid-way the same result (one computation per key, others wait).
The rest of a decoding run the page left half-read is decoded the same way (``decode_ahead``).
"""

from __future__ import annotations

import atexit
import gc
import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import streamlit as st

QUIET_S = 3.0  # after a page's run: Chromium draws its charts (at 0.5 s a first visit drew 0.4-1.3 s later)
MAX_YIELD_S = 30.0  # a page that never stops running (a live view) does not stop the preload
# Besides the real models a first visit opens on (SmolLM2, Gemma 3, where installed) and the
# toy default (ui.models.DEFAULT_MODEL), in that order: the concept
# pages' model. A model that takes seconds to load (a GGUF decoder read from its converted
# folder) is then in memory before anybody asks; a page that asks sooner has already drawn
# its title and the sidebar, and shows the picker's spinner while it waits (ui.models.get_model).
PRELOAD_MODELS = ("minilm",)
ENV_SWITCH = "ATTENTION_LAB_PRELOAD"  # "0" turns it off (e.g. a machine short of memory)

log = logging.getLogger(__name__)


_runs = threading.Condition()
_state = {"active": 0, "ended_at": None}  # script runs going on; when the last one ended
_STOPPING = threading.Event()  # the interpreter is exiting: background work stops waiting


@contextmanager
def script_run() -> Iterator[None]:
    """Around a page's script run (app.py): the preload waits while any is running."""
    with _runs:
        _state["active"] += 1
    try:
        yield
    finally:
        with _runs:
            _state["active"] -= 1
            _state["ended_at"] = time.monotonic()
            _runs.notify_all()


def _pages_quiet() -> bool:
    ended = _state["ended_at"]
    return _state["active"] == 0 and ended is not None and time.monotonic() - ended >= QUIET_S


def yield_to_pages(limit_s: float | None = None) -> None:
    """Wait until no page is running and one has finished at least ``QUIET_S`` ago (at most
    ``limit_s``, default ``MAX_YIELD_S``)."""
    deadline = time.monotonic() + (MAX_YIELD_S if limit_s is None else limit_s)
    with _runs:
        while not _pages_quiet() and not _STOPPING.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            _runs.wait(min(left, QUIET_S))


def _work(device: str) -> None:
    yield_to_pages()  # the page that started the process is drawn first
    from ui import concepts, modern
    from ui.models import DEFAULT_MODEL, load_model

    started = time.perf_counter()
    for name in dict.fromkeys((*_real_defaults(), DEFAULT_MODEL, *PRELOAD_MODELS)):
        yield_to_pages()
        try:
            load_model(name, device)
        except Exception as err:  # the page that needs it will say why, in the UI language
            log.warning("preloading %s failed: %s", name, err)
    for name, compute in (
        ("qk variance", concepts.cached_qk_variance),
        ("saturation", concepts.cached_saturation),
        ("attention cost", concepts.cached_attention_cost),
        # Attention since 2017: q·k by distance (MiniLM's table) and the measured memory at
        # the default block size took ~3.5 s of a first visit's server time.
        ("q·k by distance", lambda: modern.qk_rows(True)),
        ("attention memory", lambda: modern.memory(128)),
    ):
        yield_to_pages()
        try:
            compute()
        except Exception as err:  # the page computes it again and shows any error itself
            log.warning("preloading %s failed: %s", name, err)
    # What is alive now (modules, weights, cached numbers) lives as long as the process. Moved
    # out of the collector's sight, it no longer makes each full collection take ~280 ms in
    # the middle of somebody's page; later garbage is collected as before.
    gc.freeze()
    log.info("preloaded in %.1f s", time.perf_counter() - started)


def decode_ahead(run) -> None:
    """Decode the rest of a ``model.runtime.decoding.DecodingRun`` that a page read only in
    part, on a thread of its own, one step at a time while no page is running: the next
    Step finds its token decoded, and the page can soon say how long the run is. One thread
    per run (``take_ahead``); the steps are the run's own, whoever decodes them."""
    if run.done or not run.take_ahead():
        return
    thread = threading.Thread(target=_ahead, args=(run,), name="decode-ahead", daemon=True)
    _AHEAD.add(thread)
    thread.start()


def _ahead(run) -> None:
    try:
        while not _STOPPING.is_set():
            yield_to_pages()
            if _STOPPING.is_set() or not run.decode_next():
                return
    except Exception as err:  # the run is dropped (ui.models): the page's next read retries
        log.warning("decoding ahead failed: %s", err)
    finally:
        _AHEAD.discard(threading.current_thread())


_AHEAD: set[threading.Thread] = set()  # threads decoding ahead now


@atexit.register
def _stop_ahead() -> None:
    """A thread killed mid-step at exit can abort the interpreter (as mid-load, above): each
    finishes the step it is in."""
    _STOPPING.set()
    with _runs:
        _runs.notify_all()
    for thread in list(_AHEAD):
        thread.join(5)


def _real_defaults() -> tuple[str, ...]:
    """The real models a first visit opens on (SmolLM2 in English, Gemma 3 in Korean), where
    installed: loaded first, as they are the slowest to load."""
    from model.runtime.gguf_cache import installed
    from model.runtime.loading import GGUF_MODELS

    return tuple(name for name in GGUF_MODELS if installed(name))


@st.cache_resource(show_spinner=False)
def start_preload(device: str = "auto") -> threading.Thread | None:
    """Start the background work once per process; None when switched off."""
    if os.environ.get(ENV_SWITCH, "1") == "0":
        return None
    thread = threading.Thread(target=_work, args=(device,), name="preload", daemon=True)
    thread.start()
    # A daemon thread killed mid-way through loading torch weights aborts the interpreter
    # ("terminate called without an active exception"): let it finish before exit.
    atexit.register(thread.join, 120)
    return thread
