"""Attention Explorer: type a sentence, see every head of every layer."""

from __future__ import annotations

import textwrap

import streamlit as st

from model.analysis import head_max, head_mean, rollout
from model.export import trace_to_json, trace_to_npz
from model.tokens import hide_special_tokens, merge_subwords, subword_style
from model.trace import Trace
from ui.charts import image_format, plotly_chart
from ui.frame import require_frame
from ui.i18n import t
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
    attention_heatmap,
    difference_heatmap,
    focus_bars_figure,
    heads_figure,
    model_grid_figure,
    scores_heatmap,
)
from viz.headview import head_colour, head_view_height, head_view_html, highlighted_text_html
from viz.tables import attention_frame, head_stats_frame

require_frame()

KINDS = ("encoder", "decoder", "cross")
AGGREGATES = ("head", "mean", "max", "rollout")
VIEWS = ("heatmap", "heads", "model", "lines", "focus", "stages", "stats", "compare", "export")
VIEW_ICONS = {
    "heatmap": ":material/grid_on:", "heads": ":material/view_module:",
    "model": ":material/apps:", "lines": ":material/linear_scale:",
    "focus": ":material/center_focus_strong:", "stages": ":material/stairs:",
    "compare": ":material/compare:",
    "stats": ":material/table_chart:", "export": ":material/download:",
}  # fmt: skip
HEAD_VIEW_MAX_TOKENS = 160  # more lines than a reader can follow, and a heavy page
PILLS_MAX_TOKENS = 40  # beyond this a drop-down is easier than a wall of pills
CSV_MAX_CELLS = 2_000_000  # the whole kind when it fits, else the chosen layer


def _labels() -> tuple[str, str, str]:
    return t("explorer.axis.query"), t("explorer.axis.key"), t("explorer.axis.weight")


def head_titles(n: int) -> list[str]:
    return [t("explorer.head_n", n=i + 1) for i in range(n)]


def special_tokens(lm) -> frozenset[str]:
    found = set(getattr(lm, "special_tokens", ()) or ())
    for tok in (getattr(lm, "src_tokenizer", None), getattr(lm, "tgt_tokenizer", None)):
        found |= set(getattr(tok, "special_tokens", ()) or ())
    return frozenset(found)


def kept_positions(tokens: list[str], specials: frozenset[str]) -> list[int]:
    return [i for i, tok in enumerate(tokens) if tok not in specials]


def shown_trace(trace: Trace, specials: frozenset[str], merge: bool, hide: bool, renorm: bool):
    """The trace as the reader asked to see it, and the share of attention hidden per kind."""
    base = merge_subwords(trace, specials) if merge else trace
    if not hide:
        return base, base, None
    shown, removed = hide_special_tokens(base, specials, renormalize=renorm)
    return base, shown, removed


def rollout_view(base: Trace, kind: str, specials, hide: bool, renorm: bool):
    """Rollout over all tokens (the residual stream carries specials too), then hidden."""
    r = rollout(base.attention[kind])  # [L, n, n]
    if not hide:
        return r
    keep = kept_positions(base.tokens(kind)[0], specials)
    r = r[:, keep][:, :, keep]
    if renorm:
        r = r / r.sum(-1, keepdim=True).clamp_min(1e-12)
    return r


st.title(t("explorer.title"))
st.caption(t("explorer.intro"))

lm = get_model()
if lm is None:
    st.stop()
model_name = selected_model()
text = sentence_input(lm, model_name)
if text is None:
    st.stop()

with st.spinner(t("explorer.running")):
    trace = get_trace(text)

if lm.kind != "encoder" and trace.tgt_tokens:
    output = [tok for tok in trace.tgt_tokens if tok not in special_tokens(lm)]
    st.markdown(t("explorer.output", output=code_span(" ".join(output))))
st.info(t("explorer.not_explanation"), icon=":material/lightbulb:")

specials = special_tokens(lm)
can_merge = any(subword_style(toks) for toks in (trace.src_tokens, trace.tgt_tokens) if toks)

