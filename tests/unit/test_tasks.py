"""Toy tasks: the en2ko grammar and its reference translator, reverse, sort, held-out splits."""

import pytest

from model.runtime.tokenizer import task_tokenizers
from model.tasks import en2ko, get_task, reverse, sort
from model.tasks.en2ko import has_batchim, particle, readable, translate

SAMPLES = en2ko.sample(1500, seed=11)


def test_batchim_is_read_from_the_hangul_code_point():
    assert [has_batchim(w) for w in ["학교", "책", "선생님", "물", "우유", "꽃"]] == [
        False,
        True,
        True,
        True,
        False,
        True,
    ]
    assert chr(0xAC00) == "가" and not has_batchim("가") and has_batchim("각")  # 0xAC01: final ㄱ
    with pytest.raises(ValueError, match="Hangul"):
        has_batchim("tom")


@pytest.mark.parametrize(
    "word, role, expected",
    [
        ("책", "object", "을"),
        ("사과", "object", "를"),
        ("톰", "topic", "은"),
        ("미나", "topic", "는"),
        ("꽃", "subject", "이"),
        ("고양이", "subject", "가"),
    ],
)
def test_particles_follow_the_final_consonant(word, role, expected):
    assert particle(word, role) == expected


def test_the_lecture_sentences_translate_to_verb_final_korean():
    assert translate("I study math") == "나 는 수학 을 공부한다"
    assert translate("I study math at school") == "나 는 학교 에서 수학 을 공부한다"
    assert readable(translate("I study math at school.")) == "나는 학교에서 수학을 공부한다"


@pytest.mark.parametrize(
    "english, korean",
    [
        ("I studied math yesterday", "나 는 어제 수학 을 공부했다"),
        ("Tomorrow, she will eat an apple", "그녀 는 내일 사과 를 먹을 것이다"),
        ("Yesterday I study math", "나 는 어제 수학 을 공부했다"),  # the time word decides
        ("I read a book", "나 는 책 을 읽는다"),
        ("He read a book", "그 는 책 을 읽었다"),  # not "reads": past
        ("Tom is busy today", "톰 은 오늘 바쁘다"),
        ("The coffee was hot", "커피 는 뜨거웠다"),
    ],
)
def test_tense_comes_from_the_time_word_then_the_verb_form(english, korean):
    assert translate(english) == korean


@pytest.mark.parametrize(
    "english, korean",
    [
        ("There is a cat in the park", "공원 에 고양이 가 있다"),
        ("There was a book on the desk", "책상 위 에 책 이 있었다"),
        ("I go to school", "나 는 학교 에 간다"),
        ("Mina went home", "미나 는 집 에 갔다"),
        ("I play the piano", "나 는 피아노 를 친다"),
        ("I play soccer", "나 는 축구 를 한다"),
        ("My friend meets her at the library", "내 친구 는 도서관 에서 그녀 를 만난다"),
        ("Her friend meets him", "그녀의 친구 는 그 를 만난다"),
    ],
)
def test_places_existence_and_verbs_chosen_by_their_object(english, korean):
    assert translate(english) == korean


def test_sentences_outside_the_grammar_get_a_clear_error():
    assert translate("I study") == "나 는 공부한다"  # "study" may drop its object ...
    for bad in ["", "the quantum cat sleeps", "I drink", "I study math at"]:  # ... "drink" not
        with pytest.raises(ValueError, match="grammar|empty"):
            translate(bad)


def test_every_sample_is_its_reference_translation_with_correct_particles():
    predicate_forms = {
        *(f for v in en2ko.VERBS.values() for f in v.ko[:2]),
        *(f for a in en2ko.ADJECTIVES.values() if a.predicate for f in a.predicate[:2]),
        *en2ko.EXIST[:2],
        *en2ko.PLAY_INSTRUMENT[:2],
        en2ko.FUTURE,
    }
    roles = {p: role for role, pair in en2ko.PARTICLES.items() for p in pair}
    for english, korean in SAMPLES:
        assert translate(english) == korean
        tokens = korean.split()
        assert tokens[-1] in predicate_forms  # verb-final
        for prev, tok in zip(tokens, tokens[1:]):
            if tok in roles:
                assert tok == particle(prev, roles[tok]), korean


