"""English -> Korean toy translation: a small grammar and a rule-based reference translator.

Korean is verb-final (subject-object-verb) and marks each noun's role with a particle whose
form depends on whether the noun ends in a consonant (batchim): 나는 / 학생은, 사과를 /
책을. The target is tokenised as stem + particle ("나 는 학교 에서 수학 을 공부한다") so
cross-attention can show the reordering and which noun each particle belongs to.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NoReturn

from model.tasks import Vocabulary, sample_split
from model.tasks import split_of as _split_of

KIND = "encoder-decoder"

# --- Hangul -------------------------------------------------------------------------------

HANGUL_FIRST, HANGUL_LAST = 0xAC00, 0xD7A3  # 가 .. 힣: 19 initials x 21 vowels x 28 finals


def has_batchim(word: str) -> bool:
    """True when the last syllable of ``word`` ends in a consonant (its final, jongseong, is set).

    A precomposed syllable is 0xAC00 + (initial * 21 + vowel) * 28 + final, final 0 = none.
    """
    if not word:
        raise ValueError("an empty word has no last syllable")
    code = ord(word[-1])
    if not HANGUL_FIRST <= code <= HANGUL_LAST:
        raise ValueError(f"{word!r} does not end in a Hangul syllable")
    return (code - HANGUL_FIRST) % 28 != 0


PARTICLES = {"topic": ("은", "는"), "subject": ("이", "가"), "object": ("을", "를")}
PLACE_PARTICLES = ("에서", "에")  # where something happens / where to, where something is


def particle(word: str, role: str) -> str:
    """The particle for ``role`` after ``word``: the first form after a consonant, else the second."""
    after_consonant, after_vowel = PARTICLES[role]
    return after_consonant if has_batchim(word) else after_vowel


# --- Lexicon ------------------------------------------------------------------------------
# Determiner policies: which English determiners a noun takes.
COUNT = ("a", "the", "my", "your", "his", "her", "our", "their")
POSS = ("my", "your", "his", "her", "our", "their")
MASS = ("", "the", "my")
BARE = ("",)
THE = ("the",)
PLACE = ("the", "my", "your", "his", "her", "our", "their")  # a home's rooms: "in my room"
POSSESSIVES = {
    "my": "내",
    "your": "너의",
    "his": "그의",
    "her": "그녀의",
    "our": "우리",
    "their": "그들의",
}


@dataclass(frozen=True)
class Noun:
    en: str
    ko: str
    tags: frozenset[str]
    dets: tuple[str, ...]
    prep: str = "at"  # the preposition a place or spot takes by default


def _nouns(ko_en: str, tags: str, dets: tuple[str, ...], prep: str = "at") -> list[Noun]:
    out = []
    for pair in ko_en.split():
        en, ko = pair.split("=")
        out.append(Noun(en, ko, frozenset(tags.split()), dets, prep))
    return out


NOUNS: dict[str, Noun] = {
    n.en: n
    for n in [
        *_nouns("friend=친구 teacher=선생님 student=학생 doctor=의사 child=아이", "person", COUNT),
        *_nouns("baby=아기", "person", COUNT),
        *_nouns("mother=어머니 father=아버지", "person", POSS),
        *_nouns("cat=고양이 dog=개 bird=새 rabbit=토끼", "animal", COUNT),
        *_nouns("apple=사과 orange=오렌지 banana=바나나 egg=계란", "food", COUNT),
        *_nouns("sandwich=샌드위치 cake=케이크", "food", COUNT),
        *_nouns("bread=빵 rice=밥 kimchi=김치 pizza=피자 soup=국 fish=생선", "food", MASS),
        *_nouns("water=물 milk=우유 coffee=커피 tea=차 juice=주스", "drink", MASS),
        *_nouns(
            "math=수학 english=영어 korean=한국어 science=과학 history=역사 music=음악 art=미술",
            "subject",
            BARE,
        ),
        *_nouns("book=책 letter=편지 poem=시 story=이야기", "reading writing thing", COUNT),
        *_nouns("newspaper=신문 magazine=잡지", "reading thing", COUNT),
        *_nouns("movie=영화 drama=드라마", "show", COUNT),
        *_nouns("tv=텔레비전", "show", BARE),
        *_nouns("soccer=축구 baseball=야구 basketball=농구 tennis=테니스", "sport", BARE),
        *_nouns("piano=피아노 guitar=기타 violin=바이올린", "instrument", THE),
        *_nouns("bag=가방 box=상자", "thing open", COUNT),
        *_nouns("door=문 window=창문", "open", THE),
        *_nouns("pen=펜 phone=휴대폰 hat=모자 computer=컴퓨터 ball=공", "thing", COUNT),
        *_nouns("umbrella=우산 key=열쇠 car=자동차", "thing", COUNT),
        *_nouns("flower=꽃 picture=그림", "thing drawable", COUNT),
        *_nouns("school=학교", "place visit", BARE),
        *_nouns("home=집", "place", BARE),
        *_nouns("library=도서관 museum=박물관 hospital=병원 market=시장", "place visit", THE),
        *_nouns("zoo=동물원 beach=해변", "place visit", THE),
        *_nouns("store=가게 restaurant=식당 cafe=카페 station=역", "place", THE),
        *_nouns("office=사무실", "place room", PLACE),
        *_nouns("house=집", "place room visit", PLACE),
        *_nouns("kitchen=부엌 classroom=교실 room=방", "place room", PLACE, "in"),
        *_nouns("garden=정원", "place visit", PLACE, "in"),
        *_nouns("park=공원", "place visit", THE, "in"),
        *_nouns("seoul=서울 busan=부산", "place visit", BARE, "in"),
        *_nouns("desk=책상 table=탁자 bed=침대 chair=의자 sofa=소파", "spot thing", THE, "on"),
        *_nouns("tree=나무", "spot", THE, "under"),
    ]
}
NAMES = {"tom": "톰", "mina": "미나", "minho": "민호", "jisoo": "지수", "john": "존"}
SUBJECT_PRONOUNS = {"i": "나", "you": "너", "he": "그", "she": "그녀", "we": "우리", "they": "그들"}
OBJECT_PRONOUNS = {
    "me": "나",
    "you": "너",
    "him": "그",
    "her": "그녀",
    "us": "우리",
    "them": "그들",
}
THIRD_SINGULAR = {"he", "she"}  # and every noun or name subject
BE = {"i": ("am", "was"), "you": ("are", "were"), "we": ("are", "were"), "they": ("are", "were")}

# Where: the preposition -> the Korean relational noun placed before the particle (None: none).
PREPOSITIONS = {"at": None, "in": None, "on": "위", "under": "아래", "near": "근처", "behind": "뒤"}
SPOT_PREPS = ("on", "under", "near", "behind")

# Korean predicate forms: (present, past, future stem); future = stem + "것이다" ("will").
FUTURE = "것이다"


@dataclass(frozen=True)
class Verb:
    en: str
    third: str  # he/she form
    past: str
    ko: tuple[str, str, str]
    frame: str  # "obj" (needs an object), "obj?" (may take one), "motion" (to a place), "intr"
    objects: frozenset[str] = frozenset()  # noun tags it accepts as object


def _verb(spec: str, ko: str, frame: str, objects: str = "") -> Verb:
    en, third, past = spec.split()
    present, past_ko, future = ko.split()
    return Verb(en, third, past, (present, past_ko, future), frame, frozenset(objects.split()))


VERBS: dict[str, Verb] = {
    v.en: v
    for v in [
        _verb("study studies studied", "공부한다 공부했다 공부할", "obj?", "subject"),
        _verb("learn learns learned", "배운다 배웠다 배울", "obj", "subject instrument sport"),
        _verb("teach teaches taught", "가르친다 가르쳤다 가르칠", "obj", "subject"),
        _verb("eat eats ate", "먹는다 먹었다 먹을", "obj?", "food"),
        _verb("drink drinks drank", "마신다 마셨다 마실", "obj", "drink"),
        _verb("cook cooks cooked", "요리한다 요리했다 요리할", "obj?", "food"),
        _verb("make makes made", "만든다 만들었다 만들", "obj", "food"),
        _verb("buy buys bought", "산다 샀다 살", "obj", "food drink thing"),
        _verb("read reads read", "읽는다 읽었다 읽을", "obj?", "reading"),
        _verb("write writes wrote", "쓴다 썼다 쓸", "obj?", "writing"),
        _verb("watch watches watched", "본다 봤다 볼", "obj", "show sport"),
        _verb("see sees saw", "본다 봤다 볼", "obj", "show person animal"),
        _verb("meet meets met", "만난다 만났다 만날", "obj", "person"),
        _verb("help helps helped", "돕는다 도왔다 도울", "obj", "person"),
        _verb("like likes liked", "좋아한다 좋아했다 좋아할", "obj", "subject food drink sport"),
        _verb("love loves loved", "사랑한다 사랑했다 사랑할", "obj", "person animal"),
        _verb("clean cleans cleaned", "청소한다 청소했다 청소할", "obj", "room"),
        _verb("open opens opened", "연다 열었다 열", "obj", "open"),
        _verb("visit visits visited", "방문한다 방문했다 방문할", "obj", "visit"),
        _verb("draw draws drew", "그린다 그렸다 그릴", "obj?", "animal drawable"),
        _verb("find finds found", "찾는다 찾았다 찾을", "obj", "thing animal"),
        _verb("play plays played", "한다 했다 할", "obj", "sport instrument"),
        _verb("go goes went", "간다 갔다 갈", "motion"),
        _verb("come comes came", "온다 왔다 올", "motion"),
        _verb("sleep sleeps slept", "잔다 잤다 잘", "intr"),
        _verb("work works worked", "일한다 일했다 일할", "intr"),
        _verb("run runs ran", "달린다 달렸다 달릴", "intr"),
        _verb("walk walks walked", "걷는다 걸었다 걸을", "intr"),
        _verb("swim swims swam", "수영한다 수영했다 수영할", "intr"),
        _verb("rest rests rested", "쉰다 쉬었다 쉴", "intr"),
        _verb("dance dances danced", "춤춘다 춤췄다 춤출", "intr"),
        _verb("sing sings sang", "노래한다 노래했다 노래할", "intr"),
        _verb("laugh laughs laughed", "웃는다 웃었다 웃을", "intr"),
    ]
}
# "play the piano" is 피아노를 치다 ("strike"), "play soccer" 축구를 하다 ("do").
PLAY_INSTRUMENT = ("친다", "쳤다", "칠")
ANIMAL_VERBS = ("eat", "drink", "sleep", "run", "walk", "swim", "rest")
# Verbs that happen "on the bed" / "under the tree" as well as at a place.
SPOT_VERBS = ("study", "read", "write", "eat", "drink", "sleep", "rest", "draw", "sing", "laugh")


@dataclass(frozen=True)
class Adjective:
    en: str
    attributive: str  # before a noun: 큰 책
    predicate: tuple[str, str, str] | None  # "is big": 크다 / 컸다 / 클 (것이다)
    fits: frozenset[str]  # noun tags it can describe


def _adj(en: str, attributive: str, predicate: str, fits: str) -> Adjective:
    forms = tuple(predicate.split()) if predicate else None
    return Adjective(en, attributive, forms, frozenset(fits.split()))  # type: ignore[arg-type]


ADJECTIVES: dict[str, Adjective] = {
    a.en: a
    for a in [
        _adj("big", "큰", "크다 컸다 클", "thing animal place spot"),
        _adj("small", "작은", "작다 작았다 작을", "thing animal place spot"),
        _adj("new", "새로운", "", "thing reading show"),
        _adj("old", "오래된", "", "thing reading spot place"),
        _adj("red", "빨간", "빨갛다 빨갰다 빨갈", "thing"),
        _adj("good", "좋은", "좋다 좋았다 좋을", "reading show person food"),
        _adj("pretty", "예쁜", "예쁘다 예뻤다 예쁠", "thing person animal place"),
        _adj("expensive", "비싼", "비싸다 비쌌다 비쌀", "thing food"),
        _adj("cheap", "싼", "싸다 쌌다 쌀", "thing food"),
        _adj("delicious", "맛있는", "맛있다 맛있었다 맛있을", "food drink"),
        _adj("happy", "행복한", "행복하다 행복했다 행복할", "person animal"),
        _adj("sad", "슬픈", "슬프다 슬펐다 슬플", "person reading show"),
        _adj("busy", "바쁜", "바쁘다 바빴다 바쁠", "person"),
        _adj("tired", "피곤한", "피곤하다 피곤했다 피곤할", "person animal"),
        _adj("kind", "친절한", "친절하다 친절했다 친절할", "person"),
        _adj("hungry", "배고픈", "배고프다 배고팠다 배고플", "person animal"),
        _adj("quiet", "조용한", "조용하다 조용했다 조용할", "place person"),
        _adj("smart", "똑똑한", "똑똑하다 똑똑했다 똑똑할", "person animal"),
        _adj("funny", "재미있는", "재미있다 재미있었다 재미있을", "reading show person"),
        _adj("hot", "뜨거운", "뜨겁다 뜨거웠다 뜨거울", "drink food"),
        _adj("cold", "차가운", "차갑다 차가웠다 차가울", "drink"),
    ]
}
TENSES = ("present", "past", "future")
# Time phrase -> (Korean tokens, the tense it forces or None when the verb decides).
TIMES: dict[str, tuple[tuple[str, ...], str | None]] = {
    "yesterday": (("어제",), "past"),
    "last night": (("어젯밤",), "past"),
    "last week": (("지난주",), "past"),
    "last year": (("작년",), "past"),
    "now": (("지금",), "present"),
    "every day": (("매일",), "present"),
    "every morning": (("매일", "아침"), "present"),
    "today": (("오늘",), None),
    "this morning": (("오늘", "아침"), None),
    "tonight": (("오늘", "밤"), "future"),
    "tomorrow": (("내일",), "future"),
    "next week": (("다음", "주"), "future"),
    "next year": (("내년",), "future"),
}
EXIST = ("있다", "있었다", "있을")  # there is / was / will be
CAPITALISED = {"i": "I", "tv": "TV", "english": "English", "korean": "Korean"}
CAPITALISED |= {w: w.title() for w in [*NAMES, "seoul", "busan"]}


# --- Reference translator -----------------------------------------------------------------


def normalize(english: str) -> list[str]:
    """Lower-case words with punctuation dropped: what both the translator and tokenizer read."""
    return re.findall(r"[a-z]+", english.lower())


@dataclass
class NounPhrase:
    ko: list[str]  # Korean tokens, the noun last (its particle is chosen from it)
    noun: Noun | None = None  # None for pronouns and names
    third: bool = True  # takes he/she verb forms


@dataclass
class Clause:
    kind: str  # "action" | "describe" | "exist"
    subject: NounPhrase
    tense: str = "present"
    verb: Verb | None = None
    obj: NounPhrase | None = None
    place: tuple[str, NounPhrase] | None = None  # (preposition or "to", place)
    adjective: Adjective | None = None
    time: tuple[str, ...] = ()


class _Parser:
    """A recursive-descent reading of the toy grammar; anything outside it is a ValueError."""

    def __init__(self, words: list[str], text: str):
        self.words, self.i, self.text = words, 0, text

    def peek(self, k: int = 0) -> str | None:
        j = self.i + k
        return self.words[j] if j < len(self.words) else None

    def take(self) -> str:
        word = self.peek()
        if word is None:
            self.fail("it ends too early")
        self.i += 1
        return word

    def fail(self, why: str) -> NoReturn:
        raise ValueError(f"not in the toy grammar ({why}): {self.text!r}")

    def noun_phrase(self, role: str) -> NounPhrase:
        word = self.peek()
        pronouns = SUBJECT_PRONOUNS if role == "subject" else OBJECT_PRONOUNS
        starts_np = self.peek(1) in NOUNS or self.peek(1) in ADJECTIVES
        if word in pronouns and not (word == "her" and starts_np):
            self.take()
            return NounPhrase([pronouns[word]], None, word not in ("i", "you", "we", "they"))
        if word in NAMES:
            self.take()
            return NounPhrase([NAMES[word]])
        ko: list[str] = []
        if word in ("a", "an", "the"):
            self.take()
        elif word in POSSESSIVES:
            ko.append(POSSESSIVES[self.take()])
        while self.peek() in ADJECTIVES:
            ko.append(ADJECTIVES[self.take()].attributive)
        word = self.take()
        if word not in NOUNS:
            self.fail(f"{word!r} is not a known noun")
        noun = NOUNS[word]
        return NounPhrase([*ko, noun.ko], noun)

    def place(self, motion: bool) -> tuple[str, NounPhrase] | None:
        word = self.peek()
        if word is None:
            return None
        if motion and word == "home":
            self.take()
            return "to", NounPhrase([NOUNS["home"].ko], NOUNS["home"])
        if (word == "to" and motion) or (word in PREPOSITIONS and not motion):
            self.take()
            np = self.noun_phrase("object")
            if np.noun is None or not np.noun.tags & {"place", "spot"}:
                self.fail(f"{word!r} needs a place after it")
            return word, np
        self.fail(f"did not expect {word!r}")

    def clause(self) -> Clause:
        if self.peek() == "there":
            return self.existence()
        subject = self.noun_phrase("subject")
        word = self.peek()
        be = {"am", "is", "are", "was", "were"}
        if word in be or (word == "will" and self.peek(1) == "be"):
            tense = "past" if word in ("was", "were") else "future" if word == "will" else "present"
            self.i += 2 if word == "will" else 1
            adj = ADJECTIVES.get(self.take() or "")
            if adj is None or adj.predicate is None:
                self.fail("'be' needs a describing adjective after it")
            return Clause("describe", subject, tense, adjective=adj)
        tense = "present"
        if word == "will":
            self.take()
            tense = "future"
        word = self.take()
        verb = next((v for v in VERBS.values() if word in (v.en, v.third, v.past)), None)
        if verb is None:
            self.fail(f"{word!r} is not a known verb")
        if tense != "future" and word == verb.past and word != verb.en:
            tense = "past"
        elif tense != "future" and word == verb.past and subject.third and word != verb.third:
            tense = "past"  # "he read": not "reads", so past
        obj = None
        if verb.frame in ("obj", "obj?") and self.peek() not in (*PREPOSITIONS, None):
            obj = self.noun_phrase("object")
        elif verb.frame == "obj":
            self.fail(f"{verb.en!r} needs an object")
        place = self.place(motion=verb.frame == "motion")
        return Clause("action", subject, tense, verb, obj, place)

    def existence(self) -> Clause:
        self.take()  # there
        word = self.take()
        if word == "will" and self.peek() == "be":
            self.take()
            tense = "future"
        elif word in ("is", "was"):
            tense = "past" if word == "was" else "present"
        else:
            self.fail("expected 'there is', 'there was' or 'there will be'")
        subject = self.noun_phrase("object")
        place = self.place(motion=False)
        if place is None:
            self.fail("'there is' needs a place")
        return Clause("exist", subject, tense, place=place)


def _take_time(words: list[str]) -> tuple[list[str], tuple[str, ...], str | None]:
    """Remove one time phrase from the start or end; (rest, Korean tokens, forced tense)."""
    for phrase in sorted(TIMES, key=len, reverse=True):
        parts = phrase.split()
        n = len(parts)
        if words[:n] == parts:
            return words[n:], *TIMES[phrase]
        if words[-n:] == parts and len(words) > n:
            return words[:-n], *TIMES[phrase]
    return words, (), None


def _with_particle(np: NounPhrase, role: str) -> list[str]:
    return [*np.ko, particle(np.ko[-1], role)]


def _place_tokens(place: tuple[str, NounPhrase], static: bool) -> list[str]:
    prep, np = place
    relational = PREPOSITIONS.get(prep)
    return [*np.ko, *([relational] if relational else []), "에서" if static else "에"]


def _predicate(forms: tuple[str, str, str], tense: str) -> list[str]:
    form = forms[TENSES.index(tense)]
    return [form, FUTURE] if tense == "future" else [form]


def parse(english: str) -> Clause:
    """The grammar's reading of an English sentence (ValueError if it is outside the grammar)."""
    words = normalize(english)
    if not words:
        raise ValueError("empty sentence")
    rest, time, forced = _take_time(words)
    parser = _Parser(rest, english)
    clause = parser.clause()
    if parser.peek() is not None:
        parser.fail(f"did not expect {parser.peek()!r}")
    clause.time = time
    if forced is not None:
        clause.tense = forced  # "yesterday" makes it past whatever the verb form says
    return clause


