"""Attention since 2017: rotary and ALiBi positions, grouped-query attention, the key/value
cache, FlashAttention's online softmax and attention sinks, each as a small experiment in
the same from-scratch Transformer, next to the paper's choice."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from model.analysis.concepts import (
    attention_facts,
    kv_cache_bytes,
    window_cache_bytes,
    window_pattern,
)
from model.positional import alibi_slopes
from model.training.lengths import fit_summary, robust_pairs, seed_values, training_seconds
from ui.charts import plotly_chart
from ui.concepts import try_model
from ui.frame import require_frame
from ui.i18n import axis_labels, t, translated_widget
from ui.models import (
    engine_folder,
    load_model,
    model_label,
    selected_device,
    show_load_detail,
)
from ui.modern import (
    CacheRun,
    cache_run,
    flash_chart,
    gqa_demo,
    length_chart,
    length_results,
    memory,
    memory_chart,
    online_example,
    qk_chart,
    qk_rows,
    rope_chart,
    show_model_facts,
    sink_chart,
    sinks,
    window_maps,
)
from ui.permalink import linked
from ui.sentence import code_span, sentence_input
from ui.tabs import lazy_tabs
from viz.attention import overview_heatmap
from viz.modern import (
    SCHEME_ORDER,
    cache_rows_figure,
    human_bytes,
    kv_bytes_figure,
    length_table,
    online_steps_frame,
)

require_frame()

CACHE_MODELS = ("en2ko", "reverse", "sort")
METRICS = ("token_accuracy", "exact_match")
# A current large model, for scale: Llama-style 7-8B dimensions.
REAL = dict(layers=32, d_model=4096, n_heads=32, tokens=8192, bytes_per_value=2)
REAL_KV = {"mha": 32, "gqa": 8, "mqa": 1}
GEMMA = dict(heads=16, d_head=256, d_model=3072)  # Gemma-7B (Gemma Team, 2024)


ROPE_D_K = 64  # the head width the rotation figure uses


def rope_theta(pair: int, d_k: int) -> float:
    """θ_i = 10000^(-2i/d_k): the angle pair i turns per position."""
    return 10000 ** (-2 * pair / d_k)


def reading_numbers(meta: dict, rows: list[dict], names: dict[str, str]) -> dict[str, str]:
    """What the reading below the chart states, computed from the shipped rows: only what
    every seed shows (robust_pairs), the exact matches, and how far out chance is reached."""
    settings = meta.get("settings", {})
    train = settings.get("train_max_len", 16)
    lengths = sorted({r["length"] for r in rows})
    beyond = next((n for n in lengths if n > train), lengths[-1])
    schemes = [s for s in SCHEME_ORDER if any(r["scheme"] == s for r in rows)]
    pairs = robust_pairs(rows, "token_accuracy", beyond, schemes)
    exact_at_train = {
        s: sum(seed_values(rows, "exact_match", s, train).values())
        / max(1, len(seed_values(rows, "exact_match", s, train)))
        for s in schemes
    }
    far = lengths[-1]
    fastest, slowest = training_seconds(meta)
    return {
        "train_time": f"{fastest:,.0f}–{slowest:,.0f}",
        "train": str(train),
        "beyond": str(beyond),
        "pairs": ", ".join(f"{names[a]} > {names[b]}" for a, b in pairs) or "–",
        "exact_at_train": ", ".join(
            f"{names[s]} {share:.2f}" for s, share in exact_at_train.items()
        ),
        "far": str(far),
        "far_max": f"{max(r['token_accuracy'] for r in rows if r['length'] == far):.2f}",
        "chance": f"{1 / settings.get('symbols', 10):.1f}",
        "exact_beyond": f"{max(r['exact_match'] for r in rows if r['length'] > train):.2f}",
    }


def fit_texts(meta: dict, names: dict[str, str]) -> list[str]:
    """Per scheme: fitted in every seed (with the steps it took), in some, or in none."""
    out = []
    for scheme, f in fit_summary(meta).items():
        lo, hi = min(f["steps"]), max(f["steps"])
        steps = f"{lo:,}" if lo == hi else f"{lo:,}–{hi:,}"
        acc = f"{min(f['train_accuracy']):.2f}–{max(f['train_accuracy']):.2f}"
        key = "all" if f["fit"] == f["seeds"] else "none" if f["fit"] == 0 else "some"
        out.append(
            t(
                f"modern.length.fit_{key}",
                scheme=names.get(scheme, scheme),
                steps=steps,
                fit=f["fit"],
                seeds=f["seeds"],
                acc=acc,
            )
        )
    return out


def slope_text(m: float) -> str:
    """An ALiBi slope as the power of two it is: 0.5 -> "1/2", 0.00390625 -> "1/256"."""
    inverse = 1 / m
    return f"1/{inverse:.0f}" if abs(inverse - round(inverse)) < 1e-9 else f"{m:.3g}"


def qk_spans(with_learned: bool, names: dict[str, str]) -> str:
    """Each panel's lowest and highest score, so independent y-scales are read as such."""
    rows = qk_rows(with_learned)
    parts = []
    for scheme in SCHEME_ORDER:
        scores = [r["score"] for r in rows if r["scheme"] == scheme]
        if scores:
            parts.append(
                t(
                    "modern.qk.span",
                    scheme=names[scheme],
                    lo=f"{min(scores):.2f}",
                    hi=f"{max(scores):.2f}",
                )
            )
    return "; ".join(parts)


