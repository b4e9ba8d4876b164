"""Start-up preloading: the models and slow numbers are ready before the first page asks."""

from __future__ import annotations

import threading
import time

import pytest

import ui.concepts
import ui.models
import ui.modern
from model.runtime.gguf_cache import installed
from model.runtime.loading import GGUF_MODELS
from ui import preload

CONCEPT_NUMBERS = ("cached_qk_variance", "cached_saturation", "cached_attention_cost")
# The real models a first visit opens on, where their packages are installed: loaded first.
REAL = tuple(name for name in GGUF_MODELS if installed(name))


@pytest.fixture(autouse=True)
def _no_real_freeze(monkeypatch):
    """The test process's own objects must stay collectable."""
    monkeypatch.setattr(preload.gc, "freeze", lambda: None)


@pytest.fixture(autouse=True)
def _a_page_has_run(monkeypatch):
    """The preload waits for a page to have run: one has, just now, and nothing waits."""
    monkeypatch.setattr(preload, "QUIET_S", 0)
    with preload.script_run():
        pass


def _record_modern(monkeypatch, computed):
    monkeypatch.setattr(ui.modern, "qk_rows", lambda learned: computed.append(("qk_rows", learned)))
    monkeypatch.setattr(ui.modern, "memory", lambda block: computed.append(("memory", block)))


def test_the_preload_loads_the_pages_models_and_computes_the_slow_numbers(monkeypatch):
    asked, computed = [], []
    monkeypatch.setattr(ui.models, "load_model", lambda name, device: asked.append(name))
    for name in CONCEPT_NUMBERS:
        monkeypatch.setattr(ui.concepts, name, lambda name=name: computed.append(name))
    _record_modern(monkeypatch, computed)
    preload._work("cpu")
    assert asked == [*REAL, "en2ko", "minilm"]  # the real models a first visit opens on, first
    # the Attention since 2017 page asks for MiniLM's q·k table and block 128 by default
    assert computed == [*CONCEPT_NUMBERS, ("qk_rows", True), ("memory", 128)]


def test_a_number_that_fails_to_compute_does_not_stop_the_rest(monkeypatch, caplog):
    computed = []
    monkeypatch.setattr(ui.models, "load_model", lambda name, device: None)

    def broken():
        raise RuntimeError("out of memory")

    monkeypatch.setattr(ui.concepts, "cached_qk_variance", broken)
    for name in CONCEPT_NUMBERS[1:]:
        monkeypatch.setattr(ui.concepts, name, lambda name=name: computed.append(name))
    _record_modern(monkeypatch, computed)
    preload._work("cpu")
    assert "preloading qk variance failed: out of memory" in caplog.text
    assert computed == [*CONCEPT_NUMBERS[1:], ("qk_rows", True), ("memory", 128)]


def test_a_model_that_fails_to_preload_does_not_stop_the_rest(monkeypatch, caplog):
    def load(name, device):
        if name == "en2ko":
            raise OSError("disk full")

    computed = []
    monkeypatch.setattr(ui.models, "load_model", load)
    for name in CONCEPT_NUMBERS:
        monkeypatch.setattr(ui.concepts, name, lambda name=name: computed.append(name))
    _record_modern(monkeypatch, computed)
    preload._work("cpu")
    assert "preloading en2ko failed: disk full" in caplog.text and len(computed) == 5


def test_what_the_preload_leaves_alive_is_kept_out_of_full_collections(monkeypatch):
    order = []
    monkeypatch.setattr(ui.models, "load_model", lambda name, device: order.append(name))
    for name in CONCEPT_NUMBERS:
        monkeypatch.setattr(ui.concepts, name, lambda name=name: order.append(name))
    _record_modern(monkeypatch, order)
    monkeypatch.setattr(preload.gc, "freeze", lambda: order.append("freeze"))
    preload._work("cpu")
    assert order[-1] == "freeze" and order.count("freeze") == 1


def test_preloading_can_be_switched_off(monkeypatch):
    monkeypatch.setenv(preload.ENV_SWITCH, "0")
    preload.start_preload.clear()
    try:
        assert preload.start_preload() is None
    finally:
        preload.start_preload.clear()


def test_the_preload_waits_while_a_page_runs_and_starts_once_it_has_drawn(monkeypatch):
    """The first page after a start computes what it needs without the preload competing."""
    order = []
    monkeypatch.setattr(preload, "QUIET_S", 0.05)
    monkeypatch.setattr(ui.models, "load_model", lambda name, device: order.append(name))
    for name in CONCEPT_NUMBERS:
        monkeypatch.setattr(ui.concepts, name, lambda name=name: order.append(name))
    _record_modern(monkeypatch, order)
    with preload.script_run():
        worker = threading.Thread(target=preload._work, args=("cpu",))
        worker.start()
        worker.join(0.5)
        assert worker.is_alive() and order == []  # the page is still running: nothing yet
        order.append("page drawn")
    worker.join(10)
    assert not worker.is_alive()
    assert order[: 3 + len(REAL)] == ["page drawn", *REAL, "en2ko", "minilm"]


def test_a_page_that_never_ends_does_not_stop_the_preload(monkeypatch):
    monkeypatch.setattr(preload, "MAX_YIELD_S", 0.1)
    with preload.script_run():
        started = time.monotonic()
        preload.yield_to_pages()
        assert 0.1 <= time.monotonic() - started < 5
