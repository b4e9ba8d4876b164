"""The numbers behind "Attention since 2017": the length experiment, q·k by distance, RoPE's
rotation, cache sizes, tiled-attention memory, attention sinks, and their figures."""

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from model import TransformerConfig, build_model
from model.analysis.concepts import (
    AllocationMeter,
    attention_memory,
    cache_nbytes,
    kv_cache_bytes,
    online_softmax_example,
    qk_by_distance,
    rope_rotation,
)
from model.analysis.summaries import sink_share
from model.runtime.decoding import greedy_decode
from model.training.lengths import (
    OUT_DIR,
    Settings,
    load_results,
    make_sequences,
    parse_args,
    run,
    run_scheme,
)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def curves(rows, scheme):
    out = {}
    for r in rows:
        if r["scheme"] == scheme:
            out.setdefault(r["series"], []).append(r["score"])
    return out


# --- the length-generalisation experiment ---------------------------------------------------------


def test_sequences_hold_the_task_and_score_only_the_answer():
    gen = torch.Generator().manual_seed(0)
    ids, labels = make_sequences("reverse", 3, [4], 10, gen)
    assert ids.shape == (3, 10) and labels.shape == (3, 10)  # <bos> x4 <sep> y4 (<eos> label)
    for row, lab in zip(ids.tolist(), labels.tolist()):
        x, y = row[1:5], row[6:10]
        assert row[0] == 1 and row[5] == 2 and y == x[::-1]
        assert lab[:5] == [-100] * 5 and lab[5:9] == y and lab[9] == 3
    copy, _ = make_sequences("copy", 2, [3], 10, gen)
    assert copy[0, 1:4].tolist() == copy[0, 5:8].tolist()


def test_a_tiny_run_writes_results_and_metadata_that_load_back(tmp_path):
    settings = Settings(
        schemes=["rope", "none"],
        max_steps=20,
        check_every=10,
        eval_lengths=[4, 8],
        eval_n=8,
        d_model=32,
        d_ff=64,
        train_max_len=4,
        seeds=[0, 1],
    )
    rows = run(
        settings,
        tmp_path,
        command="python -m model.training.lengths --max-steps 20",
        log=lambda s: None,
    )
    assert [(r["scheme"], r["seed"], r["length"]) for r in rows] == [
        (scheme, seed, n) for seed in (0, 1) for scheme in ("rope", "none") for n in (4, 8)
    ]
    meta, loaded = load_results(tmp_path)
    assert meta["seeds"] == [0, 1] and meta["command"].endswith("--max-steps 20")
    assert meta["settings"]["schemes"] == ["rope", "none"]
    # every (scheme, seed) says how many steps it trained and whether it fitted
    assert {(r["scheme"], r["seed"]) for r in meta["runs"]} == {
        (s, seed) for s in ("rope", "none") for seed in (0, 1)
    }
    for r in meta["runs"]:
        assert r["steps"] <= 20 and r["fit"] == (r["train_accuracy"] >= settings.fit_accuracy)
    assert [(r["scheme"], r["seed"], r["length"]) for r in loaded] == [
        (r["scheme"], r["seed"], r["length"]) for r in rows
    ]
    for r, back in zip(rows, loaded):
        assert back["token_accuracy"] == pytest.approx(r["token_accuracy"], abs=1e-4)
        assert back["exact_match"] == pytest.approx(r["exact_match"], abs=1e-4)
        assert 0 <= back["exact_match"] <= 1 and 0 <= back["token_accuracy"] <= 1


def test_training_stops_once_the_training_lengths_fit():
    easy = Settings(
        task="copy",
        max_steps=600,
        check_every=50,
        fit_accuracy=0.5,
        eval_lengths=[2],
        eval_n=16,
        d_model=32,
        d_ff=64,
        train_max_len=2,
        symbols=4,
    )
    result = run_scheme(easy, "rope", 0)
    assert result["fit"] and result["steps"] < 600 and result["steps"] % 50 == 0
    assert result["train_accuracy"] >= 0.5