def translate(english: str) -> str:
    """The reference Korean (space-separated stem + particle tokens) for a grammar sentence."""
    c = parse(english)
    if c.kind == "exist":
        assert c.place is not None
        out = [*c.time, *_place_tokens(c.place, static=False)]
        return " ".join([*out, *_with_particle(c.subject, "subject"), *_predicate(EXIST, c.tense)])
    out = [*_with_particle(c.subject, "topic"), *c.time]
    if c.kind == "describe":
        assert c.adjective is not None and c.adjective.predicate is not None
        return " ".join([*out, *_predicate(c.adjective.predicate, c.tense)])
    assert c.verb is not None
    if c.place is not None:
        out += _place_tokens(c.place, static=c.verb.frame != "motion")
    forms = c.verb.ko
    if c.obj is not None:
        out += _with_particle(c.obj, "object")
        if c.verb.en == "play" and c.obj.noun is not None and "instrument" in c.obj.noun.tags:
            forms = PLAY_INSTRUMENT
    return " ".join([*out, *_predicate(forms, c.tense)])


def reference(english: str) -> str:
    """The reference answer, as every task names it: the rule-based translation."""
    return translate(english)


def readable(korean: str) -> str:
    """Tokens -> written Korean: particles glued to their noun ("나 는" -> "나는")."""
    out: list[str] = []
    for token in korean.split():
        if out and token in PARTICLE_TOKENS:
            out[-1] += token
        else:
            out.append(token)
    return " ".join(out)


