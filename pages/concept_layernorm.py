"""Layer normalization and Add & Norm, measured on a real forward pass."""

from __future__ import annotations

import numpy as np
import streamlit as st

from model.analysis.concepts import layernorm_scale, residual_peak
from model.analysis.walkthrough import layer_norm_module
from ui.charts import plotly_chart
from ui.concepts import (
    cached_feed_forward,
    cached_hidden,
    concept_model,
    concept_sentence,
    ffn_formula,
)
from ui.frame import require_frame
from ui.i18n import t
from ui.models import get_trace, selected_device
from ui.permalink import linked
from viz.concepts import grouped_bars, lines_figure, matrix_heatmap, robust_bound, token_lines

require_frame()

DEMO_FEATURES = 8


def norm_title(name: str) -> str:
    parts = name.split(".")
    stack = t(f"concepts.layernorm.stack.{parts[0]}")
    if parts[1] == "final":
        return f"{stack} · {t('concepts.layernorm.final')}"
    where = t(f"concepts.layernorm.after.{parts[2]}")
    return f"{stack} · {t('common.layer_n', n=int(parts[1]) + 1)} · {where}"


st.title(t("concepts.layernorm.title"))
st.caption(t("concepts.layernorm.intro"))
# Two lines each, so a narrow screen does not cut the formulas off.
st.latex(
    r"\begin{gathered} \mathrm{LayerNorm}(x) = \gamma \odot \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}}"
    r" + \beta \\ \mu = \frac{1}{d}\sum_{i=1}^{d} x_i,\quad"
    r" \sigma^2 = \frac{1}{d}\sum_{i=1}^{d}(x_i-\mu)^2 \end{gathered}"
)
st.latex(
    r"\begin{aligned} \text{post-LN: }& \mathrm{LayerNorm}(x + \mathrm{Sublayer}(x)) \\ "
    r"\text{pre-LN: }& x + \mathrm{Sublayer}(\mathrm{LayerNorm}(x)) \end{aligned}"
)
st.markdown(t("concepts.layernorm.plain"))

lm, name = concept_model()
if lm is None:
    st.stop()
text = concept_sentence(lm, name, key="ltext", default="I study math")
if text is None:
    st.stop()
device = selected_device()
# A real decoder-only model reads the sentence alone: SmolLM2's massive activation stands
# out on it (29 to 36 times the median token's peak on every shipped example, in either
# language), and writing a continuation first was most of this page's first visit (a
# second of CPU for 12 tokens). A toy trained on a task still reads its whole answer.
real_decoder = lm.kind == "decoder" and "task" not in lm.info
with st.spinner(t("explorer.running")):
    trace = get_trace(lm, text, new_tokens=0 if real_decoder else None)
placement = lm.config.norm_placement
st.caption(t(f"concepts.layernorm.placement.{placement}", model=name))

names = list(trace.norms)
if not names:
    st.info(t("concepts.layernorm.no_norms"), icon=":material/info:")
    st.stop()
