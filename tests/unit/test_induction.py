"""The induction task, attention-only models, head scores, and the shipped induction models."""

import json
from pathlib import Path

import pytest
import torch

from model import TransformerConfig, build_model, load
from model.analysis.induction import (
    SNAPSHOTS,
    head_scores,
    load_snapshots,
    measure,
    repeat_accuracy,
    repeated_ids,
)
from model.runtime.tokenizer import task_tokenizers
from model.tasks import get_task, induction, reference_answer
from model.training.trainer import main
from tests.tolerance import assert_close_f32

ROOT = Path(__file__).resolve().parents[2] / "assets" / "checkpoints"


def test_prompts_repeat_the_start_of_a_block_of_different_letters():
    for prompt, continuation in induction.sample(300, seed=5):
        block, k = induction.split_block(prompt)
        assert len(set(block)) == len(block) and 1 <= k < len(block)
        assert len(block) in induction.TRAIN_BLOCKS
        assert induction.reference(prompt) == continuation == " ".join(block[k:])
    assert induction.sample(20, seed=1) == induction.sample(20, seed=1)
    assert get_task("induction") is induction


def test_the_held_out_split_uses_block_lengths_never_trained_on():
    test = induction.sample(300, seed=2, split="test")
    lengths = {len(induction.split_block(p)[0]) for p, _ in test}
    assert lengths <= set(induction.TEST_BLOCKS)
    assert not set(induction.TEST_BLOCKS) & set(induction.TRAIN_BLOCKS)
    assert all(induction.split_of(p) == "test" for p, _ in test)


@pytest.mark.parametrize(
    "prompt, expected",
    [
        ("q w e r t y q w", "e r t y"),
        ("QWERTYQW", "e r t y"),  # typed without spaces, in capitals
        ("z x q w e r t y q w", "e r t y"),  # filler letters before the block
        ("a b c a", "b c"),
    ],
)
def test_the_reference_finishes_the_repeat(prompt, expected):
    assert induction.reference(prompt) == expected


@pytest.mark.parametrize("prompt", ["", "a b c d", "a b c a c", "a b a b a"])
def test_prompts_that_do_not_repeat_a_block_are_refused(prompt):
    with pytest.raises(ValueError):
        induction.reference(prompt)
    assert reference_answer("induction", prompt) == ""


def test_an_attention_only_model_has_no_feed_forward_layers_and_both_paths_agree():
    cfg = TransformerConfig(
        kind="decoder",
        tgt_vocab_size=30,
        src_vocab_size=30,
        d_model=32,
        n_heads=2,
        n_decoder_layers=2,
        d_ff=0,
        norm_placement="pre",
        dropout=0.0,
    )
    net = build_model(cfg).eval()
    assert not any("ffn" in name for name, _ in net.named_parameters())
    ids = torch.randint(4, 30, (2, 9))
    fast, traced = net(ids).logits, net(ids, trace=True)
    assert_close_f32(fast, traced.logits, atol=1e-5)
    assert not any("ffn" in name for name in traced.record.norms)
    with pytest.raises(ValueError, match="d_ff"):
        TransformerConfig(d_ff=-1)


def test_head_scores_read_the_positions_they_are_about():
    """A hand-made network is hard to build; check the indices on planted attention instead."""
    _, tok = task_tokenizers(induction)
    ids = repeated_ids(tok, induction.repeated(3, seed=0, length=5))
    assert ids.shape == (3, 11) and (ids[:, 1:6] == ids[:, 6:]).all()

    class Planted(torch.nn.Module):
        """Layer 0 looks one back; layer 1 looks at the token after the earlier copy."""

        config = TransformerConfig(kind="decoder", n_heads=1)
        device = torch.device("cpu")

        def forward(self, ids, trace=False):
            n_tok = ids.shape[1]
            n = (n_tok - 1) // 2
            prev = torch.zeros(n_tok, n_tok)
            prev[0, 0] = 1
            prev[torch.arange(1, n_tok), torch.arange(0, n_tok - 1)] = 1
            ind = prev.clone()
            ind[n + torch.arange(1, n), n + torch.arange(0, n - 1)] = 0
            ind[n + torch.arange(1, n), torch.arange(2, n + 1)] = 1
            rec = type(
                "R",
                (),
                {
                    "attention": {
                        "decoder": [
                            prev.expand(len(ids), 1, n_tok, n_tok),
                            ind.expand(len(ids), 1, n_tok, n_tok),
                        ]
                    }
                },
            )()
            return type("O", (), {"record": rec})()

    scores = head_scores(Planted(), ids)
    assert scores["previous_token"][:, 0].tolist() == pytest.approx([1.0, 5 / 9])  # n / (2n - 1)
    assert scores["prefix_matching"][:, 0].tolist() == pytest.approx([0.0, 1.0])