PARTICLE_TOKENS = frozenset([*(p for pair in PARTICLES.values() for p in pair), *PLACE_PARTICLES])


# --- Generator ----------------------------------------------------------------------------


def _article(dets: tuple[str, ...], rng: random.Random, next_word: str) -> str:
    det = rng.choice(dets)
    if det == "a" and next_word[0] in "aeiou":
        return "an"
    return det


def _np(rng: random.Random, nouns: list[Noun], adj_p: float = 0.25) -> tuple[list[str], Noun]:
    noun = rng.choice(nouns)
    words = [noun.en]
    fitting = [a for a in ADJECTIVES.values() if a.fits & noun.tags]
    if fitting and noun.dets != BARE and rng.random() < adj_p:
        words.insert(0, rng.choice(fitting).en)
    det = _article(noun.dets, rng, words[0])
    return ([det] if det else []) + words, noun


def _nouns_with(*tags: str) -> list[Noun]:
    return [n for n in NOUNS.values() if n.tags & set(tags)]


PEOPLE, ANIMALS = _nouns_with("person"), _nouns_with("animal")
PLACES, SPOTS = _nouns_with("place"), _nouns_with("spot")


def _subject(rng: random.Random, animals: bool = True) -> tuple[list[str], str, Noun | None]:
    """(English words, agreement key: a pronoun or "3rd", the noun if any)."""
    r = rng.random()
    if r < 0.45:
        pronoun = rng.choice(list(SUBJECT_PRONOUNS))
        return [pronoun], pronoun, None
    if r < 0.6:
        return [rng.choice(list(NAMES))], "3rd", None
    words, noun = _np(rng, PEOPLE + (ANIMALS if animals else []), adj_p=0.1)
    return words, "3rd", noun