def memory_numbers(mem: dict, block: int) -> dict[str, str]:
    """The tiled working set beside its output, in tiles of scores, and the smallest n."""
    working = mem["tiled_measured"][-1] - mem["output_bytes"][-1]
    return {
        "block": block,
        "working": human_bytes(working),
        "ratio": f"{working / (block * block * 4):.0f}",
        "n0": mem["n"][0],
        "tiled0": human_bytes(mem["tiled_measured"][0]),
        "full0": human_bytes(mem["full_measured"][0]),
    }


def bandwidth_numbers() -> dict[str, str]:
    """The 7-8B model's cache read once per generated token at REAL["tokens"] tokens."""
    sizes = {
        k: kv_cache_bytes(REAL["layers"], REAL["d_model"], REAL["n_heads"], g, REAL["tokens"], 2)
        for k, g in REAL_KV.items()
    }
    return {
        "tokens": f"{REAL['tokens']:,}",
        **{name: human_bytes(size) for name, size in sizes.items()},
        "gqa_kv": REAL_KV["gqa"],
        "times": f"{sizes['mha'] / sizes['gqa']:.0f}",
    }


def gemma_numbers() -> dict[str, int]:
    """Gemma-7B's shape: 16 heads of width 256, whose product is not its d_model of 3072."""
    return {**GEMMA, "product": GEMMA["heads"] * GEMMA["d_head"]}


def scheme_names() -> dict[str, str]:
    return {s: t(f"modern.scheme.{s}") for s in SCHEME_ORDER}


st.title(t("modern.title"))
st.caption(t("modern.intro"))
st.markdown(t("modern.overview"))

# The sidebar's own LLaMA / Qwen2 / Mistral / Gemma 3 / GPT-2 model: what its config chose.
FOLDER = engine_folder()
if FOLDER:
    show_model_facts(FOLDER, selected_device())
FOLDER_CONFIG = load_model(FOLDER, selected_device()).config if FOLDER else None
FACTS = attention_facts(FOLDER_CONFIG) if FOLDER else None


# ---- 1. positions ------------------------------------------------------------------------------
ALIBI_HEADS = 8


def positions_intro() -> None:
    st.header(t("modern.positions.header"))
    st.markdown(
        t(
            "modern.positions.text",
            n=ALIBI_HEADS,
            slopes=", ".join(slope_text(m) for m in alibi_slopes(ALIBI_HEADS).tolist()),
        )
    )
    st.latex(
        r"\text{RoPE: } (R_p q)^\top (R_s k) = q^\top R_{s-p}\, k"
        r"\qquad \text{ALiBi: } \frac{q_p^\top k_s}{\sqrt{d_k}} - m_h\,|p - s|"
    )


