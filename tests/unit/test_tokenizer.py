"""Word-level tokenizer: fixed special ids, round trips, unknown words with suggestions."""

import pytest

from model.runtime.tokenizer import WordTokenizer, load_vocab, save_vocab, task_tokenizers
from model.tasks import en2ko, reverse, sort

SRC, TGT = task_tokenizers(en2ko)


def test_special_tokens_have_fixed_ids_with_pad_zero():
    for tok in (SRC, TGT, task_tokenizers(sort)[1], task_tokenizers(reverse)[0]):
        assert (tok.pad_id, tok.bos_id, tok.eos_id, tok.unk_id) == (0, 1, 2, 3)
        assert tok.tokens([0, 1, 2, 3]) == ["<pad>", "<bos>", "<eos>", "<unk>"]
        assert {"<pad>", "<bos>", "<eos>", "<unk>"} <= tok.special_tokens
    assert "<sep>" in task_tokenizers(sort)[1].special_tokens


def test_every_task_sample_round_trips_through_ids():
    for english, korean in en2ko.sample(300, seed=3):
        src = SRC.encode(english, 64)
        assert not src.unknown and not src.truncated
        assert SRC.detokenize(src.ids) == " ".join(en2ko.normalize(english))
        tgt = TGT.encode_target(korean, 64)
        assert TGT.detokenize(tgt.ids) == korean
        assert TGT.unk_id not in tgt.ids


def test_case_and_punctuation_are_normalised_for_english_input():
    plain = SRC.encode("i study math at school", 64).ids
    assert SRC.encode("  I study MATH, at school!\n", 64).ids == plain
    assert SRC.encode("<b>I</b> study\x00 math at school", 64).tokens[0] == "<unk>"  # "b"


def test_unknown_words_are_reported_once_with_close_suggestions():
    enc = SRC.encode("I studdy physics and physics", 64)
    assert enc.unknown == ["studdy", "physics", "and"]
    assert enc.tokens == ["i", "<unk>", "<unk>", "<unk>", "<unk>"]
    assert "study" in SRC.suggest("studdy")
    assert SRC.suggest("scool", n=3)[0] == "school"
    assert len(SRC.suggest("teachr", n=2)) <= 2
    assert SRC.suggest("zzzzzzzz") == []


def test_korean_particles_may_be_typed_glued_to_their_noun():
    glued = TGT.encode_target("나는 학교에서 수학을 공부한다", 64)
    assert glued.tokens == ["나", "는", "학교", "에서", "수학", "을", "공부한다"]
    assert not glued.unknown
    assert TGT.encode_target("책이", 8).tokens == ["책", "이"]


def test_decoder_prompts_are_wrapped_and_stay_wrapped_when_cut():
    _, tok = task_tokenizers(sort)
    assert tok.encode("312", 32).tokens == ["<bos>", "3", "1", "2", "<sep>"]  # chars split
    cut = tok.encode("9 8 7 6 5 4", 5)
    assert cut.truncated and cut.tokens == ["<bos>", "9", "8", "7", "<sep>"]
    assert tok.encode("3 x 1", 32).unknown == ["x"]


def test_vocab_json_round_trip_keeps_ids_and_behaviour(tmp_path):
    path = tmp_path / "vocab.json"
    save_vocab(path, "en2ko", SRC, TGT)
    task, src, tgt = load_vocab(path)
    assert task == "en2ko" and src.vocab == SRC.vocab and tgt.vocab == TGT.vocab
    assert (
        tgt.encode_target("나는 책을 읽는다", 16).ids
        == TGT.encode_target("나는 책을 읽는다", 16).ids
    )
    save_vocab(path, "sort", None, task_tokenizers(sort)[1])
    task, src, tgt = load_vocab(path)
    assert src is None and tgt.encode("21", 8).tokens == ["<bos>", "2", "1", "<sep>"]


def test_a_vocabulary_without_the_fixed_specials_is_refused(tmp_path):
    data = SRC.to_dict()
    data["tokens"] = data["tokens"][1:] + ["<pad>"]
    with pytest.raises(ValueError, match="must start with"):
        WordTokenizer.from_dict(data)
    (tmp_path / "vocab.json").write_text('{"tokens": []}')
    with pytest.raises(ValueError, match="not an Attention Lab vocabulary"):
        load_vocab(tmp_path / "vocab.json")


def test_written_glues_particles_back_as_korean_is_written():
    from model.analysis.tokens import written_text

    tokens = ["<bos>", "나", "는", "학교", "에서", "수학", "을", "공부한다", "<eos>"]
    assert TGT.written(tokens) == "나는 학교에서 수학을 공부한다"
    assert TGT.words(TGT.written(tokens)) == tokens[1:-1]  # and it reads back as the same tokens
    assert written_text(TGT, tokens[1:-1]) == "나는 학교에서 수학을 공부한다"
    assert written_text(object(), ["a", "b"]) == "a b"  # a tokenizer without particles
    assert TGT.written(["는", "나"]) == "는 나"  # a particle with no word before it stays alone
