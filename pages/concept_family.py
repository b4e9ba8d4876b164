"""The Transformer family: encoder-only, decoder-only, encoder-decoder, side by side."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st
import torch

from model.analysis.concepts import cosine_matrix
from model.analysis.tokens import written_text
from model.analysis.view import model_special_tokens
from model.masks import causal_mask
from ui.charts import plotly_chart
from ui.concepts import try_model
from ui.frame import require_frame
from ui.i18n import t
from ui.models import load_model, selected_device, show_load_detail
from ui.sentence import code_span
from ui.token_cost import show_token_cost
from viz.concepts import mask_figure, matrix_heatmap

require_frame()

SOURCE = ["I", "study", "math"]
TARGET = ["<bos>", "나", "는", "수학", "을", "공부한다"]  # en2ko's own tokens: stem, particle
EXAMPLES = {"en2ko": "I study math at school", "sort": "3 1 4 1 5 9 2 6"}
PROBE_SENTENCES = (
    "I study math at school",
    "She learns mathematics in class",
    "The cat sleeps on the sofa",
    "A kitten is napping on the couch",
)


@st.cache_data(show_spinner=False, max_entries=8)
def live_output(name: str, device: str, text: str) -> str:
    lm = load_model(name, device)
    tokens = [s.token for s in lm.decode(text)]
    return written_text(lm.tgt_tokenizer, tokens, model_special_tokens(lm))


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
MASKS = (  # (name, mask, queries, keys): who may attend to whom in each family
    ("encoder", np.ones((n_src, n_src), bool), SOURCE, SOURCE),
    ("decoder", causal_mask(n_tgt).numpy(), TARGET, TARGET),
    ("cross", np.ones((n_tgt, n_src), bool), TARGET, SOURCE),
)
for col, (name, mask, queries, keys) in zip(st.columns(3), MASKS):
    title = t(f"concepts.family.mask.{name}")
    col.markdown(f"**{title}**")
    plotly_chart(
        mask_figure(
            mask,
            queries,
            keys,
            name=title,
            allowed_label=t("concepts.family.allowed"),
            blocked_label=t("concepts.family.blocked"),
        ),
        key=f"mask_{name}_chart",
        where=col,
        summary=t(
            "concepts.family.mask_summary",
            title=title,
            allowed=int(mask.sum()),
            masked=int((~mask).sum()),
            total=mask.size,
            queries=len(queries),
            keys=len(keys),
        ),
    )
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
            st.markdown(
                t(
                    "concepts.family.encoder.live",
                    text=code_span(EXAMPLES["en2ko"]),
                    n=len(tokens),
                    tokens=code_span(" ".join(tokens)),
                )
            )
        else:
            out = live_output(name, device, EXAMPLES[name])
            st.markdown(
                t(
                    "concepts.family.generated",
                    text=code_span(EXAMPLES[name]),
                    output=code_span(out or "∅"),
                )
            )

# ---- the paper's base model beside the ones shipped here ------------------------------------------
st.header(t("concepts.family.base"))
st.markdown(t("concepts.family.base_text"))
PAPER_BASE = {
    "layers": "6 + 6",
    "d_model": 512,
    "heads": 8,
    "d_k": 64,
    "d_ff": 2048,
    "dropout": 0.1,
    "scale": True,
    "positions": "sinusoidal",
    "norm": "post",
    "output": (True, 37000, True),
}


def settings_of(cfg) -> dict:
    layers = {"encoder": f"{cfg.n_encoder_layers}", "decoder": f"{cfg.n_decoder_layers}"}.get(
        cfg.kind, f"{cfg.n_encoder_layers} + {cfg.n_decoder_layers}"
    )
    return {
        "layers": layers,
        "d_model": cfg.d_model,
        "heads": cfg.n_heads,
        "d_k": cfg.d_model // cfg.n_heads,
        "d_ff": cfg.d_ff,
        "dropout": cfg.dropout,
        "scale": cfg.scale_embedding,
        "positions": cfg.positions,
        "norm": cfg.norm_placement,
        "output": (
            cfg.output_head and cfg.kind != "encoder",
            cfg.tgt_vocab_size,
            cfg.tie_embeddings,
        ),
    }


def setting_text(row: str, value) -> str:
    if row == "scale":
        return t("concepts.family.base.yes") if value else t("concepts.family.base.no")
    if row == "positions":
        return t(f"concepts.family.base.pos.{value}")
    if row == "norm":
        return f"{value}-LN"
    if row == "output":
        head, vocab, tied = value
        if not head:
            return t("concepts.family.base.out_none")
        return t(
            "concepts.family.base.out_tied" if tied else "concepts.family.base.out",
            vocab=f"{vocab:,}",
        )
    return f"{value:g}" if isinstance(value, float) else str(value)


columns_base = {t("concepts.family.base.paper"): PAPER_BASE}
for shipped in ("en2ko", "minilm"):
    shipped_lm, _ = try_model(shipped)
    if shipped_lm is not None and hasattr(shipped_lm, "network"):
        columns_base[shipped] = settings_of(shipped_lm.config)
base_rows = pd.DataFrame(
    [
        {
            t("concepts.family.base.setting"): t(f"concepts.family.base.row.{row}"),
            **{col: setting_text(row, vals[row]) for col, vals in columns_base.items()},
        }
        for row in PAPER_BASE
    ]
).set_index(t("concepts.family.base.setting"))
st.table(base_rows)  # a static table: its cells wrap, where a data grid cut the output row off
st.latex(
    r"\begin{gathered} \mathrm{input} = \sqrt{d_{\mathrm{model}}}\; E[x_i] + PE_i \\ "
    r"P(y_t \mid y_{<t}, x) = \mathrm{softmax}(h_t W_{\mathrm{out}} + b) \end{gathered}"
)
st.caption(t("concepts.family.base_caption"))

st.header(t("concepts.family.head"))
st.markdown(t("concepts.family.head_text"))
st.latex(
    r"\begin{gathered} p(y \mid x) = \mathrm{softmax}(W \tanh(W_p\, h_{[\mathrm{CLS}]} + b_p)"
    r" + b) \\ e(x) = \frac{1}{n}\sum_{i=1}^{n} h_i \end{gathered}"
)
minilm, why = try_model("minilm")
if minilm is None:
    st.info(t("concepts.family.missing", name="minilm"), icon=":material/info:")
else:
    vectors = pooled(device, PROBE_SENTENCES)
    short = [f"{i + 1}" for i in range(len(PROBE_SENTENCES))]
    st.markdown("\n".join(f"{i + 1}. {code_span(s)}" for i, s in enumerate(PROBE_SENTENCES)))
    plotly_chart(
        matrix_heatmap(
            np.stack([vectors["cls"][0], vectors["mean"][0]]),
            [t("concepts.family.cls_vector"), t("concepts.family.mean_vector")],
            numbers=False,
            value_name=t("concepts.value"),
            col_title=t("concepts.dimension"),
            height=210,
            title=t("concepts.family.vectors_title"),
        ),
        key="vectors_chart",
    )
    p1, p2 = st.columns(2)
    plotly_chart(
        where=p1,
        fig=matrix_heatmap(
            cosine_matrix(vectors["mean"]),
            short,
            short,
            bound=1.0,
            value_name="cos",
            title=t("concepts.family.sim_mean"),
        ),
        key="sim_mean_chart",
    )
    plotly_chart(
        where=p2,
        fig=matrix_heatmap(
            cosine_matrix(vectors["cls"]),
            short,
            short,
            bound=1.0,
            value_name="cos",
            title=t("concepts.family.sim_cls"),
        ),
        key="sim_cls_chart",
    )
    st.caption(t("concepts.family.sim_caption"))
show_token_cost()
st.page_link(
    "pages/practice.py",
    label=t("practice.check_yourself"),
    icon=":material/quiz:",
    query_params={"topic": "family"},
)