def test_a_scheme_gives_the_same_numbers_every_time_and_seeds_differ():
    settings = Settings(max_steps=10, eval_lengths=[6], eval_n=8, d_model=32, d_ff=64)
    first = run_scheme(settings, "alibi", 0)["rows"]
    assert first == run_scheme(settings, "alibi", 0)["rows"]
    assert [r["seed"] for r in run_scheme(settings, "alibi", 1)["rows"]] == [1]


def test_the_command_line_refuses_nonsense():
    with pytest.raises(SystemExit):
        parse_args(["--max-steps", "0"])
    with pytest.raises(SystemExit):
        parse_args(["--fit-accuracy", "1.5"])
    with pytest.raises(SystemExit):
        parse_args(["--schemes", "relative"])
    settings, out, jobs, threads = parse_args(
        ["--task", "copy", "--jobs", "2", "--seeds", "3", "1"]
    )
    assert settings.task == "copy" and jobs == 2 and threads == 1 and out == OUT_DIR
    assert settings.seeds == [1, 3]


# --- q·k against distance, RoPE's rotation ----------------------------------------------------


def test_only_relative_schemes_give_a_score_that_depends_on_distance_alone():
    rows = qk_by_distance(max_distance=30, query_positions=(30, 77))
    rope = list(curves(rows, "rope").values())
    np.testing.assert_allclose(rope[0], rope[1], atol=1e-9)
    sinus = list(curves(rows, "sinusoidal").values())
    assert np.abs(np.subtract(sinus[0], sinus[1])).max() > 0.1
    none = list(curves(rows, "none").values())[0]
    assert max(none) == min(none)
    alibi = curves(rows, "alibi")
    steep, gentle = alibi["h=0"], alibi["h=7"]
    assert steep[0] - steep[10] == pytest.approx(0.5 * 10)  # slope 2^-1 for 8 heads
    assert gentle[0] - gentle[10] == pytest.approx(2**-8 * 10)
    assert "learned" not in {r["scheme"] for r in rows}
    table = torch.randn(100, 16)
    with_learned = qk_by_distance(max_distance=10, query_positions=(20, 40), learned_table=table)
    assert len(curves(with_learned, "learned")) == 2


def test_rope_rotation_turns_one_pair_by_position_times_theta():
    rows = rope_rotation(pair=2, d_k=16, positions=5)
    theta = 10000 ** (-4 / 16)
    for r in rows:
        assert r["angle"] == pytest.approx(r["position"] * theta)
        assert r["x"] == pytest.approx(math.cos(r["angle"]))
        assert r["y"] == pytest.approx(math.sin(r["angle"]))
    with pytest.raises(ValueError, match="pair"):
        rope_rotation(pair=8, d_k=16)


# --- key/value cache ----------------------------------------------------------------------------------


def test_kv_cache_bytes_for_a_real_model_and_its_grouped_variants():
    gib = 2**30
    assert kv_cache_bytes(32, 4096, 32, 32, 8192) == 4 * gib  # fp16, MHA
    assert kv_cache_bytes(32, 4096, 32, 8, 8192) == 1 * gib  # GQA, 8 KV heads
    assert kv_cache_bytes(32, 4096, 32, 1, 8192) == 128 * 2**20  # MQA
    with pytest.raises(ValueError):
        kv_cache_bytes(32, 4096, 32, 3, 8192)


@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])
def test_the_formula_equals_the_bytes_a_decoded_cache_really_holds(n_kv_heads):
    torch.manual_seed(0)
    cfg = TransformerConfig(
        kind="decoder",
        tgt_vocab_size=20,
        d_model=32,
        n_heads=4,
        n_kv_heads=n_kv_heads,
        dropout=0.0,
        positions="rope",
    )
    model = build_model(cfg).eval()
    cache = model.new_cache()
    out, _ = greedy_decode(model, torch.tensor([[5, 6, 7]]), 1, 2, 6, cache=cache)
    rows = cache["layers"][0]["self"]["k"].shape[2]
    assert rows == 3 + out.shape[1] - 1  # the prompt, then every token but the last fed back
    assert cache_nbytes(cache)["self"] == kv_cache_bytes(2, 32, 4, n_kv_heads, rows, 4)


