"""The training page through AppTest: start, watch, cancel, the server's cap, zips up and down."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from model.runtime.bundle import pack
from model.training import live
from tests.app.helpers import APP
from ui.i18n import translate


def training() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("pages/training.py")
    return at.run()


def start(at: AppTest, steps: int) -> live.LiveRun | None:
    at.slider(key="tr_steps").set_value(steps)
    at.button(key="tr_start").click().run()
    try:
        return at.session_state["training_run"]
    except KeyError:  # refused: no run was stored
        return None


def en(key: str, **kwargs) -> str:
    return translate(key, "en", **kwargs)


@pytest.fixture(scope="module")
def trained():
    """One short run through the page, finished: (AppTest, its run)."""
    at = training()
    run = start(at, 50)
    assert run is not None and not at.exception
    assert at.get("progress")  # the live view while it runs
    run.join(120)
    at.run()
    return at, run


def test_a_short_run_in_the_page_lowers_the_loss_and_leaves_a_timeline(trained):
    at, run = trained
    p = run.snapshot()
    assert p.state == "done" and p.loss[-1][1] < p.loss[0][1], p.error
    assert not at.exception and not at.error
    assert en("training.state.done", step=50, total=50, seconds=f"{p.elapsed_s:.0f}") in [
        s.value for s in at.success
    ]
    timeline = at.select_slider(key="tr_timeline")
    assert timeline.options == [f"step {s.step}" for s in p.snapshots] and len(p.snapshots) > 2
    assert at.get("download_button")
    last = at.get("plotly_chart")[-1].proto.spec
    timeline.set_value(0).run()  # scrub back to the untrained model
    kind = en("common.kind.cross")
    title = en("training.snapshot_title", step=0, kind=kind, layer=1)
    assert title in [m.value for m in at.markdown]
    assert at.get("plotly_chart")[-1].proto.spec != last  # a different picture


def test_the_trained_model_joins_this_sessions_model_choices(trained):
    at, run = trained
    folder = run.snapshot().folder
    picker = at.sidebar.selectbox(key="model")
    assert "trained #1 · reverse (this session)" in picker.options
    assert "assets" not in Path(folder).parts  # the shipped checkpoints are never touched
    picker.set_value(folder)
    at.switch_page("pages/explorer.py")
    at.query_params.update({"view": "compare", "cmp": "model"})
    at.run()
    assert not at.exception and not at.error
    assert at.get("plotly_chart")  # the trained model's attention, drawn by the Explorer
    other = at.selectbox(key="model2")
    assert "reverse · reverse a sequence (toy)" in other.options


def test_cancel_in_the_page_stops_the_run():
    at = training()
    run = start(at, 2000)
    assert at.button(key="tr_cancel").disabled is False
    at.button(key="tr_cancel").click().run()
    run.join(30)
    at.run()
    p = run.snapshot()
    assert p.state == "cancelled" and p.step < 2000
    assert en("training.state.cancelled", step=p.step, total=2000) in [i.value for i in at.info]


def test_a_second_run_while_the_server_is_busy_gets_a_message(monkeypatch):
    monkeypatch.setattr(live, "_SLOTS", threading.BoundedSemaphore(1))
    first = training()
    run = start(first, 2000)
    try:
        second = training()
        assert start(second, 50) is None
        assert en("training.busy") in [w.value for w in second.warning]
    finally:
        run.cancel()
        run.join(30)


def test_an_uploaded_zip_of_a_trained_model_joins_the_choices(trained):
    _, run = trained
    at = training()
    at.file_uploader(key="tr_upload").set_value(
        ("model.zip", pack(run.snapshot().folder), "application/zip")
    ).run()
    assert not at.exception and not at.error
    assert any("uploaded #1 · reverse" in s.value for s in at.success)
    assert "uploaded #1 · reverse (this session)" in at.sidebar.selectbox(key="model").options


def test_a_damaged_zip_gets_a_message_not_a_traceback():
    at = training()
    at.file_uploader(key="tr_upload").set_value(
        ("broken.zip", b"PK\x03\x04 broken", "application/zip")
    ).run()
    assert not at.exception
    assert [e.value for e in at.error] == [en("training.upload_failed", file="broken.zip")]
