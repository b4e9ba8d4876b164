"""Switching the language relabels every drop-down at once, not after the next pick.

Streamlit tells the browser a drop-down's value by its label and re-sends it only when the
value changes; without ui.i18n.translated_widget the Korean UI kept English labels such as
"Layer 1" in its drop-downs. Here: after a switch, every selectbox is sent its new label.
"""

from __future__ import annotations

import re

import pytest
from streamlit.testing.v1 import AppTest

from tests.app.helpers import open_page
from ui.i18n import translate

HANGUL = re.compile(r"[\uac00-\ud7a3]")
PICKER = "_language_picker"  # ui.sidebar's language control


def opened(page: str, **query: str) -> AppTest:
    return open_page(page, **query)


def sent_labels(at: AppTest) -> dict[str, str]:
    """key -> the label this run told the browser to show, for drop-downs it re-sent."""
    return {sb.key: sb.proto.raw_value for sb in at.selectbox if sb.proto.set_value}


@pytest.mark.parametrize(
    ("page", "query"),
    [
        ("explorer", {"model": "minilm"}),
        ("concept_attention", {"model": "minilm"}),
        ("concept_layernorm", {"model": "minilm"}),
        ("training", {}),
    ],
)
def test_switching_language_sends_every_drop_down_its_new_label(page, query):
    at = opened(page, **query)
    assert not at.exception
    english = {sb.key: list(sb.proto.options) for sb in at.selectbox}
    assert {"model", "device"} <= set(english)  # the sidebar's, on every page

    at.button_group(key=PICKER).set_value("ko").run()
    assert not at.exception
    sent = sent_labels(at)
    assert set(sent) == set(english), "a drop-down kept the label of the old language"
    for sb in at.selectbox:
        korean = list(sb.proto.options)
        assert sent[sb.key] in korean  # one of this run's own labels ...
        if korean != english[sb.key]:
            assert sent[sb.key] not in english[sb.key]  # ... not a leftover English one
    assert HANGUL.search(sent["device"]) and HANGUL.search(sent["model"])


def test_switching_back_keeps_every_choice_and_shows_english_again():
    at = opened("explorer", model="minilm", layer="3", head="5")
    at.button_group(key=PICKER).set_value("ko").run()
    at.button_group(key=PICKER).set_value("en").run()
    assert not at.exception
    assert at.selectbox(key="model").value == "minilm"
    assert (at.selectbox(key="layer").value, at.selectbox(key="head").value) == (3, 5)
    sent = sent_labels(at)
    assert sent["model"] == translate("model.name.minilm", "en")
    assert sent["layer"] == translate("common.layer_n", "en", n=4)
    assert at.query_params["model"] == "minilm"


def test_an_ordinary_rerun_does_not_resend_labels():
    # Re-sending on every run would fight a student who is mid-way through picking.
    at = opened("explorer", model="minilm")
    at.button_group(key=PICKER).set_value("ko").run()
    at.run()
    assert sent_labels(at) == {}
