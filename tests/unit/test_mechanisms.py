"""Mechanisms: the layer-by-layer runner, the logit lens, activation patching, head attribution."""

import math

import pytest
import torch

from model import TransformerConfig, build_model, load
from model.analysis.attribution import attribute, default_relevant
from model.analysis.circuit import NotADecoder, output_matrix, run
from model.analysis.lens import logit_lens
from model.analysis.patching import PatchingError, patch
from model.runtime.lab import LabModel
from model.runtime.tokenizer import task_tokenizers
from model.tasks import sort
from tests.lens_check import assert_lens_ends_in_the_models_output
from tests.tolerance import assert_close_f32, f32_tolerance

PAIRS = {
    "sort": [("3 1 2 9", "3 1 0 9"), ("7 5 8", "7 2 8")],
    "en2ko": [
        ("I study math at school", "I study music at school"),
        ("Tom reads a book", "Mina reads a book"),
    ],
    "induction": [("q w e r t y u q w", "q w e r z y u q w"), ("a b c d e f a", "a b c x e f a")],
}


@pytest.fixture(scope="module", params=sorted(PAIRS))
def model(request):
    return request.param, load(request.param, device="cpu")


def _random_lab(norm: str, d_ff: int) -> LabModel:
    """An untrained decoder-only model of either LayerNorm placement, with or without FFN."""
    _, tok = task_tokenizers(sort)
    cfg = TransformerConfig(
        kind="decoder",
        src_vocab_size=len(tok),
        tgt_vocab_size=len(tok),
        d_model=32,
        n_heads=4,
        n_decoder_layers=3,
        d_ff=d_ff,
        dropout=0.0,
        norm_placement=norm,
        max_len=32,
    )
    torch.manual_seed(0)
    return LabModel("random", build_model(cfg), None, tok, device="cpu")


def _forward(lm, ids, src_ids=None, **kw):
    args = (ids,) if src_ids is None else (src_ids, ids)
    return lm.network(*args, **kw).logits


def test_the_runner_gives_the_models_own_logits(model):
    _, lm = model
    src = None
    if lm.kind == "encoder-decoder":
        src, ids = torch.tensor([lm.encode("I study math").ids]), torch.tensor([[1, 5, 6, 7]])
    else:
        ids = torch.tensor([lm.encode(PAIRS[lm.name][0][0]).ids])
    assert_close_f32(run(lm.network, ids, src).logits, _forward(lm, ids, src), atol=1e-5)


@pytest.mark.parametrize("norm, d_ff", [("pre", 0), ("pre", 64), ("post", 64), ("post", 0)])
def test_the_stream_splits_into_parts_that_add_up_to_every_logit(norm, d_ff):
    lm = _random_lab(norm, d_ff)
    ids = torch.tensor([lm.encode("3 1 2 9 9 4").ids])
    r = run(lm.network, ids, decompose=True)
    parts = [part @ output_matrix(lm.network).T for part in r.parts.values()]
    assert_close_f32(sum(parts), r.logits, atol=1e-4, scale=parts)
    assert (d_ff > 0) == any(name.startswith("ffn.") for name in r.parts)


def test_the_logit_lens_last_layer_is_the_models_own_distribution(model):
    _, lm = model
    text = PAIRS[lm.name][0][0]
    lens = logit_lens(lm, text, k=3)
    n_layers = lm.config.n_decoder_layers
    assert lens.top_probs.shape == (n_layers + 1, len(lens.tokens), 3)
    assert lens.answer_prob.shape == (n_layers + 1, len(lens.tokens))
    assert_lens_ends_in_the_models_output(lm, lens, text)
    trace = lm.trace(text)  # the same positions and the same outputs as the traced path
    assert lens.tokens == trace.tgt_tokens
    assert_close_f32(lens.top_probs[-1], trace.predictions.top_probs[:, :3], atol=1e-5)
    assert lens.top_tokens[-1][-1][0] == lens.answer[-1]
    assert (lens.top_probs[..., :-1] >= lens.top_probs[..., 1:]).all()  # best first


