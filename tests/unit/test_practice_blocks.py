"""The five block exercises (z = Σ wᵢ vᵢ, a whole weight matrix, pre-/post-LN, the FFN, the KV
cache with GQA), each over 100 seeds, against numbers recomputed here by hand in plain Python /
numpy — never by the kind's own code or the lab functions it calls."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import practice

SEEDS = range(100)
NEW = ("attn_output", "weight_matrix", "ln_placement", "ffn", "kv_cache")


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def exercises(kind):
    return [practice.make(kind, seed) for seed in SEEDS]


def hint(ex, answer) -> str:
    fb = ex.check(answer)
    assert not fb.correct
    return fb.key.rsplit(".", 1)[-1]


def test_seventeen_kinds_and_the_new_ones_are_in_mixed_and_their_topics():
    assert len(practice.KINDS) >= 17
    mixed = practice.kinds_for(practice.MIXED)
    for kind in NEW:
        assert kind in mixed
        assert kind in practice.kinds_for(practice.topic_of(kind))
    assert practice.topic_of("attn_output") == practice.topic_of("weight_matrix") == "attention"
    assert practice.topic_of("ln_placement") == "layernorm"
    assert practice.topic_of("ffn") == practice.topic_of("kv_cache") == "sizes"
    # a class working through a mixed set meets every kind in the first round
    first = {practice.item(11, practice.MIXED, i)[0] for i in range(len(practice.KINDS))}
    assert set(NEW) <= first


@pytest.mark.parametrize("kind", NEW)
def test_each_new_kind_is_deterministic_and_varies(kind):
    a = [practice.make(kind, s) for s in range(30)]
    b = [practice.make(kind, s) for s in range(30)]
    assert [(x.data, x.answer, x.solution, x.wrong) for x in a] == [
        (x.data, x.answer, x.solution, x.wrong) for x in b
    ]
    assert len({repr(x.data) for x in a}) >= 25


def test_attn_output_is_the_weighted_sum_of_the_values():
    for ex in exercises("attn_output"):
        w, v = np.array(ex.data["weights"]), np.array(ex.data["values"], dtype=float)
        assert math.isclose(w.sum(), 1.0) and (w > 0).all()
        z = sum(w[i] * v[i] for i in range(len(w)))
        assert np.allclose(ex.answer[0], z, atol=1e-12)
        assert ex.check(list(z + 0.009)).correct and not ex.check(list(z + 0.02)).correct
        assert hint(ex, list(v.sum(0))) == "unweighted"
        assert hint(ex, list(v.mean(0))) == "plain_mean"
        assert hint(ex, list(v[int(w.argmax())])) == "top_only"
        if len(w) == v.shape[1]:
            assert hint(ex, list(v @ w)) == "wrong_axis"


def softmax(xs):
    m = max(xs)
    e = [math.exp(x - m) for x in xs]
    return [x / sum(e) for x in e]


def test_weight_matrix_is_a_softmax_per_row_and_the_wrong_axis_is_named():
    seen = set()
    for ex in exercises("weight_matrix"):
        s, allowed = ex.data["scores"], ex.data["allowed"]
        n = len(s)
        causal = ex.data["mask_kind"] == "causal"
        seen.add(ex.data["mask_kind"])
        assert allowed == [[not causal or j <= i for j in range(n)] for i in range(n)]
        rows = []
        for i in range(n):
            kept = softmax([s[i][j] for j in range(n) if allowed[i][j]])
            rows.append(kept + [0.0] * (n - len(kept)))
        got = np.array(ex.answer[0]).reshape(n, n)
        assert np.allclose(got, rows, atol=1e-12)
        assert np.allclose(got.sum(1), 1.0)
        # the softmax over the queries (each column sums to 1): "wrong softmax axis"
        cols = np.zeros((n, n))
        for j in range(n):
            idx = [i for i in range(n) if allowed[i][j]]
            for i, p in zip(idx, softmax([s[i][j] for i in idx])):
                cols[i, j] = p
        assert np.allclose(cols.sum(0), 1.0)
        assert hint(ex, list(cols.reshape(-1))) == "wrong_axis"
        # one softmax over every allowed cell
        flat = [s[i][j] for i in range(n) for j in range(n) if allowed[i][j]]
        it = iter(softmax(flat))
        whole = [next(it) if allowed[i][j] else 0.0 for i in range(n) for j in range(n)]
        assert hint(ex, whole) == "whole_matrix"
        if causal:
            full = [p for i in range(n) for p in softmax(s[i])]
            assert hint(ex, full) == "no_mask"
            after = [p if allowed[k // n][k % n] else 0.0 for k, p in enumerate(full)]
            assert hint(ex, after) == "mask_after_softmax"
        for step in ex.solution[1:-1]:  # integer scores print as integers: "0", never "0."
            assert (
                step.params["scores"]
                == "["
                + ", ".join(
                    "-∞" if not ok else f"{v:.0f}"
                    for v, ok in zip(s[step.params["i"] - 1], allowed[step.params["i"] - 1])
                )
                + "]"
            )
        typed = ", ".join(f"{x:.2f}" for x in got.reshape(-1))  # two decimals, as asked
        assert ex.check(practice.parse.parse_numbers(typed, n * n)).correct
    assert seen == {"none", "causal"}


def layer_norm(x):
    x = np.asarray(x, dtype=float)
    return (x - x.mean()) / np.sqrt(x.var() + 1e-5)  # numpy's var is the biased one


def test_ln_placement_pre_and_post_by_hand():
    seen = set()
    for ex in exercises("ln_placement"):
        x, w = np.array(ex.data["x"]), np.array(ex.data["w"])
        pre = x + w * layer_norm(x)
        post = layer_norm(x + w * x)
        placement = ex.data["placement"]
        seen.add(placement)
        expected = pre if placement == "pre" else post
        assert np.allclose(ex.answer[0], expected, atol=1e-9)
        if placement == "pre":
            assert hint(ex, list(post)) == "did_post"
            assert hint(ex, list(layer_norm(x) + w * layer_norm(x))) == "normed_residual"
            assert hint(ex, list(layer_norm(pre))) == "norm_after_too"
        else:
            assert hint(ex, list(pre)) == "did_pre"
            assert hint(ex, list(x + w * x)) == "no_norm"
            assert hint(ex, list(layer_norm(x) + w * layer_norm(x))) == "norm_before_sum"
    assert seen == {"pre", "post"}


def test_ffn_sizes_by_counting():
    seen = set()
    for ex in exercises("ffn"):
        d, f, b, length = (ex.data[k] for k in ("d_model", "d_ff", "b", "l"))
        assert f == ex.data["mult"] * d
        seen.add(ex.data["asked"])
        if ex.data["asked"] == "params":
            count = d * f + f + f * d + d
            assert ex.answer == (count,)
            assert ex.check((f"{count:,}".replace(",", ""),)).correct
            assert hint(ex, (2 * d * f,)) == "no_bias"
            assert hint(ex, (d * f + f,)) == "one_layer"
            assert hint(ex, (count * length,)) == "per_token"
            assert not ex.check((count + 1,)).correct
        else:
            assert tuple(ex.answer) == (b, length, f)
            assert hint(ex, (b, length, d)) == "no_expand_shape"
            assert hint(ex, (length, f)) == "no_batch"
    assert seen == {"params", "hidden"}


def test_kv_cache_bytes_with_grouped_query_attention():
    for ex in exercises("kv_cache"):
        p = ex.data
        size = {"float32": 4, "bfloat16": 2, "float16": 2, "int8": 1}[p["dtype"]]
        assert p["size"] == size and p["n_heads"] % p["n_kv_heads"] == 0
        n_bytes = 2 * p["layers"] * p["n_kv_heads"] * p["d_head"] * p["tokens"] * p["batch"] * size
        mib = n_bytes / 1024 / 1024
        assert math.isclose(ex.answer[0], mib, rel_tol=1e-12)
        assert ex.check((mib * 1.004,)).correct and not ex.check((mib * 1.01,)).correct
        group = p["n_heads"] // p["n_kv_heads"]
        assert hint(ex, (mib * group,)) == "all_heads"
        assert hint(ex, (mib / 2,)) == "keys_only"
        assert hint(ex, (n_bytes / 10**6,)) == "decimal_mb"
        assert hint(ex, (mib / p["layers"],)) == "one_layer"
        if size != 4:
            assert hint(ex, (mib * 4 / size,)) == "four_bytes"
