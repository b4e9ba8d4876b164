"""Incremental decoding with a key/value cache equals recomputing the whole prefix."""

import pytest
import torch

from model import TransformerConfig, build_model
from model.attention import attention_weights
from model.runtime.decoding import greedy_decode, last_rows, stepper
from model.trace import Recorder


def make(kind, placement):
    torch.manual_seed(1)
    return build_model(
        TransformerConfig(kind=kind, norm_placement=placement, dropout=0.0, tgt_vocab_size=40)
    ).eval()


@pytest.mark.parametrize("kind", ["encoder-decoder", "decoder"])
@pytest.mark.parametrize("placement", ["post", "pre"])
def test_cached_greedy_decoding_equals_full_recomputation(kind, placement):
    model = make(kind, placement)
    ids = torch.tensor([[5, 6, 7, 8], [9, 10, 11, 0]] if kind == "encoder-decoder" else [[5, 6, 7]])
    cached, cached_logits = greedy_decode(model, ids, 1, 2, 12, use_cache=True)
    full, full_logits = greedy_decode(model, ids, 1, 2, 12, use_cache=False)
    assert torch.equal(cached, full)
    torch.testing.assert_close(cached_logits, full_logits, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("placement", ["post", "pre"])
def test_feeding_tokens_in_chunks_through_the_cache_equals_one_full_pass(placement):
    model = make("encoder-decoder", placement)
    src = torch.tensor([[5, 6, 7, 8, 9]])
    tgt = torch.tensor([[1, 12, 13, 14, 15, 16]])
    with torch.no_grad():
        full = model(src, tgt).logits
        memory, valid = model.encode(src)
        cache = model.new_cache()
        parts = [
            model.decode(tgt[:, a:b], memory, valid, cache=cache)
            for a, b in [(0, 1), (1, 4), (4, 6)]
        ]
    torch.testing.assert_close(torch.cat(parts, dim=1), full, atol=1e-5, rtol=1e-5)
    assert cache["length"] == 6


@pytest.mark.parametrize(
    "options",
    [
        {"n_kv_heads": 2, "positions": "rope"},  # grouped-query heads, as SmolLM2 and Gemma
        {"sliding_window": 4, "layer_types": ["sliding_attention", "full_attention"]},
        {"positions": "alibi"},  # a bias on the scores: the rows go the general way
    ],
)
def test_each_steps_attention_rows_are_the_recorded_weights_to_the_bit(options):
    """A decoding step's rows skip building the mask where the newest query sees every key
    (MaskSpec.open_to); they must still be exactly the weights computed under that mask."""
    torch.manual_seed(2)
    # No padding id, as the real decoders run: a padded model's rows go the general way.
    cfg = TransformerConfig(kind="decoder", n_decoder_layers=2, dropout=0.0, pad_id=None, **options)
    model = build_model(cfg).eval()
    step, new = stepper(model, torch.tensor([[5, 6, 7]]), None)
    cache = model.new_cache()
    with torch.inference_mode():
        for _ in range(7):  # past the window: a sliding layer's cache then drops keys
            rec = Recorder(statistics=False)
            token = step(new, rec, cache).argmax(-1, keepdim=True)
            rows = last_rows(rec)["decoder"]  # [layers, heads, keys]
            for layer in range(2):
                qk, spec = rec.qk["decoder"][layer], rec.mask_of("decoder", layer)
                dense = spec.dense() if spec.dense() is not None else torch.ones(1, 1, 1, 1)
                kept = attention_weights(  # a bool tensor: the mask applied, never skipped
                    qk.q[0], qk.k[0], dense.bool(), alibi=qk.alibi, rows=[-1], scale=qk.scale
                )[:, 0]
                assert torch.equal(rows[layer, :, rows.shape[-1] - kept.shape[-1] :], kept)
            new = token
