"""The induction task, attention-only models, head scores, and the shipped induction models."""

import json
from pathlib import Path

import pytest
import torch

from model import TransformerConfig, build_model, load
from model.analysis.induction import (
    SNAPSHOTS,
    circuit,
    classify_stop,
    eos_by_head,
    forward_editing,
    free_running,
    head_scores,
    load_snapshots,
    measure,
    phase_change,
    repeat_accuracy,
    repeated_ids,
    score_at,
    teacher_forced,
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


@pytest.mark.slow  # among the slowest of its folder (docs/benchmarks.md, the suite)
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


def test_the_shipped_model_continues_a_typed_prompt_and_stops_where_the_repeat_ends(two_layer):
    assert two_layer.translate("q w e r t y u q w") == "e r t y u"
    assert two_layer.translate("ZXABCDEFGHAB") == "c d e f g h"


def test_the_shipped_models_record_how_they_were_made(two_layer, one_layer):
    for name, lm in (("induction", two_layer), ("induction-1layer", one_layer)):
        folder = ROOT / name
        metrics = lm.info["metrics"]
        assert metrics["command"].startswith("python -m model.train --task induction ")
        assert f"--seed {metrics['seed']}" in metrics["command"]
        # At most 10 minutes of training on this 2-core machine: the process's CPU time
        # (its wall time depends on who else shared the machine, and is recorded beside it).
        assert metrics.get("cpu_time_s", metrics["wall_time_s"]) <= 600
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


# --- where free-running continuations stop, and the circuit that decides it ----------------


@pytest.mark.parametrize(
    "generated, expected",
    [
        ([5, 6, 2], "exact"),
        ([5, 6, 7, 2], "kept_going"),
        ([5, 6, 7, 8], "kept_going"),  # ran out of budget without <eos>
        ([5, 2], "stopped_early"),
        ([9, 9, 2], "exact"),  # wrong letters, right place: only the stop is judged
    ],
)
def test_a_continuation_is_judged_by_where_it_stops(generated, expected):
    assert classify_stop(generated, [5, 6], eos_id=2) == expected


@pytest.mark.slow  # among the slowest of its folder (docs/benchmarks.md, the suite)
def test_the_shipped_model_stops_exactly_on_held_out_prompts_as_its_metrics_say(two_layer):
    """The page's counts: recomputed from the checkpoint, equal to what it ships, and the
    issue's bar: at least 95 % stop exactly where the repeat ends."""
    metrics = two_layer.info["metrics"]
    shipped = metrics["free_running"]
    pairs = induction.sample(shipped["n"], metrics["eval_seed"], split="test")
    assert {len(induction.split_block(p)[0]) for p, _ in pairs} <= set(induction.TEST_BLOCKS)
    again = free_running(two_layer.network, two_layer.tgt_tokenizer, pairs)
    assert again == shipped
    n = shipped["n"]
    assert shipped["exact"] + shipped["kept_going"] + shipped["stopped_early"] == n
    assert shipped["exact"] / n >= 0.95
    config = two_layer.network.config
    assert config.n_decoder_layers == 2 and config.d_ff == 0  # two attention-only layers
    teacher = metrics["induction"]
    assert teacher["repeat_accuracy"] >= 0.95
    assert teacher["first_half_accuracy"] <= 2 * teacher["chance"]


def test_the_edited_forward_is_the_model_when_nothing_is_removed(two_layer):
    ids = repeated_ids(two_layer.tgt_tokenizer, induction.repeated(8, seed=3, length=7))
    logits, attention = forward_editing(two_layer.network, ids)
    torch.testing.assert_close(logits, two_layer.network(ids).logits, atol=1e-4, rtol=1e-4)
    assert len(attention) == 2 and attention[0].shape[-1] == ids.shape[1]


@pytest.mark.slow  # among the slowest of its folder (docs/benchmarks.md, the suite)
def test_the_circuit_numbers_on_the_page_are_recomputed_from_the_checkpoint(two_layer):
    """metrics["circuit"] (the induction tab's texts) equals a fresh measurement, and says
    what the texts claim: the previous-token head is causal through the induction head's
    keys alone, and the induction head is the best prefix-matching head of layer 2."""
    shipped = two_layer.info["metrics"]["circuit"]
    again = circuit(
        two_layer.network,
        two_layer.tgt_tokenizer,
        shipped["n"],
        shipped["block_length"],
        shipped["seed"],
    )
    for key in ("induction_head", "previous_head"):
        assert again[key] == shipped[key]
    for key in ("prefix_matching", "previous_token", "duplicate_token", "ablated_repeat_accuracy"):
        assert torch.tensor(again[key]) == pytest.approx(torch.tensor(shipped[key]), abs=1e-5)
    keys = again["keys_only"]
    assert keys == pytest.approx(shipped["keys_only"], abs=1e-5)
    assert keys["prefix_matching_after"] < keys["prefix_matching_before"] / 2
    assert keys["repeat_accuracy_after"] < again["repeat_accuracy"] - 0.3
    last, head = again["induction_head"]
    assert last == 1 and again["prefix_matching"][1][head] == max(again["prefix_matching"][1])


def test_teacher_forced_rows_start_at_the_repeat_and_end_on_eos(two_layer):
    rows = teacher_forced(two_layer.network, two_layer.tgt_tokenizer, "z x q w e r t y q w")
    scored = [r for r in rows if r.reference is not None]
    assert [r.token for r in scored] == ["q", "w", "e", "r", "t", "y"]  # the repeat, read
    assert [r.reference for r in scored] == ["w", "e", "r", "t", "y", "<eos>"]
    assert all(0 <= r.probability <= 1 and 0 <= r.p_eos <= 1 for r in rows)
    assert scored[-1].p_eos > 0.5  # the shipped model says <eos> at the block's end
    with pytest.raises(induction.NotARepeat) as err:
        teacher_forced(two_layer.network, two_layer.tgt_tokenizer, "a b c d")
    assert err.value.reason == "no_repeat"


def test_the_phase_change_is_found_after_the_plateau_not_in_the_first_steps():
    steps = list(range(10, 5010, 10))

    # 5.1 -> 3.2 in the first 100 steps (learning which tokens exist), a slow slope to 2.0
    # at step 3000, a fall to 0.4 by step 3400, then flat
    def loss(s):
        if s <= 100:
            return 5.1 - 1.9 * s / 100
        if s <= 3000:
            return 3.2 - 1.2 * (s - 100) / 2900
        if s <= 3400:
            return 2.0 - 1.6 * (s - 3000) / 400
        return 0.4

    found = phase_change(steps, [loss(s) for s in steps], window=500)
    assert 2800 <= found["start_step"] <= 3000 and 3400 <= found["end_step"] <= 3500
    assert found["first_loss"] <= 3.26 and found["end_loss"] == pytest.approx(0.4, abs=0.05)


def test_the_shipped_curve_drops_suddenly_while_the_induction_head_forms(two_layer):
    from model.training.warmup import load_curve

    curve = load_curve(ROOT / "induction" / "curve.csv")
    found = phase_change(list(curve["step"]), list(curve["loss"]))
    slow = (found["first_loss"] - found["start_loss"]) / max(1, found["start_step"])
    sudden = (found["start_loss"] - found["end_loss"]) / (found["end_step"] - found["start_step"])
    assert sudden > 5 * slow  # a sudden drop after a slow descent
    snaps = load_snapshots(ROOT / "induction")["snapshots"]
    layer, head = two_layer.info["metrics"]["induction"]["best_head"]
    before = score_at(snaps, found["start_step"], "prefix_matching", layer, head)
    after = score_at(snaps, found["end_step"], "prefix_matching", layer, head)
    assert before < 0.3 < 0.6 < after


def test_the_heads_the_stop_needs_are_recomputed_from_the_checkpoint(two_layer):
    shipped = two_layer.info["metrics"]["eos_by_head"]
    again = eos_by_head(two_layer.network, two_layer.tgt_tokenizer, shipped["n"], shipped["seed"])
    assert again["eos"] == pytest.approx(shipped["eos"], abs=1e-6)
    assert torch.tensor(again["ablated"]) == pytest.approx(torch.tensor(shipped["ablated"]))
    # the page says "the stop needs all three": each of the three leaves under half
    three = sorted(v for row in again["ablated"] for v in row)[:3]
    assert again["eos"] >= 0.95 and max(three) < 0.5
