"""Finding the mechanisms: the repeated-random-tokens scan names the shipped induction
model's known heads first and finds none in a random-weight folder."""

import pytest

from model import load
from model.analysis.heads import THRESHOLD, scan_heads
from tests.hf_folders import build_decoder_folder


def test_the_scan_ranks_the_induction_checkpoints_known_heads_first():
    scan = scan_heads(load("induction", device="cpu"))
    top = [(r.layer, r.head, r.role) for r in scan.ranked()[:3]]
    # 0-based (layer, head); the pages show them 1-based: L2H2 and L2H4 match prefixes,
    # L1H3 attends to the previous token.
    assert {top[0][:2], top[1][:2]} == {(1, 1), (1, 3)}
    assert top[0][2] == top[1][2] == "induction"
    assert top[2] == (0, 2, "previous")
    assert sorted(scan.found("prefix_matching")) == [(1, 1), (1, 3)]
    # Both induction heads write the token they attend to; the model learns in context.
    assert scan.scores["copying"][1, 1] > 1 and scan.scores["copying"][1, 3] > 1
    assert scan.icl < -5 and scan.loss_second < 0.1


@pytest.mark.parametrize("layout", ["llama", "gpt2"])
def test_a_random_weight_folder_has_no_head_above_the_threshold(tmp_path, layout):
    lm = load(build_decoder_folder(layout, tmp_path / layout), device="cpu")
    scan = scan_heads(lm)
    assert scan.length >= 30  # a real test: many positions, not a handful
    for score in ("prefix_matching", "previous_token", "duplicate_token", "first_token"):
        assert scan.found(score) == [], (score, float(scan.scores[score].max()), THRESHOLD)
    assert all(row.role is None for row in scan.ranked())
    assert abs(scan.icl) < 0.5  # random weights cannot use the repeat


def test_the_scan_is_the_same_for_the_same_seed_and_refuses_an_encoder():
    lm = load("induction", device="cpu")
    a, b = scan_heads(lm, seed=3), scan_heads(lm, seed=3)
    assert all((a.scores[k] == b.scores[k]).all() for k in a.scores)
    with pytest.raises(ValueError):
        scan_heads(load("minilm", device="cpu"))


def test_offered_patching_pairs_tokenize_evenly_on_byte_level_bpe(tmp_path):
    from model.analysis.pairs import candidate_pairs, even_pairs

    lm = load(build_decoder_folder("llama", tmp_path / "llama"), device="cpu")
    mary = candidate_pairs()[0]
    assert "John gave" in mary[0] and "Mary gave" in mary[1]
    assert len(lm.encode(mary[0]).ids) != len(lm.encode(mary[1]).ids)  # the old default fails
    pairs = even_pairs(lm)
    assert pairs and mary not in pairs
    for clean, corrupted in pairs:
        assert len(lm.encode(clean).ids) == len(lm.encode(corrupted).ids)
