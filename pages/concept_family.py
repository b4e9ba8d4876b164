"""The Transformer family: encoder-only, decoder-only, encoder-decoder, side by side."""

from __future__ import annotations

import numpy as np
import streamlit as st
import torch

from model.analysis.concepts import cosine_matrix
from model.masks import causal_mask
from ui.charts import plotly_chart
from ui.concepts import try_model
from ui.frame import require_frame
from ui.i18n import t
from ui.models import load_model, selected_device, show_load_detail
from ui.sentence import code_span
from viz.concepts import mask_figure, matrix_heatmap

require_frame()

SOURCE = ["I", "study", "math"]
TARGET = ["<bos>", "나는", "수학을", "공부한다"]
EXAMPLES = {"en2ko": "I study math at school", "sort": "3 1 4 1 5 9 2 6"}
PROBE_SENTENCES = (
    "I study math at school",
    "She learns mathematics in class",
    "The cat sleeps on the sofa",
    "A kitten is napping on the couch",
)


@st.cache_data(show_spinner=False, max_entries=8)
def live_output(name: str, device: str, text: str) -> str:
    return load_model(name, device).translate(text)


@st.cache_data(show_spinner=False, max_entries=8)
def minilm_tokens(device: str, text: str) -> list[str]:
    return load_model("minilm", device).encode(text).tokens


@st.cache_data(show_spinner=False, max_entries=4)
def pooled(device: str, sentences: tuple[str, ...]) -> dict[str, np.ndarray]:
    """[CLS] vectors and mean-pooled vectors of MiniLM's last layer, one row per sentence."""
    lm = load_model("minilm", device)
    cls, mean = [], []
    with torch.inference_mode():
        for text in sentences:
            ids = torch.tensor([lm.encode(text).ids], device=lm.device)
            hidden = lm.network.encode(ids)[0].float().cpu()  # [L, D]
            cls.append(hidden[0].numpy())
            mean.append(hidden.mean(0).numpy())
    return {"cls": np.stack(cls), "mean": np.stack(mean)}


st.title(t("concepts.family.title"))
st.caption(t("concepts.family.intro"))

n_src, n_tgt = len(SOURCE), len(TARGET)
plotly_chart(
    mask_figure(
        [np.ones((n_src, n_src), bool), causal_mask(n_tgt).numpy(), np.ones((n_tgt, n_src), bool)],
        [SOURCE, TARGET, TARGET],
        [SOURCE, TARGET, SOURCE],
        titles=[t("concepts.family.mask.encoder"), t("concepts.family.mask.decoder"),
                t("concepts.family.mask.cross")],
        allowed_label=t("concepts.family.allowed"), blocked_label=t("concepts.family.blocked"),
    ),
    key="masks_chart",
)  # fmt: skip
st.caption(t("concepts.family.mask_caption"))

device = selected_device()
cols = st.columns(3)
for col, family, name in zip(cols, ("encoder", "decoder", "encdec"), ("minilm", "sort", "en2ko")):
    with col:
        st.subheader(t(f"concepts.family.{family}.title"))
        st.markdown(t(f"concepts.family.{family}.text"))
        lm, why = try_model(name)
        if lm is None:
            st.info(t("concepts.family.missing", name=name), icon=":material/hourglass_empty:")
            show_load_detail(why)
            continue
        if name == "minilm":
            tokens = minilm_tokens(device, EXAMPLES["en2ko"])
            st.markdown(t("concepts.family.encoder.live", text=code_span(EXAMPLES["en2ko"]),
                          n=len(tokens), tokens=code_span(" ".join(tokens))))  # fmt: skip
        else:
            out = live_output(name, device, EXAMPLES[name])
            st.markdown(t("concepts.family.generated", text=code_span(EXAMPLES[name]),
                          output=code_span(out or "∅")))  # fmt: skip

st.header(t("concepts.family.head"))
st.markdown(t("concepts.family.head_text"))
st.latex(r"p(y \mid x) = \mathrm{softmax}(W\, h_{[\mathrm{CLS}]} + b), \qquad "
         r"e(x) = \frac{1}{n}\sum_{i=1}^{n} h_i")  # fmt: skip
minilm, why = try_model("minilm")
if minilm is None:
    st.info(t("concepts.family.missing", name="minilm"), icon=":material/info:")
else:
    vectors = pooled(device, PROBE_SENTENCES)
    short = [f"{i + 1}" for i in range(len(PROBE_SENTENCES))]
    st.markdown("\n".join(f"{i + 1}. {code_span(s)}" for i, s in enumerate(PROBE_SENTENCES)))
    plotly_chart(
        matrix_heatmap(np.stack([vectors["cls"][0], vectors["mean"][0]]),
                       [t("concepts.family.cls_vector"), t("concepts.family.mean_vector")],
                       numbers=False, value_name=t("concepts.value"),
                       col_title=t("concepts.dimension"), height=210,
                       title=t("concepts.family.vectors_title")),
        key="vectors_chart",
    )  # fmt: skip
    p1, p2 = st.columns(2)
    plotly_chart(where=p1, fig=
        matrix_heatmap(cosine_matrix(vectors["mean"]), short, short, bound=1.0, value_name="cos",
                       title=t("concepts.family.sim_mean")),
        key="sim_mean_chart",
    )  # fmt: skip
    plotly_chart(where=p2, fig=
        matrix_heatmap(cosine_matrix(vectors["cls"]), short, short, bound=1.0, value_name="cos",
                       title=t("concepts.family.sim_cls")),
        key="sim_cls_chart",
    )  # fmt: skip
    st.caption(t("concepts.family.sim_caption"))
st.page_link("pages/practice.py", label=t("practice.check_yourself"), icon=":material/quiz:", query_params={"topic": "family"})  # fmt: skip