# ---- controls: ids in the URL, so the address bar is a permalink to this exact view ----
available = [k for k in KINDS if k in trace.attention]
c1, c2 = st.columns([2, 3])
with c1:
    kind = linked(
        st.segmented_control,
        t("explorer.kind"),
        available,
        key="kind",
        required=True,
        format_func=lambda k: t(f"explorer.kind.{k}"),
    )
n_layers, n_heads = trace.attention[kind].shape[:2]
with c2:
    aggregate = linked(
        st.segmented_control,
        t("explorer.aggregate"),
        [a for a in AGGREGATES if a != "rollout" or kind != "cross"],
        key="agg",
        required=True,
        format_func=lambda a: t(f"explorer.aggregate.{a}"),
        help=t("explorer.aggregate_help"),
    )
l_col, h_col, _ = st.columns([2, 2, 3])
with l_col:
    layer = linked(
        st.selectbox,
        t("explorer.layer"),
        list(range(n_layers)),
        key="layer",
        format_func=lambda i: t("explorer.layer_n", n=i + 1),
    )
with h_col:
    head = linked(
        st.selectbox,
        t("explorer.head"),
        list(range(n_heads)),
        key="head",
        format_func=lambda i: t("explorer.head_n", n=i + 1),
        disabled=aggregate != "head",
    )
o1, o2, o3 = st.columns(3)
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
q_tokens, k_tokens = shown.tokens(kind)
attention = shown.attention[kind]  # [L, H, Lq, Lk]
causal = kind == "decoder"  # the only kind whose keys include a query's future
if removed is not None:
    share = float(removed[kind][layer].mean()) * 100
    st.caption(t("explorer.hidden_share", share=f"{share:.1f}"))
if not q_tokens or not k_tokens:
    st.warning(t("explorer.nothing_left"), icon=":material/visibility_off:")
    st.stop()

view = linked(
    st.segmented_control,
    t("explorer.view"),
    VIEWS,
    key="view",
    required=True,
    format_func=lambda v: f"{VIEW_ICONS[v]} {t(f'explorer.view.{v}')}",
)


def map_of(base_trace: Trace, shown_trace_: Trace, at_layer: int):
    """[Lq, Lk] for a layer and the chosen head or aggregate, and its title."""
    a = shown_trace_.attention[kind]
    layer_name = t("explorer.layer_n", n=at_layer + 1)
    if aggregate == "head":
        return a[at_layer, head], f"{layer_name} · {t('explorer.head_n', n=head + 1)}"
    if aggregate == "mean":
        return head_mean(a)[at_layer], f"{layer_name} · {t('explorer.aggregate.mean')}"
    if aggregate == "max":
        return head_max(a)[at_layer], f"{layer_name} · {t('explorer.aggregate.max')}"
    r = rollout_view(base_trace, kind, specials, hide, renorm)
    return r[at_layer], t("explorer.rollout_title", n=at_layer + 1)


def selected_map():
    return map_of(base, shown, layer)


if view == "heatmap":
    weights, title = selected_map()
    if aggregate == "max":
        st.caption(t("explorer.max_note"))
    plotly_chart(
        attention_heatmap(
            weights, q_tokens, k_tokens, causal=causal, title=title, labels=_labels()
        ),
        key="heatmap_chart",
    )
elif view == "heads":
    plotly_chart(
        heads_figure(
            attention[layer],
            q_tokens,
            k_tokens,
            causal=causal,
            titles=head_titles(n_heads),
            labels=_labels(),
        ),
        key="heads_chart",
    )
elif view == "model":
    st.caption(t("explorer.model_grid_note"))
    plotly_chart(
        model_grid_figure(
            attention,
            causal=causal,
            col_titles=head_titles(n_heads),
            row_titles=[t("explorer.layer_n", n=i + 1) for i in range(n_layers)],
        ),
        key="model_chart",
    )
