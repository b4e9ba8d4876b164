"""Start-up preloading: the models and slow numbers are ready before the first page asks."""

from __future__ import annotations

import ui.concepts
import ui.models
from ui import preload


def test_the_preload_loads_the_pages_models_and_computes_the_slow_numbers(monkeypatch):
    asked, computed = [], []
    monkeypatch.setattr(preload, "START_DELAY_S", 0)
    monkeypatch.setattr(ui.models, "load_model", lambda name, device: asked.append(name))
    for name in ("cached_qk_variance", "cached_saturation", "cached_attention_cost"):
        monkeypatch.setattr(ui.concepts, name, lambda name=name: computed.append(name))
    preload._work("cpu")
    assert asked == ["en2ko", "minilm"]
    assert computed == ["cached_qk_variance", "cached_saturation", "cached_attention_cost"]


def test_a_model_that_fails_to_preload_does_not_stop_the_rest(monkeypatch, caplog):
    def load(name, device):
        if name == "en2ko":
            raise OSError("disk full")

    computed = []
    monkeypatch.setattr(preload, "START_DELAY_S", 0)
    monkeypatch.setattr(ui.models, "load_model", load)
    for name in ("cached_qk_variance", "cached_saturation", "cached_attention_cost"):
        monkeypatch.setattr(ui.concepts, name, lambda name=name: computed.append(name))
    preload._work("cpu")
    assert "preloading en2ko failed: disk full" in caplog.text and len(computed) == 3


def test_preloading_can_be_switched_off(monkeypatch):
    monkeypatch.setenv(preload.ENV_SWITCH, "0")
    preload.start_preload.clear()
    try:
        assert preload.start_preload() is None
    finally:
        preload.start_preload.clear()
