"""Attention Explorer: type a sentence, see every head of every layer.

Widgets -> view -> viz -> chart: the controls (ids in the URL, so the address bar is a
permalink) make one ``AttentionView`` (model.analysis.view) of the trace, and each view in
``VIEWS`` draws from it. The functions come first, the page itself runs at the bottom.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

import numpy as np
import streamlit as st
import torch

from model.analysis.export import trace_to_json, trace_to_npz, window_to_json, window_to_npz
from model.analysis.tokens import subword_style, written_text
from model.analysis.view import (
    AGGREGATES,
    GENERATED_MARK,
    AttentionView,
    is_long,
    model_special_tokens,
    rollout_means_flow,
)
from model.trace import Trace, reporting_progress
from ui.background import with_progress
from ui.charts import attention_summary, describe_figure, image_format
from ui.downloads import drawn, html_download
from ui.frame import require_frame
from ui.i18n import axis_labels, head_titles, t
from ui.maps import FOCUS_KEYS, FOCUS_TEXT_AFTER, FOCUS_TEXT_BEFORE, STAGES_WINDOW_MAX, zoom_window
from ui.models import (
    FOLDER,
    get_model,
    get_trace,
    get_trace_by_name,
    model_choices,
    model_label,
    selected_model,
)
from ui.permalink import linked
from ui.sentence import clean_text, code_span, sentence_read
from viz.attention import (
    HEADS_MAX_SIDE,
    attention_heatmap,
    difference_heatmap,
    focus_bars_figure,
    heads_figure,
    heads_pooled,
    model_grid_figure,
    overview_heatmap,
    qk_norm_figure,
    scores_heatmap,
)
from viz.headview import head_colour, head_view_height, head_view_html, highlighted_text_html
from viz.tables import attention_frame, head_stats_table, window_frame

require_frame()

KINDS = ("encoder", "decoder", "cross")
VIEW_ICONS = {
    "heatmap": ":material/grid_on:",
    "heads": ":material/view_module:",
    "model": ":material/apps:",
    "lines": ":material/linear_scale:",
    "focus": ":material/center_focus_strong:",
    "stages": ":material/stairs:",
    "compare": ":material/compare:",
    "stats": ":material/table_chart:",
    "export": ":material/download:",
}
HEAD_VIEW_MAX_TOKENS = 160  # more lines than a reader can follow, and a heavy page
PILLS_MAX_TOKENS = 40  # beyond this a drop-down is easier than a wall of pills
CSV_MAX_CELLS = 2_000_000  # the whole kind when it fits, else the chosen layer
GRID_MAX_CELLS = 150_000  # the model grid's cells in all: about 1.5 MB sent at any size
GENERATE_MAX = 256  # tokens a decoder may add after the prompt, when asked


@dataclass(frozen=True)
class Reading:
    """What the view was read from: the model, its name, the text and the tokens a decoder
    generates (stages and compare read again through the same model)."""

    lm: object
    model_name: str
    text: str
    new_tokens: int | None = None


# ---- what a chart is called and says ----


def title_of(view: AttentionView, layer: int | None = None) -> str:
    layer = view.layer if layer is None else layer
    if view.aggregate == "rollout":
        return t("explorer.rollout_title", n=layer + 1)
    what = (
        t("common.head_n", n=view.head + 1)
        if view.aggregate == "head"
        else t(f"explorer.aggregate.{view.aggregate}")
    )
    return f"{t('common.layer_n', n=layer + 1)} · {what}"


def whole_map_chart(view: AttentionView, title: str | None = None):
    """(figure, summary) of a short input's whole map."""
    title = title or title_of(view)
    q_tokens, k_tokens = view.tokens
    weights = view.map()
    figure = attention_heatmap(
        weights, q_tokens, k_tokens, mask=view.mask(), title=title, labels=axis_labels()
    )
    return figure, attention_summary(title, weights, q_tokens, k_tokens)


def overview_chart(view: AttentionView, reduce: str):
    """(figure, caption) of a long map's pooled overview (blocks, max or mean, said)."""
    values, row_edges, col_edges = view.overview(reduce=reduce)
    q_tokens, k_tokens = view.tokens
    caption = t(
        "explorer.overview_caption",
        n_q=len(q_tokens),
        n_k=len(k_tokens),
        rows=len(row_edges) - 1,
        cols=len(col_edges) - 1,
        reduce=t(f"explorer.reduce_said.{reduce}"),
    )
    title = f"{title_of(view)} · {t('explorer.overview')}"
    figure = overview_heatmap(values, row_edges, col_edges, title=title, labels=axis_labels())
    return figure, caption


