"""The exercise engine: every kind, 50 seeds each, checked against numbers recomputed here.

The recomputations are written out by hand (plain Python / numpy), not by calling the
functions the engine uses, so a slip in the engine cannot agree with itself.
"""

from __future__ import annotations

import math
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import practice
from practice.core import CELLS_PASS, overlap
from practice.parse import AnswerError, parse_int, parse_number, parse_numbers, parse_shape

ROOT = Path(__file__).resolve().parents[2]
SEEDS = range(50)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Small tensors: one thread is faster, and kinder to a shared machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def exercises(kind):
    return [practice.make(kind, seed) for seed in SEEDS]


def same(a, b) -> bool:
    return (a.data, a.answer, a.solution, a.wrong, a.fields, a.options) == (
        b.data,
        b.answer,
        b.solution,
        b.wrong,
        b.fields,
        b.options,
    )


def test_at_least_seventeen_kinds_over_every_concept_topic():
    assert len(practice.KINDS) >= 17
    assert {"attention", "positional", "layernorm", "warmup", "family"} <= set(practice.TOPICS)
    assert {practice.topic_of(k) for k in practice.KINDS} == set(practice.TOPICS)


@pytest.mark.parametrize("kind", practice.KINDS)
def test_every_kind_is_deterministic_accepts_its_answer_and_names_each_mistake(kind):
    for seed in SEEDS:
        ex = practice.make(kind, seed)
        again = practice.make(kind, seed)
        assert same(ex, again), (kind, seed)
        assert ex.kind == kind and ex.seed == seed and ex.topic == practice.topic_of(kind)
        assert ex.check(ex.answer).correct, (kind, seed)
        assert ex.solution and ex.wrong, (kind, seed)
        for wrong in ex.wrong:
            feedback = ex.check(wrong.answer)
            assert not feedback.correct, (kind, seed, wrong)
            assert feedback.key == wrong.key, (kind, seed, wrong, feedback)
            assert feedback.key.startswith(f"practice.{kind}.hint."), feedback.key
    assert len({repr(practice.make(kind, s).data) for s in SEEDS}) > 5  # seeds really vary


@pytest.mark.parametrize("kind", practice.KINDS)
def test_making_an_exercise_leaves_the_global_random_state_alone(kind):
    py, th = random.getstate(), torch.random.get_rng_state()
    practice.make(kind, 123)
    assert random.getstate() == py
    assert torch.equal(torch.random.get_rng_state(), th)


def test_unknown_kind_and_bad_seeds_are_refused():
    with pytest.raises(ValueError, match="unknown kind"):
        practice.make("nope", 1)
    for seed in (-1, 10**10, 1.5, "3", True):
        with pytest.raises(ValueError, match="seed"):
            practice.make("sdpa_row", seed)


# --- independent recomputations ---------------------------------------------------------------


def softmax(xs):
    m = max(xs)
    e = [math.exp(x - m) for x in xs]
    return [x / sum(e) for x in e]


def test_sdpa_row_weights_by_hand():
    for ex in exercises("sdpa_row"):
        q, keys, allowed, d_k = (ex.data[k] for k in ("q", "keys", "allowed", "d_k"))
        scores = [sum(a * b for a, b in zip(q, key)) / math.sqrt(d_k) for key in keys]
        kept = softmax([s for s, ok in zip(scores, allowed) if ok])
        it = iter(kept)
        expected = [next(it) if ok else 0.0 for ok in allowed]
        assert np.allclose(ex.answer[0], expected, atol=1e-9)
        assert not all(allowed) and sum(allowed) >= 2
        # the forgotten √d_k is rejected with its own hint
        raw = softmax([s * math.sqrt(d_k) for s, ok in zip(scores, allowed) if ok])
        it = iter(raw)
        fb = ex.check([next(it) if ok else 0.0 for ok in allowed])
        assert fb.key == "practice.sdpa_row.hint.no_sqrt"
        # within the tolerance of 0.01 is right; 0.02 off is not
        assert ex.check([w + 0.009 * (i % 2) for i, w in enumerate(expected)]).correct
        assert not ex.check([expected[0] + 0.02, *expected[1:]]).correct


def test_qk_variance_is_dk_times_the_variances():
    for ex in exercises("qk_variance"):
        d_k, s2 = ex.data["d_k"], ex.data["s2"]
        assert ex.answer == (d_k * s2 * s2, s2 * s2)
        fb = ex.check((d_k * s2 * s2, s2 * s2 / d_k))
        assert fb.key == "practice.qk_variance.hint.divided_by_dk"
        if s2 != 1:  # s² counted once instead of twice (s² · s²)
            assert ex.check((d_k * s2, s2)).key == "practice.qk_variance.hint.s2_once"