chosen = linked(
    st.selectbox, t("concepts.layernorm.which"), names, key="lnorm", format_func=norm_title
)
stats = trace.norms[chosen]
stack = chosen.split(".", 1)[0]
tokens = trace.src_tokens if stack == "encoder" else trace.tgt_tokens
b1, b2 = st.columns(2)
plotly_chart(
    where=b1,
    fig=grouped_bars(
        tokens,
        {
            t("concepts.layernorm.before"): stats["in_mean"].tolist(),
            t("concepts.layernorm.after"): stats["out_mean"].tolist(),
        },
        y_title=t("concepts.layernorm.mean"),
    ),
    key="mean_chart",
)
plotly_chart(
    where=b2,
    fig=grouped_bars(
        tokens,
        {
            t("concepts.layernorm.before"): stats["in_std"].tolist(),
            t("concepts.layernorm.after"): stats["out_std"].tolist(),
        },
        y_title=t("concepts.layernorm.std"),
    ),
    key="std_chart",
)
module = layer_norm_module(lm.network, chosen)
if module is not None and module.weight is not None:
    gamma = module.weight.detach().float().cpu().numpy()
    bias = getattr(module, "bias", None)  # RMSNorm (LLaMA, Qwen2, Mistral) has none
    beta = bias.detach().float().cpu().numpy() if bias is not None else 0 * gamma
    scale = layernorm_scale(gamma, beta)
    out_std = stats["out_std"].numpy()
    st.caption(
        t(
            "concepts.layernorm.stats_caption",
            bmean=f"{scale['mean_beta']:.3f}",
            rms=f"{scale['rms_gamma']:.2f}",
            std=f"{scale['std_gamma']:.3f}",
            lo=f"{out_std.min():.2f}",
            hi=f"{out_std.max():.2f}",
        )
    )
    plotly_chart(
        lines_figure(
            range(len(gamma)),
            {"γ (gamma)": gamma, "β (beta)": beta},
            x_title=t("concepts.dimension"),
            y_title=t("concepts.value"),
            title=t("concepts.layernorm.gamma_beta"),
        ),
        key="gamma_chart",
    )
    st.caption(
        t(
            "concepts.layernorm.gamma_caption",
            gmean=f"{gamma.mean():.3f}",
            bmean=f"{beta.mean():.3f}",
        )
    )
else:
    st.caption(t("concepts.layernorm.stats_caption_plain"))

st.subheader(t("concepts.layernorm.residual"))
residual = trace.residual_norms.get(stack)
if residual is not None:
    series = {f"{i}: {tok}": residual[:, i].tolist() for i, tok in enumerate(tokens)}
    peak = residual_peak(residual)
    plotly_chart(
        token_lines(
            range(residual.shape[0]),
            series,
            x_title=t("concepts.layernorm.depth"),
            y_title="‖x‖",
            others_name=t("concepts.layernorm.other_tokens", n=len(series) - 1),
            log_y=peak["massive"],
        ),
        key="residual_chart",
    )
    if placement == "post":
        # Each layer's output is its last LayerNorm's: the length γ and β give it.
        n_layers = residual.shape[0] - 1
        last = [layer_norm_module(lm.network, f"{stack}.{i}.ffn") for i in range(n_layers)]
        sizes = [
            layernorm_scale(
                m.weight.detach().float().cpu().numpy(),
                None if m.bias is None else m.bias.detach().float().cpu().numpy(),
            )
            for m in last
            if m is not None and m.weight is not None
        ]
        after = residual[1:].numpy()
        if sizes and after.size:
            lengths = [s_["length"] for s_ in sizes]
            st.caption(
                t(
                    "concepts.layernorm.residual_caption.post",
                    lo=f"{min(lengths):.1f}",
                    hi=f"{max(lengths):.1f}",
                    init=f"{sizes[0]['d'] ** 0.5:.1f}",
                    std=f"{max(s_['sqrt_d_std'] for s_ in sizes):.2f}",
                    mlo=f"{after.min():.1f}",
                    mhi=f"{after.max():.1f}",
                )
            )
    else:
        st.caption(t("concepts.layernorm.residual_caption.pre"))
    if peak["massive"]:
        st.caption(
            t(
                "concepts.layernorm.massive",
                token=f"{peak['token']}: {tokens[peak['token']]}",
                peak=f"{peak['peak']:,.0f}",
                layer=peak["layer"],
                ratio=f"{peak['ratio']:,.0f}",
                median=f"{peak['median']:,.0f}",
            )
        )

