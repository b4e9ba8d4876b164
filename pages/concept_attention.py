"""Self-attention, step by step: one query through q·k, /√d_k, mask, softmax and Σ w·v."""

from __future__ import annotations

import math

import numpy as np
import streamlit as st

from model.analysis.concepts import mask_fill_weights
from model.masks import causal_mask
from ui.charts import plotly_chart
from ui.concepts import (
    cached_attention_cost,
    cached_cross_walkthrough,
    cached_qk_products,
    cached_qk_variance,
    cached_saturation,
    cached_softmax_example,
    cached_walkthrough,
    concept_model,
    concept_sentence,
    try_model,
)
from ui.frame import require_frame
from ui.i18n import axis_labels, head_titles, t
from ui.models import selected_device
from ui.permalink import linked
from ui.sentence import code_span
from ui.tabs import lazy_tabs
from viz.attention import heads_figure
from viz.concepts import (
    grouped_bars,
    histogram_pair,
    lines_figure,
    matrix_heatmap,
    step_frame,
)

require_frame()

PILLS_MAX_TOKENS = 40


def qkv_charts(
    q_row, query_token: str, k, v, key_tokens: list[str], *, titles: tuple[str, str, str], key: str
) -> None:
    """The query's q vector, then K and V side by side; ``titles`` for q, K and V, ``key``
    keeps the charts of self- and cross-attention apart."""
    value, dims = t("concepts.value"), t("concepts.dimension")
    plotly_chart(
        matrix_heatmap(
            q_row, [query_token], title=titles[0], value_name=value, col_title=dims, height=190
        ),
        key=f"{key}q_chart",
    )
    for where, name, matrix, title in zip(st.columns(2), "kv", (k, v), titles[1:], strict=True):
        plotly_chart(
            where=where,
            fig=matrix_heatmap(matrix, key_tokens, title=title, value_name=value, col_title=dims),
            key=f"{key}{name}_chart",
        )


def step_table(key_tokens, scores, scaled, allowed, weights, columns: dict[str, str]) -> None:
    """One row per key: q·k, scaled, allowed, masked and the softmax weight as a bar."""
    st.dataframe(
        step_frame(key_tokens, scores, scaled, allowed, weights, columns),
        hide_index=True,
        column_config={
            columns["weight"]: st.column_config.ProgressColumn(
                columns["weight"], min_value=0.0, max_value=1.0, format="%.4f"
            ),
            columns["score"]: st.column_config.NumberColumn(format="%.3f"),
            columns["scaled"]: st.column_config.NumberColumn(format="%.3f"),
            columns["masked"]: st.column_config.NumberColumn(format="%.3f"),
        },
    )


st.title(t("concepts.attention.title"))
st.caption(t("concepts.attention.intro"))
st.latex(
    r"\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right) V"
)
st.warning(t("concepts.attention.common_mistake"), icon=":material/priority_high:")

lm, name = concept_model()
if lm is None:
    st.stop()
text = concept_sentence(lm, name, key="ctext", default="Thinking Machines")
if text is None:
    st.stop()
st.caption(t("concepts.attention.examples_hint"))

device = selected_device()
n_layers = len(lm.network.decoder.layers if lm.kind == "decoder" else lm.network.encoder.layers)
c1, c2 = st.columns(2)
with c1:
    layer = linked(
        st.selectbox,
        t("common.layer"),
        list(range(n_layers)),
        key="clayer",
        format_func=lambda i: t("common.layer_n", n=i + 1),
    )
with st.spinner(t("explorer.running")):
    wt = cached_walkthrough(name, device, text, layer)
tokens, n_heads, d_k = wt.tokens, wt.n_heads, wt.d_k
with c2:
    head = linked(
        st.selectbox,
        t("common.head"),
        list(range(n_heads)),
        key="chead",
        format_func=lambda i: t("common.head_n", n=i + 1),
    )