def test_mha_shapes_by_the_rules():
    for ex in exercises("mha_shapes"):
        b, h, lq, lk, d_model = (ex.data[k] for k in ("b", "h", "lq", "lk", "d_model"))
        d_k = d_model // h
        expected = {
            "q_heads": (b, h, lq, d_k),
            "k_heads": (b, h, lk, d_k),
            "weights": (b, h, lq, lk),
            "out": (b, lq, d_model),
        }[ex.data["target"]]
        assert tuple(ex.answer) == expected


def test_which_mask_heatmap_has_exactly_the_zeros_of_its_mask():
    for ex in exercises("which_mask"):
        w = np.array(ex.data["weights"])
        tokens = ex.data["tokens"]
        n = len(tokens)
        real = np.array([t != "<pad>" for t in tokens])
        causal = np.tril(np.ones((n, n), dtype=bool))
        padding = real[None, :] & real[:, None]
        allowed = {
            "none": np.ones((n, n), dtype=bool),
            "padding": padding,
            "causal": causal,
            "both": padding & causal,
        }[ex.answer]
        assert (w[~allowed] == 0).all() and (w[allowed] > 0).all()
        # the heatmap prints two decimals: no allowed cell may read 0.00
        assert all(f"{x:.2f}" != "0.00" for x in w[allowed])
        rows = w.sum(1)
        assert np.allclose(rows[allowed.any(1)], 1.0, atol=1e-5)


def test_shift_right_is_bos_then_target_and_target_then_eos():
    for ex in exercises("shift_right"):
        y = ex.data["target"]
        expected = ["<bos>", *y] if ex.data["asked"] == "inputs" else [*y, "<eos>"]
        assert ex.answer == expected
        assert ex.check(" ".join(expected).upper()).correct  # case and spacing do not matter


def pe_by_hand(p: int, d: int) -> list[float]:
    out = []
    for i in range(d):
        angle = p / 10000 ** ((i - i % 2) / d)
        out.append(math.sin(angle) if i % 2 == 0 else math.cos(angle))
    return out


def test_pe_dot_picks_the_largest_dot_product_by_hand():
    # 300 seeds: the answer is the computed largest, never assumed to be the smallest offset,
    # and each wrong pick's hint says truly whether it was closer or farther than the answer.
    not_smallest = 0
    for ex in (practice.make("pe_dot", seed) for seed in range(300)):
        d = ex.data["d_model"]
        dots = [
            sum(a * b for a, b in zip(pe_by_hand(p, d), pe_by_hand(q, d)))
            for p, q in ex.data["pairs"]
        ]
        assert np.allclose(dots, ex.data["dots"], atol=1e-5)
        assert ex.answer == str(int(np.argmax(dots)))
        offsets = [q - p for p, q in ex.data["pairs"]]
        best = offsets[int(ex.answer)]
        not_smallest += best != min(offsets)
        for i, off in enumerate(offsets):
            if str(i) != ex.answer:
                name = ex.check(str(i)).key.rsplit(".", 1)[-1]
                assert name == ("closer_is_more_similar" if off > best else "not_monotone")
    assert not_smallest > 0  # why the prompt asks to compute all three


