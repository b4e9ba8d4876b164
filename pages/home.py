"""Home: what the lab teaches, how to find your way, and what runs behind it."""

from __future__ import annotations

import streamlit as st

from ui.frame import require_frame
from ui.i18n import t

require_frame()

# Formulas are the same in every language, so they live here rather than in the catalogs.
ATTENTION = (
    r"\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^{\top}}{\sqrt{d_k}}\right) V"
)

# (catalog key, icon, formula shown on the card). Long formulas are split over lines
# (gathered) so they fit a card of TOPIC_CARD_PX instead of being cut off.
TOPIC_CARD_PX, FAMILY_CARD_PX = 440, 290
TOPICS = [
    (
        "self_attention",
        ":material/visibility:",
        r"\begin{gathered} z_i = \sum_j \alpha_{ij}\, v_j \\"
        r" \alpha_{ij} = \mathrm{softmax}_j\!\left(\frac{q_i \cdot k_j}{\sqrt{d_k}}\right)"
        r" \end{gathered}",
    ),
    (
        "multi_head",
        ":material/view_week:",
        r"\begin{gathered} \mathrm{MultiHead} = \mathrm{Concat}(\mathrm{head}_1, \dots,"
        r" \mathrm{head}_h)\, W^{O} \\ \mathrm{head}_i = \mathrm{Attention}(QW_i^{Q},\,"
        r" KW_i^{K},\, VW_i^{V}) \end{gathered}",
    ),
    (
        "positional",
        ":material/timeline:",
        r"\begin{aligned} PE_{(p,\,2i)} &= \sin\!\big(p / 10000^{2i/d_{\text{model}}}\big) \\"
        r" PE_{(p,\,2i+1)} &= \cos\!\big(p / 10000^{2i/d_{\text{model}}}\big) \end{aligned}",
    ),
    (
        "masks",
        ":material/visibility_off:",
        r"\begin{gathered} \mathrm{softmax}\!\left(\frac{QK^{\top}}{\sqrt{d_k}} + M\right) \\"
        r" M_{ij} = \begin{cases} 0 & j \le i \\ -\infty & j > i \end{cases} \end{gathered}",
    ),
    (
        "add_norm",
        ":material/add_circle:",
        r"\mathrm{LayerNorm}\big(x + \mathrm{Sublayer}(x)\big)",
    ),
    (
        "warmup",
        ":material/trending_up:",
        r"\mathit{lr} = d_{\text{model}}^{-0.5} \cdot"
        r" \min\!\big(\mathit{step}^{-0.5},\ \mathit{step} \cdot \mathit{warmup}^{-1.5}\big)",
    ),
]


def _matrix(rows: list[list[int]]) -> str:
    body = r" \\ ".join(" & ".join(str(x) for x in row) for row in rows)
    return rf"\begin{{bmatrix}} {body} \end{{bmatrix}}"


# (catalog key, icon, who-may-attend-whom pattern as a 0/1 matrix, queries as rows)
FAMILIES = [
    ("encoder", ":material/input:", _matrix([[1] * 4 for _ in range(4)])),
    ("decoder", ":material/output:", _matrix([[int(j <= i) for j in range(4)] for i in range(4)])),
    ("encdec", ":material/sync_alt:", _matrix([[1] * 4 for _ in range(3)])),
]

# Runs as written (tests/app/test_home.py executes it), so the home page never shows stale API.
PYTHON_EXAMPLE = """\
import torch
from model.attention import scaled_dot_product_attention
from model.masks import causal_mask

torch.manual_seed(0)
q, k, v = torch.randn(3, 1, 5, 16)
out, weights = scaled_dot_product_attention(q, k, v, mask=causal_mask(5))
print(weights[0].round(decimals=2))
"""

st.title(t("home.title"))
st.markdown(f"**{t('home.tagline')}**")
st.markdown(t("home.intro"))

with st.container(border=True):
    st.subheader(f":material/functions: {t('home.formula.header')}")
    # The formula gets the card's whole width: in a column its last "V" was cut off.
    st.latex(ATTENTION)
    symbols, scale = st.columns(2, gap="large")
    symbols.markdown(t("home.formula.symbols"))
    scale.markdown(t("home.formula.scale"))

st.header(f":material/school: {t('home.topics.header')}")
# Cards of a fixed width that wrap: two a row where they fit, one a row on a narrow screen.
# Fixed columns squeezed the formulas until they were cut off (MultiHead at 1024 px).
with st.container(horizontal=True, gap="medium"):
    for key, icon, tex in TOPICS:
        with st.container(border=True, width=TOPIC_CARD_PX):
            st.subheader(f"{icon} {t(f'home.topic.{key}.title')}")
            st.latex(tex)
            st.markdown(t(f"home.topic.{key}.body"))

st.header(f":material/account_tree: {t('home.families.header')}")
st.caption(t("home.families.caption"))
with st.container(horizontal=True, gap="medium"):
    for key, icon, tex in FAMILIES:
        with st.container(border=True, width=FAMILY_CARD_PX):
            st.subheader(f"{icon} {t(f'home.family.{key}.title')}")
            st.latex(tex)
            st.caption(t(f"home.family.{key}.matrix"))
            st.markdown(t(f"home.family.{key}.body"))
            st.caption(t(f"home.family.{key}.examples"))

guide, engine = st.columns(2, gap="large")
with guide:
    st.header(f":material/explore: {t('home.guide.header')}")
    st.markdown(
        "\n".join(
            f"- {t(key)}"
            for key in ("home.guide.pages", "home.guide.language", "home.guide.device")
        )
    )
with engine:
    st.header(f":material/memory: {t('home.engine.header')}")
    st.markdown(t("home.engine.body"))

st.header(f":material/code: {t('home.python.header')}")
st.markdown(t("home.python.body"))
st.code(PYTHON_EXAMPLE, language="python")
