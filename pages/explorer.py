"""Attention Explorer: type a sentence, see every head of every layer.

Top to bottom: the model and sentence, the trace, the controls (ids in the URL, so the
address bar is a permalink), then the chosen view: one function per view in ``VIEWS``.
"""

from __future__ import annotations

import copy
import textwrap
from dataclasses import dataclass

import numpy as np
import streamlit as st
import torch

from model.analysis.export import (
    trace_to_json,
    trace_to_npz,
    window_to_json,
    window_to_npz,
)
from model.analysis.tokens import subword_style, written_text
from model.analysis.views import (
    AGGREGATES,
    model_special_tokens,
    rollout_means_flow,
    shown_rollout,
    shown_trace,
)
from model.trace import Trace, reporting_progress
from ui.background import with_progress
from ui.charts import attention_summary, describe_figure, image_format, plotly_chart
from ui.frame import require_frame
from ui.i18n import axis_labels, head_titles, t
from ui.maps import (
    FOCUS_KEYS,
    FOCUS_TEXT_AFTER,
    FOCUS_TEXT_BEFORE,
    STAGES_WINDOW_MAX,
    chosen_reader,
    head_maps,
    is_long,
    pooled_heads,
    pooled_map,
    rollout_map,
    zoom_window,
)
from ui.models import (
    FOLDER,
    cached_trace,
    get_model,
    get_trace,
    model_choices,
    model_label,
    selected_device,
    selected_model,
    trace_with,
)
from ui.permalink import linked
from ui.sentence import clean_text, code_span, sentence_input
from viz.attention import (
    HEADS_MAX_SIDE,
    attention_heatmap,
    difference_heatmap,
    focus_bars_figure,
    heads_figure,
    heads_pooled,
    model_grid_figure,
    overview_heatmap,
    scores_heatmap,
)
from viz.headview import head_colour, head_view_height, head_view_html, highlighted_text_html
from viz.tables import attention_frame, streamed_head_stats, window_frame

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
GENERATED_MARK = "⁺"  # after a generated token's label: the prompt's tokens stay plain


@dataclass
class Shown:
    """What the reader chose to see; every view draws from this and nothing else."""

    lm: object
    model_name: str
    text: str
    trace: Trace  # as the model produced it
    base: Trace  # words merged, when asked
    shown: Trace  # ... and special tokens hidden, when asked
    kind: str
    layer: int
    head: int
    aggregate: str
    merge: bool
    hide: bool
    renorm: bool
    specials: frozenset[str]
    n_layers: int
    n_heads: int
    new_tokens: int | None = None  # decoder-only: tokens generated after the prompt

    @property
    def tokens(self) -> tuple[list[str], list[str]]:
        return self.shown.tokens(self.kind)

    @property
    def mask(self) -> torch.Tensor:  # the model's own: True = may attend
        return self.shown.mask(self.kind)

    @property
    def long(self) -> bool:
        """Drawn as a pooled overview and a zoom window (ui.maps), never whole."""
        return is_long(*(len(toks) for toks in self.tokens))

    def title_of(self, layer: int) -> str:
        if self.aggregate == "rollout":
            return t("explorer.rollout_title", n=layer + 1)
        what = (
            t("common.head_n", n=self.head + 1)
            if self.aggregate == "head"
            else t(f"explorer.aggregate.{self.aggregate}")
        )
        return f"{t('common.layer_n', n=layer + 1)} · {what}"

    def map_of(self, base: Trace, shown: Trace, layer: int, n_heads: int | None = None):
        """[Lq, Lk] for a layer and the chosen head or aggregate, and its title (short
        inputs: a long one is read as an overview and a window, see ``pooled_of``)."""
        if self.aggregate == "rollout":
            maps = shown_rollout(base, self.kind, self.specials, self.hide, self.renorm)
            return maps[layer], self.title_of(layer)
        n_heads = self.n_heads if n_heads is None else n_heads
        read = chosen_reader(shown, self.kind, layer, self.aggregate, self.head, n_heads)
        return read(None), self.title_of(layer)

    def pooled_of(self, shown: Trace, layer: int, reduce: str):
        """(values, query block edges, key block edges) of a long map, and its title."""
        found = pooled_map(shown, self.kind, layer, self.aggregate, self.head, self.n_heads, reduce)
        return found, self.title_of(layer)

    def selected_map(self):
        return self.map_of(self.base, self.shown, self.layer)


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


