"""Start-up preloading: the models and slow numbers are ready before the first page asks."""

from __future__ import annotations

import pytest

import ui.concepts
import ui.models
import ui.modern
from ui import preload

CONCEPT_NUMBERS = ("cached_qk_variance", "cached_saturation", "cached_attention_cost")


@pytest.fixture(autouse=True)
def _no_real_freeze(monkeypatch):
    """The test process's own objects must stay collectable."""
    monkeypatch.setattr(preload.gc, "freeze", lambda: None)


def _record_modern(monkeypatch, computed):
    monkeypatch.setattr(ui.modern, "qk_rows", lambda learned: computed.append(("qk_rows", learned)))
    monkeypatch.setattr(ui.modern, "memory", lambda block: computed.append(("memory", block)))


def test_the_preload_loads_the_pages_models_and_computes_the_slow_numbers(monkeypatch):
    asked, computed = [], []
    monkeypatch.setattr(preload, "START_DELAY_S", 0)
    monkeypatch.setattr(ui.models, "load_model", lambda name, device: asked.append(name))
    for name in CONCEPT_NUMBERS:
        monkeypatch.setattr(ui.concepts, name, lambda name=name: computed.append(name))
    _record_modern(monkeypatch, computed)
    preload._work("cpu")
    assert asked == ["en2ko", "minilm"]
    # the Attention since 2017 page asks for MiniLM's q·k table and block 128 by default
    assert computed == [*CONCEPT_NUMBERS, ("qk_rows", True), ("memory", 128)]


def test_a_number_that_fails_to_compute_does_not_stop_the_rest(monkeypatch, caplog):
    computed = []
    monkeypatch.setattr(preload, "START_DELAY_S", 0)
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
    monkeypatch.setattr(preload, "START_DELAY_S", 0)
    monkeypatch.setattr(ui.models, "load_model", load)
    for name in CONCEPT_NUMBERS:
        monkeypatch.setattr(ui.concepts, name, lambda name=name: computed.append(name))
    _record_modern(monkeypatch, computed)
    preload._work("cpu")
    assert "preloading en2ko failed: disk full" in caplog.text and len(computed) == 5


def test_what_the_preload_leaves_alive_is_kept_out_of_full_collections(monkeypatch):
    order = []
    monkeypatch.setattr(preload, "START_DELAY_S", 0)
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