@st.fragment
def length_section() -> None:
    """The experiment's chart and table: the metric switch reruns only this."""
    st.subheader(t("modern.length.header"))
    meta, rows = length_results()
    if not rows:
        st.info(t("modern.length.missing"), icon=":material/info:")
    else:
        settings = meta.get("settings", {})
        names = scheme_names()
        lengths = settings.get("eval_lengths", [0])
        st.markdown(
            t(
                "modern.length.text",
                task=t(f"modern.task.{settings.get('task', 'reverse')}"),
                train=settings.get("train_max_len", 16),
                seeds=len(meta.get("seeds", [0])),
                fit=f"{settings.get('fit_accuracy', 0):.2f}",
                check=settings.get("check_every", 0),
                max_steps=f"{settings.get('max_steps', 0):,}",
                fits="; ".join(fit_texts(meta, names)),
                lo=min(lengths),
                hi=max(lengths),
            )
        )
        metric = linked(
            st.segmented_control,
            t("modern.length.metric"),
            list(METRICS),
            key="mmetric",
            required=True,
            format_func=lambda m: t(f"modern.metric.{m}"),
        )
        plotly_chart(
            length_chart(
                metric,
                names,
                t("modern.length.x"),
                t(f"modern.metric.{metric}"),
                t("modern.length.trained"),
            ),
            key="length_chart",
        )
        st.dataframe(
            length_table(rows, metric=metric, names=names, length_header=t("modern.length.col")),
            column_config={"_index": st.column_config.TextColumn(t("modern.length.scheme"))},
        )
        st.caption(
            t(
                "modern.length.caption",
                command=code_span(meta.get("command", "")),
                seeds=", ".join(str(x) for x in meta.get("seeds", [meta.get("seed", 0)])),
                seconds=f"{meta.get('cpu_time_s', meta.get('wall_time_s', 0)):,.0f}",
            )
        )
        st.markdown(t("modern.length.reading", **reading_numbers(meta, rows, names)))


def qk_section() -> None:
    st.subheader(t("modern.qk.header"))
    st.markdown(t("modern.qk.text"))
    with_learned = try_model("minilm")[0] is not None
    series = {f"p={p}": t("modern.qk.query_at", p=p) for p in (48, 96)}
    series.update({f"h={h}": t("modern.qk.head", h=h + 1) for h in (0, 7)})
    plotly_chart(
        qk_chart(with_learned, scheme_names(), series, t("modern.qk.x"), t("modern.qk.y")),
        key="qk_chart",
    )
    st.caption(t("modern.qk.caption", spans=qk_spans(with_learned, scheme_names())))


@st.fragment
def rope_section() -> None:
    """RoPE's rotation: its two sliders rerun only this."""
    st.subheader(t("modern.rope.header"))
    st.markdown(t("modern.rope.text", d_k=ROPE_D_K))
    r1, r2 = st.columns(2)
    pair = r1.slider(
        t("modern.rope.pair"),
        0,
        31,
        0,
        key="mpair",
        bind="query-params",
        help=t("modern.rope.pair_help"),
    )
    n_pos = r2.slider(t("modern.rope.positions"), 2, 24, 8, key="mpos", bind="query-params")
    other = pair + 8 if pair + 8 <= 31 else pair - 8  # a slower (or, past 23, faster) pair
    plotly_chart(
        rope_chart(
            ((t("modern.rope.pair_n", i=pair), pair), (t("modern.rope.pair_n", i=other), other)),
            n_pos,
            t("modern.rope.position"),
        ),
        key="rope_chart",
    )
    theta, theta_other = rope_theta(pair, ROPE_D_K), rope_theta(other, ROPE_D_K)
    st.caption(
        t(
            "modern.rope.caption",
            i=pair,
            theta=f"{theta:.4g}",
            turns=f"{theta * (n_pos - 1):.3g}",
            d_k=ROPE_D_K,
        )
        + " "
        + t(
            "modern.rope.compare_slower" if other > pair else "modern.rope.compare_faster",
            j=other,
            theta=f"{theta_other:.4g}",
        )
    )
    if FACTS and FACTS["rope_base"] and pair < FACTS["d_k"] // 2:
        own = FACTS["rope_base"] ** (-2 * pair / FACTS["d_k"])
        st.caption(
            t(
                "models.yours.rope_pair",
                name=model_label(FOLDER),
                base=t("models.yours.base_global", base=f"{FACTS['rope_base']:,.0f}")
                if FACTS["rope_local_base"]
                else f"{FACTS['rope_base']:,.0f}",
                d_k=FACTS["d_k"],
                i=pair,
                theta=f"{own:.4g}",
                layout=t(f"models.yours.layout.{FACTS['rope_layout']}"),
            )
        )