# --- FlashAttention's online softmax ------------------------------------------------------------


def test_the_online_softmax_example_ends_at_ordinary_attention():
    steps, scores, out, weights = online_softmax_example(n_keys=10, block_size=4)
    assert len(steps) == 3 and steps[-1].last
    torch.testing.assert_close(steps[-1].partial[0], out)
    torch.testing.assert_close(weights.sum(), torch.tensor(1.0, dtype=weights.dtype))
    assert float(steps[-1].m_new) == pytest.approx(float(scores.max()))


def test_the_allocation_meter_counts_what_lives_at_once_and_frees():
    before = torch.zeros(10_000)  # made outside: not counted, nor are views of it
    with AllocationMeter() as meter:
        a = torch.zeros(1000)  # 4,000 bytes
        b = torch.zeros(500)  # + 2,000 = 6,000 alive
        _view = b[:10]  # a view: no new memory
        _outside = before[:100]
        del a  # 2,000 alive
        c = torch.zeros(2000)  # + 8,000 = 10,000 alive: the peak
        assert meter.live == 10_000
    assert meter.peak == 10_000
    del b, c, _view
    assert meter.live == 0  # every free was seen


def test_measured_attention_memory_follows_the_formulas_and_tiles_do_not_grow():
    mem = attention_memory([16, 64, 128, 256], block_size=16)
    assert mem["full_measured"] == mem["full_formula"]  # 3 n² floats + the output, exactly
    assert mem["full_measured"][3] > 3.5 * mem["full_measured"][2]  # n² : 2× n -> ~4× bytes
    above_output = [t - o for t, o in zip(mem["tiled_measured"], mem["output_bytes"])]
    assert above_output[1] == above_output[2] == above_output[3], above_output  # not with n
    assert mem["tiled_measured"][3] < mem["full_measured"][3] / 8
    assert max(mem["max_diff"]) < 1e-5


# --- attention sinks ------------------------------------------------------------------------------


def test_sink_share_is_the_mean_weight_on_each_sink_token():
    tokens = ["[CLS]", "a", "b", "[SEP]"]
    att = torch.zeros(1, 2, 4, 4)
    att[0, 0, :, 0] = 1.0  # head 1 parks everything on [CLS]
    att[0, 1, :, :] = 0.25  # head 2 spreads evenly
    share = sink_share(att, tokens)
    torch.testing.assert_close(share, torch.tensor([[[1.0, 0.0], [0.25, 0.25]]]))
    with pytest.raises(ValueError, match="keys"):
        sink_share(att, tokens[:3])


# --- figures ----------------------------------------------------------------------------------------


def test_figures_escape_labels_and_shade_the_trained_lengths():
    from viz.modern import human_bytes, length_figure, length_table, qk_distance_figure

    rows = [
        {"scheme": s, "length": n, "token_accuracy": 0.5, "exact_match": 0.1}
        for s in ("rope", "none")
        for n in (8, 16, 24)
    ]
    names = {"rope": "<b>RoPE</b>", "none": "none"}
    fig = length_figure(
        rows,
        metric="token_accuracy",
        train_max_len=16,
        names=names,
        x_title="len",
        y_title="acc",
        trained_label="trained",
    )
    assert fig.data[0].name == "&lt;b&gt;RoPE&lt;/b&gt;"
    assert fig.layout.shapes[0].x1 == 16.5
    table = length_table(rows, metric="exact_match", names=names, length_header="L")
    assert list(table.columns) == ["L 8", "L 16", "L 24"] and table.iloc[0, 0] == "0.10"
    qk = qk_distance_figure(
        qk_by_distance(max_distance=5, query_positions=(5, 9)),
        names={},
        series_names={},
        x_title="Δ",
        y_title="s",
    )
    assert len(qk.layout.annotations) == 4  # sinusoidal, rope, alibi, none
    # three panels a row (five in one were 60 px each on a phone), distance ticks level
    axes = ["", "2", "3", "4"]
    assert len({tuple(qk.layout[f"yaxis{a}"].domain) for a in axes}) == 2  # rows
    assert len({tuple(qk.layout[f"xaxis{a}"].domain) for a in axes}) == 3  # columns
    assert all(qk.layout[f"xaxis{a}"].tickangle == 0 for a in axes)
    assert human_bytes(1536) == "1.5 KiB" and human_bytes(2**30) == "1.0 GiB"


