"""The practice pages through AppTest: every kind answered wrong then right in both languages,
bad input with a clear message, class sets by link, and find the bug (the teacher's view
is the class page's: tests/app/test_classroom.py)."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

import practice
from practice import bugs
from tests.app import helpers
from tests.app.helpers import ok
from ui.i18n import translate
from ui.practice import md_literal

SEED = 5


def open_page(page: str = "practice", **query: str) -> AppTest:
    return helpers.open_page(page, timeout=180, **query)


def esc(value):
    if isinstance(value, str):
        return value.replace("\\", "\\\\").replace("<", "\\<").replace(">", "\\>")
    return value


def said(key: str, lang: str, /, **params) -> str:
    """A message as the page shows it (token parameters escaped for markdown)."""
    return translate(key, lang, **{k: esc(v) for k, v in params.items()})


def enter(at: AppTest, ex, answer) -> AppTest:
    """Type or pick ``answer`` in ``ex``'s form and press Check."""
    if ex.form == "numbers":
        for f, value in zip(ex.fields, answer):
            text = ", ".join(repr(v) for v in value) if isinstance(value, tuple) else repr(value)
            if f.integer:
                text = str(int(value))
            at.text_input(key=f"answer_{f.name}").set_value(text)
    elif ex.form == "shape":
        at.text_input(key="answer_shape").set_value(", ".join(str(v) for v in answer))
    elif ex.form == "tokens":
        at.text_input(key="answer_tokens").set_value(" ".join(answer))
    elif ex.form == "choice":
        at.radio(key="answer_choice").set_value(answer)
    elif ex.form == "cells":
        for i, j in enumerate(answer):
            at.segmented_control(key=f"answer_cell_{i}").set_value(j)
    return press_check(at)


def press_check(at: AppTest) -> AppTest:
    [button] = [b for b in at.button if b.proto.is_form_submitter]
    return button.click().run()


def current(kind: str) -> practice.Exercise:
    return practice.make(*practice.item(SEED, kind, 0))


def seed_opening_on(kind: str) -> int:
    """A set whose first exercise is ``kind`` (a topic of the same name holds more kinds)."""
    return next(s for s in range(SEED, SEED + 100) if practice.item(s, kind, 0)[0] == kind)


@pytest.mark.parametrize("lang", ["en", "ko"])
@pytest.mark.parametrize("kind", practice.KINDS)
def test_every_kind_answered_wrong_then_right(kind, lang):
    seed = seed_opening_on(kind)
    at = open_page(seed=str(seed), topic=kind, lang=lang)
    ok(at)
    ex = practice.make(*practice.item(seed, kind, 0))
    title = translate(
        "practice.exercise_title",
        lang,
        n=1,
        kind=translate(f"practice.kind.{kind}", lang),
        topic=translate(f"practice.topic.{ex.topic}", lang),
    )
    assert title in [s.value for s in at.subheader]
    wrong = ex.wrong[0]
    at = enter(at, ex, wrong.answer)
    assert not at.exception
    params = dict(wrong.params)
    if ex.form == "cells":
        params["percent"] = ex.check(wrong.answer).params["percent"]
    # "Not right" in words first, then the specific hint (not colour alone)
    not_right = translate("practice.not_right", lang)
    assert [e.value for e in at.error] == [f"**{not_right}** {said(wrong.key, lang, **params)}"]
    assert at.metric[0].value == "0 / 1"
    at = enter(at, ex, ex.answer)
    ok(at)
    fb = ex.check(ex.answer)
    assert [s.value for s in at.success] == [said(fb.key, lang, **fb.params)]
    assert at.metric[0].value == "0 / 1"  # only the first try counts
    solution = " ".join(m.value for m in at.markdown)
    first = ex.solution[0]
    assert said(first.key, lang, **first.params) in solution


