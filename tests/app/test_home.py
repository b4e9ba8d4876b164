"""The app frame and home page, run headless through Streamlit's AppTest."""

from __future__ import annotations

import contextlib
import io
import re

import torch
from streamlit.testing.v1 import AppTest

from model.runtime.device import thread_setting
from tests.app.helpers import open_page
from ui.i18n import load_catalog, translate

HANGUL = re.compile(r"[\uac00-\ud7a3]")


def open_app(**query: str) -> AppTest:
    return open_page(None, timeout=60, **query)


def visible_text(at: AppTest) -> list[str]:
    """Every string a reader sees in the main area and the sidebar (formulas and code aside)."""
    texts = []
    for root in (at.main, at.sidebar):
        for kind in ("title", "header", "subheader", "markdown", "caption"):
            texts += [element.value for element in root.get(kind)]
        texts += [widget.label for widget in root.get("button_group")]
    return texts


def test_home_opens_in_english_with_its_title():
    at = open_app()
    assert not at.exception
    assert [title.value for title in at.title] == [translate("home.title", "en")]
    assert at.query_params["lang"] == "en"


def test_attention_formulas_scale_by_the_square_root_of_d_k():
    at = open_app()
    formulas = [element.value for element in at.latex]
    assert any(r"\mathrm{Attention}(Q, K, V) =" in tex for tex in formulas), formulas
    with_scores = [tex for tex in formulas if "QK^{\\top}" in tex]
    assert with_scores, formulas
    for tex in with_scores:
        assert r"\frac{QK^{\top}}{\sqrt{d_k}}" in tex, tex


def test_choosing_korean_in_the_sidebar_turns_the_page_korean():
    at = open_app()
    at.sidebar.button_group[0].set_value("ko").run()

    assert not at.exception
    assert [title.value for title in at.title] == [translate("home.title", "ko")]
    assert at.query_params["lang"] == "ko"
    texts = visible_text(at)
    assert all(HANGUL.search(text) for text in texts), [t for t in texts if not HANGUL.search(t)]
    english_only = set(load_catalog("en").values()) - set(load_catalog("ko").values())
    assert [text for text in texts if text in english_only] == []
    assert not any(translate("home.title", "en") in text for text in texts)


def test_switching_back_to_english_restores_english():
    at = open_app(lang="ko")
    at.sidebar.button_group[0].set_value("en").run()
    assert [title.value for title in at.title] == [translate("home.title", "en")]
    assert not any(HANGUL.search(text) for text in visible_text(at) if "한국어" not in text)


def test_a_link_with_lang_ko_opens_in_korean():
    at = open_app(lang="ko")
    assert [title.value for title in at.title] == [translate("home.title", "ko")]
    assert at.sidebar.button_group[0].value == "ko"


def test_an_unknown_lang_in_the_link_falls_back_to_english():
    at = open_app(lang="xx")
    assert not at.exception
    assert [title.value for title in at.title] == [translate("home.title", "en")]
    assert at.query_params["lang"] == "en"


def test_sidebar_names_the_device_torch_uses():
    """The caption names the thread cap the page's own (script) thread runs with: the app's
    setting, not whatever another test left in this process's main thread."""
    at = open_app()
    captions = [caption.value for caption in at.sidebar.caption]
    if torch.cuda.is_available():
        expected = re.escape(torch.cuda.get_device_name(0))
    else:
        expected = rf"CPU · {thread_setting()} threads?\b"
    assert any(re.search(expected, caption) for caption in captions), captions


def test_the_python_example_on_the_home_page_runs():
    at = open_app()
    (snippet,) = [block.value for block in at.code]
    namespace: dict = {}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(snippet, "home-page-example", "exec"), namespace)
    weights = namespace["weights"]
    # Causal mask over 5 tokens: each row sums to 1 and nothing lies above the diagonal.
    assert weights.shape == (1, 5, 5)
    torch.testing.assert_close(weights.sum(-1), torch.ones(1, 5))
    assert torch.equal(weights[0].triu(1), torch.zeros(5, 5))
    assert printed.getvalue().startswith("tensor([[1.")