def _verb_words(verb: Verb, tense: str, agreement: str) -> list[str]:
    if tense == "future":
        return ["will", verb.en]
    if tense == "past":
        return [verb.past]
    return [verb.third if agreement in ("3rd", "he", "she") else verb.en]


def _be_words(tense: str, agreement: str) -> list[str]:
    if tense == "future":
        return ["will", "be"]
    present, past = BE.get(agreement, ("is", "was"))
    return [past if tense == "past" else present]


def _location(rng: random.Random, motion: bool, spots: bool) -> list[str]:
    """Where to ("to the park", "home") for motion verbs; where ("at school", "on the desk") else."""
    if motion or not spots or rng.random() < 0.6:
        words, place = _np(rng, PLACES, adj_p=0.1)
        if motion:
            return ["home"] if place.en == "home" else ["to", *words]
        return [place.prep, *words]
    words, _ = _np(rng, SPOTS, adj_p=0.1)
    return [rng.choice(SPOT_PREPS), *words]


def _time_phrase(rng: random.Random, tense: str) -> str | None:
    if rng.random() < 0.4:
        return None
    options = [p for p, (_, forced) in TIMES.items() if forced in (tense, None)]
    return rng.choice(options)


def _action(rng: random.Random) -> tuple[list[str], str]:
    subject, agreement, noun = _subject(rng)
    is_animal = noun is not None and "animal" in noun.tags
    verbs = [VERBS[v] for v in ANIMAL_VERBS] if is_animal else list(VERBS.values())
    verb = rng.choice(verbs)
    tense = rng.choice(TENSES)
    words = subject + _verb_words(verb, tense, agreement)
    takes_object = verb.frame == "obj" or (verb.frame == "obj?" and rng.random() < 0.7)
    if takes_object:
        if "person" in verb.objects and rng.random() < 0.3:
            obj = [rng.choice(list(OBJECT_PRONOUNS))]
        elif "person" in verb.objects and rng.random() < 0.2:
            obj = [rng.choice(list(NAMES))]
        else:
            obj, _ = _np(rng, _nouns_with(*verb.objects))
        words += obj
    if verb.frame == "motion" or rng.random() < 0.5:
        words += _location(rng, verb.frame == "motion", spots=verb.en in SPOT_VERBS)
    return words, tense