def window_chart(view: AttentionView, rows: slice, cols: slice):
    """(figure, summary) of one zoom window at full resolution, its tokens on the axes."""
    q_tokens, k_tokens = view.tokens
    q, k = q_tokens[rows], k_tokens[cols]
    where = t(
        "explorer.zoom_title",
        title=title_of(view),
        q0=rows.start,
        q1=rows.stop - 1,
        k0=cols.start,
        k1=cols.stop - 1,
    )
    weights = view.map(rows, cols)
    figure = attention_heatmap(
        weights,
        q,
        k,
        mask=view.mask(rows, cols),  # the window's cells only
        title=where,
        labels=axis_labels(),
        start=(rows.start, cols.start),
    )
    return figure, attention_summary(where, weights, q, k)


# ---- the views: each draws one way of looking at the chosen attention ----


def reduce_choice() -> str:
    """Max or mean per block of a pooled overview (kept in the URL)."""
    return linked(
        st.segmented_control,
        t("explorer.reduce"),
        ["max", "mean"],
        key="reduce",
        required=True,
        format_func=lambda r: t(f"explorer.reduce.{r}"),
        help=t("explorer.reduce_help"),
    )


def ready_rollout(view: AttentionView) -> None:
    """A long input's rollout up to the view's layer, computed now (kept with the trace) in
    a worker under a bar of the layers multiplied: seconds a layer at thousands of tokens."""
    if view.aggregate != "rollout" or view.rollout_ready():
        return
    with_progress(
        ("rollout", id(view.base), view.kind, view.layer),
        lambda report: view.rollout(progress=report),
        lambda done, n: t("explorer.rollout_progress", layer=view.layer + 1, done=done, n=n),
    )


def export_charts(view: AttentionView, reading: Reading, charts, name: str) -> None:
    """The charts just drawn, as one HTML file that opens offline (ui.downloads)."""
    intro = t("chart.export_html_intro", model=model_label(reading.model_name), text=reading.text)
    html_download(
        charts,
        title=f"{t('explorer.title')} · {title_of(view)}",
        intro=intro,
        name=f"attention-{name}-{view.kind}-layer{view.layer + 1}",
        key=f"{name}_html",
    )


def show_heatmap(view: AttentionView, reading: Reading) -> None:
    if view.aggregate == "max":
        st.caption(t("explorer.max_note"))
    if view.long:
        show_long_heatmap(view, reading)
        return
    figure, summary = whole_map_chart(view)
    chart = drawn(figure, "heatmap_chart", summary)
    export_charts(view, reading, [chart], "heatmap")


def show_long_heatmap(view: AttentionView, reading: Reading) -> None:
    """The pooled overview, the zoom widgets, then the window they pick at full resolution."""
    reduce = reduce_choice()
    ready_rollout(view)
    overview, caption = overview_chart(view, reduce)
    st.caption(caption)
    charts = [drawn(overview, "overview_chart", caption=caption)]
    rows, cols = zoom_window(*(len(toks) for toks in view.tokens))
    window, summary = window_chart(view, rows, cols)
    charts.append(drawn(window, "heatmap_chart", summary))
    export_charts(view, reading, charts, "heatmap")


def show_heads(view: AttentionView, reading: Reading) -> None:
    q_tokens, k_tokens = view.tokens
    common = dict(titles=head_titles(view.n_heads), labels=axis_labels(), max_side=HEADS_MAX_SIDE)
    if heads_pooled(q_tokens, k_tokens, HEADS_MAX_SIDE):
        n = max(len(q_tokens), len(k_tokens))
        # A long input's pass summed every head's blocks already: drawn from those, with no
        # pass over the layer's queries and keys (half a second at 4,096 tokens)
        side = (view.long and view.shown.summed_blocks(view.kind)) or HEADS_MAX_SIDE
        values, row_edges, col_edges = view.heads_overview(side, "mean")
        st.caption(t("explorer.heads_pooled", n=n, k=max(2, round(n / (len(row_edges) - 1)))))
        figure = heads_figure(values, q_tokens, k_tokens, edges=(row_edges, col_edges), **common)
    else:
        figure = heads_figure(view.heads(), q_tokens, k_tokens, mask=view.model_mask(), **common)
    export_charts(view, reading, [drawn(figure, "heads_chart")], "heads")