options = list(range(len(tokens)))
if len(tokens) <= PILLS_MAX_TOKENS:
    query = linked(
        st.pills,
        t("concepts.attention.query_token"),
        options,
        key="cquery",
        required=True,
        format_func=lambda i: code_span(tokens[i]),
    )
else:
    query = linked(
        st.selectbox,
        t("concepts.attention.query_token"),
        options,
        key="cquery",
        format_func=lambda i: f"{i}: {tokens[i]}",
    )
query = query if query in options else 0
if wt.kind == "decoder":
    st.caption(t("concepts.attention.decoder_note"))

# The step tables' columns: self-attention's and cross-attention's tabs.
columns = {
    "key": t("common.axis.key"),
    "score": "q·k",
    "scaled": "q·k / √d_k",
    "allowed": t("concepts.attention.col_allowed"),
    "masked": t("concepts.attention.col_masked"),
    "weight": t("concepts.attention.col_weight"),
}


# ---- 1. q, K, V -------------------------------------------------------------------------------
def show_steps() -> None:
    """Steps 1-3 for the chosen query and head."""
    st.header(t("concepts.attention.step1"))
    step1 = "concepts.attention.step1_text" if wt.bias else "concepts.attention.step1_text_nobias"
    st.markdown(t(step1, d_model=wt.x.shape[1], d_k=d_k, n=len(tokens)))
    if wt.bias:
        st.latex(r"q_i = x_i W_Q + b_Q,\quad k_j = x_j W_K + b_K,\quad v_j = x_j W_V + b_V")
    else:
        st.latex(r"q_i = x_i W_Q,\quad k_j = x_j W_K,\quad v_j = x_j W_V")
    value = t("concepts.value")
    dims = t("concepts.dimension")
    qkv_charts(
        wt.q[head, query],
        tokens[query],
        wt.k[head],
        wt.v[head],
        tokens,
        titles=(
            t("concepts.attention.q_title"),
            t("concepts.attention.k_title"),
            t("concepts.attention.v_title"),
        ),
        key="",
    )

    # ---- 2. scores, scale, mask, softmax ------------------------------------------------------------
    st.header(t("concepts.attention.step2"))
    scores, scaled = wt.scores[head, query], wt.scaled[head, query]
    allowed, weights = wt.allowed[query], wt.weights[head, query]
    top = int(weights.argmax())
    st.latex(
        rf"q \cdot k_{{{top}}} = {float(scores[top]):.3f}, \quad "
        rf"\frac{{q \cdot k_{{{top}}}}}{{\sqrt{{{d_k}}}}} = \frac{{{float(scores[top]):.3f}}}"
        rf"{{{math.sqrt(d_k):.3f}}} = {float(scaled[top]):.3f}"
    )
    st.markdown(t("concepts.attention.step2_text"))
    step_table(tokens, scores, scaled, allowed, weights, columns)
    st.latex(r"w_{j} = \frac{\exp(s_j)}{\sum_{j'} \exp(s_{j'})}, \qquad z = \sum_j w_j\, v_j")
    # The notes' slip: a masked score set to 0 still gets exp(0) = 1. Shown on this row, with the
    # keys after the query masked as a decoder would (the first query when this one is the last).
    row = query if query < len(tokens) - 1 else 0
    fill = mask_fill_weights(wt.scaled[head, row], causal_mask(len(tokens))[row])
    st.warning(
        t(
            "concepts.attention.mask_fill",
            token=code_span(tokens[row]),
            n=fill["n_masked"],
            zero=f"{fill['zero']:.1%}",
            inf=f"{fill['inf']:.0%}",
        ),
        icon=":material/priority_high:",
    )

    # ---- 3. weighted sum, and the model's own numbers -----------------------------------------------
    st.header(t("concepts.attention.step3"))
    plotly_chart(
        matrix_heatmap(
            wt.heads[head, query],
            [tokens[query]],
            title=t("concepts.attention.z_title"),
            value_name=value,
            col_title=dims,
            height=190,
        ),
        key="z_chart",
    )
    error = wt.weights_error()
    if wt.agrees():
        st.success(
            t("concepts.attention.match", error=f"{error:.1e}"), icon=":material/check_circle:"
        )
    else:
        st.error(t("concepts.attention.mismatch", error=f"{error:.1e}"), icon=":material/error:")


