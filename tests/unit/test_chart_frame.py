"""A chart's frame (its summary, wrapped titles and font) is worked out once per figure and
language: a warm rerun sends the framed figure again without opening it (ui.charts)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from ui import charts, i18n
from viz.memo import FIGURES, KeptFigure


def _figure(title: str = "A curve whose title is long enough to be wrapped on a phone screen"):
    x = np.arange(1, 200)
    return go.Figure(go.Scatter(x=x, y=np.sqrt(x), name="rate"), layout={"title": title})


@pytest.fixture
def counted(monkeypatch):
    """How many times a figure was summarised (opened and walked)."""
    calls = []
    real = charts.describe_figure

    def describe(fig, title=None):
        calls.append(fig)
        return real(fig, title)

    monkeypatch.setattr(charts, "describe_figure", describe)
    speak(monkeypatch, "en")
    FIGURES.discard(lambda key: key[0] != "ui.charts.framed_figure")  # no frame from before
    return calls


def speak(monkeypatch, lang: str) -> None:
    monkeypatch.setattr(charts, "current_language", lambda: lang)
    monkeypatch.setattr(i18n, "current_language", lambda: lang)


def test_a_kept_figure_framed_before_is_sent_again_without_being_opened(counted):
    spec = _figure().to_json(validate=False)
    said, first = charts.framed_figure(KeptFigure(spec))
    again_said, again = charts.framed_figure(KeptFigure(spec))
    assert len(counted) == 1 and again_said == said
    assert not object.__getattribute__(again, "_kept")["built"]  # its JSON, as framed
    sent = again.to_dict()
    assert sent == first.to_dict()
    assert sent["layout"]["font"]["family"] == charts.FONT_STACK
    assert "<br>" in sent["layout"]["title"]["text"]  # wrapped to a phone's width


def test_a_figure_built_in_this_run_is_framed_in_place(counted):
    fig = _figure()
    said, framed = charts.framed_figure(fig)
    assert framed is fig and len(counted) == 1
    assert fig.layout.font.family == charts.FONT_STACK and "<br>" in fig.layout.title.text
    assert said.startswith("A curve whose title")


def test_a_figure_changed_after_it_was_built_is_framed_anew(counted):
    spec = _figure().to_json(validate=False)
    charts.framed_figure(KeptFigure(spec))
    changed = KeptFigure(spec)
    changed.update_yaxes(range=[0, 2])  # opened and changed: a different figure
    _, framed = charts.framed_figure(changed)
    assert len(counted) == 2 and tuple(framed.to_dict()["layout"]["yaxis"]["range"]) == (0, 2)


def test_the_frame_follows_the_language_and_the_given_summary(counted, monkeypatch):
    spec = _figure(title="Rate").to_json(validate=False)
    english, _ = charts.framed_figure(KeptFigure(spec))
    speak(monkeypatch, "ko")
    korean, _ = charts.framed_figure(KeptFigure(spec))
    given, _ = charts.framed_figure(KeptFigure(spec), summary="Said by the page")
    assert len(counted) == 2 and english != korean and given == "Said by the page"
