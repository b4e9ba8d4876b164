"""Start-up work, once per server process and in the background: the models the pages need
are loaded, and the concept pages' slow numbers computed, before a person asks for them.

A teacher who opens a concept page right after ``make run`` would otherwise wait for MiniLM
to load and for attention to be timed at seven sizes. The first page itself is not held
up: the work starts after a short delay, on a thread of its own, and Streamlit's caches
give a request that arrives mid-way the same result (one computation per key, others wait).
"""

from __future__ import annotations

import atexit
import gc
import logging
import os
import threading
import time

import streamlit as st

START_DELAY_S = 1.5  # let the page that started the process draw first
PRELOAD_MODELS = ("en2ko", "minilm")  # the default model and the concept pages' model
ENV_SWITCH = "ATTENTION_LAB_PRELOAD"  # "0" turns it off (e.g. a machine short of memory)

log = logging.getLogger(__name__)


def _work(device: str) -> None:
    time.sleep(START_DELAY_S)
    from ui import concepts, modern
    from ui.models import load_model

    started = time.perf_counter()
    for name in PRELOAD_MODELS:
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
        try:
            compute()
        except Exception as err:  # the page computes it again and shows any error itself
            log.warning("preloading %s failed: %s", name, err)
    # What is alive now (modules, weights, cached numbers) lives as long as the process. Moved
    # out of the collector's sight, it no longer makes each full collection take ~280 ms in
    # the middle of somebody's page; later garbage is collected as before.
    gc.freeze()
    log.info("preloaded in %.1f s", time.perf_counter() - started)


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