def _describe(rng: random.Random) -> tuple[list[str], str]:
    subject, agreement, noun = _subject(rng)
    if rng.random() < 0.3:
        words, noun = _np(rng, _nouns_with("food", "drink", "thing", "place", "show"), 0.0)
        subject, agreement = words, "3rd"
    tags = noun.tags if noun is not None else frozenset({"person"})
    adjectives = [a for a in ADJECTIVES.values() if a.predicate and a.fits & tags]
    tense = rng.choice(TENSES)
    return subject + _be_words(tense, agreement) + [rng.choice(adjectives).en], tense


def _exist(rng: random.Random) -> tuple[list[str], str]:
    tense = rng.choice(TENSES)
    there = {"present": ["is"], "past": ["was"], "future": ["will", "be"]}[tense]
    thing, noun = _np(rng, [n for n in _nouns_with("thing", "animal", "person") if "a" in n.dets])
    if thing[0] not in ("a", "an"):  # "there is" takes the indefinite article
        thing = [_article(("a",), rng, thing[1]), *thing[1:]]
    spots = "person" not in noun.tags
    return ["there", *there, *thing, *_location(rng, motion=False, spots=spots)], tense


def _display(words: list[str], first_upper: bool = True) -> str:
    text = " ".join(CAPITALISED.get(w, w) for w in words)
    return text[:1].upper() + text[1:] if first_upper else text