def show_overview(v: Shown, found, title: str, reduce: str, key: str, where=st) -> None:
    """A long map's pooled overview, said in its caption (blocks, max or mean)."""
    values, row_edges, col_edges = found
    q_tokens, k_tokens = v.tokens
    where.caption(
        t(
            "explorer.overview_caption",
            n_q=len(q_tokens),
            n_k=len(k_tokens),
            rows=len(row_edges) - 1,
            cols=len(col_edges) - 1,
            reduce=t(f"explorer.reduce_said.{reduce}"),
        )
    )
    plotly_chart(
        overview_heatmap(
            values,
            row_edges,
            col_edges,
            title=f"{title} · {t('explorer.overview')}",
            labels=axis_labels(),
        ),
        key=key,
        where=where,
    )


def ready_rollout(trace: Trace, kind: str, layer: int) -> None:
    """A long input's rollout up to ``layer``, computed now (kept with the trace) in a
    worker under a bar of the layers multiplied: seconds a layer at thousands of tokens."""
    with_progress(
        ("rollout", id(trace), kind, layer),
        lambda report: rollout_map(trace, kind, layer, report),
        lambda done, n: t("explorer.rollout_progress", layer=layer + 1, done=done, n=n),
    )


def show_window(v: Shown, weights, rows: slice, cols: slice, title: str, key: str) -> None:
    """One zoom window at full resolution, its tokens on the axes."""
    q_tokens, k_tokens = v.tokens
    q, k = q_tokens[rows], k_tokens[cols]
    where = t(
        "explorer.zoom_title",
        title=title,
        q0=rows.start,
        q1=rows.stop - 1,
        k0=cols.start,
        k1=cols.stop - 1,
    )
    plotly_chart(
        attention_heatmap(
            weights,
            q,
            k,
            mask=v.shown.mask(v.kind, rows, cols),  # the window's cells only
            title=where,
            labels=axis_labels(),
            start=(rows.start, cols.start),
        ),
        key=key,
        summary=attention_summary(where, weights, q, k),
    )


def show_heatmap(v: Shown) -> None:
    if v.aggregate == "max":
        st.caption(t("explorer.max_note"))
    q_tokens, k_tokens = v.tokens
    if v.long:
        reduce = reduce_choice()
        if v.aggregate == "rollout":
            ready_rollout(v.shown, v.kind, v.layer)
        found, title = v.pooled_of(v.shown, v.layer, reduce)
        show_overview(v, found, title, reduce, "overview_chart")
        rows, cols = zoom_window(len(q_tokens), len(k_tokens))
        read = chosen_reader(v.shown, v.kind, v.layer, v.aggregate, v.head, v.n_heads)
        show_window(v, read(rows, cols), rows, cols, title, "heatmap_chart")
        return
    weights, title = v.selected_map()
    plotly_chart(
        attention_heatmap(
            weights, q_tokens, k_tokens, mask=v.mask, title=title, labels=axis_labels()
        ),
        key="heatmap_chart",
        summary=attention_summary(title, weights, q_tokens, k_tokens),
    )


def show_heads(v: Shown) -> None:
    q_tokens, k_tokens = v.tokens
    common = dict(titles=head_titles(v.n_heads), labels=axis_labels(), max_side=HEADS_MAX_SIDE)
    if heads_pooled(q_tokens, k_tokens, HEADS_MAX_SIDE):
        n = max(len(q_tokens), len(k_tokens))
        # A long input's pass summed every head's blocks already: drawn from those, with no
        # pass over the layer's queries and keys (half a second at 4,096 tokens)
        side = (v.long and v.shown.summed_blocks(v.kind)) or HEADS_MAX_SIDE
        values, row_edges, col_edges = pooled_heads(v.shown, v.kind, v.layer, "mean", side)
        st.caption(t("explorer.heads_pooled", n=n, k=max(2, round(n / (len(row_edges) - 1)))))
        figure = heads_figure(
            values,
            q_tokens,
            k_tokens,
            edges=(row_edges, col_edges),
            **common,
        )
    else:
        figure = heads_figure(
            head_maps(v.shown, v.kind, v.layer, v.n_heads),
            q_tokens,
            k_tokens,
            mask=v.mask,
            **common,
        )
    plotly_chart(figure, key="heads_chart")