# ---- multi-head: a tab of its own, so the step tab draws four small charts, not seven -----------
def show_multihead() -> None:
    """Every head of the chosen layer at once, concatenated and projected by W_O."""
    value, dims = t("concepts.value"), t("concepts.dimension")
    st.header(t("concepts.attention.multihead"))
    st.latex(  # two lines, so a narrow screen does not cut the formula off
        r"\begin{gathered} \mathrm{MultiHead}(Q,K,V) = \mathrm{Concat}(\mathrm{head}_1,\dots,"
        r"\mathrm{head}_h)\,W_O \\ \mathrm{head}_i = \mathrm{Attention}(XW_Q^i, XW_K^i, XW_V^i)"
        r"\end{gathered}"
    )
    n, d_model = wt.x.shape
    st.markdown(t("concepts.attention.shapes", n=n, d_model=d_model, h=n_heads, d_k=d_k))
    plotly_chart(
        heads_figure(
            wt.weights,
            tokens,
            tokens,
            mask=wt.allowed,
            titles=head_titles(n_heads),
            labels=axis_labels(),
        ),
        key="heads_chart",
    )
    m1, m2 = st.columns(2)
    plotly_chart(
        where=m1,
        fig=matrix_heatmap(
            wt.concat,
            tokens,
            title=t("concepts.attention.concat_title", d=d_model),
            numbers=False,
            value_name=value,
            col_title=dims,
        ),
        key="concat_chart",
    )
    plotly_chart(
        where=m2,
        fig=matrix_heatmap(
            wt.out,
            tokens,
            title=t("concepts.attention.out_title", d=d_model),
            numbers=False,
            value_name=value,
            col_title=dims,
        ),
        key="out_chart",
    )
    if wt.out_agrees():
        st.caption(t("concepts.attention.out_match", error=f"{wt.out_error():.1e}"))
    else:
        st.error(
            t("concepts.attention.out_mismatch", error=f"{wt.out_error():.1e}"),
            icon=":material/error:",
        )


# ---- cross-attention: queries from the decoder, keys and values from the encoder ---------------
def show_cross() -> None:
    """The same steps with queries from the decoder, keys and values from the encoder."""
    st.header(t("concepts.attention.cross"))
    st.markdown(t("concepts.attention.cross_text"))
    xlm, why = try_model("en2ko")
    if xlm is None:
        st.info(t("concepts.family.missing", name="en2ko"), icon=":material/hourglass_empty:")
        return
    xtext = concept_sentence(xlm, "en2ko", key="xtext", default="I study math")
    if xtext is None:
        return
    xw, xhead, xquery = chosen_cross(xlm, xtext)
    dec_tokens, src_tokens = xw.tokens, xw.key_tokens or []
    st.markdown(
        t(
            "concepts.attention.cross_shapes",
            lt=len(dec_tokens),
            ls=len(src_tokens),
            d_k=xw.d_k,
            d_model=xw.x.shape[1],
        )
    )
    st.latex(r"q_t = y_t W_Q + b_Q,\quad k_s = m_s W_K + b_K,\quad v_s = m_s W_V + b_V")
    qkv_charts(
        xw.q[xhead, xquery],
        dec_tokens[xquery],
        xw.k[xhead],
        xw.v[xhead],
        src_tokens,
        titles=(
            t("concepts.attention.cross_q_title"),
            t("concepts.attention.cross_k_title"),
            t("concepts.attention.cross_v_title"),
        ),
        key="x",
    )
    step_table(
        src_tokens,
        xw.scores[xhead, xquery],
        xw.scaled[xhead, xquery],
        xw.allowed[xquery],
        xw.weights[xhead, xquery],
        columns,
    )
    show_cross_heads(xw)