def test_shipped_metadata_is_valid_json_with_timings():
    meta = json.loads((Path(OUT_DIR) / "metadata.json").read_text())
    runs = {(r["scheme"], r["seed"]) for r in meta["runs"]}
    assert runs == {(s, seed) for s in meta["settings"]["schemes"] for seed in meta["seeds"]}
    assert all(r["cpu_s"] > 0 for r in meta["runs"])


def test_the_length_chart_draws_the_mean_and_the_range_over_seeds():
    from viz.modern import length_figure, length_summary, length_table

    rows = [
        {"scheme": "rope", "seed": seed, "length": n, "token_accuracy": acc, "exact_match": 0.0}
        for seed, accs in ((0, (0.9, 0.6)), (1, (0.8, 0.3)), (2, (1.0, 0.45)))
        for n, acc in zip((8, 16), accs)
    ]
    summary = length_summary(rows, "token_accuracy").set_index("length")
    assert summary.loc[16, "mean"] == pytest.approx(0.45)
    assert (summary.loc[16, "low"], summary.loc[16, "high"], summary.loc[16, "seeds"]) == (
        0.3,
        0.6,
        3,
    )
    fig = length_figure(
        rows,
        metric="token_accuracy",
        train_max_len=8,
        names={"rope": "RoPE"},
        x_title="len",
        y_title="acc",
        trained_label="trained",
    )
    band, line = fig.data
    assert band.fill == "toself" and list(band.y) == [1.0, 0.6, 0.3, 0.8]  # high, then low back
    assert list(line.y) == pytest.approx([0.9, 0.45])
    table = length_table(rows, metric="token_accuracy", names={"rope": "RoPE"}, length_header="L")
    assert table.loc["RoPE", "L 16"] == "0.45 (0.30–0.60)"


def test_byte_ticks_read_as_bytes_not_billions():
    from viz.modern import byte_ticks, human_bytes, kv_bytes_figure

    for top in (900, 70_000, 3.2e5, 4.3 * 2**30, 6e9):
        ticks = byte_ticks(top)
        assert ticks[0] == 0 and ticks[-1] <= top and len(ticks) >= 3
        labels = [human_bytes(v) for v in ticks]
        assert len(set(labels)) == len(labels)  # each tick says its own value exactly
    fig = kv_bytes_figure({"MHA": 4 * 2**30, "GQA": 2**30}, y_title="bytes")
    assert "GiB" in fig.layout.yaxis.ticktext[1]
    assert all(t.endswith(("B", "KiB", "MiB", "GiB", "TiB")) for t in fig.layout.yaxis.ticktext)


def test_online_softmax_table_writes_minus_infinity_and_the_same_decimals():
    from viz.modern import online_steps_frame, signed

    assert signed(float("-inf")) == "−∞" and signed(-0.0001) == "0.000" and signed(-1.5) == "−1.500"
    steps, _, _, _ = online_softmax_example(10, 4, seed=3)
    cols = {k: k for k in ("tile", "keys", "tile_max", "m_old", "m_new", "rescale", "l", "partial")}
    frame = online_steps_frame(steps, cols)
    assert frame.loc[0, "m_old"] == "−∞" and frame.loc[0, "rescale"] == "0.000"
    assert all(len(v.split(".")[1]) == 3 for v in frame["m_new"])