def show_model(view: AttentionView, reading: Reading) -> None:
    st.caption(t("explorer.model_grid_note"))
    q_tokens, k_tokens = view.tokens
    side = max(4, min(32, int((GRID_MAX_CELLS / (view.n_layers * view.n_heads)) ** 0.5)))
    summed = view.shown.summed_blocks(view.kind)
    if view.long and summed:  # the pass summed every head's blocks: tiles of those
        side = min(side, summed)
    layers = range(view.n_layers)
    if max(len(q_tokens), len(k_tokens)) <= side:  # every cell fits its tile
        tiles, mask = view.stacked(), view.model_mask()
    else:  # each head pooled on its own, block means of the cells the mask allows
        tiles = np.stack([view.heads_overview(side, "mean", layer).values for layer in layers])
        mask = None  # already NaN where a whole block is masked
    figure = model_grid_figure(
        tiles,
        mask=mask,
        col_titles=head_titles(view.n_heads),
        row_titles=[t("common.layer_n", n=i + 1) for i in layers],
        max_side=side,
    )
    export_charts(view, reading, [drawn(figure, "model_chart")], "model")


def show_lines(view: AttentionView, reading: Reading) -> None:
    q_tokens, k_tokens = view.tokens
    if max(len(q_tokens), len(k_tokens)) > HEAD_VIEW_MAX_TOKENS:
        st.info(t("explorer.lines_too_long", limit=HEAD_VIEW_MAX_TOKENS), icon=":material/info:")
        return
    st.caption(t("explorer.lines_caption", n=view.layer + 1))
    st.iframe(
        head_view_html(
            view.heads(),
            q_tokens,
            k_tokens,
            head_labels=head_titles(view.n_heads),
            hint=t("explorer.lines_hint"),
        ),
        height=head_view_height(max(len(q_tokens), len(k_tokens)), view.n_heads),
    )


def focus_token(q_tokens: list[str]) -> int:
    """The query token whose attention the focus view follows (kept in the URL)."""
    options = list(range(len(q_tokens)))
    label = t("explorer.focus_token")
    if len(q_tokens) <= PILLS_MAX_TOKENS:
        token = linked(
            st.pills,
            label,
            options,
            key="token",
            required=True,
            format_func=lambda i: code_span(q_tokens[i]),
        )
    else:
        token = linked(
            st.selectbox, label, options, key="token", format_func=lambda i: f"{i}: {q_tokens[i]}"
        )
    return token if token in options else 0