def chosen_cross(xlm, xtext: str):
    """The cross-attention walk-through at the reader's layer, with the head and decoder
    query they pick: (walk-through, head, query)."""
    n_dec = len(xlm.network.decoder.layers)
    x1, x2 = st.columns(2)
    with x1:
        xlayer = linked(
            st.selectbox,
            t("common.layer"),
            list(range(n_dec)),
            key="xlayer",
            format_func=lambda i: t("common.layer_n", n=i + 1),
        )
    with st.spinner(t("explorer.running")):
        xw = cached_cross_walkthrough("en2ko", device, xtext, xlayer)
    with x2:
        xhead = linked(
            st.selectbox,
            t("common.head"),
            list(range(xw.n_heads)),
            key="xhead",
            format_func=lambda i: t("common.head_n", n=i + 1),
        )
    dec_tokens = xw.tokens
    xoptions = list(range(len(dec_tokens)))
    xquery = linked(
        st.pills,
        t("concepts.attention.cross_query"),
        xoptions,
        key="xquery",
        required=True,
        format_func=lambda i: code_span(dec_tokens[i]),
    )
    return xw, xhead, xquery if xquery in xoptions else 0


def show_cross_heads(xw) -> None:
    """Every head's cross-attention, and the check against the model's own weights."""
    dec_tokens, src_tokens = xw.tokens, xw.key_tokens or []
    plotly_chart(
        heads_figure(
            xw.weights,
            dec_tokens,
            src_tokens,
            mask=xw.allowed,
            titles=head_titles(xw.n_heads),
            labels=axis_labels(),
        ),
        key="xheads_chart",
    )
    st.caption(t("concepts.attention.cross_caption", lt=len(dec_tokens), ls=len(src_tokens)))
    if xw.agrees():
        st.success(
            t(
                "concepts.attention.cross_match",
                error=f"{xw.weights_error():.1e}",
                out=f"{xw.out_error():.1e}",
            ),
            icon=":material/check_circle:",
        )
    else:
        st.error(
            t("concepts.attention.mismatch", error=f"{xw.weights_error():.1e}"),
            icon=":material/error:",
        )


# ---- why √d_k ------------------------------------------------------------------------------------
def show_why_scale() -> None:
    """Why the scores are divided by √d_k, measured."""
    st.header(t("concepts.attention.why_scale"))
    st.markdown(t("concepts.attention.why_scale_text"))
    st.latex(r"\operatorname{Var}(q\cdot k) = \sum_{i=1}^{d_k} \operatorname{Var}(q_i k_i) = d_k")
    exp_dk = st.select_slider(
        t("concepts.attention.dk_slider"),
        options=[2**i for i in range(11)],
        value=64,
        key="cdk",
        bind="query-params",
    )
    var = cached_qk_variance()
    v1, v2 = st.columns(2)
    plotly_chart(
        where=v1,
        fig=lines_figure(
            var["d_k"],
            {
                t("concepts.attention.var_raw"): var["raw"],
                t("concepts.attention.var_scaled"): var["scaled"],
                "d_k": var["d_k"],
            },
            x_title="d_k",
            y_title=t("concepts.attention.variance"),
            log_x=True,
            log_y=True,
            dashed=("d_k",),
            markers=True,
            vline=exp_dk,
            vline_label=f"d_k = {exp_dk}",
        ),
        key="var_chart",
    )
    dots = cached_qk_products(exp_dk)
    plotly_chart(
        where=v2,
        fig=histogram_pair(
            dots,
            dots / math.sqrt(exp_dk),
            names=("q·k", "q·k / √d_k"),
            x_title=t("concepts.value"),
            y_title=t("concepts.density"),
        ),
        key="hist_chart",
    )
    st.caption(
        t(
            "concepts.attention.var_measured",
            d_k=exp_dk,
            raw=f"{np.var(dots):.2f}",
            scaled=f"{np.var(dots / math.sqrt(exp_dk)):.3f}",
        )
    )
    show_saturation(exp_dk)