def test_pe_permutation_row_by_hand():
    for ex in exercises("pe_permutation"):
        x = np.array(ex.data["x"])[ex.data["perm"]]
        wq, wk, wv = (np.array(ex.data[k]) for k in ("w_q", "w_k", "w_v"))
        q, k, v = x @ wq, x @ wk, x @ wv
        s = q @ k.T / math.sqrt(x.shape[1])
        p = np.exp(s - s.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        out = p @ v
        assert np.allclose(ex.answer[0], out[ex.data["j"]], atol=1e-9)
        # and it is the original output of the same word: attention without positions
        original = np.array(ex.data["out_a"])
        assert np.allclose(out, original[ex.data["perm"]], atol=1e-9)


def test_layernorm_by_hand_with_the_biased_variance():
    for ex in exercises("layernorm"):
        x = np.array(ex.data["x"], dtype=float)
        mu, var = x.mean(), ((x - x.mean()) ** 2).sum() / len(x)
        expected = ex.data["gamma"] * (x - mu) / math.sqrt(var + 1e-5) + ex.data["beta"]
        assert np.allclose(ex.answer[0], expected, atol=1e-9)
        unbiased = ex.data["gamma"] * (x - mu) / math.sqrt(var * len(x) / (len(x) - 1) + 1e-5)
        fb = ex.check(list(unbiased + ex.data["beta"]))
        assert fb.key == "practice.layernorm.hint.unbiased"


def test_noam_by_the_formula_and_its_peak_at_warmup():
    for ex in exercises("noam"):
        d, w, s = ex.data["d_model"], ex.data["warmup"], ex.data["step"]
        lr = d**-0.5 * min(s**-0.5, s * w**-1.5)
        assert math.isclose(ex.answer[0], lr, rel_tol=1e-12)
        assert ex.answer[1] == w
        assert ex.check((lr * 1.005, w)).correct  # within 1 %
        assert ex.check((lr, w + 1)).key == "practice.noam.hint.peak_off_by_one"
        two_digits = float(f"{lr:.1e}")  # two significant figures
        fb = ex.check((two_digits, w))
        if abs(two_digits - lr) <= 0.01 * lr:
            assert fb.correct
        else:  # rounded too far: asked for a digit more, never "compute both branches"
            assert fb.key == "practice.noam.hint.precision"
        if abs(two_digits - lr) > 0.01 * lr:  # a wrong peak as well: the rate's digit first
            assert ex.check((two_digits, w + 7)).key == "practice.noam.hint.precision"
        assert ex.check((lr, w + 7)).key == "practice.noam.hint.peak"  # the rate was right
        assert ex.check((lr * 3, w)).key == "practice.noam.generic"
        lr_step = ex.solution[1]
        assert lr_step.params["min"] == f"{min(s**-0.5, s * w**-1.5):.3e}"


def test_attention_kind_matches_the_picture():
    for ex in exercises("attention_kind"):
        queries, keys = ex.data["queries"], ex.data["keys"]
        w = np.array(ex.data["weights"])
        upper_zero = bool(np.allclose(w[np.triu_indices(len(queries), 1)], 0))
        if ex.answer == "cross":
            assert queries[0] == "<bos>" and keys[-1] == "<eos>"
        elif ex.answer == "decoder":
            assert queries == keys and queries[0] == "<bos>" and upper_zero
        else:
            assert queries == keys and keys[-1] == "<eos>"


def test_family_of_the_labs_own_tasks_comes_from_the_tasks():
    from model.tasks import en2ko, reverse, sort

    own = {"lab_reverse": reverse.KIND, "lab_sort": sort.KIND, "lab_en2ko": en2ko.KIND}
    for ex in exercises("family_task"):
        if ex.data["task"] in own:
            assert ex.answer == own[ex.data["task"]]
        assert ex.answer in ex.options


def test_cross_attention_cells_are_the_rows_argmax_of_a_fresh_trace():
    from model import load

    lm = load("reverse", device="cpu")
    for i, ex in enumerate(exercises("cross_attention")):
        w = np.array(ex.data["weights"])
        assert list(ex.answer) == [int(j) for j in w.argmax(1)]
        if i < 5:  # a fresh model, traced again, agrees
            fresh = lm.trace(ex.data["source"]).attention["cross"][-1].mean(0).numpy()
            assert np.allclose(fresh, w, atol=1e-6)
        picks = list(ex.answer)
        picks[0] = None  # one unpicked row of several still passes, by overlap
        assert ex.check(picks).correct == (overlap(picks, ex.answer) >= CELLS_PASS)


# --- bad answers never raise ------------------------------------------------------------------


@pytest.mark.parametrize("kind", practice.KINDS)
def test_malformed_answers_get_feedback_not_an_exception(kind):
    ex = practice.make(kind, 3)
    for bad in (None, "", "abc", [], [float("nan")] * 5, [[1, 2], [3]], 12345, object()):
        fb = ex.check(bad)
        assert not fb.correct and fb.key.startswith("practice.")


# --- class sets -------------------------------------------------------------------------------


def test_a_class_set_is_the_same_for_everyone_and_a_mixed_round_has_every_kind():
    first = [practice.item(42, practice.MIXED, i) for i in range(30)]
    assert first == [practice.item(42, practice.MIXED, i) for i in range(30)]
    assert {k for k, _ in first[: len(practice.KINDS)]} == set(practice.KINDS)
    assert first != [practice.item(43, practice.MIXED, i) for i in range(30)]
    for topic in practice.TOPICS:
        kinds = {practice.item(7, topic, i)[0] for i in range(10)}
        assert kinds == set(practice.kinds_for(topic))
    with pytest.raises(ValueError, match="unknown topic"):
        practice.kinds_for("astrology")


# --- typed answers ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,key",
    [
        ("", "practice.input.empty"),
        ("   ", "practice.input.empty"),
        ("abc", "practice.input.not_a_number"),
        ("nan", "practice.input.not_finite"),
        ("inf", "practice.input.not_finite"),
        ("-Infinity", "practice.input.not_finite"),
        ("1e400", "practice.input.too_large"),
        ("9" * 400, "practice.input.too_large"),
        ("1e13", "practice.input.too_large"),
        ("1/0", "practice.input.divide_by_zero"),
        ("1 2", "practice.input.one_number"),
        ("9" * 600, "practice.input.too_long"),
    ],
)
def test_unreadable_numbers_name_their_problem(text, key):
    with pytest.raises(AnswerError) as err:
        parse_number(text)
    assert err.value.key == key


