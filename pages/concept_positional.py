"""Positional encoding: the sinusoid table, its distance structure, MiniLM's learned table,
and why a Transformer without positions cannot tell "I love you" from "love I you"."""

from __future__ import annotations

import numpy as np
import streamlit as st

from model.analysis.concepts import cosine_matrix, pe_shift_error, pe_shift_matrix, pe_wavelengths
from model.positional import sinusoidal_encoding
from ui.charts import plotly_chart
from ui.concepts import cached_permutation_demo, minilm_position_table
from ui.frame import require_frame
from ui.i18n import t
from ui.permalink import linked
from ui.tabs import lazy_tabs
from viz.concepts import lines_figure, matrix_heatmap, robust_bound

require_frame()

SENTENCE_A = ("I", "love", "you")
SENTENCE_B = ("love", "I", "you")


@st.cache_data(show_spinner=False, max_entries=32)
def table(max_len: int, d_model: int, interleaved: bool) -> np.ndarray:
    return sinusoidal_encoding(max_len, d_model, interleaved=interleaved).numpy()


st.title(t("concepts.positional.title"))
st.caption(t("concepts.positional.intro"))
st.latex(
    r"PE_{(p,\,2i)} = \sin\!\left(\frac{p}{10000^{2i/d_{model}}}\right),\quad "
    r"PE_{(p,\,2i+1)} = \cos\!\left(\frac{p}{10000^{2i/d_{model}}}\right)"
)
st.markdown(t("concepts.positional.plain"))

c1, c2 = st.columns(2)
max_len = c1.slider(
    t("concepts.positional.max_len"), 8, 200, 50, key="pmaxlen", bind="query-params"
)
d_model = c2.slider(
    t("concepts.positional.d_model"), 4, 256, 64, step=2, key="pdmodel", bind="query-params"
)
layout = linked(  # a row of its own: in a third of the page its long options were cut off
    st.segmented_control,
    t("concepts.positional.layout"),
    ["interleaved", "concatenated"],
    key="playout",
    required=True,
    format_func=lambda layout: t(f"concepts.positional.layout.{layout}"),
)
interleaved = layout == "interleaved"
st.caption(t(f"concepts.positional.layout_help.{layout}"))
longest = pe_wavelengths(d_model)[-1] / (2 * np.pi)
st.caption(
    t(
        "concepts.positional.wavelengths",
        d=d_model,
        longest=f"{longest:,.0f}",
        a=d_model - 2,
        b=d_model - 1,
    )
)
pe = table(max_len, d_model, interleaved)
pos, dim = t("concepts.positional.position"), t("concepts.dimension")


def show_table() -> None:
    """The table as a heatmap, chosen dimensions as curves, and the similarity of positions."""
    plotly_chart(
        matrix_heatmap(
            pe,
            [str(p) for p in range(max_len)],
            title=t("concepts.positional.table_title"),
            numbers=False,
            bound=1.0,
            value_name="PE",
            row_title=pos,
            col_title=dim,
            height=min(700, 160 + 8 * max_len),
        ),
        key="pe_chart",
    )

    dims = st.multiselect(
        t("concepts.positional.dims"),
        list(range(d_model)),
        default=[d for d in (0, 1, 4, min(d_model - 1, 20)) if d < d_model],
        key="pdims",
    )
    if dims:
        plotly_chart(
            lines_figure(
                range(max_len),
                {t("concepts.positional.dim_n", i=d): pe[:, d] for d in dims},
                x_title=pos,
                y_title="PE",
            ),
            key="curves_chart",
        )
    st.caption(t("concepts.positional.curves_caption"))

    st.subheader(t("concepts.positional.similarity"))
    st.markdown(t("concepts.positional.similarity_text"))
    sim = pe @ pe.T
    plotly_chart(
        matrix_heatmap(
            sim,
            [str(p) for p in range(max_len)],
            None,  # positions as numbers: plotly spaces their ticks by the width (a phone's too)
            numbers=False,
            value_name="PE·PEᵀ",
            row_title=pos,
            col_title=pos,
            height=min(700, 160 + 8 * max_len),
        ),
        key="sim_chart",
    )


