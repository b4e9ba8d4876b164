"""Whole-model behaviour: the traced path, what it records, and what it must never do."""

import math

import pytest
import torch
from torch import nn

from model import TransformerConfig, build_model
from tests.module_state import assert_same_tensors, tensor_state

KINDS = ["encoder-decoder", "encoder", "decoder"]


def make(kind, placement="post", **kw):
    torch.manual_seed(0)
    cfg = TransformerConfig(kind=kind, norm_placement=placement, dropout=0.0, **kw)
    return build_model(cfg).eval()


SRC = torch.tensor([[5, 6, 7, 8, 9], [5, 6, 7, 0, 0]])  # second sentence padded (pad_id 0)
TGT = torch.tensor([[1, 10, 11, 12], [1, 10, 0, 0]])


def run(model, **kw):
    kind = model.config.kind
    if kind == "encoder-decoder":
        return model(SRC, TGT, **kw)
    return model(SRC if kind == "encoder" else TGT, **kw)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("placement", ["post", "pre"])
def test_traced_path_equals_fast_path(kind, placement):
    model = make(kind, placement)
    with torch.no_grad():
        fast, traced = run(model), run(model, trace=True)
    assert fast.record is None and traced.record is not None
    torch.testing.assert_close(fast.logits, traced.logits, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_no_weight_reaches_a_future_or_padded_key(kind):
    model = make(kind)
    with torch.no_grad():
        rec = run(model, trace=True).record
    for k, layers in rec.attention.items():
        for w in layers:  # [B, H, Lq, Lk]
            if k == "decoder":
                assert torch.all(w.triu(diagonal=1) == 0), "a query saw the future"
            keys_valid = (TGT if k == "decoder" else SRC if kind != "decoder" else TGT) != 0
            queries_valid = (SRC if k == "encoder" else TGT) != 0
            assert torch.all(w.transpose(1, 3)[~keys_valid] == 0), "a padded key got weight"
            assert torch.all(w.transpose(1, 2)[~queries_valid] == 0), "a padded query row is not 0"
            row_sums = w.sum(-1).transpose(1, 2)[queries_valid]
            torch.testing.assert_close(row_sums, torch.ones_like(row_sums))
            assert torch.isfinite(w).all()


def test_trace_leaves_padding_out_and_keeps_the_papers_axes():
    model = make("encoder-decoder")
    with torch.no_grad():
        out = model(SRC, TGT, trace=True)
    t = out.trace(1, ["a", "b", "c"], ["<bos>", "x"])
    cfg = model.config
    assert t.attention["encoder"].shape == (cfg.n_encoder_layers, cfg.n_heads, 3, 3)
    assert t.attention["decoder"].shape == (cfg.n_decoder_layers, cfg.n_heads, 2, 2)
    assert t.attention["cross"].shape == (cfg.n_decoder_layers, cfg.n_heads, 2, 3)
    assert all(a.dtype == torch.float32 and a.device.type == "cpu" for a in t.attention.values())
    # Only what pages read of the logits: each position's top-k, never [L, vocab].
    assert t.predictions.top_ids.shape == (2, min(10, cfg.tgt_vocab_size))
    assert t.logits is None
    assert t.residual_norms["encoder"].shape == (cfg.n_encoder_layers + 1, 3)
    assert t.tokens("cross") == (["<bos>", "x"], ["a", "b", "c"])


def test_a_sentence_traces_the_same_alone_or_batched_with_a_longer_one():
    model = make("encoder-decoder")
    with torch.no_grad():
        batched = model(SRC, TGT, trace=True).trace(1, list("abc"), ["<bos>", "x"])
        alone = model(SRC[1:, :3], TGT[1:, :2], trace=True).trace(0, list("abc"), ["<bos>", "x"])
    for kind in batched.attention:
        torch.testing.assert_close(batched.attention[kind], alone.attention[kind])
    torch.testing.assert_close(
        batched.predictions.top_probs, alone.predictions.top_probs, atol=1e-5, rtol=1e-5
    )


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("placement", ["post", "pre"])
def test_every_layer_norm_reports_token_statistics(kind, placement):
    model = make(kind, placement)
    with torch.no_grad():
        rec = run(model, trace=True).record
    n_norms = sum(isinstance(m, nn.LayerNorm) for m in model.modules())
    assert len(rec.norms) == n_norms
    for name, stats in rec.norms.items():
        # Fresh LayerNorm (gamma 1, beta 0): every token leaves with mean 0 and std 1.
        torch.testing.assert_close(
            stats["out_mean"], torch.zeros_like(stats["out_mean"]), atol=1e-5, rtol=0
        )
        torch.testing.assert_close(
            stats["out_std"], torch.ones_like(stats["out_std"]), atol=1e-3, rtol=0
        )
        assert not torch.allclose(stats["in_std"], stats["out_std"]), name


def test_stages_are_recomputed_for_one_head_from_the_record_and_end_in_its_weights():
    model = make("encoder")
    with torch.no_grad():
        t = run(model, trace=True).trace(1, list("abc"), [])
    st = t.attention_stages("encoder", 0, 1)
    torch.testing.assert_close(st.weights, t.attention_map("encoder", 0, 1))
    torch.testing.assert_close(st.scaled, st.scores / math.sqrt(model.config.d_k))
    window = t.attention_stages("encoder", 0, 1, rows=slice(1, 3), cols=[0, 2])
    torch.testing.assert_close(window.weights, st.weights[1:3][:, [0, 2]])
    torch.testing.assert_close(t.stages["encoder"]["weights"], t.attention["encoder"])


def test_a_traced_forward_leaves_no_state_on_the_model():
    model = make("encoder-decoder")
    before = tensor_state(model)
    with torch.no_grad():
        out = run(model, trace=True, stages=True)
    assert_same_tensors(before, tensor_state(model))
    assert out.record.attention["cross"]  # what it saw went to the caller's Recorder


def test_ablating_nothing_changes_nothing_and_ablating_a_head_changes_the_output():
    model = make("encoder-decoder")
    cfg = model.config
    ones = {
        "encoder": torch.ones(cfg.n_encoder_layers, cfg.n_heads),
        "decoder": torch.ones(cfg.n_decoder_layers, cfg.n_heads),
        "cross": torch.ones(cfg.n_decoder_layers, cfg.n_heads),
    }
    with torch.no_grad():
        base = model(SRC, TGT).logits
        same = model(SRC, TGT, head_mask=ones).logits
        cut = {**ones, "cross": ones["cross"].clone()}
        cut["cross"][0, 1] = 0
        changed = model(SRC, TGT, head_mask=cut).logits
        changed_traced = model(SRC, TGT, head_mask=cut, trace=True).logits
    torch.testing.assert_close(base, same)
    assert not torch.allclose(base, changed)
    torch.testing.assert_close(changed, changed_traced, atol=1e-5, rtol=1e-5)


def test_tied_embeddings_share_one_matrix():
    model = make("decoder", tie_embeddings=True)
    assert model.head.weight is model.embed.token.weight
    untied = make("decoder", tie_embeddings=False)
    assert untied.head.weight is not untied.embed.token.weight


def test_learned_positions_and_gelu_build_and_run():
    model = make(
        "encoder", positions="learned", activation="gelu", type_vocab_size=2, embedding_norm=True
    )
    with torch.no_grad():
        out = model(SRC, token_type_ids=torch.zeros_like(SRC), trace=True)
    assert torch.isfinite(out.logits).all()


def test_input_longer_than_max_len_gets_a_clear_error():
    model = make("encoder", max_len=4)
    with pytest.raises(ValueError, match="exceed this model's limit of 4"):
        model(SRC)


def test_config_refuses_inconsistent_or_unknown_settings():
    with pytest.raises(ValueError, match="divisible"):
        TransformerConfig(d_model=30, n_heads=4)
    with pytest.raises(ValueError, match="norm_placement"):
        TransformerConfig(norm_placement="middle")
    with pytest.raises(ValueError, match="unknown config keys: bogus"):
        TransformerConfig.from_dict({"d_model": 32, "bogus": 1})
    cfg = TransformerConfig(d_model=32, n_heads=2)
    assert TransformerConfig.from_dict(cfg.to_dict()) == cfg
    assert cfg.d_k == 16
