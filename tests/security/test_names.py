"""Names a person can see: a name needs one visible grapheme, judged by a rule (Unicode
categories and Default_Ignorable_Code_Point), not a list. Fillers, blanks and joiners are
trimmed at the start and the end, refused alone, and never tell two names apart; real
names in Korean and Arabic, emoji sequences and combining marks are all kept."""

from __future__ import annotations

import unicodedata

import pytest

from classroom import BadNameError, Classroom
from classroom.names import (
    DEFAULT_IGNORABLE,
    blank,
    clean_name,
    default_ignorable,
    same_name,
    shows_ink,
)

# The code points the issue names, and their kin: each draws nothing.
INVISIBLE = {
    "\u3164": "HANGUL FILLER",
    "\u2800": "BRAILLE PATTERN BLANK",
    "\u200d": "ZERO WIDTH JOINER",
    "\u115f": "HANGUL CHOSEONG FILLER",
    "\u1160": "HANGUL JUNGSEONG FILLER",
    "\uffa0": "HALFWIDTH HANGUL FILLER",
    "\u200c": "ZERO WIDTH NON-JOINER",
}

VISIBLE = {
    "김민수": "Korean syllables",
    "\u1100\u1161\u11a8": "Korean conjoining jamo (NFC makes 각)",
    "مرحبا": "Arabic",
    "محمد\u200cرضا": "Persian with a non-joiner inside",
    "👩\u200d💻": "emoji ZWJ sequence (technologist)",
    "👨\u200d👩\u200d👧": "emoji ZWJ sequence (family)",
    "❤\ufe0f": "emoji with a variation selector",
    "Zoe\u0308": "a combining diaeresis (NFC makes ë)",
    "क्षि": "Devanagari with a virama and a vowel sign",
    "a\u0301\u0323": "two combining marks on one letter",
}


@pytest.mark.parametrize("c", INVISIBLE, ids=INVISIBLE.values())
def test_an_invisible_code_point_alone_is_refused(c):
    for name in (c, c * 3, f" {c} "):
        with pytest.raises(BadNameError) as err:
            clean_name(name)
        assert err.value.reason == "invisible", repr(name)


@pytest.mark.parametrize("c", INVISIBLE, ids=INVISIBLE.values())
def test_an_invisible_code_point_at_the_start_or_the_end_is_no_part_of_the_name(c):
    assert clean_name(f"{c}Ada") == "Ada"
    assert clean_name(f"Ada{c}") == "Ada"
    assert clean_name(f"{c} 민수 {c}{c}") == "민수"
    assert same_name(f"Ada{c}", "Ada") and same_name(f"{c}Ada", "ada")


@pytest.mark.parametrize("c", INVISIBLE, ids=INVISIBLE.values())
def test_an_invisible_code_point_inside_never_tells_two_names_apart(c):
    try:
        inside = clean_name(f"A{c}da")
    except BadNameError:
        return  # refused is as good: it cannot be a second "Ada"
    assert same_name(inside, "Ada") or same_name(inside, "A da")


@pytest.mark.parametrize("name", VISIBLE, ids=VISIBLE.values())
def test_real_names_in_every_script_emoji_and_combining_marks_are_kept(name):
    kept = clean_name(name)
    assert kept == unicodedata.normalize("NFC", name)
    assert same_name(kept, name)


def test_format_characters_that_hide_or_reorder_text_are_refused_anywhere():
    for hidden in ("\u202e", "\u200b", "\u2066", "\ufeff", "\u00ad", "\u2061"):
        with pytest.raises(BadNameError) as err:
            clean_name(f"Ad{hidden}a")
        assert err.value.reason == "invisible", hex(ord(hidden))


def test_the_rule_is_categories_and_default_ignorables_not_a_list():
    assert all(a <= b for a, b in DEFAULT_IGNORABLE)
    assert all(b < c for (_, b), (c, _) in zip(DEFAULT_IGNORABLE, DEFAULT_IGNORABLE[1:]))
    for c in "\u3164\u115f\u1160\uffa0\u200d\u200c\ufe0f\U000e0041\u180e\u034f":
        assert default_ignorable(c), hex(ord(c))
    for c in "A가ㄱ\u1100٣!🙂\u0301\u2801":
        assert not default_ignorable(c), hex(ord(c))
    assert not shows_ink("\u2800") and shows_ink("\u2801"), "a Braille cell shows its dots"
    assert not shows_ink("\u0301") and not blank("\u0301"), "a mark rides on its letter"
    # every letter, number, punctuation or symbol that is not default-ignorable shows ink
    for cp in range(0x20, 0x3000):
        c = chr(cp)
        cat = unicodedata.category(c)
        if cat[0] in "LNPS" and not default_ignorable(c) and cp != 0x2800:
            assert shows_ink(c), hex(cp)


def test_a_name_with_a_trailing_joiner_is_the_same_student_in_the_store(tmp_path):
    room = Classroom(f"sqlite:///{tmp_path / 'names.sqlite'}")
    code, teacher_key = room.create_class("Names", n_items=1)
    room.join(code, "Ada")
    for twin in ("Ada\u200d", "\u3164Ada", "ADA\u2800", "A\u200dda"):
        assert room.name_taken(code, twin), repr(twin)
    key = room.join(code, "Ada\u200d")
    assert room.student(key).name == "Ada", "stored as it shows"
    assert not room.name_taken(code, "Adam")


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_join_form_asks_is_this_you_for_a_joiner_twin_and_refuses_a_filler(
    lang, tmp_path, monkeypatch
):
    from streamlit.testing.v1 import AppTest

    from tests.app import helpers
    from ui.classroom import _room
    from ui.i18n import translate

    monkeypatch.setenv("ATTENTION_LAB_DATABASE_URL", f"sqlite:///{tmp_path / 'form.sqlite'}")
    _room.clear()
    try:
        room = Classroom()
        code, _ = room.create_class("Names", n_items=1)
        room.join(code, "Ada")

        join_label = translate("classroom.join.button", lang)

        def join(at: AppTest, name: str) -> AppTest:
            at.text_input(key="join_name").set_value(name)
            [button] = [b for b in at.button if b.label == join_label]
            return button.click().run()

        def join_link() -> AppTest:
            return helpers.open_page("classroom", timeout=180, lang=lang, **{"class": code})

        twin = join(join_link(), "Ada\u200d")
        assert not twin.exception
        assert "student" not in twin.query_params, "no second Ada without asking"
        assert translate("classroom.join.taken", lang, name="Ada") in [
            w.value for w in twin.warning
        ]
        # One page, as a student who tries one filler after another in its form.
        refused = join_link()
        for filler in ("\u3164", "\u2800", "\u200d", "\u115f\u1160", "\uffa0"):
            refused = join(refused, filler)
            assert not refused.exception
            assert "student" not in refused.query_params
            said = translate("classroom.join.bad_name.invisible", lang, limit=40)
            assert said in [w.value for w in refused.warning], repr(filler)
    finally:
        _room.clear()