def shade_text(view: AttentionView, token: int, rows: torch.Tensor) -> None:
    """The text shaded by the mean of the heads' weights: all of it, or for a long input the
    part near the token (thousands of shaded words are a wall, and slow to lay out)."""
    k_tokens = view.tokens[1]
    shade = slice(None)
    if view.long:
        start = max(0, min(token, len(k_tokens)) - FOCUS_TEXT_BEFORE)
        shade = slice(start, min(len(k_tokens), start + FOCUS_TEXT_BEFORE + FOCUS_TEXT_AFTER))
        st.caption(t("explorer.focus_text_part", a=shade.start, b=shade.stop - 1, n=len(k_tokens)))
    shaded = k_tokens[shade]
    st.iframe(
        highlighted_text_html(
            shaded,
            rows.mean(0)[shade],
            focus=token - (shade.start or 0) if view.kind != "cross" else None,
            caption=t("explorer.focus_text_caption"),
        ),
        height=60 + 34 * (1 + sum(len(tok) + 3 for tok in shaded) // 110),
    )


def show_focus(view: AttentionView, reading: Reading) -> None:
    q_tokens, k_tokens = view.tokens
    token = focus_token(q_tokens)
    rows = view.heads(rows=[token])[:, 0]  # [H, Lk]
    st.caption(t("explorer.focus_caption", n=view.layer + 1))
    shade_text(view, token, rows)
    keys = None
    if view.long:  # the keys it weighs most, in reading order
        keys = sorted(rows.mean(0).topk(FOCUS_KEYS).indices.tolist())
        share = float(rows.mean(0)[keys].sum()) * 100
        st.caption(
            t("explorer.focus_top_keys", k=FOCUS_KEYS, n=len(k_tokens), share=f"{share:.0f}")
        )
    figure = focus_bars_figure(
        rows if keys is None else rows[:, keys],
        k_tokens if keys is None else [k_tokens[i] for i in keys],
        head_titles=head_titles(view.n_heads),
        colours=[head_colour(h) for h in range(view.n_heads)],
        value_label=t("common.axis.weight"),
        positions=keys,
    )
    where = f"{t('explorer.view.focus')} · {t('common.layer_n', n=view.layer + 1)}"
    chart = drawn(figure, "focus_chart", describe_figure(figure, title=where))
    export_charts(view, reading, [chart], f"focus-{token}")


def stages_intro(view: AttentionView, reading: Reading, stage_head: int) -> None:
    if view.aggregate != "head":
        st.caption(t("explorer.stages_first_head"))
    d_k = getattr(reading.lm.config, "d_k", None)  # transformers configs have no d_k
    st.markdown(t("explorer.stages_intro", n=view.layer + 1, h=stage_head + 1))
    if d_k:
        st.latex(rf"d_k = {d_k}, \quad \sqrt{{d_k}} = {d_k**0.5:.3f}")


def show_stages(view: AttentionView, reading: Reading) -> None:
    # the stages come from the model's own record (raw tokens), one head on demand
    staged = view.trace
    if not staged.has_stages(view.kind):
        st.info(t("explorer.stages_unavailable"), icon=":material/info:")
        return
    sq, sk = staged.tokens(view.kind)
    stage_head = view.head if view.aggregate == "head" else 0
    stages_intro(view, reading, stage_head)
    rows = cols = slice(None)
    start = (0, 0)
    if is_long(len(sq), len(sk)):  # one window of the head, at full resolution
        rows, cols = zoom_window(len(sq), len(sk), limit=STAGES_WINDOW_MAX)
        sq, sk, start = sq[rows], sk[cols], (rows.start, cols.start)
    one = staged.attention_stages(view.kind, view.layer, stage_head, rows=rows, cols=cols)
    columns, charts = st.columns(2), []
    # The three pre-softmax stages on a diverging scale, then the softmax weights.
    for i, stage in enumerate(("scores", "scaled", "masked")):
        figure = scores_heatmap(
            getattr(one, stage),
            sq,
            sk,
            title=t(f"explorer.stage.{stage}"),
            labels=axis_labels(value="common.axis.score"),
            start=start,
        )
        charts.append(drawn(figure, f"stage_{stage}", where=columns[i % 2]))
    figure = attention_heatmap(
        one.weights,
        sq,
        sk,
        mask=staged.mask(view.kind, rows, cols),
        title=t("explorer.stage.softmax"),
        labels=axis_labels(),
        start=start,
    )
    charts.append(drawn(figure, "stage_softmax", where=columns[1]))
    if view.merge or view.hide:
        st.caption(t("explorer.stages_raw_tokens"))
    if getattr(reading.lm.config, "qk_norm", False):
        charts.append(show_qk_norm(view, reading, stage_head, rows, cols))
    export_charts(view, reading, [c for c in charts if c], f"stages-head{stage_head + 1}")


def show_qk_norm(view: AttentionView, reading: Reading, head: int, rows: slice, cols: slice):
    """QK-norm (Gemma 3): each query's and key's length before and after the norm, from the
    page's own trace, which kept them (``traced``); a long input's is traced again with them."""
    normed = view.trace
    if not normed.has_norm_stages(view.kind):
        normed = get_trace(reading.lm, reading.text, stages=True, new_tokens=reading.new_tokens)
    if not normed.has_norm_stages(view.kind):
        return None
    sq, sk = normed.tokens(view.kind)
    parts = normed.norm_stages(view.kind, view.layer, head)
    parts = {
        name: values[rows] if name.startswith("q") else values[cols]
        for name, values in parts.items()
    }
    st.subheader(t("explorer.qknorm.header"))
    st.markdown(t("explorer.qknorm.text", d_k=parts["q_after"].shape[-1]))
    names = {w: t(f"explorer.qknorm.{w}") for w in ("queries", "keys", "before", "after", "length")}
    figure = qk_norm_figure(
        sq[rows], sk[cols], parts, names=names, title=t("explorer.qknorm.title", h=head + 1)
    )
    chart = drawn(figure, "stage_qknorm")
    spans = {name: span_text(values.norm(dim=-1)) for name, values in parts.items()}
    st.caption(t("explorer.qknorm.caption", **spans))
    return chart


def span_text(lengths) -> str:
    """Smallest to largest, as a caption says it: "3.1–48.0"."""
    return f"{float(lengths.min()):.1f}–{float(lengths.max()):.1f}"


def statistics_frame(view: AttentionView):
    """Every head's entropy, distance and first-token share; a long input's in a worker
    under a bar of layers (seconds)."""
    if not view.long:
        return head_stats_table(view.statistics())
    return head_stats_table(
        with_progress(
            ("stats", id(view.shown), view.kind),
            lambda report: view.statistics(report),
            lambda done, n: t("explorer.stats_progress", done=done, n=n),
        )
    )


def show_stats(view: AttentionView, reading: Reading) -> None:
    frame = statistics_frame(view)
    st.caption(t("explorer.stats_caption"))
    share = st.column_config.ProgressColumn
    st.dataframe(
        frame,
        hide_index=True,
        column_config={
            "layer": st.column_config.NumberColumn(t("common.layer")),
            "head": st.column_config.NumberColumn(t("common.head")),
            "entropy": share(
                t("explorer.stats.entropy"),
                help=t("explorer.stats.entropy_help"),
                format="%.2f",
                min_value=0.0,
                max_value=max(1e-6, float(frame["entropy"].max())),
            ),
            "mean_distance": st.column_config.NumberColumn(
                t("explorer.stats.distance"), help=t("explorer.stats.distance_help"), format="%.2f"
            ),
            "first_token": share(
                t("explorer.stats.first_token"),
                help=t("explorer.stats.first_token_help"),
                format="%.2f",
                min_value=0.0,
                max_value=1.0,
            ),
        },
    )


def second_trace(view: AttentionView, reading: Reading, mode: str):
    """The trace to compare with and its label (sentence or model mode), or (None, "")."""
    if mode == "sentence":
        text2 = clean_text(
            st.text_input(
                t("explorer.compare_sentence"),
                key="text2",
                bind="query-params",
                persist_state="session",
                placeholder=reading.text,
            )
            or ""
        )[0]
        other = get_trace(reading.lm, text2, new_tokens=reading.new_tokens) if text2 else None
        return other, textwrap.shorten(text2, 40, placeholder="…")  # a chart title: plain
    others = [m for m in model_choices() if m not in (FOLDER, reading.model_name)]
    model2 = linked(
        st.selectbox, t("explorer.compare_model"), others, key="model2", format_func=model_label
    )
    return get_trace_by_name(model2, reading.text), model_label(model2)


def second_view(view: AttentionView, reading: Reading, mode: str):
    """What to compare with: (its view, its title), or None with a note to the reader."""
    if mode == "layer":
        layer2 = linked(
            st.selectbox,
            t("explorer.compare_layer"),
            list(range(view.n_layers)),
            key="layer2",
            default=view.n_layers - 1,
            format_func=lambda i: t("common.layer_n", n=i + 1),
        )
        return view.choose(layer=layer2), title_of(view, layer2)
    other, label = second_trace(view, reading, mode)
    if other is None:
        st.info(t("explorer.compare_need_input"), icon=":material/edit:")
        return None
    if view.kind not in other.kinds():
        st.info(t("explorer.compare_no_kind"), icon=":material/info:")
        return None
    layers2, heads2, _, _ = other.shape(view.kind)
    if view.layer >= layers2 or view.head >= heads2:
        st.info(t("explorer.compare_no_layer"), icon=":material/info:")
        return None
    return view.choose(trace=other, n_prompt=None), f"{title_of(view)} · {label}"


def show_compare(view: AttentionView, reading: Reading) -> None:
    st.caption(t("explorer.compare_caption"))
    modes = ["sentence", "layer", "model"] if view.n_layers > 1 else ["sentence", "model"]
    mode = linked(
        st.segmented_control,
        t("explorer.compare_mode"),
        modes,
        key="cmp",
        required=True,
        format_func=lambda m: t(f"explorer.compare.{m}"),
    )
    found = second_view(view, reading, mode)
    if found is None:
        return
    other, second_title = found
    same_shape = len(view.tokens[0]) == len(other.tokens[0])
    same_shape = same_shape and len(view.tokens[1]) == len(other.tokens[1])
    compared = compare_pooled if view.long or other.long else compare_whole
    charts = compared(view, other, second_title, st.columns(2), same_shape)
    export_charts(view, reading, charts, f"compare-{mode}")


def compare_whole(view, other, second_title: str, columns, same_shape: bool) -> list:
    """Two short maps side by side, and their difference cell by cell."""
    charts = [
        drawn(whole_map_chart(view)[0], "cmp_first", where=columns[0]),
        drawn(whole_map_chart(other, second_title)[0], "cmp_second", where=columns[1]),
    ]
    if not same_shape:
        st.info(t("explorer.compare_tokens_differ"), icon=":material/info:")
        return charts

    def both(a: list[str], b: list[str]) -> list[str]:
        # Position by position; where the inputs differ, name both ("math/art").
        return [x if x == y else f"{x}/{y}" for x, y in zip(a, b, strict=True)]

    figure = difference_heatmap(
        view.map(),
        other.map(),
        both(view.tokens[0], other.tokens[0]),
        both(view.tokens[1], other.tokens[1]),
        mask=view.mask() & other.mask(),
        title=t("explorer.compare_difference"),
        labels=axis_labels(value="common.axis.difference"),
    )
    caption = t("explorer.compare_difference_caption")
    charts.append(drawn(figure, "cmp_diff", caption=caption))
    st.caption(caption)
    return charts


def compare_pooled(view, other, second_title: str, columns, same_shape: bool) -> list:
    """Two long maps as block means (so the difference is exact), and their difference."""
    st.caption(t("explorer.compare_pooled"))
    ready_rollout(view)
    ready_rollout(other)
    first, second = view.overview(reduce="mean"), other.overview(reduce="mean")
    charts = []
    for (values, row_edges, col_edges), title, key, col in (
        (first, title_of(view), "cmp_first", columns[0]),
        (second, second_title, "cmp_second", columns[1]),
    ):
        figure = overview_heatmap(values, row_edges, col_edges, title=title, labels=axis_labels())
        charts.append(drawn(figure, key, where=col))
    if not same_shape:
        st.info(t("explorer.compare_tokens_differ"), icon=":material/info:")
        return charts
    figure = overview_heatmap(
        second.values - first.values,
        first.row_edges,
        first.col_edges,
        title=t("explorer.compare_difference"),
        labels=axis_labels(value="common.axis.difference"),
        bound=1.0,
    )
    caption = t("explorer.compare_difference_caption")
    charts.append(drawn(figure, "cmp_diff", caption=caption))
    st.caption(caption)
    return charts


def show_export(view: AttentionView, reading: Reading) -> None:
    if view.long:
        show_window_export(view, reading)
        return
    q_tokens, k_tokens = view.tokens
    whole = view.n_layers * view.n_heads * len(q_tokens) * len(k_tokens) <= CSV_MAX_CELLS
    layers = range(view.n_layers) if whole else [view.layer]

    def csv_bytes() -> bytes:
        frame = attention_frame(view.stacked(layers), q_tokens, k_tokens)
        if not whole:
            frame["layer"] = view.layer + 1
        return frame.to_csv(index=False).encode("utf-8")

    st.caption(
        t("explorer.export_caption") if whole else t("explorer.export_layer_only", n=view.layer + 1)
    )
    download_buttons(
        csv_bytes,
        lambda: trace_to_json(view.shown, reading.model_name, reading.text),
        lambda: trace_to_npz(view.shown),
        f"attention-{view.kind}.csv",
        "attention",
    )


def show_window_export(view: AttentionView, reading: Reading) -> None:
    """A long input: every map together would be gigabytes, so the files hold one window of
    the chosen layer, every head (the zoom's window: the heatmap picks the same one)."""
    q_tokens, k_tokens = view.tokens
    n = max(len(q_tokens), len(k_tokens))
    st.caption(t("explorer.export_window", n=n, layer=view.layer + 1))
    rows, cols = zoom_window(len(q_tokens), len(k_tokens))
    shown, kind, layer = view.shown, view.kind, view.layer

    def csv_bytes() -> bytes:
        return window_frame(shown, kind, layer, rows, cols).to_csv(index=False).encode("utf-8")

    name = f"attention-layer{layer + 1}-q{rows.start}-{rows.stop - 1}-k{cols.start}-{cols.stop - 1}"
    download_buttons(
        csv_bytes,
        lambda: window_to_json(shown, kind, layer, rows, cols, reading.model_name, reading.text),
        lambda: window_to_npz(shown, kind, layer, rows, cols),
        f"{name}.csv",
        name,
    )


def download_buttons(csv_bytes, json_text, npz_bytes, csv_name: str, name: str) -> None:
    """CSV, JSON and NPZ side by side (each made when clicked), then the permalink's note."""
    e1, e2, e3 = st.columns(3)
    for where, label, data, file_name, mime, icon in (
        (e1, "csv", csv_bytes, csv_name, "text/csv", "table"),
        (e2, "json", json_text, f"{name}.json", "application/json", "data_object"),
        (e3, "npz", npz_bytes, f"{name}.npz", "application/octet-stream", "deployed_code"),
    ):
        where.download_button(
            t(f"explorer.export.{label}"),
            data,
            file_name=file_name,
            mime=mime,
            icon=f":material/{icon}:",
            on_click="ignore",
        )
    st.markdown(t("explorer.permalink"))
    st.caption(
        t("explorer.image_export", format=image_format().upper(), setting=t("chart.image_format"))
    )


# Adding a view: one function above and one line here (its icon in VIEW_ICONS, its name in
# the catalogs as explorer.view.<id>).
VIEWS = {
    "heatmap": show_heatmap,
    "heads": show_heads,
    "model": show_model,
    "lines": show_lines,
    "focus": show_focus,
    "stages": show_stages,
    "stats": show_stats,
    "compare": show_compare,
    "export": show_export,
}


# ---- the model, the text and its trace ----


def generation_option(lm) -> int | None:
    """Decoder-only models: the prompt's own map by default, generation when asked for (a
    toy trained on a task shows its answer by default: that is what it was made for)."""
    if lm.kind != "decoder":
        return None
    default = min(GENERATE_MAX, lm.max_len) if "task" in lm.info else 0
    return int(
        st.number_input(
            t("explorer.generate"),
            min_value=0,
            max_value=GENERATE_MAX,
            value=default,
            step=1,
            key="gen",
            bind="query-params",
            help=t("explorer.generate_help"),
        )
    )


def show_output(lm, model_name: str, trace: Trace, n_prompt: int, specials) -> None:
    """What the model wrote: a decoder-only model's continuation without its prompt."""
    if lm.kind == "encoder" or not trace.tgt_tokens:
        return
    written = trace.tgt_tokens[n_prompt:] if lm.kind == "decoder" else trace.tgt_tokens
    output = [tok for tok in written if tok not in specials]
    if lm.kind == "decoder" and not output:
        st.caption(t("explorer.prompt_only"))
        return
    sentence = written_text(lm.tgt_tokenizer, output)
    key = "explorer.output" if lm.kind != "decoder" else "explorer.generated"
    st.markdown(t(key, output=code_span(sentence)))
    if lm.kind == "decoder":
        st.caption(t("explorer.generated_mark", mark=GENERATED_MARK))
    if sentence != " ".join(output):  # the axes below show the tokens the model really writes
        # The toy en2ko vocabulary's own reason; any other tokenizer's pieces are just pieces.
        key = "explorer.output_tokens" if model_name == "en2ko" else "explorer.output_pieces"
        st.caption(t(key, tokens=code_span(" ".join(output))))


def get_trace_with_progress(lm, text: str, n_tokens: int, new_tokens: int | None) -> Trace:
    """``get_trace``; a long input's first pass runs in a worker (ui.background) under a
    bar of the attention layers it has read: a minute on a laptop, which a click during it
    must not throw away. A QK-norm model's short input keeps the norm's stages in the same
    pass (a few MB at a sentence), so the stages view draws them without a second trace."""
    if not is_long(n_tokens, n_tokens):
        stages = bool(getattr(lm.config, "qk_norm", False))  # transformers' configs: no
        return get_trace(lm, text, stages=stages, new_tokens=new_tokens)
    cfg = lm.config
    total = {
        "encoder": cfg.n_encoder_layers,
        "decoder": cfg.n_decoder_layers,
        "encoder-decoder": cfg.n_encoder_layers + 2 * cfg.n_decoder_layers,
    }[lm.kind]

    def compute(report) -> Trace:
        heard = 0

        def layer_read(attention_kind: str, layers: int) -> None:
            nonlocal heard
            heard = min(heard + 1, total)
            report(heard, total)

        with reporting_progress(layer_read):
            return get_trace(lm, text, new_tokens=new_tokens)

    return with_progress(
        ("trace", lm.name, str(lm.device), id(lm), text, new_tokens),
        compute,
        lambda done, n: t("explorer.pass_progress", tokens=n_tokens, done=done, n=n),
    )


# ---- the controls: ids in the URL, so the address bar is a permalink to this exact view ----


def kind_and_aggregate(lm, trace: Trace) -> tuple[str, str]:
    """The attention kind (encoder / decoder / cross) and the aggregate; rollout is offered
    where it is how the model's input flows (``lm.kind``, the model kind, decides)."""
    # One row each: the attention kinds' labels are long in Korean and would be cut off.
    attention_kind = linked(
        st.segmented_control,
        t("explorer.kind"),
        [k for k in KINDS if k in trace.kinds()],
        key="kind",
        required=True,
        format_func=lambda k: t(f"common.kind.{k}"),
    )
    aggregate = linked(
        st.segmented_control,
        t("explorer.aggregate"),
        [a for a in AGGREGATES if a != "rollout" or rollout_means_flow(lm.kind, attention_kind)],
        key="agg",
        required=True,
        format_func=lambda a: t(f"explorer.aggregate.{a}"),
        help=t("explorer.aggregate_help"),
    )
    return attention_kind, aggregate


def layer_and_head(n_layers: int, n_heads: int, aggregate: str) -> tuple[int, int]:
    l_col, h_col, _ = st.columns([2, 2, 3])
    with l_col:
        layer = linked(
            st.selectbox,
            t("common.layer"),
            list(range(n_layers)),
            key="layer",
            format_func=lambda i: t("common.layer_n", n=i + 1),
        )
    with h_col:
        head = linked(
            st.selectbox,
            t("common.head"),
            list(range(n_heads)),
            key="head",
            format_func=lambda i: t("common.head_n", n=i + 1),
            disabled=aggregate != "head",
        )
    return layer, head


def token_toggles(trace: Trace, kind: str) -> tuple[str | None, bool, bool]:
    """Join pieces ("word", "character" or None), hide specials, renormalise: off for a long
    input (read map by map)."""
    can_merge = any(subword_style(toks) for toks in (trace.src_tokens, trace.tgt_tokens) if toks)
    n = max(len(toks) for toks in trace.tokens(kind))
    long_input = is_long(n, n)
    # One wrapping row, each toggle as wide as its label: thirds of a 1024 px page cut them.
    row = st.container(horizontal=True, gap="medium")
    merge = row.toggle(
        t("explorer.merge"),
        key="merge",
        bind="query-params",
        disabled=not can_merge or long_input,
        help=t("explorer.merge_help"),
    )
    # A word holds whole characters: joining characters matters only with words apart.
    chars = row.toggle(
        t("explorer.merge_chars"),
        key="merge_chars",
        bind="query-params",
        disabled=not can_merge or long_input or merge,
        help=t("explorer.merge_chars_help"),
    )
    hide = row.toggle(
        t("explorer.hide"),
        key="hide",
        bind="query-params",
        disabled=long_input,
        help=t("explorer.hide_help"),
    )
    if long_input:
        st.caption(t("explorer.long_input_note", n=n))
        merge = chars = hide = False
    renorm = row.toggle(
        t("explorer.renorm"),
        value=True,
        key="renorm",
        bind="query-params",
        disabled=not hide,
        help=t("explorer.renorm_help"),
    )
    unit = "word" if merge else "character" if chars else None
    return unit if can_merge else None, hide, renorm


def chosen_view(lm, trace: Trace, n_prompt: int | None) -> AttentionView:
    """The controls, read into one view of the trace."""
    kind, aggregate = kind_and_aggregate(lm, trace)
    n_layers, n_heads, _, _ = trace.shape(kind)  # from the record: no map computed
    layer, head = layer_and_head(n_layers, n_heads, aggregate)
    unit, hide, renorm = token_toggles(trace, kind)
    return AttentionView(
        trace,
        kind,
        layer,
        head,
        aggregate,
        merge=unit is not None,
        unit=unit or "word",
        hide=hide,
        renorm=renorm,
        specials=model_special_tokens(lm),
        n_prompt=n_prompt,
    )


def view_choice() -> str:
    return linked(
        st.segmented_control,
        t("explorer.view"),
        list(VIEWS),
        key="view",
        required=True,
        format_func=lambda name: f"{VIEW_ICONS[name]} {t(f'explorer.view.{name}')}",
    )


# ---- the page ----

st.title(t("explorer.title"))
st.caption(t("explorer.intro"))

lm = get_model()
model_name = selected_model()
read = sentence_read(lm, model_name, offer_pretrained=True) if lm is not None else None
if read is None:
    st.stop()
text, encoded = read
n_tokens = len(encoded.ids)  # the text is read once a rerun: here
new_tokens = generation_option(lm)
with st.spinner(t("explorer.running")):
    trace = get_trace_with_progress(lm, text, n_tokens, new_tokens)
n_prompt = n_tokens if lm.kind == "decoder" else None
show_output(lm, model_name, trace, n_prompt or 0, model_special_tokens(lm))
st.info(t("explorer.not_explanation"), icon=":material/lightbulb:")

view = chosen_view(lm, trace, n_prompt)
share = view.hidden_share()
if share is not None:
    st.caption(t("explorer.hidden_share", share=f"{share * 100:.1f}"))
if not all(view.tokens):
    st.warning(t("explorer.nothing_left"), icon=":material/visibility_off:")
    st.stop()
VIEWS[view_choice()](view, Reading(lm, model_name, text, new_tokens))