def test_the_logit_lens_reads_a_pre_ln_stream_through_the_final_norm():
    lm = _random_lab("pre", 0)
    lens = logit_lens(lm, "3 1 2", continuation=[5, 6])
    assert_lens_ends_in_the_models_output(lm, lens, "3 1 2", continuation=[5, 6])
    assert not torch.allclose(lens.top_probs[0], lens.top_probs[-1])


@pytest.mark.slow  # among the slowest of its folder (docs/benchmarks.md, the suite)
def test_patching_nothing_is_zero_and_the_whole_last_layer_is_one_per_input(model):
    _, lm = model
    for clean, corrupted in PAIRS[lm.name]:
        p = patch(lm, clean, corrupted)
        assert p.pair.answer != p.pair.other
        assert p.ld_clean > 0 > p.ld_corrupted
        assert p.nothing == pytest.approx(0.0, abs=1e-6)
        assert p.whole_last_layer == pytest.approx(1.0, abs=1e-6)
        layers = len(p.by_position) - 1
        assert p.by_position.shape == (layers + 1, len(p.stream_tokens))
        # Restoring the embedding of the one changed position restores the clean input itself.
        if len(p.pair.changed) == 1:
            assert p.by_position[0, p.pair.changed[0]] == pytest.approx(1.0, abs=1e-5)
        # Positions the inputs share are identical in both runs at the embeddings: nothing there.
        same = [i for i in range(len(p.stream_tokens)) if i not in p.pair.changed]
        assert p.by_position[0, same].abs().max() < 1e-6
        if lm.kind == "decoder":  # the answer is read at the last position only
            assert p.by_position[-1, -1] == pytest.approx(1.0, abs=1e-6)
            assert p.by_position[-1, :-1].abs().max() < 1e-6


@pytest.mark.parametrize(
    "clean, corrupted, key",
    [
        ("3 1 2", "3 1 2 4", "length"),
        ("3 1 2", "3 x 2", "unknown"),
        ("", "3 1 2", "empty"),
        ("3 1 2", "   ", "empty"),
        ("3 1 2", "3 1 2", "same"),
        ("3 1 2", "3 2 1", "same_answer"),
    ],
)
def test_patching_refuses_inputs_it_cannot_compare_with_a_reason(clean, corrupted, key):
    lm = load("sort", device="cpu")
    with pytest.raises(PatchingError) as err:
        patch(lm, clean, corrupted)
    assert err.value.key == key


def test_encoder_only_models_are_refused_clearly():
    from model.analysis.circuit import check_network

    cfg = TransformerConfig(kind="encoder", d_model=16, n_heads=2)
    with pytest.raises(NotADecoder, match="decoder"):
        check_network(build_model(cfg))


def test_switching_no_head_off_changes_nothing(model):
    _, lm = model
    src = None
    text = PAIRS[lm.name][0][0]
    if lm.kind == "encoder-decoder":
        src, ids = torch.tensor([lm.encode(text).ids]), torch.tensor([[1, 5, 6, 7]])
    else:
        ids = torch.tensor([lm.encode(text).ids])
    with torch.no_grad():
        plain = _forward(lm, ids, src)
        all_on = _forward(lm, ids, src, head_mask=lm.head_mask())
        one_off = _forward(lm, ids, src, head_mask=lm.head_mask(off=[("decoder", 0, 0)]))
    assert torch.equal(plain, all_on)
    assert not torch.equal(plain, one_off)


def summed(a) -> float:
    """The float32 tolerance of a sum of the heads' terms and the rest: their size, not the
    total's, sets its rounding."""
    return f32_tolerance(1e-4, a.logit, a.rest, [h.direct for h in a.heads])