def show_model(v: Shown) -> None:
    st.caption(t("explorer.model_grid_note"))
    q_tokens, k_tokens = v.tokens
    side = max(4, min(32, int((GRID_MAX_CELLS / (v.n_layers * v.n_heads)) ** 0.5)))
    summed = v.shown.summed_blocks(v.kind)
    if v.long and summed:  # the pass summed every head's blocks: tiles of those, none recomputed
        side = min(side, summed)
    if max(len(q_tokens), len(k_tokens)) <= side:  # every cell fits its tile
        tiles = torch.stack(
            [head_maps(v.shown, v.kind, layer, v.n_heads) for layer in range(v.n_layers)]
        )
        mask = v.mask
    else:  # each head pooled on its own, block means of the cells the mask allows
        tiles = np.stack(
            [pooled_heads(v.shown, v.kind, layer, "mean", side)[0] for layer in range(v.n_layers)]
        )
        mask = None  # already NaN where a whole block is masked
    plotly_chart(
        model_grid_figure(
            tiles,
            mask=mask,
            col_titles=head_titles(v.n_heads),
            row_titles=[t("common.layer_n", n=i + 1) for i in range(v.n_layers)],
            max_side=side,
        ),
        key="model_chart",
    )


def show_lines(v: Shown) -> None:
    q_tokens, k_tokens = v.tokens
    if max(len(q_tokens), len(k_tokens)) > HEAD_VIEW_MAX_TOKENS:
        st.info(t("explorer.lines_too_long", limit=HEAD_VIEW_MAX_TOKENS), icon=":material/info:")
        return
    st.caption(t("explorer.lines_caption", n=v.layer + 1))
    st.iframe(
        head_view_html(
            head_maps(v.shown, v.kind, v.layer, v.n_heads),
            q_tokens,
            k_tokens,
            head_labels=head_titles(v.n_heads),
            hint=t("explorer.lines_hint"),
        ),
        height=head_view_height(max(len(q_tokens), len(k_tokens)), v.n_heads),
    )


