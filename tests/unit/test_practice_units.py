"""Typed answers with units and groupings people write: read, converted or named, never
stripped blindly ("192 MiB" was rejected as "you typed 2 numbers")."""

from __future__ import annotations

import pytest

import practice
from practice.parse import AnswerError, parse_int, parse_number


def kv_exercise():
    """A kv_cache exercise whose answer is a whole number of MiB (so it can be typed exactly)."""
    for seed in range(400):
        ex = practice.make("kv_cache", seed)
        if float(ex.answer[0]).is_integer():
            return ex
    raise AssertionError("no kv_cache seed with a whole number of MiB")


def typed(ex, text: str):
    """What the page does with the text box: parse with the field's unit, then check."""
    field = ex.fields[0]
    return ex.check((parse_number(text, field.unit),))


def test_a_kv_cache_answer_with_its_unit_or_an_exact_conversion_is_right():
    ex = kv_exercise()
    mib = int(ex.answer[0])
    assert ex.fields[0].unit == "MiB"
    for text in (
        f"{mib}",
        f"{mib} MiB",
        f"{mib}MiB",
        f"{mib} mib",
        f"{mib:,} MiB",
        f"{mib / 1024} GiB",
        f"{mib * 1024} KiB",
        f"{mib * 2**20} bytes",
        f"{mib * 2**20:,} B",
    ):
        assert typed(ex, text).correct, text


def test_megabytes_for_a_mib_question_are_named_not_converted_or_stripped():
    ex = kv_exercise()
    mib = int(ex.answer[0])
    for text in (f"{mib} MB", f"{mib * 1.048576:.3f} MB", f"{mib / 1000} GB"):
        with pytest.raises(AnswerError) as err:
            typed(ex, text)
        assert err.value.key == "practice.input.unit_decimal"
        assert err.value.params["unit"] == "MiB"


def test_a_unit_where_the_answer_has_none_or_an_unknown_unit_is_said():
    with pytest.raises(AnswerError) as err:
        parse_number("0.25 MiB")
    assert err.value.key == "practice.input.unit_unexpected"
    with pytest.raises(AnswerError) as err:
        parse_number("192 kg", "MiB")
    assert err.value.key == "practice.input.unit_unknown"


@pytest.mark.parametrize(
    "text",
    [
        "33,088",
        "33,088개",
        "33 088",
        "33\u2009088",
        "33\u202f088",
        "33\u00a0088",
        "33088 parameters",
        "３３，０８８",
    ],
)
def test_a_count_with_its_grouping_or_counter_word_is_one_number(text):
    assert parse_int(text) == 33088


def test_a_count_typed_so_is_right_in_the_ffn_exercise():
    for seed in range(50):
        ex = practice.make("ffn", seed)
        if ex.form == "numbers":
            count = int(ex.answer[0])
            for text in (
                f"{count:,}개",
                f"{count:,}".replace(",", " "),
                f"{count:,}".replace(",", "\u2009"),
            ):
                assert ex.check((parse_int(text),)).correct, (seed, text)
            return
    raise AssertionError("no ffn seed asked for the parameter count")


def test_a_percent_is_a_hundredth_and_spaces_still_separate_two_numbers():
    assert parse_number("9%") == pytest.approx(0.09)
    assert parse_number("12.5 %") == pytest.approx(0.125)
    with pytest.raises(AnswerError) as err:
        parse_number("3 4")  # not "34": a space groups only thousands (three digits)
    assert err.value.key == "practice.input.one_number"
    with pytest.raises(AnswerError) as err:
        parse_int("9%")  # a count is not a share
    assert err.value.key == "practice.input.not_integer"


def test_scientific_and_full_width_answers_keep_their_unit_and_messages_quote_all_typed():
    assert parse_number("1.5×10³ MiB", "MiB") == 1500
    assert parse_number("１９２ ＭｉＢ", "MiB") == 192
    for text in ("1/0 MiB", "[x](http://e.vil)**b**www.e.vil"):
        with pytest.raises(AnswerError) as err:
            parse_number(text, "MiB")
        assert err.value.params["value"] == text