def test_all_heads_plus_the_rest_add_up_to_the_answers_logit(model):
    _, lm = model
    a = attribute(lm, PAIRS[lm.name][0][0])
    assert sum(h.direct for h in a.heads) + a.rest == pytest.approx(a.logit, abs=summed(a))
    kinds = {"decoder"} | ({"cross"} if lm.kind == "encoder-decoder" else set())
    assert {h.kind for h in a.heads} == kinds
    n = lm.config.n_decoder_layers * lm.config.n_heads * len(kinds)
    assert len(a.heads) == n
    for h in a.heads:
        assert 0 <= h.attention <= 1 and 0 <= h.rollout <= 1
        assert math.isfinite(h.ablation_loss) and math.isfinite(h.ablation_logit)


def test_a_heads_ablation_effect_is_that_of_switching_it_off_in_the_whole_forward(model):
    """Each ablated pass runs on the prefix up to the position and reads one row of logits:
    the effects are those of the full-length forward with the head switched off (the default
    position has later tokens, the continuation, which the prefix leaves out)."""
    from model.analysis.lens import decoder_inputs

    _, lm = model
    text = PAIRS[lm.name][0][0]
    a = attribute(lm, text)
    inputs = decoder_inputs(lm, text)
    assert a.position < inputs.ids.shape[1] - 1  # tokens after it, which the prefix leaves out
    with torch.no_grad():
        whole = _forward(lm, inputs.ids, inputs.src_ids)[0, a.position].double()
        for h in a.heads[:: max(1, len(a.heads) // 6)]:  # six heads, every layer's kinds
            off = lm.head_mask(off=[(h.kind, h.layer, h.head)])
            ablated = _forward(lm, inputs.ids, inputs.src_ids, head_mask=off)[0, a.position]
            effect = float(ablated.double()[a.answer_id] - whole[a.answer_id])
            assert h.ablation_logit == pytest.approx(effect, abs=f32_tolerance(1e-5, a.logit))


@pytest.mark.slow  # among the slowest of its folder (docs/benchmarks.md, the suite)
def test_attribution_works_for_every_position_of_an_untrained_model():
    lm = _random_lab("post", 64)
    for position in range(3):
        a = attribute(lm, "3 1 2 9", position=position)
        assert sum(h.direct for h in a.heads) + a.rest == pytest.approx(a.logit, abs=summed(a))
    with pytest.raises(ValueError, match="position"):
        attribute(lm, "3 1 2", position=99)


def test_the_relevant_token_is_the_answers_latest_earlier_copy():
    assert default_relevant(["<bos>", "a", "b", "a", "c"], 4, "a") == 3
    assert default_relevant(["<bos>", "a", "b"], 2, "z") == 2


def test_head_scatter_labels_only_the_heads_that_stand_out_and_names_all_on_hover():
    from viz.mechanisms import head_scatter

    labels = [f"L{i // 4 + 1} H{i % 4 + 1}" for i in range(24)]  # en2ko: 24 heads
    ys = [-0.1 * i for i in range(24)]
    fig = head_scatter([0.5] * 24, ys, labels, x_title="x", y_title="y")
    shown = [t for t in fig.data[0].text if t]
    assert len(shown) == 6 and "L6 H4" in shown  # the largest effect (-2.3) is named
    assert list(fig.data[0].customdata) == labels  # hover names every head
    lo, hi = fig.layout.yaxis.range
    assert lo < min(ys) and hi > max(ys)  # labels of the extreme points stay inside


def test_patching_length_error_counts_the_typed_tokens_not_bos():
    lm = load("sort", device="cpu")
    with pytest.raises(PatchingError) as err:
        patch(lm, "3 1 2", "3 1 2 4")
    assert (err.value.details["clean"], err.value.details["corrupted"]) == (3, 4)


def test_en2ko_attribution_defaults_to_a_position_with_more_than_bos_to_see():
    lm = load("en2ko", device="cpu")
    a = attribute(lm, "I study math at school")
    # at position 0 the decoder sees only <bos>: every self-attention head's weight is 1 there
    assert a.position >= 1 and a.tokens[a.relevant] != "<bos>"
