"""Masks and positional encodings against their definitions."""

import math

import pytest
import torch

from model.masks import MaskSpec, attention_mask, causal_mask, padding_mask
from model.positional import sinusoidal_encoding


def test_causal_mask_lets_each_position_see_itself_and_the_past_only():
    m = causal_mask(4)
    assert m.dtype == torch.bool
    assert m.tolist() == [
        [True, False, False, False],
        [True, True, False, False],
        [True, True, True, False],
        [True, True, True, True],
    ]


def test_padding_on_both_sides_blocks_padded_keys_and_empties_padded_query_rows():
    ids = torch.tensor([[4, 5, 0], [4, 5, 6]])
    valid = padding_mask(ids, pad_id=0)
    m = attention_mask(valid, valid, causal=True)
    assert m.shape == (2, 1, 3, 3)
    assert not m[0, 0, :, 2].any()  # nobody attends the padded key
    assert not m[0, 0, 2].any()  # the padded query attends nothing
    assert m[1, 0].equal(causal_mask(3))


def test_causal_mask_with_offset_matches_the_full_mask_rows():
    valid = torch.ones(1, 5, dtype=torch.bool)
    full = attention_mask(valid, valid, causal=True)
    last_two = attention_mask(valid[:, 3:], valid, causal=True, offset=3)
    assert last_two.equal(full[:, :, 3:])


@pytest.mark.parametrize("d_model", [8, 9, 64])
def test_sinusoidal_encoding_follows_the_papers_formula(d_model):
    pe = sinusoidal_encoding(50, d_model)
    assert pe.shape == (50, d_model)
    for p in (0, 1, 7, 49):
        for i in range(d_model):
            angle = p / 10000 ** ((i - i % 2) / d_model)
            want = math.sin(angle) if i % 2 == 0 else math.cos(angle)
            assert pe[p, i].item() == pytest.approx(want, abs=1e-6)


def test_position_p_plus_k_is_a_fixed_rotation_of_position_p():
    # The paper's reason for sinusoids: PE[p+k] is a linear function of PE[p], the same for all p.
    d, k = 16, 5
    pe = sinusoidal_encoding(100, d).double()
    omega = 1 / 10000 ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    rot = torch.zeros(d, d, dtype=torch.float64)
    for i, w in enumerate(omega):
        c, s = math.cos(k * w), math.sin(k * w)
        # [sin(a+b), cos(a+b)] = [[cos b, sin b], [-sin b, cos b]] @ [sin a, cos a]
        rot[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor([[c, s], [-s, c]])
    torch.testing.assert_close(pe[:-k] @ rot.T, pe[k:], atol=1e-6, rtol=0)


def test_concatenated_layout_is_a_column_permutation_of_the_interleaved_one():
    a = sinusoidal_encoding(20, 10, interleaved=True)
    b = sinusoidal_encoding(20, 10, interleaved=False)
    assert torch.equal(b, torch.cat([a[:, 0::2], a[:, 1::2]], dim=1))
    assert torch.equal(a[0], torch.tensor([0.0, 1.0] * 5))


def test_sinusoidal_encoding_rejects_nonsense_sizes():
    with pytest.raises(ValueError):
        sinusoidal_encoding(10, 0)


@pytest.mark.parametrize(
    "spec",
    [
        MaskSpec(5, 5, causal=True),
        MaskSpec(1, 9, causal=True, offset=8),  # a decoding step's newest query
        MaskSpec(1, 9, causal=True, offset=8, window=4),  # its window hides the oldest keys
        MaskSpec(1, 4, causal=True, offset=3, window=4),  # a window as wide as the keys
        MaskSpec(3, 6, causal=True, offset=3, window=2),
        MaskSpec(4, 4, key_valid=torch.tensor([[True, True, True, False]])),
        MaskSpec(4, 4, window=8),
    ],
)
def test_rows_open_to_every_key_are_exactly_those_the_mask_hides_nothing_from(spec):
    """attention_weights skips the mask for such rows: open_to must never say open where
    the mask would hide a key, nor shut where it would not."""
    for rows in (None, [-1], [0], slice(1, 3)):
        dense = spec.dense(rows)
        assert spec.open_to(rows) == (dense is None or bool(dense.all())), (spec, rows)