NUMBER_CASES = [
    ("", "practice.input.empty", {}),
    ("abc", "practice.input.not_a_number", {"value": "abc"}),
    ("nan", "practice.input.not_finite", {"value": "nan"}),
    ("inf", "practice.input.not_finite", {"value": "inf"}),
    ("1e13", "practice.input.too_large", {"value": "1e13"}),
    ("1e999", "practice.input.too_large", {"value": "1e999"}),
    ("9" * 400, "practice.input.too_large", {"value": "9" * 39 + "…"}),
    ("9.76×10⁻⁴/0", "practice.input.divide_by_zero", {"value": "9.76×10⁻⁴/0"}),
    ("1/0", "practice.input.divide_by_zero", {"value": "1/0"}),
]


@pytest.mark.parametrize("lang", ["en", "ko"])
@pytest.mark.parametrize("text,key,params", NUMBER_CASES)
def test_bad_numbers_get_a_clear_message(text, key, params, lang):
    at = open_page(seed=str(SEED), topic="noam", lang=lang)
    at.text_input(key="answer_lr").set_value(text)
    at.text_input(key="answer_peak").set_value("4000")
    at = press_check(at)
    assert not at.exception and not at.error
    assert [w.value for w in at.warning] == [
        translate(key, lang, **{k: md_literal(v) for k, v in params.items()})
        if params
        else translate(key, lang)
    ]
    assert at.metric[0].value == "0 / 0"  # unreadable answers are not scored


def test_typed_markdown_is_echoed_as_typed_never_as_a_link():
    typed = "[x](http://e.vil)**b**www.e.vil"  # (under the 40 characters a message quotes)
    at = open_page(seed=str(SEED), topic="noam")
    at.text_input(key="answer_lr").set_value(typed)
    at.text_input(key="answer_peak").set_value("4000")
    at = press_check(at)
    assert not at.exception
    [warning] = [w.value for w in at.warning]
    # quoted as inline code, where Markdown (and GitHub-style autolinking) is off
    assert f"`{typed}`" in warning
    assert warning == translate("practice.input.not_a_number", "en", value=f"`{typed}`")
    assert at.text_input(key="answer_lr").value == typed  # nothing the user typed is lost


def test_grouped_and_full_width_numbers_are_read_as_one_answer():
    ex = current("noam")
    lr, peak = ex.answer
    at = open_page(seed=str(SEED), topic="noam")
    at.text_input(key="answer_lr").set_value(f"{lr / 10**-4:.3f}×10⁻⁴")
    at.text_input(key="answer_peak").set_value(f"{int(peak):,}")
    at = press_check(at)
    assert not at.warning and [s.value for s in at.success]


def test_the_answer_key_never_prints_minus_zero():
    # set 8 opens on pe_permutation with an output entry of -9e-06; the teacher's printable
    # key (the class dashboard) prints answers with ui.exercise.answer_text
    from ui.exercise import answer_text

    kind, sub = practice.item(8, practice.MIXED, 0)
    assert kind == "pe_permutation" and any(f"{x:.3f}" == "-0.000" for x in current_answer(8))
    printed = answer_text(practice.make(kind, sub))
    assert "-0.000" not in printed and "0.000" in printed


def current_answer(seed: int):
    return practice.make(*practice.item(seed, practice.MIXED, 0)).answer[0]


def test_bad_lists_shapes_and_missing_picks_get_a_clear_message():
    at = open_page(seed=str(SEED), topic="sdpa_row")
    n = practice.item(SEED, "sdpa_row", 0)
    ex = practice.make(*n)
    at.text_input(key="answer_weights").set_value("0.5")
    at = press_check(at)
    expected = translate("practice.input.count", "en", expected=ex.fields[0].size, got=1)
    assert [w.value for w in at.warning] == [expected]
    at = open_page(seed=str(SEED), topic="mha_shapes")
    at.text_input(key="answer_shape").set_value("2, y, 4")
    at = press_check(at)
    assert [w.value for w in at.warning] == [
        translate("practice.input.not_a_number", "en", value=md_literal("y"))
    ]
    at = open_page(seed=str(SEED), topic="which_mask", lang="ko")
    at = press_check(at)
    assert [w.value for w in at.warning] == [translate("practice.input.pick_one", "ko")]
    at = open_page(seed=str(SEED), topic="cross_attention")
    at = press_check(at)
    assert [w.value for w in at.warning] == [translate("practice.input.pick_cells", "en")]
    assert not at.exception