def test_readable_numbers_lists_and_shapes():
    assert parse_number(" 0.25 ") == 0.25
    assert parse_number("1/4") == 0.25
    assert parse_number("−3e-2") == -0.03
    assert parse_int("4000") == 4000
    with pytest.raises(AnswerError, match="not_integer"):
        parse_int("4000.5")
    assert parse_numbers("[0.1, 0.2; 0.7]", 3) == (0.1, 0.2, 0.7)
    with pytest.raises(AnswerError) as err:
        parse_numbers("0.1 0.2", 3)
    assert err.value.key == "practice.input.count" and err.value.params == {"expected": 3, "got": 2}
    assert parse_shape("[2, 8, 5, 16]") == parse_shape("2 x 8 x 5 x 16") == (2, 8, 5, 16)
    with pytest.raises(AnswerError, match="bad_dim"):
        parse_shape("2, 0.5")


def test_numbers_as_people_write_them():
    # thousands separators: one number each, not two
    assert parse_number("1,000") == 1000 and parse_number("8,192") == 8192
    assert parse_int("4,000") == 4000 and parse_number("-1,234.5") == -1234.5
    assert parse_numbers("1,000, 2,500, 8,192", 3) == (1000, 2500, 8192)
    assert parse_numbers("0.1,0.2,0.7", 3) == (0.1, 0.2, 0.7)  # a plain list is still a list
    with pytest.raises(AnswerError, match="one_number"):
        parse_number("0,125")  # a decimal comma is not read as 125
    # full-width punctuation and digits from a Korean / Japanese keyboard
    assert parse_numbers("0.1，0.2，0.7", 3) == (0.1, 0.2, 0.7)
    assert parse_numbers("［0.5；0.25、0.25］", 3) == (0.5, 0.25, 0.25)
    assert parse_number("１２") == 12
    # ×10ⁿ in its usual spellings
    for text in ("9.76×10⁻⁴", "9.76 × 10^-4", "9.76x10**(-4)", "9.76·10⁻⁴", "9.76e-4"):
        assert parse_number(text) == pytest.approx(9.76e-4, rel=1e-12), text
    assert parse_number("1.5×10³") == 1500
    assert parse_shape("4 x 100") == (4, 100)  # a shape's "x 100" is not ×10⁰⁰
    # a message quotes what was typed, not a mangled form of it
    with pytest.raises(AnswerError) as err:
        parse_number("9.76×10⁻⁴/0")
    assert err.value.key == "practice.input.divide_by_zero"
    assert err.value.params == {"value": "9.76×10⁻⁴/0"}
    with pytest.raises(AnswerError) as err:
        parse_number("9" * 400)
    assert err.value.key == "practice.input.too_large" and len(err.value.params["value"]) == 40
    # the dimension limit the message states is the one enforced
    assert parse_shape("1, 2, 3, 4") == (1, 2, 3, 4)
    with pytest.raises(AnswerError) as err:
        parse_shape("1, 2, 3, 4, 5")
    assert err.value.key == "practice.input.too_many_dims"
    assert err.value.params == {"got": 5, "limit": 4}


def test_practice_never_imports_streamlit():
    code = "import sys, practice, practice.bugs; assert 'streamlit' not in sys.modules, 'streamlit'"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_every_key_an_exercise_can_say_is_in_both_catalogs_with_its_placeholders():
    import re

    from practice import bugs
    from ui.i18n import load_catalog

    placeholder = re.compile(r"(?<!\{)\{([A-Za-z_][A-Za-z0-9_]*)\}(?!\})")
    said: dict[str, set[str]] = {}
    for kind in practice.KINDS:
        for seed in range(20):
            ex = practice.make(kind, seed)
            said.setdefault(ex.prompt_key, set())
            said.setdefault(f"practice.{kind}.generic", set()).update(ex.data["hint_params"])
            for item in [*ex.solution, *ex.wrong]:
                said.setdefault(item.key, set()).update(item.params)
            if ex.form == "cells":  # the overlap score comes with every cells verdict
                for key in [f"practice.{kind}.generic", *(w.key for w in ex.wrong)]:
                    said[key].add("percent")
    for bug in bugs.BUGS:
        for key in ("name", "found", "not", "why"):
            said.setdefault(f"practice.bugs.{key}.{bug}", set())
    for lang in ("en", "ko"):
        catalog = load_catalog(lang)
        missing = sorted(k for k in said if k not in catalog)
        assert missing == [], (lang, missing)
        for key, params in said.items():
            if key.startswith(tuple(f"practice.{k}.prompt" for k in practice.KINDS)):
                continue  # the page fills a prompt from ex.data (the app tests render them all)
            assert set(placeholder.findall(catalog[key])) <= params, (lang, key)