# ---- 2. grouped-query attention ----------------------------------------------------------------
@st.fragment
def gqa_section() -> None:
    """Grouped-query attention: its choice reruns only this."""
    st.header(t("modern.gqa.header"))
    st.markdown(t("modern.gqa.text"))
    kv_choice = linked(
        st.segmented_control,
        t("modern.gqa.kv_heads"),
        [8, 4, 2, 1],
        key="mkv",
        required=True,
        format_func=lambda g: t("modern.gqa.kv_option", g=g),
    )
    demo = gqa_demo(kv_choice)
    group = 8 // kv_choice
    g1, g2, g3 = st.columns(3)
    g1.metric(t("modern.gqa.weights_shape"), "[" + ", ".join(str(s) for s in demo["shape"]) + "]")
    g2.metric(t("modern.gqa.kv_params"), f"{demo['kv_params']:,}")
    g3.metric(t("modern.gqa.group"), t("modern.gqa.group_value", n=group))
    share = pd.DataFrame(
        {
            t("modern.gqa.query_head"): [t("modern.gqa.head_n", n=h + 1) for h in range(8)],
            t("modern.gqa.kv_head"): [t("modern.gqa.head_n", n=h // group + 1) for h in range(8)],
        }
    )
    st.dataframe(share.set_index(t("modern.gqa.query_head")).T)
    if demo["gap"] is not None:
        st.success(t("modern.gqa.parity", gap=f"{demo['gap']:.1e}"), icon=":material/check_circle:")
    else:
        st.caption(t("modern.gqa.shared", g=kv_choice, group=group))


# ---- 3. the key/value cache --------------------------------------------------------------------
@st.fragment
def cache_section() -> None:
    """The key/value cache: model, input and step rerun only this."""
    st.header(t("modern.cache.header"))
    st.markdown(t("modern.cache.text"))
    run = chosen_cache_run()
    if run is None:
        return
    n_steps = len(run.generated)
    step = (
        st.slider(t("modern.cache.step"), 1, n_steps, n_steps, key="mcstep") if n_steps > 1 else 1
    )
    rows_now = run.prefix + step - 1  # the new token's key joins the cache as it is read
    st.markdown(
        t(
            "modern.cache.now",
            step=step,
            total=n_steps,
            token=code_span(run.generated[step - 1]),
            fed=" ".join(code_span(x) for x in run.fed[:rows_now]),
            rows=rows_now,
        )
    )
    show_cache_rows(run, rows_now)
    show_cache_equality(run, step)
    show_cache_bytes(run, rows_now)
    st.markdown(t("modern.cache.bandwidth", **bandwidth_numbers()))


def chosen_cache_run() -> CacheRun | None:
    """The cached decoding run of the model and text the reader picks, or None with the
    reason said (the model did not load, the input is bad, no room to generate)."""
    cache_model = linked(
        st.segmented_control,
        t("modern.cache.model"),
        [*CACHE_MODELS, FOLDER] if FOLDER else list(CACHE_MODELS),
        key="mcmodel",
        required=True,
        format_func=model_label,
    )
    cache_lm, why = try_model(cache_model)
    if cache_lm is None:
        st.error(t("model.load_failed", name=model_label(cache_model)), icon=":material/error:")
        show_load_detail(why)
        return None
    cache_text = sentence_input(cache_lm, cache_model, key="mctext")
    if cache_text is None:
        return None
    run = cache_run(cache_model, selected_device(), cache_text)
    if run is None:
        st.warning(t("modern.cache.no_room"), icon=":material/warning:")
    return run


def show_cache_rows(run: CacheRun, rows_now: int) -> None:
    """Each layer's cached keys so far (head 1), one row per token read."""
    for i, col in enumerate(st.columns(run.layers)):
        keys = run.keys[i][0, :rows_now]  # head 1: [rows, d_k]
        plotly_chart(
            cache_rows_figure(
                keys,
                tokens=run.fed[:rows_now],
                title=t(
                    "modern.cache.layer_title",
                    n=i + 1,
                    shape=f"[{run.kv_heads}, {rows_now}, {keys.shape[1]}]",
                ),
                x_title=t("modern.cache.dims"),
            ),
            key=f"cache_layer_{i}",
            where=col,
        )
    st.caption(t("modern.cache.rows_caption"))


def show_cache_equality(run: CacheRun, step: int) -> None:
    """The equality check: the step's logits with the cache and recomputed from scratch."""
    diff = float(run.logit_gap[:step].max())
    if diff <= 1e-4 and run.same_tokens:
        st.success(
            t(
                "modern.cache.equal" if step > 1 else "modern.cache.equal_one",
                diff=f"{diff:.1e}",
                steps=step,
            ),
            icon=":material/check_circle:",
        )
    else:
        st.error(t("modern.cache.differ", diff=f"{diff:.1e}"), icon=":material/error:")


def show_cache_bytes(run: CacheRun, rows_now: int) -> None:
    """The cache's size with every head layout, for this model now and a 7-8B one, and the
    measured bytes of the whole run beside the formula."""
    n_heads = run.n_heads
    half = max(1, n_heads // 2)

    def size(g: int, rows: int) -> int:
        return kv_cache_bytes(run.layers, run.d_model, n_heads, g, rows, run.bytes_per_value)

    ours = {
        t("modern.cache.mha", g=n_heads): size(n_heads, rows_now),
        t("modern.cache.gqa", g=half): size(half, rows_now),
        t("modern.cache.mqa"): size(1, rows_now),
    }
    if run.kv_heads not in (n_heads, half, 1):  # the model's own
        ours[t("modern.cache.gqa", g=run.kv_heads)] = size(run.kv_heads, rows_now)
        ours = dict(sorted(ours.items(), key=lambda item: -item[1]))
    real = {
        t(f"modern.cache.{k}", g=g): kv_cache_bytes(
            REAL["layers"],
            REAL["d_model"],
            REAL["n_heads"],
            g,
            REAL["tokens"],
            REAL["bytes_per_value"],
        )
        for k, g in REAL_KV.items()
    }
    b1, b2 = st.columns(2)
    plotly_chart(
        kv_bytes_figure(
            ours,
            y_title=t("modern.cache.bytes"),
            title=t(
                "modern.cache.ours_title",
                layers=run.layers,
                d=run.d_model,
                heads=n_heads,
                tokens=rows_now,
            ),
        ),
        key="cache_ours",
        where=b1,
    )
    plotly_chart(
        kv_bytes_figure(
            real, y_title=t("modern.cache.bytes"), title=t("modern.cache.real_title", **REAL)
        ),
        key="cache_real",
        where=b2,
    )
    rows_end = run.prefix + len(run.generated) - 1
    measured = t(
        "modern.cache.measured",
        rows=rows_end,
        measured=f"{run.self_bytes:,}",
        formula=f"{size(run.kv_heads, rows_end):,}",
    )
    if run.cross_bytes:  # only an encoder-decoder keeps the encoder's keys and values
        measured += " " + t("modern.cache.cross", cross=human_bytes(run.cross_bytes))
    st.caption(measured)


@st.fragment
def calculator_section() -> None:
    """The cache calculator: typing reruns only this."""
    with st.expander(t("modern.calc.header"), icon=":material/calculate:"):
        st.caption(t("modern.calc.caption", **gemma_numbers()))
        c = st.columns(5)
        calc: dict[str, int | None] = {
            "layers": c[0].number_input(t("modern.calc.layers"), 1, 512, 32, key="mc_layers"),
            "d_model": c[1].number_input(t("modern.calc.d_model"), 1, 65536, 4096, key="mc_d"),
            "n_heads": c[2].number_input(t("modern.calc.heads"), 1, 1024, 32, key="mc_h"),
            "n_kv_heads": c[3].number_input(t("modern.calc.kv_heads"), 1, 1024, 8, key="mc_g"),
            "tokens": c[4].number_input(t("modern.calc.tokens"), 1, 10_000_000, 8192, key="mc_n"),
        }
        widths = {"fp32": 4, "fp16": 2, "int8": 1}
        # Labels fixed during this run (see ui.permalink.linked): a later lookup could be in
        # another language.
        dtype_names = {k: t(f"modern.calc.dtype.{k}") for k in widths}
        # A row of its own: a sixth column cut "fp16 / bf16 (2 bytes)" off at 1440 px.
        dcol1, dcol2 = st.columns(2)
        dtype = dcol1.selectbox(
            t("modern.calc.dtype"),
            list(widths),
            index=1,
            key=translated_widget("mc_dtype"),
            format_func=dtype_names.__getitem__,
        )
        # Head width: 0 means d_model / heads; some models choose their own (Gemma-7B: 256).
        d_head = dcol2.number_input(
            t("modern.calc.d_head"), 0, 4096, 0, key="mc_dk", help=t("modern.calc.d_head_help")
        )
        width = widths.get(dtype, 2)
        values = {name: int(n) if n is not None else 0 for name, n in calc.items()}
        d_head = int(d_head or 0)
        if min(values.values()) < 1:
            st.warning(t("modern.calc.missing"), icon=":material/edit:")
        elif not d_head and values["d_model"] % values["n_heads"]:
            st.warning(t("modern.calc.d_model_heads", **values), icon=":material/warning:")
        elif values["n_heads"] % values["n_kv_heads"] or values["n_kv_heads"] > values["n_heads"]:
            st.warning(t("modern.calc.kv_divide", **values), icon=":material/warning:")
        else:

            def size_with(kv_heads: int) -> int:
                return kv_cache_bytes(
                    values["layers"],
                    values["d_model"],
                    values["n_heads"],
                    kv_heads,
                    values["tokens"],
                    width,
                    d_head=d_head or None,
                )

            size, full = size_with(values["n_kv_heads"]), size_with(values["n_heads"])
            saving = None
            if full != size:
                saving = t("modern.calc.saving", times=f"{full / size:.0f}")
            st.metric(t("modern.calc.result"), human_bytes(size), delta=saving, delta_color="off")
            if saving is None:
                st.caption(t("modern.calc.no_saving"))


# ---- 4. FlashAttention's online softmax --------------------------------------------------------
@st.fragment
def flash_section() -> None:
    """The online softmax, tile by tile: its controls rerun only this."""
    st.header(t("modern.flash.header"))
    st.markdown(t("modern.flash.text"))
    # Two lines: on one, the formula ran past the page's edge at 1024 px.
    st.latex(
        r"\begin{gathered} m' = \max(m, \max_j s_j),\quad "
        r"\ell' = e^{m - m'}\,\ell + \sum_j e^{s_j - m'} \\ "
        r"o' = e^{m - m'}\,o + \sum_j e^{s_j - m'}\, v_j,\quad \text{out} = o / \ell \end{gathered}"
    )
    f1, f2, f3 = st.columns(3)
    n_keys = f1.slider(t("modern.flash.keys"), 4, 32, 10, key="mfkeys", bind="query-params")
    block = f2.slider(t("modern.flash.block"), 1, 16, 4, key="mfblock", bind="query-params")
    seed = f3.number_input(t("modern.flash.seed"), 0, 10_000, 3, key="mfseed")
    block = min(block, n_keys)
    steps, scores, final_out, _ = online_example(n_keys, block, int(seed or 0))
    n_tiles = len(steps)
    tile = st.slider(t("modern.flash.tile"), 1, n_tiles, 1, key="mftile") if n_tiles > 1 else 1
    flash_labels = {
        "titles": (
            t("modern.flash.scores_title"),
            t("modern.flash.output_title", n=tile, total=n_tiles),
        ),
        "key_title": t("modern.flash.key"),
        "dim_title": t("modern.flash.dim"),
        "max_label": t("modern.flash.running_max"),
        "final_label": t("modern.flash.final"),
        "partial_label": t("modern.flash.partial"),
    }
    plotly_chart(flash_chart(n_keys, block, int(seed or 0), tile, flash_labels), key="flash_chart")
    cols = {
        k: t(f"modern.flash.col.{k}")
        for k in ("tile", "keys", "tile_max", "m_old", "m_new", "rescale", "l", "partial")
    }
    st.dataframe(online_steps_frame(steps[:tile], cols), hide_index=True)
    st.caption(t("modern.flash.table_caption"))
    gap = float(np.abs(np.asarray(steps[-1].partial).reshape(-1) - np.asarray(final_out)).max())
    if tile == n_tiles:
        st.success(t("modern.flash.equal", diff=f"{gap:.1e}"), icon=":material/check_circle:")
    else:
        st.info(t("modern.flash.more", left=n_tiles - tile), icon=":material/chevron_right:")


@st.fragment
def memory_section() -> None:
    """Memory as n grows."""
    st.subheader(t("modern.memory.header"))
    st.markdown(t("modern.memory.text"))
    mem_block = linked(
        st.segmented_control,
        t("modern.memory.block"),
        [64, 128, 256],
        key="mmblock",
        required=True,
        default=128,
    )
    mem = memory(mem_block)
    plotly_chart(
        memory_chart(
            mem_block,
            {"full": t("modern.memory.full"), "tiled": t("modern.memory.tiled")},
            t("modern.memory.n"),
            t("modern.memory.bytes"),
        ),
        key="memory_chart",
    )
    st.dataframe(
        pd.DataFrame(
            {
                t("modern.memory.n"): mem["n"],
                t("modern.memory.full"): [human_bytes(size) for size in mem["full_measured"]],
                t("modern.memory.tiled"): [human_bytes(size) for size in mem["tiled_measured"]],
                t("modern.memory.diff"): [f"{diff:.1e}" for diff in mem["max_diff"]],
            }
        ),
        hide_index=True,
    )
    st.caption(t("modern.memory.caption", **memory_numbers(mem, mem_block)))


# ---- 5. attention sinks ------------------------------------------------------------------------
@st.fragment
def sinks_section() -> None:
    """Attention sinks in MiniLM: the input reruns only this."""
    st.header(t("modern.sinks.header"))
    st.markdown(t("modern.sinks.text"))
    minilm, why = try_model("minilm")
    if minilm is None:
        st.error(t("model.load_failed", name=model_label("minilm")), icon=":material/error:")
        show_load_detail(why)
    else:
        sink_text = sentence_input(minilm, "minilm", key="mstext")
        if sink_text is not None:
            tokens, share_values = sinks(selected_device(), sink_text)
            sink_labels = {
                "sink_names": (t("modern.sinks.cls"), t("modern.sinks.sep")),
                "layer_title": t("common.layer"),
                "head_title": t("common.head"),
                "value_name": t("modern.sinks.share"),
            }
            plotly_chart(sink_chart(selected_device(), sink_text, sink_labels), key="sink_chart")
            both = share_values.sum(-1)
            st.caption(
                t(
                    "modern.sinks.caption",
                    n=len(tokens),
                    even=f"{2 / len(tokens):.2f}",
                    mean=f"{both.mean():.2f}",
                    top=f"{both.max():.2f}",
                )
            )
            st.markdown(t("modern.sinks.why"))


def show_positions() -> None:
    positions_intro()
    length_section()
    qk_section()
    rope_section()


# ---- 3b. sliding-window and global layers (a model with a layer pattern: Gemma 3) ----------
@st.fragment
def window_section() -> None:
    """The sidebar model's own local/global layers, the cache they save, and on request a
    sliding layer's map beside a global one's over a text twice the window."""
    cfg = load_model(FOLDER, selected_device()).config
    pattern = window_pattern(cfg)
    n_local = sum(w is not None for w in pattern)
    st.header(t("modern.window.header"))
    st.markdown(
        t(
            "modern.window.text",
            name=model_label(FOLDER),
            layers=len(pattern),
            local=n_local,
            wide=len(pattern) - n_local,
            window=f"{cfg.sliding_window:,}",
            local_base=f"{cfg.layer_rope_base(pattern.index(cfg.sliding_window)):,.0f}",
            global_base=f"{cfg.layer_rope_base(pattern.index(None)):,.0f}",
        )
    )
    kinds = [
        t("modern.window.local", w=f"{w:,}") if w else t("modern.window.global") for w in pattern
    ]
    layer_names = [t("common.layer_n", n=i + 1) for i in range(len(pattern))]
    st.dataframe(
        pd.DataFrame({t("modern.window.kind"): kinds}, index=layer_names).T,
        key="mwin_pattern",
    )
    sizes = window_cache_bytes(cfg, cfg.max_len)
    c1, c2, c3 = st.columns(3)
    c1.metric(
        t("modern.window.cache_pattern", n=f"{cfg.max_len:,}"), human_bytes(sizes["windowed"])
    )
    c2.metric(t("modern.window.cache_global"), human_bytes(sizes["all_global"]))
    c3.metric(t("modern.window.saving"), f"{sizes['all_global'] / sizes['windowed']:.1f}×")
    if not st.toggle(t("modern.window.compare"), key="mwin", help=t("modern.window.compare_help")):
        return
    with st.spinner(t("modern.window.running")):
        maps = window_maps(FOLDER, selected_device())
    cols = st.columns(2)
    for col, layer, window, overview in zip(cols, maps.layers, maps.windows, maps.maps):
        title = (
            t("modern.window.map_local", n=layer + 1, w=f"{window:,}")
            if window
            else t("modern.window.map_global", n=layer + 1)
        )
        figure = overview_heatmap(
            overview.values,
            overview.row_edges,
            overview.col_edges,
            title=title,
            labels=axis_labels(),
        )
        plotly_chart(figure, key=f"mwin_map_{layer}", where=col)
    st.caption(
        t(
            "modern.window.caption",
            n=f"{maps.n_tokens:,}",
            local=maps.layers[0] + 1,
            reach_local=f"{maps.reach[0]:,}",
            window=f"{maps.windows[0]:,}",
            wide=maps.layers[1] + 1,
            reach_wide=f"{maps.reach[1]:,}",
        )
    )


def show_cache() -> None:
    if FOLDER and any(w is not None for w in window_pattern(FOLDER_CONFIG)):
        window_section()
    cache_section()
    calculator_section()


def show_flash() -> None:
    flash_section()
    memory_section()


# One tab per idea; only the open one runs and sends its charts.
lazy_tabs(
    {
        t("tabs.modern.positions"): show_positions,
        t("tabs.modern.gqa"): gqa_section,
        t("tabs.modern.cache"): show_cache,
        t("tabs.modern.flash"): show_flash,
        t("tabs.modern.sinks"): sinks_section,
    },
    key="modern_tab",
    params=(  # a link to a widget opens its tab
        ("mmetric", "mpair", "mpos"),
        ("mkv",),
        ("mcmodel", "mctext", "mcstep"),
        ("mfkeys", "mfblock", "mfseed", "mftile", "mmblock"),
        ("mstext",),
    ),
)

st.divider()
st.page_link(
    "pages/concept_positional.py", label=t("modern.link.positional"), icon=":material/waves:"
)
st.page_link("pages/decoding.py", label=t("modern.link.decoding"), icon=":material/stairs:")