def random_sentence(rng: random.Random) -> str:
    """One English sentence of the grammar, as a person would write it."""
    r = rng.random()
    words, tense = _action(rng) if r < 0.7 else _describe(rng) if r < 0.85 else _exist(rng)
    phrase = _time_phrase(rng, tense)
    if phrase is None:
        return _display(words)
    if rng.random() < 0.25:  # "Yesterday, I studied math"
        return _display(phrase.split()) + ", " + _display(words, first_upper=False)
    return _display(words + phrase.split())


def split_of(english: str) -> str:
    """ "train" | "test" for a sentence, by a hash of its normalised words."""
    return _split_of(" ".join(normalize(english)))


def sample(n: int, seed: int, split: str = "train") -> list[tuple[str, str]]:
    """``n`` (English, reference Korean) pairs from ``split``, the same for the same seed."""
    return sample_split(n, seed, split, random_sentence, translate, split_of)


# --- Vocabularies -------------------------------------------------------------------------


def source_words() -> list[str]:
    """Every English word the grammar can produce (lower-case)."""
    words = {"a", "an", "the", "to", "there", "will", "be", "am", "is", "are", "was", "were"}
    words |= set(NOUNS) | set(NAMES) | set(SUBJECT_PRONOUNS) | set(OBJECT_PRONOUNS)
    words |= set(POSSESSIVES) | set(PREPOSITIONS) | set(ADJECTIVES)
    words |= {w for v in VERBS.values() for w in (v.en, v.third, v.past)}
    words |= {w for phrase in TIMES for w in phrase.split()}
    return sorted(words)