def show_saturation(exp_dk: int) -> None:
    """Unscaled scores saturate the softmax: one example's weights, and the gradient left."""
    sat = cached_saturation()
    example = cached_softmax_example(exp_dk)
    s1, s2 = st.columns(2)
    plotly_chart(
        where=s1,
        fig=grouped_bars(
            [f"k{i + 1}" for i in range(len(example["raw"]))],
            {
                t("concepts.attention.softmax_raw"): example["raw"],
                t("concepts.attention.softmax_scaled"): example["scaled"],
            },
            y_title=t("common.axis.weight"),
            probability=True,
        ),
        key="softmax_chart",
    )
    plotly_chart(
        where=s2,
        fig=lines_figure(
            sat["d_k"],
            {
                t("concepts.attention.grad_raw"): sat["grad_raw"],
                t("concepts.attention.grad_scaled"): sat["grad_scaled"],
            },
            x_title="d_k",
            y_title=t("concepts.attention.grad_axis"),
            log_x=True,
            markers=True,
            vline=exp_dk,
            vline_label=f"d_k = {exp_dk}",
        ),
        key="grad_chart",
    )
    st.caption(t("concepts.attention.grad_caption"))


# ---- cost ----------------------------------------------------------------------------------------
def show_cost() -> None:
    """Time and memory against the sentence length."""
    d_model = wt.x.shape[1]
    st.header(t("concepts.attention.cost"))
    st.markdown(t("concepts.attention.table"))
    n_small, n_large = len(tokens), 4 * d_model
    st.info(
        t(
            "concepts.attention.n_below_d",
            d=d_model,
            n_small=n_small,
            n_large=n_large,
            sa_small=f"{n_small**2 * d_model:,}",
            rnn_small=f"{n_small * d_model**2:,}",
            sa_large=f"{n_large**2 * d_model:,}",
            rnn_large=f"{n_large * d_model**2:,}",
        ),
        icon=":material/balance:",
    )
    cost = cached_attention_cost()
    c_1, c_2 = st.columns(2)
    n2 = [cost["ms"][-1] * (n / cost["n"][-1]) ** 2 for n in cost["n"]]
    plotly_chart(
        where=c_1,
        fig=lines_figure(
            cost["n"],
            {t("concepts.attention.measured"): cost["ms"], "∝ n²": n2},
            x_title="n",
            y_title=t("concepts.attention.time_ms"),
            log_x=True,
            log_y=True,
            dashed=("∝ n²",),
            markers=True,
        ),
        key="time_chart",
    )
    plotly_chart(
        where=c_2,
        fig=lines_figure(
            cost["n"],
            {t("concepts.attention.weights_mib"): [b / 2**20 for b in cost["bytes"]]},
            x_title="n",
            y_title="MiB",
            log_x=True,
            log_y=True,
            markers=True,
        ),
        key="memory_chart",
    )
    st.caption(t("concepts.attention.cost_caption"))


# One tab per part; only the open one runs and sends its charts.
lazy_tabs(
    {
        t("tabs.attention.steps"): show_steps,
        t("tabs.attention.multihead"): show_multihead,
        t("tabs.attention.cross"): show_cross,
        t("tabs.attention.why_scale"): show_why_scale,
        t("tabs.attention.cost"): show_cost,
    },
    key="attention_tab",
    params=((), (), ("xtext", "xlayer", "xhead", "xquery"), ("cdk",), ()),  # links open tabs
)
st.page_link(
    "pages/practice.py",
    label=t("practice.check_yourself"),
    icon=":material/quiz:",
    query_params={"topic": "attention"},
)
