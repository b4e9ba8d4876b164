"""Chart summaries and tables say what the chart draws: the right token, the right peak."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from model.schedule import noam_lr
from ui.i18n import translate
from viz.attention import attention_heatmap, heads_figure
from viz.concepts import band_figure, grouped_bars, lines_figure, matrix_heatmap
from viz.summaries import (
    attention_peak,
    figure_facts,
    figure_table,
    number,
    rounded,
    series_peak,
)

QUERIES = ["The", "animal", "was", "tired", "because", "it"]
KEYS = QUERIES


def _weights() -> np.ndarray:
    rng = np.random.default_rng(0)
    w = rng.random((6, 6)) * 0.1
    w[5, 1] = 0.62  # 'it' -> 'animal', the strongest link
    return w / w.sum(-1, keepdims=True) * (w.sum(-1, keepdims=True) > 0)


def test_attention_peak_names_the_query_and_the_key_it_attends_to_most():
    w = _weights()
    peak = attention_peak(w, QUERIES, KEYS)
    q, k = np.unravel_index(np.argmax(w), w.shape)
    assert (peak["query"], peak["key"]) == (QUERIES[q], KEYS[k]) == ("it", "animal")
    assert peak["weight"] == f"{w.max():.2f}"
    sentence = translate("a11y.summary.attention", "en", where="Layer 2 · Head 3", **peak)
    assert "'it'" in sentence.replace("‘", "'").replace("’", "'")
    assert "'animal'" in sentence.replace("‘", "'").replace("’", "'")
    assert "'tired'" not in sentence.replace("‘", "'").replace("’", "'")


def test_attention_peak_moves_with_the_data():
    w = _weights()
    w[2, 3] = 5.0  # now 'was' -> 'tired' is strongest
    assert (attention_peak(w, QUERIES, KEYS)["query"], attention_peak(w, QUERIES, KEYS)["key"]) == (
        "was",
        "tired",
    )


def test_masked_cells_never_win():
    w = np.full((2, 2), np.nan)
    w[1, 0] = 0.3
    assert attention_peak(w, ["a", "b"], ["c", "d"]) == {
        "query": "b",
        "key": "c",
        "weight": "0.30",
        "n": 1,
    }
    with pytest.raises(ValueError):
        attention_peak(np.full((2, 2), np.nan), ["a", "b"], ["c", "d"])


def test_warmup_summary_peaks_at_the_warmup_step():
    steps = np.arange(1, 20_001, 50)
    lr = np.array([noam_lr(int(s), 512, 4000) for s in steps])
    peak = series_peak(steps, lr)
    i = int(np.argmax(lr))
    assert peak == {"x": number(steps[i]), "y": number(lr[i])}
    assert peak["x"] == "4,001"  # the first grid step at or past warm-up
    assert peak["y"] == "7.0e-04"
    en = translate("a11y.summary.warmup", "en", **peak)
    ko = translate("a11y.summary.warmup", "ko", **peak)
    assert "4,001" in en and "7.0e-04" in en and "4,001" in ko and "7.0e-04" in ko


def test_a_heatmap_figure_reports_its_own_strongest_cell_and_every_cell_in_its_table():
    w = _weights()
    fig = attention_heatmap(w, QUERIES, KEYS, title="Layer 2 · Head 3")
    facts = figure_facts(fig)
    assert len(facts) == 1
    assert (facts[0]["row"], facts[0]["col"], facts[0]["value"]) == (
        "it",
        "animal",
        number(w.max()),
    )
    table = figure_table(fig)
    assert len(table) == 36
    top = table.loc[table["value"].idxmax()]
    # headed by the chart's own axis titles: the rows are queries, the columns keys
    assert (top["query"], top["key"]) == ("it", "animal")
    assert np.isclose(table["value"].sum(), w.sum(), atol=36 * 5e-4)  # rounded as drawn


def test_masked_cells_are_left_out_of_the_table():
    w = _weights()
    mask = np.tril(np.ones((6, 6), dtype=bool))
    table = figure_table(attention_heatmap(w, QUERIES, KEYS, mask=mask))
    assert len(table) == int(mask.sum())


def test_many_heads_give_one_fact_per_head_named_by_its_subplot_title():
    w = np.stack([_weights(), _weights().T])
    fig = heads_figure(w, QUERIES, KEYS, titles=["Head 1", "Head 2"])
    facts = figure_facts(fig)
    assert [f["name"] for f in facts] == ["Head 1", "Head 2"]
    assert (facts[0]["row"], facts[0]["col"]) == ("it", "animal")
    assert (facts[1]["row"], facts[1]["col"]) == ("animal", "it")


def test_curves_report_their_peak_with_axis_titles():
    x = np.arange(10)
    fig = lines_figure(
        x, {"a": -((x - 3) ** 2), "b": x * 1.0}, x_title="step", y_title="learning rate"
    )
    facts = figure_facts(fig)
    assert [(f["name"], f["x"]) for f in facts] == [("a", "3"), ("b", "9")]
    assert facts[0]["x_title"] == "step" and facts[0]["y_title"] == "learning rate"
    assert set(figure_table(fig)["series"]) == {"a", "b"}


def test_bars_with_category_axes():
    fig = go.Figure(go.Bar(x=["sin", "cos", "tan"], y=[0.2, 0.9, 0.4]))
    assert figure_facts(fig)[0]["x"] == "cos"
    assert list(figure_table(fig)["x"]) == ["sin", "cos", "tan"]


def test_the_focus_views_bars_say_what_each_heads_largest_bar_measures():
    """Small multiples with no axis titles: each head's fact still names its quantity (the
    summary read "the largest  is …" with a gap), and the key by its token and position."""
    from viz.attention import focus_bars_figure

    rows = np.array([[0.1, 0.7, 0.2], [0.5, 0.2, 0.3]])
    fig = focus_bars_figure(
        rows, ["the", "cat", "sat"], head_titles=["Head 1", "Head 2"],
        colours=["red", "blue"], value_label="weight", positions=[40, 41, 97],
    )  # fmt: skip
    facts = figure_facts(fig)
    assert [(f["name"], f["y_title"]) for f in facts] == [
        ("Head 1", "weight"),
        ("Head 2", "weight"),
    ]
    assert [(f["x"], f["y"]) for f in facts] == [("cat #41", "0.70"), ("the #40", "0.50")]
    said = translate("a11y.summary.bar", "en", **facts[0])
    assert "the largest weight is ‘cat #41’" in said


def test_token_text_is_shown_as_typed():
    fig = attention_heatmap(np.eye(2), ["<b>", "a&b"], ["<b>", "a&b"])
    assert set(figure_table(fig)["key"]) == {"<b>", "a&b"}


@pytest.mark.parametrize(
    "value, text", [(0.615, "0.61"), (4000.0, "4,000"), (103_561.7, "103,562"), (7e-4, "7.0e-04")]
)
def test_numbers_are_short(value, text):
    assert number(value) == text


def test_a_tie_for_the_strongest_link_is_named_as_a_tie():
    tokens = ["i", "study", "math", "at", "school"]
    peak = attention_peak(np.eye(5), tokens, tokens)
    assert peak["kind"] == "attention_self" and peak["n"] == 5 and peak["weight"] == "1.00"
    said = translate("a11y.summary.attention_self", "en", where="Layer 1", **peak)
    assert said == "Layer 1: all 5 tokens attend most to themselves (1.00)."
    w = np.full((2, 3), 0.1)
    w[0, 0] = w[1, 2] = 0.8
    peak = attention_peak(w, ["a", "b"], ["c", "d", "e"])
    assert (peak["kind"], peak["n"], peak["query"], peak["key"]) == ("attention_tie", 2, "a", "c")


def test_a_heatmap_whose_top_value_fills_the_diagonal_says_so():
    z = np.full((32, 32), 3.0) + np.eye(32) * 29.0
    z[16, 16] = 32.000008  # one cell a hair above the rest, as float32 sums give
    fact = figure_facts(matrix_heatmap(z, [str(i) for i in range(32)], title="PE·PEᵀ"))[0]
    assert (fact["kind"], fact["n"], fact["value"]) == ("heatmap_diagonal", 32, "32")


def test_bars_that_all_read_the_same_pick_none_and_name_their_quantity():
    fig = grouped_bars(["a", "b", "c"], {"after": [1.0, 1.0, 1.0]}, y_title="mean")
    fact = figure_facts(fig)[0]
    assert fact["kind"] == "bar_all" and fact["n"] == 3 and fact["y_title"] == "mean"
    fig = grouped_bars(["a", "b"], {"before": [0.5, 2.0]}, y_title="standard deviation")
    fact = figure_facts(fig)[0]
    assert (fact["kind"], fact["x"], fact["y_title"]) == ("bar", "b", "standard deviation")


def test_a_band_over_seeds_is_part_of_its_series_and_the_curve_ends_are_said():
    bands = {
        "with warm-up": {
            "step": [1, 2, 3],
            "mean": [4.0, 2.0, 0.77],
            "min": [3, 1, 0.5],
            "max": [5, 3, 1],
        },
        "without": {
            "step": [1, 2, 3],
            "mean": [4.0, 3.5, 3.34],
            "min": [3, 3, 3],
            "max": [5, 4, 4],
        },
    }
    fig = band_figure(bands, x_title="step", y_title="loss")
    facts = figure_facts(fig)
    assert [(f["name"], f["kind"], f["y"]) for f in facts] == [
        ("with warm-up", "final", "0.77"),
        ("without", "final", "3.34"),
    ]
    table = figure_table(fig, {"series": "계열"})
    assert list(table.columns) == ["계열", "step", "loss"] and len(table) == 6


def test_table_values_are_rounded_as_drawn_and_never_negative_zero():
    assert rounded(5.89599263441337e-15) == 0.0 and str(rounded(-1e-9)) == "0.0"
    assert rounded(0.950739860534668) == 0.951 and rounded(32.000008) == 32.0
    assert rounded(7.0412e-4) == 7.04e-4


def test_memory_axes_read_in_kib_mib_gib():
    from viz.modern import memory_figure

    memory = {
        "n": [256, 4096],
        "full_measured": [3e3, 2e9],
        "tiled_measured": [3e3, 5e6],
        "full_formula": [3e3, 2e9],
        "output_bytes": [2e3, 4e6],
    }
    fig = memory_figure(memory, names={"full": "f", "tiled": "t"}, x_title="n", y_title="bytes")
    ticks = list(fig.layout.yaxis.ticktext)
    assert "1 MiB" in ticks and any(t.endswith("GiB") for t in ticks)
    assert all(t.split()[-1] in ("B", "KiB", "MiB", "GiB") for t in ticks)
