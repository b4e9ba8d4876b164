"""The training and evaluation commands: files written, metrics recorded, the schedule followed."""

import csv
import json
import os
import subprocess
import sys

import pytest
import torch

from model.runtime.checkpoint import load_checkpoint
from model.runtime.tokenizer import task_tokenizers
from model.schedule import noam_lr
from model.tasks import en2ko, sort
from model.training.evaluate import main as evaluate_main
from model.training.trainer import IGNORE, main, make_batch

TINY = ["--d-model", "16", "--heads", "2", "--layers", "1", "--d-ff", "32", "--batch", "8"]
METRIC_KEYS = {
    "exact_match",
    "token_accuracy",
    "eval_n",
    "steps",
    "wall_time_s",
    "tokens_per_s",
    "command",
    "seed",
    "torch_version",
    "params",
}


def test_a_short_run_writes_a_loadable_checkpoint_with_metrics_and_curve(tmp_path, monkeypatch):
    out = tmp_path / "run"
    args = ["--task", "reverse", "--out", str(out), "--steps", "6", "--warmup", "4"]
    # The lab's thread cap holds for training too, and the caller's own count comes back:
    # a run that kept all cores made every later test in its process fight the others.
    monkeypatch.setenv("ATTENTION_LAB_THREADS", "1")
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        metrics = main([*args, *TINY, "--eval-n", "20", "--log-every", "2", "--no-progress"])
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    assert metrics["threads"] == 1
    names = {"model.safetensors", "config.json", "vocab.json", "metrics.json", "curve.csv"}
    assert names <= {p.name for p in out.iterdir()}
    saved = json.loads((out / "metrics.json").read_text())
    assert set(saved) >= METRIC_KEYS and saved == metrics
    assert saved["command"].startswith("python -m model.train --task reverse")
    assert saved["steps"] == 6 and saved["eval_n"] == 20 and 0 <= saved["exact_match"] <= 1
    with open(out / "curve.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["step"]) for r in rows] == [2, 4, 6]
    for r in rows:  # the learning rate is the paper's warm-up schedule, step by step
        expected = noam_lr(int(r["step"]), 16, 4, factor=saved["lr_factor"])
        assert float(r["lr"]) == pytest.approx(expected, rel=1e-4)
    assert load_checkpoint(out, "cpu").config.d_model == 16


def test_the_evaluation_command_measures_and_records_held_out_metrics(tmp_path, capsys):
    out = tmp_path / "run"
    main(
        [
            "--task",
            "sort",
            "--out",
            str(out),
            "--steps",
            "2",
            *TINY,
            "--eval-n",
            "10",
            "--no-progress",
        ]
    )
    result = evaluate_main([str(out), "--n", "30", "--record"])
    assert result["eval_n"] == 30 and 0 <= result["token_accuracy"] <= 1
    assert json.loads(capsys.readouterr().out)["eval_n"] == 30
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["eval_n"] == 30 and saved["evaluated_by"].startswith(
        "python -m model.training.evaluate"
    )
    assert saved["task"] == "sort" and saved["steps"] == 2  # training provenance kept


def test_decoder_only_batches_carry_loss_on_the_continuation_only():
    _, tok = task_tokenizers(sort)
    batch = make_batch([("3 1 2", "1 2 3"), ("5 4", "4 5")], None, tok, 32)
    assert batch.src is None
    assert tok.tokens(batch.inputs[0].tolist()) == ["<bos>", "3", "1", "2", "<sep>", "1", "2", "3"]
    labels = batch.labels[0].tolist()
    assert labels[:4] == [IGNORE] * 4  # no loss for predicting the prompt
    assert tok.tokens(labels[4:]) == ["1", "2", "3", "<eos>"]  # <sep> predicts the first digit
    assert batch.labels[1].tolist()[-2:] == [IGNORE] * 2  # padding carries no loss either


def test_encoder_decoder_batches_shift_the_target_right():
    src, tgt = task_tokenizers(en2ko)
    batch = make_batch([("I study math", "나 는 수학 을 공부한다")], src, tgt, 64)
    assert src.tokens(batch.src[0].tolist()) == ["i", "study", "math"]
    assert tgt.tokens(batch.inputs[0].tolist())[:2] == ["<bos>", "나"]
    assert tgt.tokens(batch.labels[0].tolist())[-2:] == ["공부한다", "<eos>"]


@pytest.mark.slow
def test_torchrun_with_two_cpu_processes_trains_with_ddp(tmp_path):
    out = tmp_path / "ddp"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2"]
    cmd += ["--standalone", "-m", "model.training.trainer", "--task", "reverse", "--out", str(out)]
    cmd += ["--steps", "3", *TINY, "--eval-n", "10", "--no-progress"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["world_size"] == 2
    assert metrics["command"].startswith("torchrun --nproc_per_node=2 -m model.train")
    assert done.stderr.count("exact match") == 1  # rank 0 alone evaluates and writes
    lm = load_checkpoint(out, "cpu")
    assert torch.isfinite(lm.network.generator.weight).all()


@pytest.mark.parametrize(("positions", "kv_heads"), [("rope", "1"), ("alibi", "2")])
def test_a_run_with_a_modern_position_scheme_and_fewer_kv_heads_loads_back(
    tmp_path, positions, kv_heads
):
    from model import load

    out = tmp_path / "run"
    args = ["--task", "reverse", "--out", str(out), "--steps", "4", "--warmup", "2"]
    main(
        [
            *args,
            *TINY,
            "--positions",
            positions,
            "--kv-heads",
            kv_heads,
            "--eval-n",
            "10",
            "--no-progress",
        ]
    )
    net = load_checkpoint(out, "cpu")
    assert net.config.positions == positions and net.config.kv_heads == int(kv_heads)
    assert net.network.decoder.layers[0].self_attn.k_proj.out_features == int(kv_heads) * 8
    trace = load(str(out)).trace("a b c")
    assert trace.attention["decoder"].shape[1] == 2  # weights per query head, whatever kv_heads


def test_impossible_kv_heads_are_a_usage_error(capsys):
    with pytest.raises(SystemExit):
        main(["--task", "reverse", "--out", "x", *TINY, "--kv-heads", "3"])
    assert "kv_heads=3 must be at least 1 and divide heads=2" in capsys.readouterr().err
