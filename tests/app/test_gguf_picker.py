"""GGUF files in the app: a .gguf in the models root opens from a link, a broken one says why.

A tiny LLaMA GGUF (tests/gguf_files.py) sits in the models root; ``?model=gguf:NAME`` opens
it in the explorer through our engine, and a file that is not a GGUF gets the plain message
in the reader's language, not a traceback.
"""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from tests.app.helpers import APP
from tests.gguf_files import write_tiny_gguf
from ui.i18n import translate

PROMPT = "the cat sat"


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    write_tiny_gguf(root / "tiny-llama.gguf", "llama", "Q8_0")
    (root / "broken.gguf").write_bytes(b"not a gguf")
    return root


@pytest.fixture(autouse=True)
def env(root, monkeypatch, tmp_path_factory):
    monkeypatch.setenv("ATTENTION_LAB_MODELS", str(root))
    monkeypatch.setenv("ATTENTION_LAB_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def on(model: str, lang: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=240)
    at.switch_page("pages/explorer.py")
    at.query_params.update({"model": model, "text": PROMPT, "lang": lang})
    return at.run()


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_a_gguf_in_the_models_root_opens_from_its_link_in_our_engine(lang):
    at = on("gguf:tiny-llama.gguf", lang)
    assert not at.exception and not at.error
    shown = " ".join(c.value for c in at.caption)
    assert translate("model.engine.lab", lang) in shown
    assert translate("model.layout", lang, layout="LLaMA") in shown


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_a_broken_gguf_says_why_in_the_readers_language(root, lang):
    at = on("gguf:broken.gguf", lang)
    assert not at.exception
    expected = translate("model.problem.gguf_unreadable", lang, path=f"`{root / 'broken.gguf'}`")
    assert [e.value for e in at.error] == [expected]
