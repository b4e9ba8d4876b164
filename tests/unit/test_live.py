"""Live training (model.training.live) and checkpoint zips (model.runtime.bundle), without any UI."""

from __future__ import annotations

import io
import threading
import time
import zipfile
from pathlib import Path

import pytest
import torch

from model import load
from model.runtime.bundle import load_zip, pack, unpack
from model.runtime.device import configure_threads
from model.runtime.types import ModelLoadError
from model.training import live
from model.training.live import Busy, LiveRun, Settings
from model.training.trainer import main as train_main

TINY = ["--d-model", "16", "--heads", "2", "--layers", "1", "--d-ff", "32", "--batch", "8"]


@pytest.fixture(autouse=True)
def app_thread_cap():
    """Runs train under the cap the app sets for the whole process (model.runtime.device)."""
    before = torch.get_num_threads()
    configure_threads()
    yield
    torch.set_num_threads(before)


def wait_for_step(run: LiveRun, step: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while run.snapshot().step < step and run.snapshot().active:
        assert time.monotonic() < deadline, "the run never reached the step"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    out = tmp_path_factory.mktemp("ckpt") / "reverse"
    train_main(
        [
            "--task",
            "reverse",
            "--out",
            str(out),
            "--steps",
            "2",
            *TINY,
            "--eval-n",
            "8",
            "--no-progress",
        ]
    )
    return out


def test_a_short_run_lowers_the_loss_and_snapshots_the_probe_attention(tmp_path):
    run = LiveRun(Settings(task="reverse", size="tiny", steps=60), out_root=tmp_path)
    run.start()
    run.join(120)
    p = run.snapshot()
    assert p.state == "done" and p.step == 60, p.error
    assert p.loss[-1][1] < p.loss[0][1] - 0.2  # it learns something in 60 steps
    assert len(p.lr) == 60 and [s for s, _ in p.accuracy] == [s.step for s in p.snapshots]
    steps = [s.step for s in p.snapshots]
    assert steps[0] == 0 and steps[-1] == 60 and steps == sorted(steps)
    snap = p.snapshots[-1]
    assert snap.kind == "cross" and snap.key_tokens[:5] == ["a", "3", "k", "7", "b"]
    layers, heads, queries, keys = snap.attention.shape
    assert (layers, heads) == (1, 2) and (queries, keys) == (6, 6)
    assert p.snapshots[0].attention.data_ptr() != snap.attention.data_ptr()  # copies, not views
    assert p.folder and tmp_path in Path(p.folder).parents  # never into assets/


def test_the_sort_task_snapshots_masked_decoder_self_attention(tmp_path):
    run = LiveRun(Settings(task="sort", size="tiny", steps=10), out_root=tmp_path)
    run.start()
    run.join(60)
    snap = run.snapshot().snapshots[-1]
    assert snap.kind == "decoder" and snap.query_tokens == snap.key_tokens
    assert snap.attention[0, 0].triu(1).abs().max() == 0  # never looks ahead


def test_an_induction_run_is_attention_only_and_logs_its_head_scores(tmp_path):
    cfg = Settings(task="induction", size="small").train_config()
    assert cfg.d_ff == 0 and cfg.positions == "learned" and cfg.label_smoothing == 0.0
    run = LiveRun(Settings(task="induction", size="small", steps=10), out_root=tmp_path)
    run.start()
    run.join(60)
    p = run.snapshot()
    assert p.state == "done" and [s for s, _, _ in p.heads] == [0, 5, 10]
    assert all(0 <= prefix <= 1 and 0 <= prev <= 1 for _, prefix, prev in p.heads)
    assert p.snapshots[-1].kind == "decoder"


def test_cancel_stops_the_run_and_keeps_no_model(tmp_path):
    run = LiveRun(Settings(steps=2000), out_root=tmp_path)
    run.start()
    wait_for_step(run, 3)
    run.cancel()
    run.join(30)
    p = run.snapshot()
    assert p.state == "cancelled" and 3 <= p.step < 2000 and p.folder is None


def test_a_run_whose_page_stops_beating_stops_itself(tmp_path):
    run = LiveRun(Settings(steps=2000), out_root=tmp_path, heartbeat_timeout_s=0.3)
    run.start()
    run.join(30)
    assert run.snapshot().state == "abandoned" and run.snapshot().step < 2000


def test_the_time_limit_stops_a_run_but_keeps_what_it_learnt(tmp_path):
    run = LiveRun(Settings(steps=2000), out_root=tmp_path, time_limit_s=0.5)
    run.start()
    run.join(30)
    p = run.snapshot()
    assert p.state == "timeout" and p.step < 2000 and p.folder


def test_the_process_wide_cap_refuses_another_run(tmp_path, monkeypatch):
    monkeypatch.setattr(live, "_SLOTS", threading.BoundedSemaphore(1))
    first = LiveRun(Settings(steps=2000), out_root=tmp_path)
    first.start()
    try:
        with pytest.raises(Busy):
            LiveRun(Settings(steps=10), out_root=tmp_path).start()
    finally:
        first.cancel()
        first.join(30)
    second = LiveRun(Settings(steps=2), out_root=tmp_path)  # the slot is free again
    second.start()
    second.join(30)
    assert second.snapshot().state == "done"


@pytest.mark.parametrize("bad", [dict(steps=0), dict(steps=2001), dict(task="x"), dict(size="xl")])
def test_settings_outside_the_bounds_are_refused(bad):
    with pytest.raises(ValueError):
        Settings(**bad)


def test_a_downloaded_zip_loads_again(checkpoint, tmp_path):
    lm = load_zip(pack(checkpoint), tmp_path / "up")
    original = load(checkpoint, device="cpu")
    assert lm.info["task"] == "reverse" and lm.config.d_model == 16
    for name, tensor in original.network.state_dict().items():
        assert torch.equal(lm.network.state_dict()[name].cpu(), tensor.cpu()), name
    assert lm.translate("a b c") == original.translate("a b c")  # the same model, end to end


def _zip(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buffer.getvalue()


def _files(checkpoint) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in checkpoint.iterdir()}


def test_a_zip_inside_one_folder_is_accepted(checkpoint, tmp_path):
    files = {f"run/{name}": data for name, data in _files(checkpoint).items()}
    assert load_zip(_zip(files), tmp_path / "up").config.d_model == 16


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda f: {"../config.json": f["config.json"], **f}, "unexpected path"),
        (lambda f: {**f, "evil.py": b"import os"}, "holds only"),
        (lambda f: {k: v for k, v in f.items() if k != "vocab.json"}, "has no vocab.json"),
        (lambda f: {**f, "model.safetensors": f["model.safetensors"][:500]}, "could not be read"),
        (lambda f: {**f, "config.json": b'{"d_model": "wide"}'}, "not a valid model config"),
        (lambda f: {**f, "config.json": b"\x80\x81 not json"}, "not readable JSON"),
        (lambda f: {"a/config.json": f["config.json"], **f}, "twice"),
    ],
)
def test_a_wrong_or_damaged_zip_is_refused_with_a_reason(checkpoint, tmp_path, change, words):
    with pytest.raises(ModelLoadError, match=words):
        load_zip(_zip(change(_files(checkpoint))), tmp_path / "up")
    assert not (tmp_path / "config.json").exists()  # nothing escaped the target folder


def test_bytes_that_are_not_a_zip_are_refused(tmp_path):
    with pytest.raises(ModelLoadError, match="not a readable zip"):
        unpack(b"PK\x03\x04 this is not really a zip", tmp_path)