def show_shift() -> None:
    """PE(p + k) as a fixed rotation of PE(p)."""
    st.subheader(t("concepts.positional.shift"))
    st.markdown(t("concepts.positional.shift_text"))
    st.latex(
        r"\begin{pmatrix} \sin((p+k)\omega_i) \\ \cos((p+k)\omega_i) \end{pmatrix} = "
        r"\begin{pmatrix} \cos k\omega_i & \sin k\omega_i \\ -\sin k\omega_i & \cos k\omega_i "
        r"\end{pmatrix} \begin{pmatrix} \sin p\omega_i \\ \cos p\omega_i \end{pmatrix}"
    )
    s1, s2 = st.columns(2)
    shift = s1.slider(
        t("concepts.positional.shift_k"),
        1,
        max(1, max_len - 2),
        min(3, max_len - 2),
        key="pshift",
        bind="query-params",
    )
    start = s2.slider(
        t("concepts.positional.shift_p"),
        0,
        max(1, max_len - 1 - shift),
        min(5, max_len - 1 - shift),
        key="pstart",
        bind="query-params",
    )
    shift = min(shift, max_len - 1)
    start = min(start, max_len - 1 - shift)
    paper_pe = table(max_len, d_model, True).astype(np.float64)
    m_k = pe_shift_matrix(d_model, shift)
    rotated = m_k @ paper_pe[start]
    shown_dims = min(d_model, 16)
    plotly_chart(
        matrix_heatmap(
            np.stack([paper_pe[start], rotated, paper_pe[start + shift]])[:, :shown_dims],
            [f"PE({start})", f"M_{shift} · PE({start})", f"PE({start + shift})"],
            title=t("concepts.positional.shift_rows", n=shown_dims),
            bound=1.0,
            value_name="PE",
            col_title=dim,
            height=230,
        ),
        key="shift_chart",
    )
    plotly_chart(
        matrix_heatmap(
            m_k[:shown_dims, :shown_dims],
            [str(i) for i in range(shown_dims)],
            title=t("concepts.positional.shift_matrix", k=shown_dims, n=shift),
            bound=1.0,
            value_name=f"M_{shift}",
            row_title=dim,
            col_title=dim,
            numbers=shown_dims <= 16,
            height=420,
        ),
        key="shift_matrix_chart",
    )
    st.success(
        t(
            "concepts.positional.shift_check",
            k=shift,
            p=start,
            one=f"{np.abs(rotated - paper_pe[start + shift]).max():.1e}",
            every=f"{pe_shift_error(paper_pe, shift):.1e}",
            n=max_len - shift,
        ),
        icon=":material/check_circle:",
    )


def show_learned() -> None:
    """MiniLM's learned position table beside the sinusoidal one."""
    st.subheader(t("concepts.positional.learned"))
    st.markdown(t("concepts.positional.learned_text"))
    learned = minilm_position_table()
    if learned is None:
        st.info(t("concepts.positional.learned_missing"), icon=":material/info:")
    else:
        rows = min(max_len, learned.shape[0])
        shown = learned[:rows]
        clip = robust_bound(shown, 99.0)
        l1, l2 = st.columns(2)
        plotly_chart(
            where=l1,
            fig=matrix_heatmap(
                shown,
                [str(p) for p in range(rows)],
                title=t("concepts.positional.learned_table", d=learned.shape[1]),
                numbers=False,
                value_name="P",
                row_title=pos,
                col_title=dim,
                bound=clip,
                height=min(700, 160 + 8 * rows),
            ),
            key="learned_chart",
        )
        plotly_chart(
            where=l2,
            fig=matrix_heatmap(
                cosine_matrix(learned[:rows]),
                [str(p) for p in range(rows)],
                [str(p) for p in range(rows)],
                title=t("concepts.positional.learned_cos"),
                numbers=False,
                value_name="cos",
                row_title=pos,
                col_title=pos,
                height=min(700, 160 + 8 * rows),
            ),
            key="learned_sim_chart",
        )
        beyond = int((np.abs(shown) > clip).sum())
        st.caption(
            t(
                "concepts.positional.learned_clip",
                bound=f"{clip:.3f}",
                n=beyond,
                share=f"{100 * beyond / shown.size:.1f}",
                largest=f"{np.abs(shown).max():.2f}",
            )
        )


def show_why() -> None:
    """Without positions, attention cannot tell word order apart."""
    st.header(t("concepts.positional.why"))
    st.markdown(t("concepts.positional.why_text"))
    demo = cached_permutation_demo(SENTENCE_A, SENTENCE_B)
    no_pe, with_pe = demo.gap("without"), demo.gap("with")
    w1, w2 = st.columns(2)
    for col, which, outs, gap in (
        (w1, "without", demo.without_pe, no_pe),
        (w2, "with", demo.with_pe, with_pe),
    ):
        with col:
            st.subheader(t(f"concepts.positional.{which}_pe"))
            for words, out, key in ((SENTENCE_A, outs[0], "a"), (SENTENCE_B, outs[1], "b")):
                plotly_chart(
                    matrix_heatmap(
                        out.numpy(),
                        list(words),
                        title=" ".join(words),
                        numbers=False,
                        value_name=t("concepts.value"),
                        col_title=dim,
                        height=220,
                    ),
                    key=f"perm_{which}_{key}",
                )
            st.metric(t("concepts.positional.gap"), f"{gap:.2e}")
    st.success(
        t("concepts.positional.verdict", no_pe=f"{no_pe:.1e}", with_pe=f"{with_pe:.2f}"),
        icon=":material/check_circle:",
    )
    st.warning(
        t(
            "concepts.positional.equivariant",
            perm=f"{no_pe:.1e}",
            same=f"{demo.invariance_gap():.2f}",
        ),
        icon=":material/priority_high:",
    )


# One tab per part; only the open one runs and sends its charts.
lazy_tabs(
    {
        t("tabs.positional.table"): show_table,
        t("tabs.positional.shift"): show_shift,
        t("tabs.positional.learned"): show_learned,
        t("tabs.positional.why"): show_why,
    },
    key="positional_tab",
    params=(("pdims",), ("pshift", "pstart"), (), ()),  # links open tabs
)
st.page_link(
    "pages/practice.py",
    label=t("practice.check_yourself"),
    icon=":material/quiz:",
    query_params={"topic": "positional"},
)
st.page_link(
    "pages/modern.py", label=t("modern.link.from_positional"), icon=":material/rocket_launch:"
)