def word_classes() -> dict[str, list[str]]:
    """The English words the grammar knows, by kind: so an unknown word can be answered with
    words of its own kind (a noun for a noun) when no known word is spelt like it."""
    return {
        "noun": sorted(NOUNS),
        "name": sorted(NAMES),
        "verb": sorted({w for v in VERBS.values() for w in (v.en, v.third, v.past)}),
        "adjective": sorted(ADJECTIVES),
        "pronoun": sorted({*SUBJECT_PRONOUNS, *OBJECT_PRONOUNS, *POSSESSIVES}),
        "preposition": sorted(PREPOSITIONS),
        "time": sorted({w for phrase in TIMES for w in phrase.split()}),
    }


def guess_class(word: str) -> str:
    """A guess at an unknown English word's kind from its form alone: -ed/-ing verbs, -ly
    adverbs (the grammar has none), -ful/-ous/-ive/-al/-y adjectives, otherwise a noun."""
    lower = word.lower()
    if lower.endswith("ly"):
        return "adverb"
    if lower.endswith(("ed", "ing")):
        return "verb"
    if lower.endswith(("ful", "ous", "ive", "al", "ish", "less", "y")):
        return "adjective"
    return "noun"


def target_words() -> list[str]:
    """Every Korean token the translator can produce."""
    words = {n.ko for n in NOUNS.values()} | set(NAMES.values()) | set(SUBJECT_PRONOUNS.values())
    words |= set(OBJECT_PRONOUNS.values()) | set(POSSESSIVES.values()) | set(PARTICLE_TOKENS)
    words |= {r for r in PREPOSITIONS.values() if r} | {FUTURE, *EXIST, *PLAY_INSTRUMENT}
    words |= {f for v in VERBS.values() for f in v.ko}
    words |= {a.attributive for a in ADJECTIVES.values()}
    words |= {f for a in ADJECTIVES.values() if a.predicate for f in a.predicate}
    words |= {t for ko, _ in TIMES.values() for t in ko}
    return sorted(words)