def show_focus(v: Shown) -> None:
    q_tokens, k_tokens = v.tokens
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
    token = token if token in options else 0
    rows = head_maps(v.shown, v.kind, v.layer, v.n_heads, rows=[token])[:, 0]  # [H, Lk]
    st.caption(t("explorer.focus_caption", n=v.layer + 1))
    shade = slice(None)  # the text shaded: all of it, or for a long input the part near
    if v.long:  # the token (thousands of shaded words are a wall, and slow to lay out)
        start = max(0, min(token, len(k_tokens)) - FOCUS_TEXT_BEFORE)
        shade = slice(start, min(len(k_tokens), start + FOCUS_TEXT_BEFORE + FOCUS_TEXT_AFTER))
        st.caption(t("explorer.focus_text_part", a=shade.start, b=shade.stop - 1, n=len(k_tokens)))
    shaded = k_tokens[shade]
    st.iframe(
        highlighted_text_html(
            shaded,
            rows.mean(0)[shade],
            focus=token - (shade.start or 0) if v.kind != "cross" else None,
            caption=t("explorer.focus_text_caption"),
        ),
        height=60 + 34 * (1 + sum(len(tok) + 3 for tok in shaded) // 110),
    )
    keys = None
    if v.long:  # the keys it weighs most, in reading order
        keys = sorted(rows.mean(0).topk(FOCUS_KEYS).indices.tolist())
        share = float(rows.mean(0)[keys].sum()) * 100
        st.caption(
            t("explorer.focus_top_keys", k=FOCUS_KEYS, n=len(k_tokens), share=f"{share:.0f}")
        )
    figure = focus_bars_figure(
        rows if keys is None else rows[:, keys],
        k_tokens if keys is None else [k_tokens[i] for i in keys],
        head_titles=head_titles(v.n_heads),
        colours=[head_colour(h) for h in range(v.n_heads)],
        value_label=t("common.axis.weight"),
        positions=keys,
    )
    where = f"{t('explorer.view.focus')} · {t('common.layer_n', n=v.layer + 1)}"
    plotly_chart(figure, key="focus_chart", summary=describe_figure(figure, title=where))


def show_stages(v: Shown) -> None:
    staged = get_trace(
        v.text, new_tokens=v.new_tokens
    )  # stages come from the same record, one head on demand
    if not staged.has_stages(v.kind):
        st.info(t("explorer.stages_unavailable"), icon=":material/info:")
        return
    sq, sk = staged.tokens(v.kind)
    stage_head = v.head if v.aggregate == "head" else 0
    if v.aggregate != "head":
        st.caption(t("explorer.stages_first_head"))
    d_k = getattr(v.lm.config, "d_k", None)  # transformers configs have no d_k
    st.markdown(t("explorer.stages_intro", n=v.layer + 1, h=stage_head + 1))
    if d_k:
        st.latex(rf"d_k = {d_k}, \quad \sqrt{{d_k}} = {d_k**0.5:.3f}")
    rows = cols = slice(None)
    start = (0, 0)
    if is_long(len(sq), len(sk)):  # one window of the head, at full resolution
        rows, cols = zoom_window(len(sq), len(sk), limit=STAGES_WINDOW_MAX)
        sq, sk, start = sq[rows], sk[cols], (rows.start, cols.start)
    one = staged.attention_stages(v.kind, v.layer, stage_head, rows=rows, cols=cols)
    stages = {name: getattr(one, name) for name in ("scores", "scaled", "masked", "weights")}
    columns = st.columns(2)
    # The three pre-softmax stages on a diverging scale, then the softmax weights.
    for i, stage in enumerate(("scores", "scaled", "masked")):
        plotly_chart(
            scores_heatmap(
                stages[stage],
                sq,
                sk,
                title=t(f"explorer.stage.{stage}"),
                labels=axis_labels(value="common.axis.score"),
                start=start,
            ),
            key=f"stage_{stage}",
            where=columns[i % 2],
        )
    plotly_chart(
        attention_heatmap(
            stages["weights"],
            sq,
            sk,
            mask=staged.mask(v.kind)[rows, cols],
            title=t("explorer.stage.softmax"),
            labels=axis_labels(),
            start=start,
        ),
        key="stage_softmax",
        where=columns[1],
    )
    if v.merge or v.hide:
        st.caption(t("explorer.stages_raw_tokens"))


def show_stats(v: Shown) -> None:
    self_attention = v.kind != "cross"
    if v.long:  # every head of every layer: seconds, in a worker under a bar of layers
        frame = with_progress(
            ("stats", id(v.shown), v.kind),
            lambda report: streamed_head_stats(v.shown, v.kind, self_attention, report),
            lambda done, n: t("explorer.stats_progress", done=done, n=n),
        )
    else:
        frame = streamed_head_stats(v.shown, v.kind, self_attention)
    st.caption(t("explorer.stats_caption"))
    st.dataframe(
        frame,
        hide_index=True,
        column_config={
            "layer": st.column_config.NumberColumn(t("common.layer")),
            "head": st.column_config.NumberColumn(t("common.head")),
            "entropy": st.column_config.ProgressColumn(
                t("explorer.stats.entropy"),
                help=t("explorer.stats.entropy_help"),
                format="%.2f",
                min_value=0.0,
                max_value=max(1e-6, float(frame["entropy"].max())),
            ),
            "mean_distance": st.column_config.NumberColumn(
                t("explorer.stats.distance"), help=t("explorer.stats.distance_help"), format="%.2f"
            ),
            "first_token": st.column_config.ProgressColumn(
                t("explorer.stats.first_token"),
                help=t("explorer.stats.first_token_help"),
                format="%.2f",
                min_value=0.0,
                max_value=1.0,
            ),
        },
    )


def second_map(v: Shown, mode: str):
    """What to compare with: (shown trace, its base trace, layer, its heads, title), or None
    with a note to the reader."""
    if mode == "layer":
        layer2 = linked(
            st.selectbox,
            t("explorer.compare_layer"),
            list(range(v.n_layers)),
            key="layer2",
            default=v.n_layers - 1,
            format_func=lambda i: t("common.layer_n", n=i + 1),
        )
        return v.shown, v.base, layer2, v.n_heads, v.title_of(layer2)
    if mode == "sentence":
        text2 = clean_text(
            st.text_input(
                t("explorer.compare_sentence"),
                key="text2",
                bind="query-params",
                persist_state="session",
                placeholder=v.text,
            )
            or ""
        )[0]
        other = get_trace(text2, new_tokens=v.new_tokens) if text2 else None
        label = textwrap.shorten(text2, 40, placeholder="…")  # a chart title: plain
    else:
        others = [m for m in model_choices() if m not in (FOLDER, v.model_name)]
        model2 = linked(
            st.selectbox, t("explorer.compare_model"), others, key="model2", format_func=model_label
        )
        other = trace_with(model2, v.text)
        label = model_label(model2)
    if other is None:
        st.info(t("explorer.compare_need_input"), icon=":material/edit:")
        return None
    if v.kind not in other.attention:
        st.info(t("explorer.compare_no_kind"), icon=":material/info:")
        return None
    base2, shown2, _ = shown_trace(other, v.specials, v.merge, v.hide, v.renorm)
    layers2, heads2, _, _ = shown2.shape(v.kind)
    if v.layer >= layers2 or v.head >= heads2:
        st.info(t("explorer.compare_no_layer"), icon=":material/info:")
        return None
    return shown2, base2, v.layer, heads2, f"{v.title_of(v.layer)} · {label}"


def show_compare(v: Shown) -> None:
    st.caption(t("explorer.compare_caption"))
    modes = ["sentence", "layer", "model"] if v.n_layers > 1 else ["sentence", "model"]
    mode = linked(
        st.segmented_control,
        t("explorer.compare_mode"),
        modes,
        key="cmp",
        required=True,
        format_func=lambda m: t(f"explorer.compare.{m}"),
    )
    found = second_map(v, mode)
    if found is None:
        return
    shown2, base2, layer2, heads2, second_title = found
    first_title = v.title_of(v.layer)
    q_tokens, k_tokens = v.tokens
    q2, k2 = shown2.tokens(v.kind)
    mask2 = shown2.mask(v.kind)
    same_shape = (len(q_tokens), len(k_tokens)) == (len(q2), len(k2))
    a_col, b_col = st.columns(2)
    if v.long or is_long(len(q2), len(k2)):  # block means, so the difference is exact
        st.caption(t("explorer.compare_pooled"))
        if v.aggregate == "rollout":
            ready_rollout(v.shown, v.kind, v.layer)
            ready_rollout(shown2, v.kind, layer2)
        first = pooled_map(v.shown, v.kind, v.layer, v.aggregate, v.head, v.n_heads, "mean")
        second = pooled_map(shown2, v.kind, layer2, v.aggregate, v.head, heads2, "mean")
        for (values, re_, ce), title, key, col in (
            (first, first_title, "cmp_first", a_col),
            (second, second_title, "cmp_second", b_col),
        ):
            plotly_chart(
                overview_heatmap(values, re_, ce, title=title, labels=axis_labels()),
                key=key,
                where=col,
            )
        if not same_shape:
            st.info(t("explorer.compare_tokens_differ"), icon=":material/info:")
            return
        plotly_chart(
            overview_heatmap(
                second[0] - first[0],
                first[1],
                first[2],
                title=t("explorer.compare_difference"),
                labels=axis_labels(value="common.axis.difference"),
                bound=1.0,
            ),
            key="cmp_diff",
        )
        st.caption(t("explorer.compare_difference_caption"))
        return
    first, _ = v.selected_map()
    second, _ = v.map_of(base2, shown2, layer2, heads2)
    plotly_chart(
        attention_heatmap(
            first, q_tokens, k_tokens, mask=v.mask, title=first_title, labels=axis_labels()
        ),
        key="cmp_first",
        where=a_col,
    )
    plotly_chart(
        attention_heatmap(second, q2, k2, mask=mask2, title=second_title, labels=axis_labels()),
        key="cmp_second",
        where=b_col,
    )
    if not same_shape:
        st.info(t("explorer.compare_tokens_differ"), icon=":material/info:")
        return

    def both(a: list[str], b: list[str]) -> list[str]:
        # Position by position; where the inputs differ, name both ("math/art").
        return [x if x == y else f"{x}/{y}" for x, y in zip(a, b, strict=True)]

    plotly_chart(
        difference_heatmap(
            first,
            second,
            both(q_tokens, q2),
            both(k_tokens, k2),
            mask=v.mask & mask2,
            title=t("explorer.compare_difference"),
            labels=axis_labels(value="common.axis.difference"),
        ),
        key="cmp_diff",
    )
    st.caption(t("explorer.compare_difference_caption"))


def show_export(v: Shown) -> None:
    q_tokens, k_tokens = v.tokens
    if v.long:
        show_window_export(v)
        return
    whole = v.n_layers * v.n_heads * len(q_tokens) * len(k_tokens) <= CSV_MAX_CELLS
    layers = range(v.n_layers) if whole else [v.layer]
    csv_source = torch.stack([head_maps(v.shown, v.kind, layer, v.n_heads) for layer in layers])

    def csv_bytes() -> bytes:
        frame = attention_frame(csv_source, q_tokens, k_tokens)
        if not whole:
            frame["layer"] = v.layer + 1
        return frame.to_csv(index=False).encode("utf-8")

    st.caption(
        t("explorer.export_caption") if whole else t("explorer.export_layer_only", n=v.layer + 1)
    )
    download_buttons(
        v,
        csv_bytes,
        lambda: trace_to_json(v.shown, v.model_name, v.text),
        lambda: trace_to_npz(v.shown),
        "attention",
    )


def show_window_export(v: Shown) -> None:
    """A long input: every map together would be gigabytes, so the files hold one window of
    the chosen layer, every head (the zoom's window: the heatmap picks the same one)."""
    q_tokens, k_tokens = v.tokens
    st.caption(
        t(
            "explorer.export_window",
            n=max(len(q_tokens), len(k_tokens)),
            layer=v.layer + 1,
        )
    )
    rows, cols = zoom_window(len(q_tokens), len(k_tokens))

    def csv_bytes() -> bytes:
        frame = window_frame(v.shown, v.kind, v.layer, rows, cols)
        return frame.to_csv(index=False).encode("utf-8")

    name = (
        f"attention-layer{v.layer + 1}-q{rows.start}-{rows.stop - 1}-k{cols.start}-{cols.stop - 1}"
    )
    download_buttons(
        v,
        csv_bytes,
        lambda: window_to_json(v.shown, v.kind, v.layer, rows, cols, v.model_name, v.text),
        lambda: window_to_npz(v.shown, v.kind, v.layer, rows, cols),
        name,
    )


def download_buttons(v: Shown, csv_bytes, json_text, npz_bytes, name: str) -> None:
    """CSV, JSON and NPZ side by side (each made when clicked), then the permalink's note."""
    e1, e2, e3 = st.columns(3)
    e1.download_button(
        t("explorer.export.csv"),
        csv_bytes,
        file_name=f"{name}-{v.kind}.csv" if name == "attention" else f"{name}.csv",
        mime="text/csv",
        icon=":material/table:",
        on_click="ignore",
    )
    e2.download_button(
        t("explorer.export.json"),
        json_text,
        file_name=f"{name}.json",
        mime="application/json",
        icon=":material/data_object:",
        on_click="ignore",
    )
    e3.download_button(
        t("explorer.export.npz"),
        npz_bytes,
        file_name=f"{name}.npz",
        mime="application/octet-stream",
        icon=":material/deployed_code:",
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


# ---- the page ----

st.title(t("explorer.title"))
st.caption(t("explorer.intro"))

lm = get_model()
if lm is None:
    st.stop()
model_name = selected_model()
text = sentence_input(lm, model_name, offer_pretrained=True)
if text is None:
    st.stop()


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


def mark_generated(trace: Trace, n_prompt: int) -> Trace:
    """A copy whose generated tokens carry GENERATED_MARK, so every view's labels tell them
    from the prompt's."""
    marked = copy.copy(trace)
    marked.tgt_tokens = [
        tok if i < n_prompt else f"{tok}{GENERATED_MARK}" for i, tok in enumerate(trace.tgt_tokens)
    ]
    return marked


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


def traced(lm, text: str, new_tokens: int | None) -> Trace:
    """``get_trace``; a long input's first pass runs in a worker (ui.background) under a
    bar of the attention layers it has read: a minute on a laptop, which a click during it
    must not throw away."""
    n_tokens = len(lm.encode(text).ids)
    if not is_long(n_tokens, n_tokens):
        return get_trace(text, new_tokens=new_tokens)
    cfg = lm.config
    total = {
        "encoder": cfg.n_encoder_layers,
        "decoder": cfg.n_decoder_layers,
        "encoder-decoder": cfg.n_encoder_layers + 2 * cfg.n_decoder_layers,
    }[lm.kind]
    name, device = selected_model(), selected_device()

    def compute(report) -> Trace:
        heard = 0

        def layer_read(kind: str, layers: int) -> None:
            nonlocal heard
            heard = min(heard + 1, total)
            report(heard, total)

        with reporting_progress(layer_read):
            return cached_trace(name, device, text, None, False, new_tokens)

    return with_progress(
        ("trace", name, device, text, new_tokens),
        compute,
        lambda done, n: t("explorer.pass_progress", tokens=n_tokens, done=done, n=n),
    )


new_tokens = generation_option(lm)
with st.spinner(t("explorer.running")):
    trace = traced(lm, text, new_tokens)

specials = model_special_tokens(lm)
n_prompt = len(lm.encode(text).ids) if lm.kind == "decoder" else 0
show_output(lm, model_name, trace, n_prompt, specials)
if lm.kind == "decoder" and len(trace.tgt_tokens) > n_prompt:
    trace = mark_generated(trace, n_prompt)
st.info(t("explorer.not_explanation"), icon=":material/lightbulb:")

can_merge = any(subword_style(toks) for toks in (trace.src_tokens, trace.tgt_tokens) if toks)

# ---- controls: ids in the URL, so the address bar is a permalink to this exact view ----
available = [k for k in KINDS if k in trace.attention]
# One row each: the attention kinds' labels are long in Korean and would be cut off in a column.
c1, c2 = st.container(), st.container()
with c1:
    kind = linked(
        st.segmented_control,
        t("explorer.kind"),
        available,
        key="kind",
        required=True,
        format_func=lambda k: t(f"common.kind.{k}"),
    )
n_layers, n_heads, _, _ = trace.shape(kind)  # from the record: no map computed
# A long input is read map by map (ui.maps): merging and hiding need every map whole.
long_input = is_long(*(len(toks) for toks in trace.tokens(kind)))
with c2:
    aggregate = linked(
        st.segmented_control,
        t("explorer.aggregate"),
        [a for a in AGGREGATES if a != "rollout" or rollout_means_flow(lm.kind, kind)],
        key="agg",
        required=True,
        format_func=lambda a: t(f"explorer.aggregate.{a}"),
        help=t("explorer.aggregate_help"),
    )
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
# One wrapping row, each toggle as wide as its label: thirds of a 1024 px page cut them off.
o1 = o2 = o3 = st.container(horizontal=True, gap="medium")
merge = o1.toggle(
    t("explorer.merge"),
    key="merge",
    bind="query-params",
    disabled=not can_merge or long_input,
    help=t("explorer.merge_help"),
)
hide = o2.toggle(
    t("explorer.hide"),
    key="hide",
    bind="query-params",
    disabled=long_input,
    help=t("explorer.hide_help"),
)
if long_input:
    st.caption(t("explorer.long_input_note", n=max(len(toks) for toks in trace.tokens(kind))))
    merge = hide = False
renorm = o3.toggle(
    t("explorer.renorm"),
    value=True,
    key="renorm",
    bind="query-params",
    disabled=not hide,
    help=t("explorer.renorm_help"),
)

base, shown, removed = shown_trace(trace, specials, merge and can_merge, hide, renorm)
if removed is not None:
    share = float(removed[kind][layer].mean()) * 100
    st.caption(t("explorer.hidden_share", share=f"{share:.1f}"))
q_tokens, k_tokens = shown.tokens(kind)
if not q_tokens or not k_tokens:
    st.warning(t("explorer.nothing_left"), icon=":material/visibility_off:")
    st.stop()

view = linked(
    st.segmented_control,
    t("explorer.view"),
    list(VIEWS),
    key="view",
    required=True,
    format_func=lambda v: f"{VIEW_ICONS[v]} {t(f'explorer.view.{v}')}",
)
VIEWS[view](
    Shown(
        lm,
        model_name,
        text,
        trace,
        base,
        shown,
        kind,
        layer,
        head,
        aggregate,
        merge and can_merge,
        hide,
        renorm,
        specials,
        n_layers,
        n_heads,
        new_tokens,
    )
)