@pytest.mark.parametrize("bad", ["abc", "-3", "99999999999", "1.5"])
def test_a_bad_seed_in_the_link_gets_a_message_and_a_fresh_set(bad):
    at = open_page(seed=bad)
    assert not at.exception
    assert [w.value for w in at.warning] == [
        translate("practice.bad_seed", "en", value=md_literal(bad), max=practice.MAX_SEED)
    ]
    assert at.query_params["seed"] != bad  # a fresh seed took its place in the URL
    assert at.subheader


def test_a_class_set_link_gives_the_same_exercises_and_try_another_moves_on():
    first = open_page(seed="77")
    second = open_page(seed="77")
    assert first.subheader[0].value == second.subheader[0].value
    kind, _ = practice.item(77, practice.MIXED, 0)
    assert translate(f"practice.kind.{kind}", "en") in first.subheader[0].value
    at = first.button(key="another").click().run()
    ok(at)
    kind2, _ = practice.item(77, practice.MIXED, 1)
    assert translate(f"practice.kind.{kind2}", "en") in at.subheader[0].value
    assert at.metric[2].value == "2"
    assert at.query_params["seed"] == "77"


def test_a_bad_topic_in_the_link_falls_back_to_mixed():
    at = open_page(seed="3", topic="astrology")
    assert not at.exception
    assert [w.value for w in at.warning] == [
        translate("practice.bad_topic", "en", value=md_literal("astrology"))
    ]
    assert at.selectbox(key="ptopic").value == practice.MIXED


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_find_the_bug_shows_both_runs_and_checks_the_pick(lang):
    at = open_page("find_the_bug", seed="4", lang=lang)
    ok(at)
    assert at.title[0].value == translate("bugs.title", lang)
    assert len(at.get("plotly_chart")) == 2
    case = bugs.gallery(4)[0]
    wrong = next(b for b in bugs.BUGS if b != case.bug)
    at.radio(key="bug_choice_0").set_value(wrong)
    at = press_check(at)
    assert [e.value for e in at.error] == [translate(f"practice.bugs.not.{wrong}", lang)]
    at.radio(key="bug_choice_0").set_value(case.bug)
    at = press_check(at)
    assert not at.exception
    assert [s.value for s in at.success] == [translate(f"practice.bugs.found.{case.bug}", lang)]
    assert [c.value for c in at.code] == list(bugs.FIXES[case.bug])
    at.segmented_control(key="bug_case").set_value(2).run()
    ok(at)
    assert len(at.get("plotly_chart")) == 2


def test_find_the_bug_opens_every_case_on_the_same_attention():
    at = open_page("find_the_bug", seed="4")
    cases = bugs.gallery(4)
    shown = []
    for number in range(len(cases)):
        at.segmented_control(key="bug_case").set_value(number).run()
        ok(at)
        shown.append(at.segmented_control(key=f"bug_kind_{number}").value)
    assert shown == [bugs.NEUTRAL_KIND] * len(cases)
    # the bugs differ in what gives them away, so a bug-dependent opening would show here
    assert len({bugs.TELLING_KIND[c.bug] for c in cases}) > 1


def test_find_the_bug_without_a_pick_says_so():
    at = press_check(open_page("find_the_bug", seed="4"))
    assert [w.value for w in at.warning] == [translate("practice.input.pick_one", "en")]


@pytest.mark.parametrize(
    "page,topic",
    [
        ("concept_attention", "attention"),
        ("concept_positional", "positional"),
        ("concept_layernorm", "layernorm"),
        ("concept_warmup", "warmup"),
        ("concept_family", "family"),
    ],
)
def test_concept_pages_end_with_a_check_yourself_link(page, topic):
    at = open_page(page, model="minilm")
    assert not at.exception
    links = [
        p
        for p in at.get("page_link")
        if p.proto.label == translate("practice.check_yourself", "en")
    ]
    assert links and f"topic={topic}" in links[-1].proto.query_string
