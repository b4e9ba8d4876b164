"""viz.memo: a figure is built once per distinct input and kept as its JSON."""

from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import torch

from viz.memo import memo_figure


def _counting_builder():
    calls = []

    @memo_figure
    def build(values, title: str) -> go.Figure:
        calls.append(title)
        fig = go.Figure(go.Heatmap(z=np.asarray(values), zmin=0, zmax=1))
        fig.update_layout(title=title)
        return fig

    return build, calls


def test_equal_content_is_built_once_and_every_call_gets_the_same_figure():
    build, calls = _counting_builder()
    z = np.array([[0.1, 0.9], [0.5, 0.5]])
    first = build(z, "Attention")
    same = build(z.copy(), "Attention")  # an equal array: the figure built before
    tensor = build(torch.tensor(z), "Attention")  # the same numbers as a tensor: keyed alike
    assert calls == ["Attention"]
    assert isinstance(same, go.Figure) and same is not first
    assert json.loads(same.to_json()) == json.loads(first.to_json()) == json.loads(tensor.to_json())
    assert np.array_equal(same.data[0].z, z) and same.layout.title.text == "Attention"
    build(z + 0.01, "Attention")  # other numbers: built anew
    assert calls == ["Attention", "Attention"]


def test_the_title_is_part_of_the_key_so_each_language_has_its_figure():
    build, calls = _counting_builder()
    z = [[0.2, 0.8]]
    english, korean = build(z, "Attention"), build(z, "어텐션")
    assert calls == ["Attention", "어텐션"]
    assert build(z, "어텐션").layout.title.text == "어텐션" and calls == ["Attention", "어텐션"]
    assert english.layout.title.text == "Attention" and korean.layout.title.text == "어텐션"


def test_what_is_kept_is_json_text_not_a_figure_tree():
    build, _ = _counting_builder()
    build([[0.1, 0.2]], "a")
    build([[0.3, 0.4]], "b")
    kept = list(build.cache_store().values())
    assert len(kept) == 2 and all(isinstance(spec, str) for spec in kept)
    assert '"Attention"' not in kept[0] and '"a"' in kept[0]


def test_a_caller_changing_its_figure_does_not_change_the_next_one():
    build, calls = _counting_builder()
    z = [[0.4, 0.6]]
    mine = build(z, "Attention")
    mine.update_layout(title="changed", font_family="serif")
    theirs = build(z, "Attention")
    assert calls == ["Attention"]
    assert theirs.layout.title.text == "Attention" and theirs.layout.font.family is None
    theirs.update_layout(title="mine now")
    assert build(z, "Attention").layout.title.text == "Attention"


def test_a_figure_handed_out_again_is_sent_as_kept_without_being_rebuilt():
    """What st.plotly_chart sends for a kept figure (with ui.charts' font) is what the first
    one sent; a caller who looks inside gets a real Figure."""
    import plotly.io
    import plotly.tools

    def sent(fig) -> dict:  # what st.plotly_chart does with a figure
        spec = plotly.tools.return_figure_from_figure_or_data(fig, validate_figure=True)
        return json.loads(plotly.io.to_json(spec, validate=False))

    build, calls = _counting_builder()
    z = np.array([[0.1, 0.9], [0.5, 0.5]])
    first = build(z, "Attention").update_layout(font_family="Noto Sans KR")
    kept = build(z, "Attention").update_layout(font_family="Noto Sans KR")
    assert sent(kept) == sent(first) and calls == ["Attention"]
    assert not kept._kept["built"]  # answered from the JSON
    kept.update_yaxes(range=[0, 1])  # anything else: the real Figure, then changed
    assert kept.layout.yaxis.range == (0, 1) and kept.layout.font.family == "Noto Sans KR"
    assert np.array_equal(kept.data[0].z, z)


def test_the_cache_drops_the_least_recently_used_entries_once_their_bytes_exceed_the_budget():
    from viz.memo import ByteLRU

    cache = ByteLRU(budget=100)
    cache.put("a", "A", 40)
    cache.put("b", "B", 40)
    cache.get("a")  # a is now the most recently used
    cache.put("c", "C", 40)  # 120 > 100: the oldest, b, goes
    assert cache.kept_keys() == ["a", "c"] and cache.total == 80
    cache.put("huge", "H", 101)  # larger than the whole budget: never kept, nothing dropped
    assert "huge" not in cache and cache.kept_keys() == ["a", "c"]


def test_a_hit_hands_out_the_very_object_kept_without_computing_or_copying_it():
    from viz.memo import ByteLRU

    cache = ByteLRU(budget=2**30)
    record = {"queries": torch.zeros(64, 64)}
    calls = []

    def compute():
        calls.append(1)
        return record

    first = cache.get_or_compute("text", compute)
    again = cache.get_or_compute("text", compute)
    assert first is record and again is record and calls == [1]
    assert again["queries"].data_ptr() == record["queries"].data_ptr()  # no copy
    assert cache.total == 64 * 64 * 4 + len("queries")


def test_kept_figures_of_every_builder_share_one_byte_budget(monkeypatch):
    from viz import memo

    monkeypatch.setattr(memo, "FIGURES", memo.ByteLRU(budget=1))
    build, calls = _counting_builder()
    build([[0.1, 0.2]], "a")
    assert build.cache_store() == {}  # its JSON is larger than the budget: not kept
    memo.FIGURES.budget = 10**6
    build([[0.1, 0.2]], "a")
    size = memo.FIGURES.total
    memo.FIGURES.budget = size * 2 - 1  # room for one such figure, not two
    build([[0.3, 0.4]], "b")
    assert [spec for spec in build.cache_store().values() if '"b"' in spec]
    assert len(build.cache_store()) == 1 and memo.FIGURES.total <= memo.FIGURES.budget


def test_the_cache_budgets_are_read_from_the_environment_in_mib(monkeypatch):
    from viz.memo import budget_bytes

    monkeypatch.setenv("SOME_CACHE_MB", "512")
    assert budget_bytes("SOME_CACHE_MB", 7) == 512 * 2**20
    for bad in ("lots", "-3", "inf"):
        monkeypatch.setenv("SOME_CACHE_MB", bad)
        assert budget_bytes("SOME_CACHE_MB", 7) == 7 * 2**20


def test_values_kept_with_a_trace_go_when_the_trace_is_collected():
    import gc

    from model.runtime.kept import ByteLRU

    class Trace:  # any object a weak reference can follow, as a model's Trace
        pass

    cache = ByteLRU(budget=2**20)
    first, second = Trace(), Trace()
    rollout = torch.ones(8, 8)
    assert cache.get_or_compute_with(first, ("rollout", 0), lambda: rollout) is rollout
    cache.put_with(second, ("rollout", 0), torch.zeros(2, 2))
    assert cache.get_with(first, ("rollout", 0)) is rollout  # the same object, per trace
    assert [k for k, _ in cache.items_with(first)] == [("rollout", 0)]
    del first
    gc.collect()
    # the collected trace's values are gone, its bytes given back; the other trace's stay
    assert len(cache.kept_keys()) == 1 and cache.total == 2 * 2 * 4
    assert cache.get_with(second, ("rollout", 0)) is not None