elif view == "lines":
    if max(len(q_tokens), len(k_tokens)) > HEAD_VIEW_MAX_TOKENS:
        st.info(t("explorer.lines_too_long", limit=HEAD_VIEW_MAX_TOKENS), icon=":material/info:")
    else:
        st.caption(t("explorer.lines_caption", n=layer + 1))
        st.iframe(
            head_view_html(
                attention[layer],
                q_tokens,
                k_tokens,
                head_labels=head_titles(n_heads),
                hint=t("explorer.lines_hint"),
            ),
            height=head_view_height(max(len(q_tokens), len(k_tokens)), n_heads),
        )
elif view == "focus":
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
            st.selectbox,
            label,
            options,
            key="token",
            format_func=lambda i: f"{i}: {q_tokens[i]}",
        )
    token = token if token in options else 0
    rows = attention[layer][:, token, :]  # [H, Lk]
    st.caption(t("explorer.focus_caption", n=layer + 1))
    st.iframe(
        highlighted_text_html(
            k_tokens,
            rows.mean(0),
            focus=token if kind != "cross" else None,
            caption=t("explorer.focus_text_caption"),
        ),
        height=60 + 34 * (1 + sum(len(tok) + 3 for tok in k_tokens) // 110),
    )
    plotly_chart(
        focus_bars_figure(
            rows,
            k_tokens,
            head_titles=head_titles(n_heads),
            colours=[head_colour(h) for h in range(n_heads)],
            value_label=t("explorer.axis.weight"),
        ),
        key="focus_chart",
    )
elif view == "stages":
    staged = get_trace(text, stages=True)
    if kind not in staged.stages:
        st.info(t("explorer.stages_unavailable"), icon=":material/info:")
    else:
        sq, sk = staged.tokens(kind)
        stage_head = head if aggregate == "head" else 0
        if aggregate != "head":
            st.caption(t("explorer.stages_first_head"))
        d_k = getattr(lm.config, "d_k", None)  # transformers configs have no d_k
        st.markdown(t("explorer.stages_intro", n=layer + 1, h=stage_head + 1))
        if d_k:
            st.latex(rf"d_k = {d_k}, \quad \sqrt{{d_k}} = {d_k**0.5:.3f}")
        stages = {name: st_[layer, stage_head] for name, st_ in staged.stages[kind].items()}
        score_labels = (*_labels()[:2], t("explorer.axis.score"))
        columns = st.columns(2)
        # The three pre-softmax stages on a diverging scale, then the softmax weights.
        for i, stage in enumerate(("scores", "scaled", "masked")):
            plotly_chart(
                scores_heatmap(stages[stage], sq, sk, title=t(f"explorer.stage.{stage}"),
                               labels=score_labels),
                key=f"stage_{stage}", where=columns[i % 2],
            )  # fmt: skip
        plotly_chart(
            attention_heatmap(stages["weights"], sq, sk, causal=kind == "decoder",
                              title=t("explorer.stage.softmax"), labels=_labels()),
            key="stage_softmax", where=columns[1],
        )  # fmt: skip
        if merge or hide:
            st.caption(t("explorer.stages_raw_tokens"))
elif view == "stats":
    frame = head_stats_frame(attention, self_attention=kind != "cross")
    st.caption(t("explorer.stats_caption"))
    st.dataframe(
        frame,
        hide_index=True,
        column_config={
            "layer": st.column_config.NumberColumn(t("explorer.layer")),
            "head": st.column_config.NumberColumn(t("explorer.head")),
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
elif view == "compare":
    st.caption(t("explorer.compare_caption"))
    modes = ["sentence", "layer", "model"] if n_layers > 1 else ["sentence", "model"]
    mode = linked(
        st.segmented_control, t("explorer.compare_mode"), modes, key="cmp", required=True,
        format_func=lambda m: t(f"explorer.compare.{m}"),
    )  # fmt: skip
    first, first_title = selected_map()
    second = None
    if mode == "layer":
        layer2 = linked(
            st.selectbox, t("explorer.compare_layer"), list(range(n_layers)), key="layer2",
            default=n_layers - 1, format_func=lambda i: t("explorer.layer_n", n=i + 1),
        )  # fmt: skip
        second, second_title = map_of(base, shown, layer2)
        q2, k2 = q_tokens, k_tokens
    else:
        if mode == "sentence":
            text2 = clean_text(
                st.text_input(
                    t("explorer.compare_sentence"),
                    key="text2",
                    bind="query-params",
                    persist_state="session",
                    placeholder=text,
                )  # fmt: skip
                or ""
            )[0]
            other = get_trace(text2) if text2 else None
            second_label = textwrap.shorten(text2, 40, placeholder="…")  # a chart title: plain
        else:
            others = [m for m in model_choices() if m not in (FOLDER, model_name)]
            model2 = linked(
                st.selectbox, t("explorer.compare_model"), others, key="model2",
                format_func=model_label,
            )  # fmt: skip
            other = trace_with(model2, text)
            second_label = model_label(model2)
        if other is None:
            st.info(t("explorer.compare_need_input"), icon=":material/edit:")
        elif kind not in other.attention:
            st.info(t("explorer.compare_no_kind"), icon=":material/info:")
        else:
            base2, shown2, _ = shown_trace(other, specials, merge and can_merge, hide, renorm)
            if layer >= shown2.attention[kind].shape[0] or head >= shown2.attention[kind].shape[1]:
                st.info(t("explorer.compare_no_layer"), icon=":material/info:")
            else:
                second, second_title = map_of(base2, shown2, layer)
                second_title = f"{second_title} · {second_label}"
                q2, k2 = shown2.tokens(kind)
    if second is not None:
        a_col, b_col = st.columns(2)
        plotly_chart(
            attention_heatmap(first, q_tokens, k_tokens, causal=causal, title=first_title,
                              labels=_labels()),
            key="cmp_first", where=a_col,
        )  # fmt: skip
        plotly_chart(
            attention_heatmap(second, q2, k2, causal=causal, title=second_title,
                              labels=_labels()),
            key="cmp_second", where=b_col,
        )  # fmt: skip
        if tuple(first.shape) == tuple(second.shape):

            def both(a: list[str], b: list[str]) -> list[str]:
                # Position by position; where the inputs differ, name both ("math/art").
                return [x if x == y else f"{x}/{y}" for x, y in zip(a, b, strict=True)]

            plotly_chart(
                difference_heatmap(first, second, both(q_tokens, q2), both(k_tokens, k2),
                                   causal=causal,
                                   title=t("explorer.compare_difference"),
                                   labels=(*_labels()[:2], t("explorer.axis.difference"))),
                key="cmp_diff",
            )  # fmt: skip
            st.caption(t("explorer.compare_difference_caption"))
        else:
            st.info(t("explorer.compare_tokens_differ"), icon=":material/info:")
elif view == "export":
    total = attention.numel()
    whole = total <= CSV_MAX_CELLS
    csv_source = attention if whole else attention[layer : layer + 1]

    def csv_bytes() -> bytes:
        frame = attention_frame(csv_source, q_tokens, k_tokens)
        if not whole:
            frame["layer"] = layer + 1
        return frame.to_csv(index=False).encode("utf-8")

    st.caption(
        t("explorer.export_caption") if whole else t("explorer.export_layer_only", n=layer + 1)
    )
    e1, e2, e3 = st.columns(3)
    e1.download_button(
        t("explorer.export.csv"),
        csv_bytes,
        file_name=f"attention-{kind}.csv",
        mime="text/csv",
        icon=":material/table:",
        on_click="ignore",
    )
    e2.download_button(
        t("explorer.export.json"),
        lambda: trace_to_json(shown, model_name, text),
        file_name="attention.json",
        mime="application/json",
        icon=":material/data_object:",
        on_click="ignore",
    )
    e3.download_button(
        t("explorer.export.npz"),
        lambda: trace_to_npz(shown),
        file_name="attention.npz",
        mime="application/octet-stream",
        icon=":material/deployed_code:",
        on_click="ignore",
    )
    st.markdown(t("explorer.permalink"))
    st.caption(
        t("explorer.image_export", format=image_format().upper(), setting=t("chart.image_format"))
    )