def vocabularies() -> tuple[Vocabulary, Vocabulary]:
    """(English source, Korean target; particles may be typed glued on)."""
    source = Vocabulary(tuple(source_words()))
    target = Vocabulary(tuple(target_words()), suffixes=tuple(sorted(PARTICLE_TOKENS)))
    return source, target


def alignment() -> dict[str, frozenset[str]]:
    """Korean content token -> the English words it translates (particles have none).

    The reference for "does cross-attention look at the right word?" checks and pictures.
    """
    pairs: dict[str, set[str]] = {}

    def add(ko: str, en: Iterable[str]) -> None:
        pairs.setdefault(ko, set()).update(en)

    for noun in NOUNS.values():
        add(noun.ko, [noun.en])
    for table in (NAMES, SUBJECT_PRONOUNS, OBJECT_PRONOUNS, POSSESSIVES):
        for en, ko in table.items():
            add(ko, [en])
    for adj in ADJECTIVES.values():
        for ko in (adj.attributive, *(adj.predicate or ())):
            add(ko, [adj.en])
    for verb in VERBS.values():
        for ko in verb.ko:
            add(ko, [verb.en, verb.third, verb.past])
    for ko in PLAY_INSTRUMENT:
        add(ko, ["play", "plays", "played"])
    for phrase, (kos, _) in TIMES.items():
        for ko in kos:
            add(ko, phrase.split())
    for prep, ko in PREPOSITIONS.items():
        if ko:
            add(ko, [prep])
    for ko in EXIST:
        add(ko, ["there", "is", "was", "be"])
    add(FUTURE, ["will"])
    return {ko: frozenset(en) for ko, en in pairs.items()}
