"""Subword merging and special-token hiding, checked against small hand-computed examples."""

import pytest
import torch

from model.analysis.tokens import (
    DEFAULT_SPECIAL_TOKENS,
    hide_special_tokens,
    merge_attention,
    merge_subwords,
    special_token_set,
    subword_style,
    word_groups,
    word_text,
)
from model.hf.pieces import _bytes_to_unicode
from model.trace import Trace


def one_head(rows: list[list[float]]) -> torch.Tensor:
    return torch.tensor(rows).view(1, 1, len(rows), len(rows[0]))  # [layers, heads, Lq, Lk]


def byte_level(text: str) -> str:
    """How a byte-level BPE vocabulary spells ``text`` (GPT-2's printable bytes)."""
    table = _bytes_to_unicode()
    return "".join(table[b] for b in text.encode("utf-8"))


def test_wordpiece_pieces_join_into_words_and_specials_stay_alone():
    tokens = ["[CLS]", "play", "##ing", "cats", "##s", "[SEP]", "##x"]
    assert word_groups(tokens) == [[0], [1, 2], [3, 4], [5], [6]]
    assert word_text(["play", "##ing"], "wordpiece") == "playing"


def test_byte_level_words_start_at_the_space_mark_and_decode_their_bytes():
    tokens = ["<|endoftext|>", "Hello", "Ġwor", "ld", "!", "Ċ", "again"]
    assert subword_style(tokens) == "byte-level"
    assert word_groups(tokens) == [[0], [1], [2, 3, 4], [5], [6]]
    korean = byte_level(" 안녕")  # 7 bytes; cut mid-character as BPE does
    assert word_text([korean[:3], korean[3:]], "byte-level") == "안녕"


def test_sentencepiece_words_start_at_the_underline_mark():
    tokens = ["▁", "t", "he", "▁cat", "s", "</s>"]
    assert word_groups(tokens) == [[0, 1, 2], [3, 4], [5]]
    assert [word_text([tokens[i] for i in g], "sentencepiece") for g in word_groups(tokens)] == [
        "the",
        "cats",
        "</s>",
    ]


def test_whole_word_tokens_are_left_alone():
    assert word_groups(["<bos>", "a", "b", "<eos>"]) == [[0], [1], [2], [3]]
    with pytest.raises(ValueError, match="subword style"):
        word_groups(["a"], style="bytes")


def test_merging_sums_keys_and_averages_queries_by_hand():
    # "un ##do it": word 0 = pieces 0, 1; word 1 = piece 2.
    weights = one_head([[0.5, 0.25, 0.25], [0.1, 0.3, 0.6], [0.2, 0.2, 0.6]])
    merged = merge_attention(weights, [[0, 1], [2]], [[0, 1], [2]])
    # word 0 as query: mean of rows 0 and 1 with keys 0+1 summed: ([.75, .25] + [.4, .6]) / 2
    expected = one_head([[0.575, 0.425], [0.4, 0.6]])
    torch.testing.assert_close(merged, expected)


def test_merged_trace_covers_every_kind_with_two_token_lists_for_cross():
    src = ["the", "cat", "##s"]  # wordpiece source: 2 words
    tgt = ["<s>", "Ġle", "s", "Ġchats"]  # byte-level target: 3 words
    torch.manual_seed(0)
    attention = {
        "encoder": torch.softmax(torch.randn(2, 3, 3, 3), -1),
        "decoder": torch.softmax(
            torch.randn(2, 3, 4, 4).masked_fill(~torch.ones(4, 4).tril().bool(), float("-inf")), -1
        ),
        "cross": torch.softmax(torch.randn(2, 3, 4, 3), -1),
    }
    words = merge_subwords(Trace(src, tgt, attention))
    assert words.src_tokens == ["the", "cats"]
    assert words.tgt_tokens == ["<s>", "les", "chats"]
    assert words.attention["encoder"].shape == (2, 3, 2, 2)
    assert words.attention["decoder"].shape == (2, 3, 3, 3)
    assert words.attention["cross"].shape == (2, 3, 3, 2)
    for merged in words.attention.values():
        torch.testing.assert_close(merged.sum(-1), torch.ones(merged.shape[:-1]))
    # Causal stays causal: no word attends a later word.
    assert words.attention["decoder"][..., torch.ones(3, 3).triu(1).bool()].abs().max() == 0
    # The cross row of "chats" is exactly the row of its single piece, keys "cat"+"##s" summed.
    cross = attention["cross"][:, :, 3]
    torch.testing.assert_close(words.attention["cross"][:, :, 2, 1], cross[..., 1] + cross[..., 2])


def test_hiding_specials_renormalises_rows_and_reports_the_removed_share():
    trace = Trace(
        ["[CLS]", "a", "b", "[SEP]"],
        [],
        {
            "encoder": one_head(
                [
                    [0.7, 0.1, 0.1, 0.1],
                    [0.4, 0.2, 0.2, 0.2],  # keeps 0.4 of its weight
                    [0.1, 0.3, 0.5, 0.1],  # keeps 0.8
                    [0.25, 0.25, 0.25, 0.25],
                ]
            )
        },
    )
    hidden, removed = hide_special_tokens(trace)
    assert hidden.src_tokens == ["a", "b"]
    torch.testing.assert_close(hidden.attention["encoder"], one_head([[0.5, 0.5], [0.375, 0.625]]))
    torch.testing.assert_close(removed["encoder"], torch.tensor([[0.4]]))  # mean of 0.6 and 0.2
    raw, _ = hide_special_tokens(trace, renormalize=False)
    torch.testing.assert_close(raw.attention["encoder"], one_head([[0.2, 0.2], [0.3, 0.5]]))


def test_a_row_paid_entirely_to_hidden_tokens_becomes_zeros_not_nan():
    trace = Trace(
        [], ["<bos>", "x", "y"], {"decoder": one_head([[1, 0, 0], [1, 0, 0], [0.5, 0.25, 0.25]])}
    )
    hidden, removed = hide_special_tokens(trace)
    torch.testing.assert_close(hidden.attention["decoder"], one_head([[0.0, 0.0], [0.5, 0.5]]))
    torch.testing.assert_close(removed["decoder"], torch.tensor([[0.75]]))


def test_tokenizer_specials_join_the_defaults():
    class Tok:
        special_tokens = frozenset({"<extra_id_0>"})

    specials = special_token_set(Tok(), extra=["<sep>"])
    assert {"<extra_id_0>", "<sep>", "[CLS]", "</s>", "<eos>", "<pad>"} <= specials
    assert "[UNK]" not in DEFAULT_SPECIAL_TOKENS  # an unknown token still stands for a word
    trace = Trace(["<extra_id_0>", "a"], [], {"encoder": one_head([[0.5, 0.5], [0.5, 0.5]])})
    assert hide_special_tokens(trace, specials)[0].src_tokens == ["a"]
    assert hide_special_tokens(trace)[0].src_tokens == ["<extra_id_0>", "a"]
