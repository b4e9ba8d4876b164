"""Incremental decoding with a key/value cache equals recomputing the whole prefix."""

import pytest
import torch

from model import TransformerConfig, build_model
from model.runtime.decoding import greedy_decode


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
