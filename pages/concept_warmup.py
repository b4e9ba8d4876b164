"""The warm-up learning rate: the paper's Noam schedule, warm-up + cosine, the rates the
shipped checkpoints were trained with, and a post-LN / pre-LN experiment with and without."""

from __future__ import annotations

import json

import numpy as np
import streamlit as st

from model.runtime.loading import CHECKPOINTS, SHIPPED
from model.schedule import noam_lr, warmup_cosine_lr
from model.training.warmup import WARMUP_DIR, WARMUP_VARIANTS, load_curve, load_warmup, seed_band
from ui.charts import plotly_chart, warmup_summary
from ui.frame import require_frame
from ui.i18n import t
from viz.concepts import band_figure, lines_figure

require_frame()

PRESETS = ((512, 4000), (512, 8000), (256, 4000))  # the Annotated Transformer's three curves
CURVE = "curve.csv"


POINTS = 2000  # a 20,000-step curve drawn 1,000 px wide: 2,000 points lose nothing visible


@st.cache_data(show_spinner=False, max_entries=64)
def step_grid(steps: int, warmup: int) -> np.ndarray:
    """About POINTS steps from 1 to ``steps``, the warm-up's last step (the peak) included."""
    grid = np.linspace(1, steps, POINTS).round().astype(int)
    return np.unique(np.append(grid, min(warmup, steps)))


@st.cache_data(show_spinner=False, max_entries=64)
def noam_curve(d_model: int, warmup: int, factor: float, steps: np.ndarray) -> np.ndarray:
    return np.array([noam_lr(int(s), d_model, warmup, factor) for s in steps])


@st.cache_data(show_spinner=False, max_entries=64)
def cosine_curve(warmup: int, total: int, peak: float, steps: np.ndarray) -> np.ndarray:
    return np.array([warmup_cosine_lr(int(s), warmup, total, peak=peak) for s in steps])


@st.cache_data(show_spinner=False, ttl=60)
def logged_curves() -> dict[str, dict]:
    """task -> {"step", "lr": the logged rate, "formula": the Noam rate its config gives,
    as arrays} for checkpoints on disk."""
    found = {}
    for task in SHIPPED:
        folder = CHECKPOINTS / task
        if not (folder / CURVE).is_file():
            continue
        try:
            config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
            metrics = json.loads((folder / "metrics.json").read_text(encoding="utf-8"))
            curve = load_curve(folder / CURVE)
            d_model, warmup = int(config["d_model"]), int(metrics["warmup"])
            factor = float(metrics.get("lr_factor", 1.0))
        except (OSError, ValueError, KeyError):
            continue
        found[task] = {
            "step": np.asarray(curve["step"]),
            "lr": np.asarray(curve["lr"]),
            "formula": np.array([noam_lr(int(s), d_model, warmup, factor) for s in curve["step"]]),
        }
    return found


@st.cache_data(show_spinner=False, ttl=60)
def experiment() -> tuple[dict, dict]:
    """(metadata, variant -> the loss band over the seeds, as arrays); ({}, {}) if none."""
    meta, curves = load_warmup(WARMUP_DIR)
    bands = {
        variant: {part: np.asarray(values) for part, values in seed_band(runs).items()}
        for variant, runs in curves.items()
        if runs
    }
    return meta, bands


st.title(t("concepts.warmup.title"))
st.caption(t("concepts.warmup.intro"))
st.latex(
    r"lrate = factor \cdot d_{model}^{-0.5} \cdot "
    r"\min\!\left(step^{-0.5},\; step \cdot warmup\_steps^{-1.5}\right)"
)
st.markdown(t("concepts.warmup.plain"))

c1, c2, c3 = st.columns(3)
d_model = c1.select_slider(
    t("concepts.warmup.d_model"),
    [64, 128, 256, 512, 768, 1024],
    512,
    key="wdmodel",
    bind="query-params",
)
warmup = c2.slider(
    t("concepts.warmup.warmup"), 100, 16000, 4000, step=100, key="wwarmup", bind="query-params"
)
factor = c3.slider(
    t("concepts.warmup.factor"), 0.1, 4.0, 1.0, step=0.1, key="wfactor", bind="query-params"
)
steps = 20000
grid = step_grid(steps, warmup)
presets = st.toggle(t("concepts.warmup.presets"), value=True, key="wpresets", bind="query-params")
series = {
    t("concepts.warmup.yours", d=d_model, w=warmup, f=f"{factor:g}"): noam_curve(
        d_model, warmup, factor, grid
    )
}
if presets:
    for d, w in PRESETS:
        series[f"{d}:{w}"] = noam_curve(d, w, 1.0, grid)
peak = noam_lr(warmup, d_model, warmup, factor)
series[t("concepts.warmup.cosine")] = cosine_curve(warmup, steps, peak, grid)
plotly_chart(
    lines_figure(
        grid,
        series,
        x_title=t("concepts.warmup.step"),
        y_title=t("concepts.warmup.lr"),
        dashed=(t("concepts.warmup.cosine"),),
        vline=warmup,
        vline_label=f"warmup = {warmup}",
        height=420,
    ),
    key="schedule_chart",
    summary=warmup_summary(grid, noam_curve(d_model, warmup, factor, grid)),
)
st.latex(
    rf"\text{{peak}} = {factor:g} \cdot {d_model}^{{-0.5}} \cdot {warmup}^{{-0.5}} = {peak:.3e}"
)
st.caption(t("concepts.warmup.cosine_caption"))