def test_a_short_induction_run_logs_head_snapshots_beside_its_curve(tmp_path):
    out = tmp_path / "run"
    main(
        [
            "--task",
            "induction",
            "--out",
            str(out),
            "--steps",
            "8",
            "--d-model",
            "16",
            "--heads",
            "2",
            "--batch",
            "8",
            "--eval-n",
            "10",
            "--log-every",
            "2",
            "--no-progress",
        ]
    )
    snaps = load_snapshots(out)
    assert snaps is not None and [r["step"] for r in snaps["snapshots"]] == [0, 4, 8]
    row = snaps["snapshots"][-1]
    assert len(row["prefix_matching"]) == 2 and len(row["prefix_matching"][0]) == 2
    config = json.loads((out / "config.json").read_text())
    assert config["d_ff"] == 0 and config["norm_placement"] == "pre"  # the task's recipe
    (out / SNAPSHOTS).write_text("{broken")
    assert load_snapshots(out) is None


@pytest.fixture(scope="module")
def two_layer():
    return load("induction", device="cpu")


@pytest.fixture(scope="module")
def one_layer():
    return load("induction-1layer", device="cpu")


def test_the_shipped_model_finishes_repeats_of_a_length_it_never_saw(two_layer, one_layer):
    length = induction.TEST_BLOCKS[1]
    m = measure(two_layer.network, two_layer.tgt_tokenizer, n=200, length=length, seed=123)
    assert m["repeat_accuracy"] >= 0.95
    assert m["first_half_accuracy"] <= 3 * m["chance"]  # nothing to copy there: near chance
    assert m["best_prefix_matching"] >= 0.5
    assert m["best_head"][0] == 1  # the induction head sits in the second layer
    one = measure(one_layer.network, one_layer.tgt_tokenizer, n=200, length=length, seed=123)
    assert one["repeat_accuracy"] <= 0.5 * m["repeat_accuracy"]
    assert one["best_prefix_matching"] < m["best_prefix_matching"] / 2


def test_the_shipped_model_continues_a_typed_prompt(two_layer):
    # It finishes the repeat; it cannot tell where the block ended, so it may copy on.
    assert two_layer.translate("q w e r t y u q w").startswith("e r t y u")
    assert two_layer.translate("ZXABCDEFGHAB").startswith("c d e f g h")


def test_the_shipped_models_record_how_they_were_made(two_layer, one_layer):
    for name, lm in (("induction", two_layer), ("induction-1layer", one_layer)):
        folder = ROOT / name
        metrics = lm.info["metrics"]
        assert metrics["command"].startswith("python -m model.train --task induction ")
        assert f"--seed {metrics['seed']}" in metrics["command"]
        assert metrics["wall_time_s"] <= 600  # at most 10 minutes on the CPU it names
        assert sum(f.stat().st_size for f in folder.iterdir()) < 2**20
        assert metrics["induction"]["n"] == 500
        assert load_snapshots(folder)["snapshots"][-1]["step"] == metrics["steps"]
    assert two_layer.info["metrics"]["induction"]["repeat_accuracy"] >= 0.95


def test_repeat_accuracy_is_chance_for_an_untrained_model():
    _, tok = task_tokenizers(induction)
    cfg = TransformerConfig(
        kind="decoder",
        tgt_vocab_size=len(tok),
        src_vocab_size=len(tok),
        d_model=32,
        n_heads=2,
        n_decoder_layers=2,
        d_ff=0,
        norm_placement="pre",
        dropout=0.0,
    )
    torch.manual_seed(0)
    ids = repeated_ids(tok, induction.repeated(100, seed=0, length=8))
    acc = repeat_accuracy(build_model(cfg), ids)
    assert acc["repeat"] < 0.2 and acc["first_half"] < 0.2
