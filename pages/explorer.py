"""Attention Explorer: type a sentence, see every head of every layer.

Top to bottom: the model and sentence, the trace, the controls (ids in the URL, so the
address bar is a permalink), then the chosen view: one function per view in ``VIEWS``.
"""

from __future__ import annotations

import copy
import textwrap
from dataclasses import dataclass

import streamlit as st
import torch

from model.analysis.export import trace_to_json, trace_to_npz
from model.analysis.tokens import subword_style, written_text
from model.analysis.views import (
    AGGREGATES,
    chosen_map,
    model_special_tokens,
    rollout_means_flow,
    shown_rollout,
    shown_trace,
)
from model.trace import Trace
from ui.charts import attention_summary, image_format, plotly_chart
from ui.frame import require_frame
from ui.i18n import axis_labels, head_titles, t
from ui.models import (
    FOLDER,
    get_model,
    get_trace,
    model_choices,
    model_label,
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
    scores_heatmap,
)
from viz.headview import head_colour, head_view_height, head_view_html, highlighted_text_html
from viz.tables import attention_frame, head_stats_frame

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
    new_tokens: int | None = None  # decoder-only: tokens generated after the prompt

    @property
    def attention(self) -> torch.Tensor:  # [L, H, Lq, Lk]
        return self.shown.attention[self.kind]

    @property
    def tokens(self) -> tuple[list[str], list[str]]:
        return self.shown.tokens(self.kind)

    @property
    def mask(self) -> torch.Tensor:  # the model's own: True = may attend
        return self.shown.mask(self.kind)

    @property
    def n_heads(self) -> int:
        return self.attention.shape[1]

    def map_of(self, base: Trace, shown: Trace, layer: int):
        """[Lq, Lk] for a layer and the chosen head or aggregate, and its title."""
        name = t("common.layer_n", n=layer + 1)
        if self.aggregate == "rollout":
            maps = shown_rollout(base, self.kind, self.specials, self.hide, self.renorm)
            return chosen_map(shown, self.kind, layer, "rollout", rollout_maps=maps), t(
                "explorer.rollout_title", n=layer + 1
            )
        what = (
            t("common.head_n", n=self.head + 1)
            if self.aggregate == "head"
            else t(f"explorer.aggregate.{self.aggregate}")
        )
        return chosen_map(shown, self.kind, layer, self.aggregate, self.head), f"{name} · {what}"

    def selected_map(self):
        return self.map_of(self.base, self.shown, self.layer)


# ---- the views: each draws one way of looking at the chosen attention ----


def show_heatmap(v: Shown) -> None:
    weights, title = v.selected_map()
    if v.aggregate == "max":
        st.caption(t("explorer.max_note"))
    q_tokens, k_tokens = v.tokens
    plotly_chart(
        attention_heatmap(
            weights, q_tokens, k_tokens, mask=v.mask, title=title, labels=axis_labels()
        ),
        key="heatmap_chart",
        summary=attention_summary(title, weights, q_tokens, k_tokens),
    )


def show_heads(v: Shown) -> None:
    q_tokens, k_tokens = v.tokens
    if heads_pooled(q_tokens, k_tokens, HEADS_MAX_SIDE):
        n = max(len(q_tokens), len(k_tokens))
        st.caption(t("explorer.heads_pooled", n=n, k=max(2, round(n / HEADS_MAX_SIDE))))
    plotly_chart(
        heads_figure(
            v.attention[v.layer],
            q_tokens,
            k_tokens,
            mask=v.mask,
            max_side=HEADS_MAX_SIDE,
            titles=head_titles(v.n_heads),
            labels=axis_labels(),
        ),
        key="heads_chart",
    )