st.header(t("concepts.layernorm.vs_batch"))
st.markdown(t("concepts.layernorm.vs_batch_text"))
demo_tokens, hidden = cached_hidden(name, device, text, 0)
x = hidden[: min(6, len(demo_tokens)), :DEMO_FEATURES].astype(np.float64)
ln = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)
bn = (x - x.mean(0, keepdims=True)) / np.sqrt(x.var(0, keepdims=True) + 1e-5)
# One figure a panel, side by side in columns that stack where they would be narrow (a
# phone, 200 % zoom, 1024 px beside the sidebar): three panels in one figure were too
# narrow at 390 px for their titles and numbers.
bound = float(max(np.abs(m).max() for m in (x, ln, bn))) or 1.0  # one colour scale for all
panels = (("raw", x), ("ln_rows", ln), ("bn_cols", bn))
for col, (part, values) in zip(st.container(key="stack_narrow_norms").columns(3), panels):
    title = t(f"concepts.layernorm.{part}")
    col.markdown(f"**{title}**")
    fig = matrix_heatmap(
        values,
        demo_tokens[: x.shape[0]],
        bound=bound,
        digits=1,  # a third of the width: one decimal still fits its cell
        value_name=t("concepts.value"),
        row_title=t("concepts.layernorm.batch_axis"),
        col_title=t("concepts.layernorm.feature_axis"),
    )
    plotly_chart(fig, key=f"axes_{part}_chart", where=col, title=title)
st.caption(t("concepts.layernorm.vs_batch_caption", n=x.shape[0], d=DEMO_FEATURES))

# ---- the other sub-layer: the position-wise feed-forward network --------------------------------
st.header(t("concepts.ffn.title"))
stack_layers = lm.network.decoder.layers if lm.kind == "decoder" else lm.network.encoder.layers
ffn_layer = linked(
    st.columns([1, 3])[0].selectbox,
    t("common.layer"),
    list(range(len(stack_layers))),
    key="flayer",
    format_func=lambda i: t("common.layer_n", n=i + 1),
)
ffn = cached_feed_forward(name, device, text, ffn_layer)
st.markdown(
    t(
        "concepts.ffn.text_gated" if ffn["gated"] else "concepts.ffn.text",
        d_model=ffn["d_model"],
        d_ff=ffn["d_ff"],
        ratio=f"{ffn['d_ff'] / ffn['d_model']:g}",
        act=ffn["activation"],
        gated=ffn["gated"],
        params=f"{ffn['params']:,}",
        model=name,
    )
)
st.latex(ffn_formula(ffn))
hidden_ffn = ffn["hidden"].numpy()
clip_ffn = robust_bound(hidden_ffn, 99.0)  # a few large units would wash the rest out
plotly_chart(
    matrix_heatmap(
        hidden_ffn,
        ffn["tokens"],
        title=t("concepts.ffn.hidden_title", d_ff=ffn["d_ff"]),
        numbers=False,
        value_name=t("concepts.value"),
        col_title=t("concepts.dimension"),
        bound=clip_ffn,
    ),
    key="ffn_chart",
)
active = float((hidden_ffn > 0).mean())
st.caption(
    t(
        "concepts.ffn.hidden_caption",
        act=ffn["activation"],
        share=f"{active:.0%}",
        clip=f"{clip_ffn:.2f}",
        top=f"{np.abs(hidden_ffn).max():.1f}",
    )
)
if ffn["position_error"] <= 1e-3 and ffn["others_moved"] <= 1e-6:
    st.success(
        t(
            "concepts.ffn.check",
            error=f"{ffn['position_error']:.1e}",
            moved=f"{ffn['others_moved']:.1e}",
        ),
        icon=":material/check_circle:",
    )
else:
    st.error(
        t(
            "concepts.ffn.check_failed",
            error=f"{ffn['position_error']:.1e}",
            moved=f"{ffn['others_moved']:.1e}",
        ),
        icon=":material/error:",
    )

st.header(t("concepts.layernorm.pre_post"))
st.markdown(t("concepts.layernorm.pre_post_text"))
st.page_link(
    "pages/concept_warmup.py",
    label=t("concepts.layernorm.to_warmup"),
    icon=":material/trending_up:",
)
st.page_link(
    "pages/practice.py",
    label=t("practice.check_yourself"),
    icon=":material/quiz:",
    query_params={"topic": "layernorm"},
)