def test_rope_labels_do_not_pile_up_and_the_last_position_is_labelled():
    from viz.modern import _spaced_labels, rope_rotation_figure

    slow = [p * 0.1 for p in range(8)]  # 0.1 rad per position: labels would overlap
    keep = _spaced_labels(slow)
    assert keep[0] and keep[-1] and sum(keep) < len(slow)
    fig = rope_rotation_figure(
        {"pair 0": rope_rotation(0, 64, 8), "pair 8": rope_rotation(8, 64, 8)},
        position_label="position",
    )
    ends = [(a.x, a.y) for a in fig.layout.annotations]
    assert math.dist(*ends) > 0.2  # the two end arrows no longer coincide


def test_head_width_can_differ_from_d_model_over_heads():
    # Gemma-7B: 28 layers, 16 heads of 256 (16 x 256 = 4096, d_model 3072), MHA
    assert kv_cache_bytes(28, 3072, 16, 16, 8192, 2, d_head=256) == 2 * 28 * 16 * 256 * 8192 * 2
    assert kv_cache_bytes(32, 4096, 32, 8, 8192, 2) == 2**30
    with pytest.raises(ValueError):
        kv_cache_bytes(2, 100, 32, 8, 10)  # 32 does not divide 100 and no head width given
    assert kv_cache_bytes(2, 100, 32, 8, 10, 1, d_head=4) == 2 * 2 * 8 * 4 * 10


def test_the_shipped_result_has_three_seeds_and_its_command_recreates_it():
    meta, rows = load_results()
    assert meta["command"].startswith("python -m model.training.lengths")
    assert "--out assets/experiments/positions" in meta["command"]
    seeds = meta["seeds"]
    assert len(seeds) >= 3 and f"--seeds {' '.join(map(str, seeds))}" in meta["command"]
    schemes = meta["settings"]["schemes"]
    assert sorted(schemes) == sorted(["sinusoidal", "learned", "rope", "alibi", "none"])
    lengths = meta["settings"]["eval_lengths"]
    assert {(r["scheme"], r["seed"], r["length"]) for r in rows} == {
        (s, seed, n) for s in schemes for seed in seeds for n in lengths
    }
    with open(OUT_DIR / "results.csv", newline="") as f:
        assert next(csv.reader(f)) == ["scheme", "seed", "length", "token_accuracy", "exact_match"]
    # every run says whether it fitted, and a fitted run did reach the bar
    for r in meta["runs"]:
        assert r["fit"] == (r["train_accuracy"] >= meta["settings"]["fit_accuracy"])
        assert r["steps"] <= meta["settings"]["max_steps"]


def test_the_orderings_the_page_states_hold_in_every_seed_and_no_others_do():
    """Recomputed straight from results.csv, one seed at a time."""
    from model.training.lengths import robust_pairs

    meta, _ = load_results()
    train = meta["settings"]["train_max_len"]
    table = {}
    with open(OUT_DIR / "results.csv", newline="") as f:
        for r in csv.DictReader(f):
            table[(r["scheme"], int(r["seed"]), int(r["length"]))] = float(r["token_accuracy"])
    beyond = min(n for n in meta["settings"]["eval_lengths"] if n > train)
    schemes, seeds = meta["settings"]["schemes"], meta["seeds"]
    stated = set(robust_pairs(load_results()[1], "token_accuracy", beyond, schemes))
    for a in schemes:
        for b in schemes:
            if a == b:
                continue
            every = all(table[(a, s, beyond)] > table[(b, s, beyond)] for s in seeds)
            assert ((a, b) in stated) == every, (a, b)
    assert stated  # the page has something that holds in every seed to say