def show_model(v: Shown) -> None:
    st.caption(t("explorer.model_grid_note"))
    n_layers = v.attention.shape[0]
    plotly_chart(
        model_grid_figure(
            v.attention,
            mask=v.mask,
            col_titles=head_titles(v.n_heads),
            row_titles=[t("common.layer_n", n=i + 1) for i in range(n_layers)],
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
            v.attention[v.layer],
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
    rows = v.attention[v.layer][:, token, :]  # [H, Lk]
    st.caption(t("explorer.focus_caption", n=v.layer + 1))
    st.iframe(
        highlighted_text_html(
            k_tokens,
            rows.mean(0),
            focus=token if v.kind != "cross" else None,
            caption=t("explorer.focus_text_caption"),
        ),
        height=60 + 34 * (1 + sum(len(tok) + 3 for tok in k_tokens) // 110),
    )
    plotly_chart(
        focus_bars_figure(
            rows,
            k_tokens,
            head_titles=head_titles(v.n_heads),
            colours=[head_colour(h) for h in range(v.n_heads)],
            value_label=t("common.axis.weight"),
        ),
        key="focus_chart",
    )


def show_stages(v: Shown) -> None:
    staged = get_trace(v.text, stages=True, new_tokens=v.new_tokens)
    if v.kind not in staged.stages:
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
    stages = {name: st_[v.layer, stage_head] for name, st_ in staged.stages[v.kind].items()}
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
            ),
            key=f"stage_{stage}",
            where=columns[i % 2],
        )
    plotly_chart(
        attention_heatmap(
            stages["weights"],
            sq,
            sk,
            mask=staged.mask(v.kind),
            title=t("explorer.stage.softmax"),
            labels=axis_labels(),
        ),
        key="stage_softmax",
        where=columns[1],
    )
    if v.merge or v.hide:
        st.caption(t("explorer.stages_raw_tokens"))


def show_stats(v: Shown) -> None:
    frame = head_stats_frame(v.attention, self_attention=v.kind != "cross")
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
        },
    )


def second_map(v: Shown, mode: str):
    """The map to compare with: (map, title, query tokens, key tokens, mask), or None with a
    note to the reader."""
    n_layers = v.attention.shape[0]
    if mode == "layer":
        layer2 = linked(
            st.selectbox,
            t("explorer.compare_layer"),
            list(range(n_layers)),
            key="layer2",
            default=n_layers - 1,
            format_func=lambda i: t("common.layer_n", n=i + 1),
        )
        return (*v.map_of(v.base, v.shown, layer2), *v.tokens, v.mask)
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
    if v.layer >= shown2.attention[v.kind].shape[0] or v.head >= shown2.attention[v.kind].shape[1]:
        st.info(t("explorer.compare_no_layer"), icon=":material/info:")
        return None
    second, title = v.map_of(base2, shown2, v.layer)
    return (second, f"{title} · {label}", *shown2.tokens(v.kind), shown2.mask(v.kind))


def show_compare(v: Shown) -> None:
    st.caption(t("explorer.compare_caption"))
    modes = ["sentence", "layer", "model"] if v.attention.shape[0] > 1 else ["sentence", "model"]
    mode = linked(
        st.segmented_control,
        t("explorer.compare_mode"),
        modes,
        key="cmp",
        required=True,
        format_func=lambda m: t(f"explorer.compare.{m}"),
    )
    first, first_title = v.selected_map()
    found = second_map(v, mode)
    if found is None:
        return
    second, second_title, q2, k2, mask2 = found
    q_tokens, k_tokens = v.tokens
    a_col, b_col = st.columns(2)
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
    if tuple(first.shape) != tuple(second.shape):
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
    attention, (q_tokens, k_tokens) = v.attention, v.tokens
    whole = attention.numel() <= CSV_MAX_CELLS
    csv_source = attention if whole else attention[v.layer : v.layer + 1]

    def csv_bytes() -> bytes:
        frame = attention_frame(csv_source, q_tokens, k_tokens)
        if not whole:
            frame["layer"] = v.layer + 1
        return frame.to_csv(index=False).encode("utf-8")

    st.caption(
        t("explorer.export_caption") if whole else t("explorer.export_layer_only", n=v.layer + 1)
    )
    e1, e2, e3 = st.columns(3)
    e1.download_button(
        t("explorer.export.csv"),
        csv_bytes,
        file_name=f"attention-{v.kind}.csv",
        mime="text/csv",
        icon=":material/table:",
        on_click="ignore",
    )
    e2.download_button(
        t("explorer.export.json"),
        lambda: trace_to_json(v.shown, v.model_name, v.text),
        file_name="attention.json",
        mime="application/json",
        icon=":material/data_object:",
        on_click="ignore",
    )
    e3.download_button(
        t("explorer.export.npz"),
        lambda: trace_to_npz(v.shown),
        file_name="attention.npz",
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


new_tokens = generation_option(lm)
with st.spinner(t("explorer.running")):
    trace = get_trace(text, new_tokens=new_tokens)

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
n_layers, n_heads = trace.attention[kind].shape[:2]
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
    disabled=not can_merge,
    help=t("explorer.merge_help"),
)
hide = o2.toggle(t("explorer.hide"), key="hide", bind="query-params", help=t("explorer.hide_help"))
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
        new_tokens,
    )
)
