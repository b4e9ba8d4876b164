"""What people take away: JSON, NPZ and the long CSV table hold the same numbers."""

import io
import json

import numpy as np
import torch

from model.analysis.export import trace_to_json, trace_to_npz
from model.trace import Trace
from viz.tables import attention_frame, head_stats_frame


def small_trace():
    torch.manual_seed(0)
    enc = torch.softmax(torch.randn(2, 3, 4, 4), -1)
    cross = torch.softmax(torch.randn(2, 3, 2, 4), -1)
    return Trace(["a", "b", "a", "<c>"], ["x", "y"], {"encoder": enc, "cross": cross})


def test_json_export_keeps_tokens_and_every_map():
    data = json.loads(trace_to_json(small_trace(), model="m", text="a b a <c>"))
    assert data["src_tokens"] == ["a", "b", "a", "<c>"] and data["model"] == "m"
    assert np.allclose(data["attention"]["cross"], small_trace().attention["cross"], atol=1e-5)
    assert data["axes"] == ["layer", "head", "query", "key"]


def test_npz_export_round_trips_through_numpy():
    arrays = np.load(io.BytesIO(trace_to_npz(small_trace())))
    assert arrays["src_tokens"].tolist() == ["a", "b", "a", "<c>"]
    np.testing.assert_array_equal(arrays["attention_encoder"], small_trace().attention["encoder"])


def test_long_table_has_one_row_per_cell_and_keeps_repeated_tokens_apart():
    a = small_trace().attention["encoder"]
    frame = attention_frame(a, ["a", "b", "a", "<c>"], ["a", "b", "a", "<c>"])
    assert len(frame) == a.numel()
    assert list(frame.columns) == [
        "layer",
        "head",
        "query",
        "query_token",
        "key",
        "key_token",
        "weight",
    ]
    row = frame[
        (frame["layer"] == 2) & (frame["head"] == 3) & (frame["query"] == 2) & (frame["key"] == 0)
    ]
    assert row.weight.item() == a[1, 2, 2, 0].item() and row.query_token.item() == "a"
    assert frame.groupby(["layer", "head", "query"]).weight.sum().round(5).eq(1).all()


def test_head_statistics_count_layers_and_heads_from_one():
    frame = head_stats_frame(small_trace().attention["encoder"], self_attention=True)
    assert frame[["layer", "head"]].values.tolist()[:4] == [[1, 1], [1, 2], [1, 3], [2, 1]]
    assert list(frame.columns) == ["layer", "head", "entropy", "mean_distance", "first_token"]
    cross = head_stats_frame(small_trace().attention["cross"], False)
    assert "mean_distance" not in cross
    # the weight on the first key, averaged over queries: layer 2, head 3 of the cross maps
    want = small_trace().attention["cross"][1, 2, :, 0].mean().item()
    assert cross.loc[(cross["layer"] == 2) & (cross["head"] == 3), "first_token"].item() == want


def test_the_explorers_statistics_table_equals_the_stacked_maps_and_is_kept_with_its_trace():
    """Every kind of a real trace: the decoder from the fused kernel, the encoder and the
    cross-attention from their maps; a second read of the table computes nothing."""
    import pandas as pd

    from model import load
    from model.analysis.view import AttentionView
    from viz.tables import head_stats_table

    trace = load("en2ko").trace("I study math at school every day")
    for kind in ("encoder", "decoder", "cross"):
        self_attention = kind != "cross"
        want = head_stats_frame(trace.attention[kind], self_attention)
        calls: list[tuple[int, int]] = []

        def progress(done: int, layers: int, calls=calls) -> None:
            calls.append((done, layers))

        got = head_stats_table(AttentionView(trace, kind).statistics(progress))
        pd.testing.assert_frame_equal(got, want, atol=1e-4, rtol=1e-4)
        assert calls and calls[-1] == (want.layer.max(), want.layer.max())
        again = head_stats_table(AttentionView(trace, kind, layer=1).statistics(progress))
        pd.testing.assert_frame_equal(again, got)
        assert len(calls) == want.layer.max()  # read once


def test_a_long_inputs_files_hold_one_window_of_a_layer_every_head_at_its_true_positions():
    """What the explorer's downloads hold for a long input: the window's maps as the trace
    computes them, positions counted in the whole text, the tokens at those positions."""
    from model import load
    from model.analysis.export import window_to_json, window_to_npz
    from viz.tables import window_frame

    trace = load("en2ko").trace("I study math at school every day with my friends")
    kind, layer, rows, cols = "encoder", 1, slice(3, 7), slice(2, 9)
    tokens = trace.tokens(kind)[0]
    heads = trace.shape(kind)[1]
    arrays = np.load(io.BytesIO(window_to_npz(trace, kind, layer, rows, cols)))
    assert arrays["attention"].shape == (heads, 4, 7) and int(arrays["layer"]) == 2
    for h in range(heads):
        want = trace.attention_map(kind, layer, h, rows=rows, cols=cols).numpy()
        np.testing.assert_array_equal(arrays["attention"][h], want)
    assert arrays["query_positions"].tolist() == [3, 4, 5, 6]
    assert arrays["key_tokens"].tolist() == tokens[2:9]
    data = json.loads(window_to_json(trace, kind, layer, rows, cols, model="en2ko"))
    assert data["layer"] == 2 and data["axes"] == ["head", "query", "key"]
    assert np.allclose(data["attention"], arrays["attention"], atol=1e-5)
    frame = window_frame(trace, kind, layer, rows, cols)
    assert len(frame) == heads * 4 * 7 and set(frame["layer"]) == {2}
    row = frame[(frame["head"] == 2) & (frame["query"] == 5) & (frame["key"] == 8)]
    assert row.weight.item() == arrays["attention"][1, 2, 6]
    assert row.query_token.item() == tokens[5] and row.key_token.item() == tokens[8]