def test_objects_move_before_the_verb():
    """English SVO -> Korean SOV: the object noun comes after the verb in English, before it in Korean."""
    checked = 0
    for english, korean in SAMPLES:
        clause = en2ko.parse(english)
        if clause.obj is None or clause.obj.noun is None:
            continue
        words, tokens = en2ko.normalize(english), korean.split()
        verb_forms = {clause.verb.en, clause.verb.third, clause.verb.past}
        verb_at = words.index(next(w for w in words if w in verb_forms))
        assert clause.obj.noun.en in words[verb_at + 1 :]
        marker = next(i for i, t in enumerate(tokens) if t in ("을", "를"))
        assert tokens[marker - 1] == clause.obj.noun.ko and marker < len(tokens) - 1
        checked += 1
    assert checked > 300


def test_grammar_covers_at_least_120_english_words_and_all_are_known():
    seen = {w for english, _ in SAMPLES for w in en2ko.normalize(english)}
    assert len(seen) >= 120
    assert seen <= set(en2ko.source_words())
    korean = {t for _, k in SAMPLES for t in k.split()}
    assert korean <= set(en2ko.target_words()) and len(korean) >= 120


def test_all_three_tenses_and_sentence_kinds_are_generated():
    clauses = [en2ko.parse(e) for e, _ in SAMPLES[:600]]
    assert {c.tense for c in clauses} == {"present", "past", "future"}
    assert {c.kind for c in clauses} == {"action", "describe", "exist"}


@pytest.mark.parametrize("name", ["en2ko", "reverse", "sort"])
def test_held_out_split_never_overlaps_training(name):
    task = get_task(name)
    train = task.sample(3000, seed=1)
    test = task.sample(400, seed=1, split="test")
    norm = en2ko.normalize if name == "en2ko" else str.split
    train_keys = {" ".join(norm(s)) for s, _ in train}
    test_keys = {" ".join(norm(s)) for s, _ in test}
    assert not train_keys & test_keys
    assert all(task.split_of(s) == "test" for s, _ in test)
    assert all(task.split_of(s) == "train" for s, _ in train)


@pytest.mark.parametrize("name", ["en2ko", "reverse", "sort"])
def test_sampling_is_deterministic_by_seed(name):
    task = get_task(name)
    assert task.sample(50, seed=5) == task.sample(50, seed=5)
    assert task.sample(50, seed=5) != task.sample(50, seed=6)
    with pytest.raises(ValueError, match="split"):
        task.sample(1, seed=0, split="valid")


def test_reverse_targets_are_the_sequence_backwards():
    for source, target in reverse.sample(300, seed=2):
        symbols = source.split()
        assert target.split() == symbols[::-1]
        assert reverse.MIN_LEN <= len(symbols) <= reverse.MAX_LEN
        assert set(symbols) <= set(reverse.SYMBOLS)


def test_sort_targets_are_the_same_digits_in_order_after_a_bos_sep_prompt():
    for source, target in sort.sample(300, seed=2):
        assert target.split() == sorted(source.split())
    _, tok = task_tokenizers(sort)
    assert tok.encode("3 1 2", 32).tokens == ["<bos>", "3", "1", "2", "<sep>"]
    assert tok.encode_target("1 2 3", 32).tokens == ["1", "2", "3"]


def test_unknown_task_names_are_refused():
    with pytest.raises(ValueError, match="unknown task"):
        get_task("translate")


def test_references_read_typed_sequences_as_the_tokenizer_does():
    assert reverse.reference("A3k") == reverse.reference("a 3 k") == "k 3 a"
    assert sort.reference("3,1,2") == "1 2 3"
    assert reverse.split_of("A3k") == reverse.split_of("a 3 k")


def test_unknown_words_get_words_of_their_own_kind_when_no_spelling_is_close():
    from model.tasks import suggestions, vocabulary_sample

    known = en2ko.source_words()
    assert suggestions("en2ko", known, "scool")[0] == "spelling"
    assert "school" in suggestions("en2ko", known, "scool")[1]
    kind, words = suggestions("en2ko", known, "quokkas")
    assert kind == "noun" and words and set(words) <= set(en2ko.word_classes()["noun"])
    kind, words = suggestions("en2ko", known, "jumped")
    assert kind == "verb" and set(words) <= set(en2ko.word_classes()["verb"])
    assert suggestions("en2ko", known, "fiercely") == ("adverb", [])  # the grammar has none
    assert suggestions("reverse", ["a", "b"], "zz") == ("none", [])  # no grammar to go by
    sample = vocabulary_sample("en2ko")
    assert {"noun", "verb", "adjective"} <= sample.keys()
    assert all(w in known for words in sample.values() for w in words)
    assert sum(len(v) for v in en2ko.word_classes().values()) >= 200