st.header(t("concepts.warmup.logged"))
logged = logged_curves()
if not logged:
    st.info(t("concepts.warmup.logged_missing"), icon=":material/hourglass_empty:")
else:
    steps_by, lr_series, formulas = {}, {}, []
    for task, info in logged.items():
        label = t("concepts.warmup.logged_label", task=task)
        steps_by[label], lr_series[label] = info["step"], info["lr"]
        formula = t("concepts.warmup.formula_label", task=task)
        formulas.append(formula)
        steps_by[formula], lr_series[formula] = info["step"], info["formula"]
    plotly_chart(
        lines_figure(
            steps_by,
            lr_series,
            x_title=t("concepts.warmup.step"),
            y_title=t("concepts.warmup.lr"),
            dashed=tuple(formulas),
        ),
        key="logged_chart",
    )
    missing = [task for task in SHIPPED if task not in logged]
    st.caption(t("concepts.warmup.logged_caption"))
    if missing:
        st.caption(t("concepts.warmup.logged_some_missing", tasks=", ".join(missing)))

st.header(t("concepts.warmup.experiment"))
meta, bands_by = experiment()
if not bands_by or set(bands_by) != set(WARMUP_VARIANTS):
    st.info(t("concepts.warmup.experiment_missing"), icon=":material/hourglass_empty:")
    st.page_link(
        "pages/practice.py",
        label=t("practice.check_yourself"),
        icon=":material/quiz:",
        query_params={"topic": "warmup"},
    )
    st.stop()
d_exp, factor_exp, w_exp = int(meta["d_model"]), float(meta["lr_factor"]), int(meta["warmup_steps"])
start_lr = noam_lr(1, d_exp, 1, factor_exp)
peak_lr = noam_lr(w_exp, d_exp, w_exp, factor_exp)
st.markdown(
    t(
        "concepts.warmup.experiment_text",
        layers=meta["layers"],
        d_model=d_exp,
        steps=meta["steps"],
        factor=f"{factor_exp:g}",
        n=len(meta["seeds"]),
        seeds=", ".join(str(s) for s in meta["seeds"]),
        start=f"{start_lr:.4f}",
        peak=f"{peak_lr:.5f}",
        ratio=f"{start_lr / peak_lr:.0f}",
        w=w_exp,
    )
)
e1, e2 = st.columns(2)
for col, norm in ((e1, "post"), (e2, "pre")):
    bands = {
        t(f"concepts.warmup.variant.{variant}", w=w_exp): bands_by[f"{norm}_{variant}"]
        for variant in ("warmup", "no_warmup")
    }
    plotly_chart(
        where=col,
        fig=band_figure(
            bands,
            x_title=t("concepts.warmup.step"),
            y_title=t("concepts.warmup.loss"),
            title=t(f"concepts.warmup.panel.{norm}"),
        ),
        key=f"exp_{norm}_chart",
    )
st.caption(t("concepts.warmup.band_caption", n=len(meta["seeds"])))
variants = meta["variants"]


def spread(info: dict, key: str, digits: int) -> str:
    return (
        f"{info[key]:.{digits}f} ({info[key + '_min']:.{digits}f}–{info[key + '_max']:.{digits}f})"
    )


rows = [
    {
        t("concepts.warmup.col_variant"): t(f"concepts.warmup.name.{name}"),
        t("concepts.warmup.col_loss"): spread(info, "final_loss", 2),
        t("concepts.warmup.col_accuracy"): spread(info, "token_accuracy", 3),
        t("concepts.warmup.col_exact"): spread(info, "exact_match", 3),
    }
    for name, info in variants.items()
]
st.dataframe(rows, hide_index=True)
st.caption(t("concepts.warmup.table_caption", n=len(meta["seeds"])))
st.markdown(
    t(
        "concepts.warmup.experiment_reading",
        post_w=f"{variants['post_warmup']['exact_match']:.2f}",
        pre_w=f"{variants['pre_warmup']['exact_match']:.2f}",
        pre_nw=f"{variants['pre_no_warmup']['exact_match']:.2f}",
        post_nw=f"{variants['post_no_warmup']['exact_match_max']:.2f}",
        post_nw_loss=f"{variants['post_no_warmup']['final_loss']:.2f}",
    )
)
st.markdown(t("concepts.warmup.not_shown"))
torch_versions = sorted(
    {r.get("torch_version") or "?" for variant in variants.values() for r in variant["runs"]}
)
st.caption(
    t(
        "concepts.warmup.rerun",
        torch=", ".join(torch_versions),
        platform=meta.get("platform", "?"),
        n=len(meta["seeds"]) * len(variants),
    )
)
st.code(meta["rerun"], language="bash")
st.page_link(
    "pages/practice.py",
    label=t("practice.check_yourself"),
    icon=":material/quiz:",
    query_params={"topic": "warmup"},
)
