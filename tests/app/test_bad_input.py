"""Bad input on every page that takes text: no traceback, a clear message, no NaN, labels literal.

One table of hostile or odd inputs, run through the explorer (MiniLM and en2ko), the
decoding page (en2ko and sort) and the attention concept page. For each the page must not
raise, must say so when the text was unusable or altered, must keep the model's numbers
finite, and must show tokens literally (tick labels escaped, user text only in code spans).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import pytest
import torch
from streamlit.testing.v1 import AppTest

from tests.app.helpers import APP, figures
from ui.i18n import load_catalog, translate
from ui.models import _decoding_run, get_trace, load_model
from ui.sentence import MAX_CHARS, clean_text, readable


@dataclass(frozen=True)
class Case:
    name: str
    text: str
    expect: frozenset[str] = frozenset()  # messages every page must show for this text


def case(name: str, text: str, *expect: str) -> Case:
    return Case(name, text, frozenset(expect))


EMPTY, CONTROL, MARKUP, CHARS = "empty", "control", "markup", "chars"
CASES = [
    case("empty", "", EMPTY),
    case("spaces_only", "     ", EMPTY),
    case("tabs_and_newlines_only", "\t\n \n\t", EMPTY),
    case("only_control_characters", "\x00\x01\x07\x1b", EMPTY, CONTROL),
    case("only_zero_width_characters", "\u200b\u200c\u200d\ufeff", EMPTY, CONTROL),
    case("exactly_max_chars", ("ab " * 4000)[: MAX_CHARS - 1] + "z"),
    case("over_max_chars", "word " * 2_500, CHARS),
    case("max_chars_of_hangul", "가" * MAX_CHARS),
    case("single_500_char_word", "a" * 500),
    case("single_char", "a"),
    case("emoji_in_sentence", "I love 🍕 and 🎉"),
    case("emoji_only", "🍕🍕🍕"),
    case("emoji_zwj_family", "family 👩\u200d👩\u200d👧 here", CONTROL),
    case("arabic_rtl", "مرحبا بالعالم"),
    case("hebrew_rtl", "שלום עולם"),
    case("bidi_override", "\u202eevil\u202c text", CONTROL),
    case("control_characters_inside", "a\x00b\x07c \x1b[31mred", CONTROL),
    case("zero_width_inside_words", "zero\u200bwidth\u200djoin\ufeff", CONTROL),
    case("html_bold", "<b>bold</b> text", MARKUP),
    case("script_tag", "<script>alert(1)</script>", MARKUP),
    case("img_onerror", '<img src=x onerror="alert(1)">', MARKUP),
    case("html_entities", "&lt;b&gt; &amp; &#x41;", MARKUP),
    case("iframe_tag", "<iframe src='javascript:alert(1)'></iframe> hi", MARKUP),
    case("markdown_specials", "**bold** _it_ # heading [link](http://x) > quote"),
    case("backticks", "``` code ``` and `x`"),
    case("latex", r"$x^2$ \frac{a}{b} $$ \(y\)"),
    case("markdown_table_pipes", "| a | b |\n|---|---|"),
    case("streamlit_shortcodes", ":material/home: :smile: :red[alert]"),
    case("korean", "나는 학교에서 수학을 공부한다"),
    case("mixed_scripts", "I 공부 math 数学 математика ρ"),
    case("japanese_chinese", "日本語のテキストと中文"),
    case("combining_marks_zalgo", "Z\u0334\u0327a\u0337l\u0336g\u0338o e\u0301\u0301"),
    case("math_alphanumerics", "𝐀𝐭𝐭𝐞𝐧𝐭𝐢𝐨𝐧 𝔦𝔰 𝓂𝒶𝓉𝒽"),
    case("odd_spaces", "a\u00a0b\u2003c\u3000d"),
    case("only_unknown_words", "qwzx vbnmplok zzyzx"),
    case("one_token_300_times", " ".join(["the"] * 300)),
    case("numbers", "3.14159 2,718 -42 1e10 007"),
    case("digits", "9 8 7 6 5 4 3 2 1 0"),
    case("long_number", "1234567890" * 20),
    case("punctuation_only", "?!.,;:()[]{}"),
    case("quotes_and_backslashes", "\"'\\ \\n \\x00 ''"),
    case("special_token_spoofing", "[CLS] [SEP] [MASK] <bos> <eos> <pad> <unk>", MARKUP),
    case("sql_injection", "'; DROP TABLE students; --"),
    case("path_traversal", "../../etc/passwd"),
    case("url_with_markup", "https://example.com/?q=<x>&y=1", MARKUP),
]
assert len(CASES) >= 40

# Tags our own messages use (the decoder reads <bos>): not the reader's text.
CATALOG_TAGS = set(re.findall(r"<[^>]*>", json.dumps(load_catalog("en"), ensure_ascii=False)))
MESSAGE_KEYS = {
    EMPTY: "input.empty",
    MARKUP: "input.markup_literal",
}


@dataclass(frozen=True)
class Page:
    id: str
    path: str
    model: str
    key: str  # the sentence box's session / query key


PAGES = [
    Page("explorer-minilm", "pages/explorer.py", "minilm", "text"),
    Page("explorer-en2ko", "pages/explorer.py", "en2ko", "text"),
    Page("decoding-en2ko", "pages/decoding.py", "en2ko", "text"),
    Page("decoding-sort", "pages/decoding.py", "sort", "text"),
    Page("concept-attention-minilm", "pages/concept_attention.py", "minilm", "ctext"),
]


def open_page(page: Page, text: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    at.switch_page(page.path)
    at.query_params.update({"model": page.model, page.key: text})
    return at.run()


def walk(node):
    for child in getattr(node, "children", {}).values():
        yield child
        yield from walk(child)


def tick_labels(fig: dict) -> list[str]:
    layout = fig["layout"]
    return [
        str(text)
        for name, axis in layout.items()
        if re.fullmatch(r"[xy]axis\d*", name)
        for text in axis.get("ticktext", [])
    ]


def messages(at: AppTest) -> list[str]:
    return [m.value for m in (*at.warning, *at.info, *at.error, *at.success)]


def outside_code_spans(markdown: str) -> str:
    """Markdown with every code span removed: what streamlit would interpret."""
    return re.sub(r"(`+)(?:(?!\1).)*?\1", "", markdown, flags=re.S)


def all_finite(tensors) -> bool:
    return all(bool(torch.isfinite(x).all()) for x in tensors if x is not None)


def every_map(trace):
    """Every layer's attention maps and every head's stages, read a layer or a head at a time
    as the page reads them, not stacked into [layers, heads, queries, keys] copies first
    (``trace.attention`` / ``trace.stages`` hold the same numbers, copied). "masked"
    holds -inf where the mask forbids, by design; the other stages are finite."""
    for kind in trace.kinds():
        for layer in range(trace.shape(kind)[0]):
            yield trace.attention_heads(kind, layer)
    for kind in trace.stages:  # the kinds that have stages
        layers, heads, _, _ = trace.shape(kind)
        for layer in range(layers):
            for head in range(heads):
                stages = trace.attention_stages(kind, layer, head)
                yield from (stages.scores, stages.scaled, stages.weights)


def model_numbers_are_finite(page: Page, text: str) -> bool:
    """The numbers behind the page, from the same caches the page filled."""
    if page.path.endswith("explorer.py"):
        trace = get_trace(load_model(page.model, "auto"), text)
        norms = [x for stats in trace.norms.values() for x in stats.values()]
        predictions = trace.predictions
        return all_finite(every_map(trace)) and all_finite(
            [
                *norms,
                *trace.residual_norms.values(),
                None if predictions is None else predictions.top_probs,
            ]
        )
    if page.path.endswith("decoding.py"):
        steps = _decoding_run(page.model, "auto", text, (("strategy", "greedy"),)).all()
        return all(
            all_finite([*s.attention.values(), s.probs, s.logits]) and s.probs.sum() > 0.99
            for s in steps
        )
    from ui.concepts import cached_walkthrough

    wt = cached_walkthrough(page.model, "auto", text, 0)
    return all_finite([wt.q, wt.k, wt.v, wt.weights, wt.heads, wt.out, wt.model_weights])


@pytest.fixture(
    scope="module",
    # One xdist group per page, not one for the module (tests/conftest.py): the five pages'
    # 230 reruns may share the two workers, and the browser tests' longer group is handed
    # out first instead of waiting behind this one on its worker.
    params=[pytest.param(p, marks=pytest.mark.xdist_group(f"bad-input-{p.id}")) for p in PAGES],
    ids=[p.id for p in PAGES],
)
def session(request) -> tuple[Page, AppTest]:
    """One open page per model, as a student keeps it: each case is typed into the same box
    (a rerun, not a fresh page), so leftovers of an earlier bad input are tested too."""
    page = request.param
    return page, open_page(page, "")


@pytest.mark.parametrize("bad", CASES, ids=[c.name for c in CASES])
def test_bad_input_gets_a_message_never_a_traceback_or_nan(session, bad):
    page, at = session
    at.text_input(key=page.key).set_value(bad.text).run()
    assert not at.exception, at.exception[0].value if at.exception else ""
    assert not at.error, [e.value for e in at.error]
    shown = messages(at)

    # What was done to the text is said, in the reader's words.
    cleaned, notes = clean_text(bad.text)
    assert (CONTROL in bad.expect) == ("control" in notes)
    assert (CHARS in bad.expect) == ("chars" in notes)
    if CONTROL in bad.expect:
        assert translate("input.control_removed", "en", n=notes["control"]) in shown
    if CHARS in bad.expect:
        assert translate("input.too_many_chars", "en", n=notes["chars"], limit=MAX_CHARS) in shown
    for flag, key in MESSAGE_KEYS.items():
        assert (translate(key, "en") in shown) == (flag in bad.expect), key
    if EMPTY in bad.expect:
        assert not figures(at)
        return

    # What the tokenizer did is said too: cut, words it does not know, nothing it can read.
    lm = load_model(page.model, "auto")
    enc = lm.encode(cleaned)
    if enc.truncated:
        assert translate("input.truncated", "en", limit=len(enc.ids)) in shown
    unknown_prefix = translate("input.unknown", "en", n=len(dict.fromkeys(enc.unknown)))
    assert any(m.startswith(unknown_prefix) for m in shown) == bool(enc.unknown)
    if not readable(lm, enc):
        assert translate("input.nothing_readable", "en") in shown
        assert not figures(at)
        return

    assert model_numbers_are_finite(page, cleaned)

    # Tokens are labels, never markup: plotly reads tags, so every '<' is escaped ...
    for fig in figures(at):
        for label in tick_labels(fig):
            assert "<" not in label and ">" not in label, label
    # ... and markdown shows user text only inside code spans.
    for tag in set(re.findall(r"<[^>]*>", cleaned)) - CATALOG_TAGS:
        for md in (*at.markdown, *at.warning, *at.info):
            assert tag not in outside_code_spans(md.value), md.value


def test_text_the_toy_vocabulary_cannot_read_is_refused_with_a_message():
    """en2ko drops emoji and punctuation: the page says so instead of translating nothing."""
    at = open_page(PAGES[1], "🍕 ?! 🎉")
    assert not at.exception
    assert translate("input.nothing_readable", "en") in messages(at)
    assert not figures(at)


def test_a_bad_case_really_reaches_the_model():
    """The table is not only empty text: the markup case draws a heatmap of escaped tags."""
    at = open_page(PAGES[0], "<b>bold</b> text")
    ticks = tick_labels(figures(at)[0])
    assert "&lt;" in ticks and "b" in ticks


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_a_far_unknown_word_gets_words_of_its_kind_and_the_vocabulary_size(lang):
    from tests.app.helpers import open_page

    at = open_page("explorer", model="en2ko", text="the quokkas study math", lang=lang)
    assert not at.exception
    shown = " ".join(w.value for w in at.warning)
    assert translate("input.kind.noun", lang) in shown
    assert "works" not in shown  # not the spelling-only guess "did you mean works, cooks?"
    assert translate("input.vocabulary", lang, n=269, sample="")[:20] in shown
