"""Mechanisms: induction heads forming, the logit lens, activation patching, what a head does."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from model.analysis.attribution import Attribution, attribute
from model.analysis.heads import ROLES, SCORES, THRESHOLD, HeadScan, default_length, scan_heads
from model.analysis.induction import (
    Prediction,
    classify_stop,
    load_snapshots,
    phase_change,
    score_at,
    teacher_forced,
)
from model.analysis.lens import Lens, logit_lens
from model.analysis.pairs import even_pairs, fact_pairs
from model.analysis.patching import Patching, PatchingError, patch
from model.runtime.checkpoint import CURVE, METRICS
from model.runtime.loading import CHECKPOINTS, CONTRAST, GGUF_MODELS
from model.tasks import EOS
from model.tasks.induction import NotARepeat, split_block
from model.training.warmup import load_curve
from ui.charts import plotly_chart
from ui.concepts import try_model
from ui.downloads import drawn, html_download
from ui.frame import require_frame
from ui.i18n import axis_labels, t
from ui.models import (
    engine_folder,
    load_model,
    model_label,
    parameter_count,
    selected_device,
    show_engine_line,
    show_load_detail,
    sidebar_folder,
)
from ui.permalink import linked
from ui.sentence import clean_text, code_span, sentence_input
from ui.tabs import lazy_tabs
from viz.attention import attention_heatmap
from viz.concepts import lines_figure
from viz.mechanisms import (
    grid_heatmap,
    head_lines_figure,
    head_scatter,
    lens_table,
    prediction_table,
)

require_frame()

MODELS = ("induction", "sort", "en2ko", "reverse")  # decoders that run our own code
SCAN_MODELS = ("induction", "sort")  # the decoder-only ones: the repeated-tokens test
SCAN_SEQUENCES = 4  # one for a model past BIG_MODEL parameters (a 0.5B one: ~50 s on 2 cores)
BIG_MODEL = 100_000_000
ONE_LAYER = CONTRAST[0]
PATCH_DEFAULTS = {
    "induction": ("q w e r t y u q w", "q w e r z y u q w"),
    "sort": ("3 1 4 1 5 9 2 6", "3 1 4 1 5 0 2 6"),
    "en2ko": ("I study math at school", "I study music at school"),
    "reverse": ("a b c d e f g", "a b c x e f g"),
}
# A pretrained decoder's pair: the indirect-object sentence of interpretability work (the
# two names swap, so the answer swaps with them).
FOLDER_PATCH = (
    "When Mary and John went to the store, John gave a drink to",
    "When Mary and John went to the store, Mary gave a drink to",
)


@st.cache_data(show_spinner=False, ttl=60)
def shipped_run(name: str) -> dict | None:
    """metrics, loss curve and head snapshots of a shipped induction checkpoint."""
    folder = CHECKPOINTS / name
    try:
        metrics = json.loads((folder / METRICS).read_text(encoding="utf-8"))
        curve = load_curve(folder / CURVE)
    except (OSError, ValueError, KeyError):
        return None
    return {"metrics": metrics, "curve": curve, "snapshots": load_snapshots(folder)}


@st.cache_data(show_spinner=False, max_entries=64)
def cached_lens(name: str, device: str, text: str, k: int) -> Lens:
    return logit_lens(load_model(name, device), text, k=k)


@st.cache_data(show_spinner=False, max_entries=8)
def cached_fact_pairs(name: str, device: str) -> list[tuple[str, str, bool]]:
    return fact_pairs(load_model(name, device))


@st.cache_data(show_spinner=False, max_entries=64)
def cached_patch(name: str, device: str, clean: str, corrupted: str) -> Patching:
    return patch(load_model(name, device), clean, corrupted)


@st.cache_data(show_spinner=False, max_entries=64)
def cached_attribution(
    name: str,
    device: str,
    text: str,
    position: int | None,
    relevant: int | None,
    relevant_src: int | None,
) -> Attribution:
    return attribute(load_model(name, device), text, position, relevant, relevant_src)


@st.cache_data(show_spinner=False, max_entries=16)
def cached_scan(name: str, device: str, length: int, seed: int) -> HeadScan:
    lm = load_model(name, device)
    n = 1 if parameter_count(lm) > BIG_MODEL else SCAN_SEQUENCES
    return scan_heads(lm, length=length, n=n, seed=seed)


@st.cache_data(show_spinner=False, max_entries=64)
def cached_teacher_forced(device: str, text: str) -> list[Prediction]:
    lm = load_model("induction", device)
    return teacher_forced(lm.network, lm.tgt_tokenizer, text)


@st.cache_data(show_spinner=False, max_entries=64)
def free_run(device: str, text: str, most: int) -> list[str]:
    """The greedy continuation, <eos> included when the model says it, at most ``most``
    tokens (a model that keeps going would loop to its length limit)."""
    lm = load_model("induction", device)
    ids = [s.token_id for s in lm.decode(text, max_new_tokens=most)]
    return lm.tgt_tokenizer.tokens(ids)


def percent(count: int, n: int) -> str:
    return f"{count / n:.1%}" if n else "–"


def free_running_numbers(fr: dict) -> dict[str, str]:
    """The shipped metrics' free-running counts, as the page states them."""
    n = fr["n"]
    return {
        "n": f"{n:,}",
        **{k: f"{fr[k]:,}" for k in ("exact", "kept_going", "stopped_early", "letters_right")},
        **{f"{k}_pct": percent(fr[k], n) for k in ("exact", "kept_going", "stopped_early")},
        "letters_pct": percent(fr["letters_right"], n),
    }


def loss_numbers(run: dict) -> dict[str, str]:
    """The two-layer curve's slow descent and sudden drop, and the induction head's
    prefix-matching score at the drop's start and end (from its snapshots)."""
    curve = run["curve"]
    found = phase_change(list(curve["step"]), list(curve["loss"]))
    out = {name: f"{x:.2f}" if name.endswith("loss") else f"{x:,.0f}" for name, x in found.items()}
    out["steps"] = f"{found['end_step'] - found['start_step']:,.0f}"
    snaps = (run.get("snapshots") or {}).get("snapshots")
    best = run["metrics"].get("induction", {}).get("best_head")
    if snaps and best:
        out["head"] = lh(best)
        for key in ("start", "end"):
            out[f"{key}_score"] = (
                f"{score_at(snaps, found[f'{key}_step'], 'prefix_matching', *best):.2f}"
            )
    else:
        out.update(head="–", start_score="–", end_score="–")
    return out


def patch_reading(result: Patching, cols: list[str]) -> dict[str, str]:
    """Where restoring the stream recovers most, after the first layer and after the last."""
    grid = result.by_position
    first, last = 1, len(grid) - 1
    best = {row: int(grid[row].argmax()) for row in (first, last)}
    return {
        "layer_a": t("common.layer_n", n=first),
        "pos_a": code_span(cols[best[first]]),
        "layer_b": t("common.layer_n", n=last),
        "pos_b": code_span(cols[best[last]]),
    }


def lh(pair) -> str:
    """[layer, head] (0-based) as the page names heads: L2H2."""
    return t("mech.head_lh", layer=pair[0] + 1, head=pair[1] + 1)


def induction_circuit_numbers(metrics: dict) -> dict[str, str] | None:
    """Every number the induction tab's circuit texts state, from the shipped metrics."""
    c, fr = metrics.get("circuit"), metrics.get("free_running")
    if not c or not fr:
        return None
    prefix, previous = c["prefix_matching"], c["previous_token"]
    duplicate, ablated = c["duplicate_token"], c["ablated_repeat_accuracy"]
    last, ind = c["induction_head"]
    prev = c["previous_head"]
    # the second-best prefix-matching head of the last layer, and the best duplicate-token
    # head anywhere (the last layer's own induction head excluded)
    second = max((h for h in range(len(prefix[last])) if h != ind), key=lambda h: prefix[last][h])
    dups = [(layer, h) for layer in range(len(duplicate)) for h in range(len(duplicate[layer]))]
    dup = max((x for x in dups if list(x) != [last, ind]), key=lambda x: duplicate[x[0]][x[1]])
    first_dup = max(range(len(duplicate[0])), key=lambda h: duplicate[0][h])
    keys = c["keys_only"]
    eos = metrics.get("eos_by_head") or {"n": 0, "eos": 0.0, "ablated": [[0.0]]}
    flat = [
        ((layer, h), share)
        for layer, row in enumerate(eos["ablated"])
        for h, share in enumerate(row)
    ]
    needed = sorted(flat, key=lambda x: x[1])[:3]  # the heads whose removal hurts most
    stop_heads = {f"stop{i + 1}": lh(head) for i, (head, _) in enumerate(needed)} | {
        f"stop{i + 1}_share": f"{share:.0%}" for i, (_, share) in enumerate(needed)
    }
    return {
        **stop_heads,
        "eos_share": f"{eos['eos']:.0%}",
        "eos_n": str(eos["n"]),
        **free_running_numbers(fr),
        "induction": lh([last, ind]),
        "prefix": f"{prefix[last][ind]:.2f}",
        "previous": lh(prev),
        "previous_score": f"{previous[prev[0]][prev[1]]:.2f}",
        "before": f"{keys['prefix_matching_before']:.2f}",
        "after": f"{keys['prefix_matching_after']:.2f}",
        "accuracy": f"{c['repeat_accuracy']:.0%}",
        "accuracy_after": f"{keys['repeat_accuracy_after']:.0%}",
        "second": lh([last, second]),
        "second_score": f"{prefix[last][second]:.2f}",
        "duplicate": lh(dup),
        "duplicate_score": f"{duplicate[dup[0]][dup[1]]:.2f}",
        "duplicate_ablated": f"{ablated[dup[0]][dup[1]]:.0%}",
        "first_duplicate": lh([0, first_dup]),
        "first_duplicate_score": f"{duplicate[0][first_dup]:.2f}",
        "block_length": str(c["block_length"]),
        "circuit_n": str(c["n"]),
    }


def layer_labels(n_layers: int) -> list[str]:
    return [t("mech.embeddings"), *[t("common.layer_n", n=i + 1) for i in range(n_layers)]]


def head_label(kind: str, layer: int, head: int) -> str:
    short = t(f"mech.kind_short.{kind}")
    return t("mech.head_label", kind=short, layer=layer + 1, head=head + 1)


def positions_label(tokens: list[str]):
    return lambda i: f"{i} · {tokens[i]}"


st.title(t("mech.title"))
st.caption(t("mech.intro"))
if sidebar_folder() and not engine_folder():  # never the toys in silence
    st.info(
        t("mech.scan.folder_not_engine", name=model_label(sidebar_folder())),
        icon=":material/info:",
    )
# The five tabs are drawn at the end (lazy_tabs): only the open one runs.


# ---- 1. Induction heads ------------------------------------------------------------------
def show_induction() -> None:
    two, one = shipped_run("induction"), shipped_run(ONE_LAYER)
    folder = engine_folder()
    if folder:  # never the toy in silence: the sidebar's model is scanned on its own tab
        st.info(
            t("mech.scan.toy_notice", name=model_label(folder), tab=t("mech.tab.scan")),
            icon=":material/info:",
        )
    st.markdown(t("mech.induction.plain"))
    found = induction_circuit_numbers(two["metrics"]) if two is not None else None
    if found:
        st.markdown(t("mech.induction.causal", **found))
    if two is None or one is None:
        st.info(t("mech.induction.missing"), icon=":material/hourglass_empty:")
        return
    names = {"induction": t("mech.two_layer"), ONE_LAYER: t("mech.one_layer")}
    show_shipped_metrics(two, one, names)
    show_training_curves(two, one, names)
    st.subheader(t("mech.induction.try"))
    try_induction(two, names)


def show_shipped_metrics(two: dict, one: dict, names: dict[str, str]) -> None:
    """One table, the two models side by side: six metric boxes in two half columns cut
    their labels off at 1024 px."""
    shown = {
        names[n]: r["metrics"].get("induction", {})
        for n, r in (("induction", two), (ONE_LAYER, one))
    }
    if not all(shown.values()):
        return
    table = pd.DataFrame(
        {
            name: {
                t("mech.metric.repeat"): f"{m['repeat_accuracy']:.1%}",
                t("mech.metric.first_half"): f"{m['first_half_accuracy']:.1%}",
                t("mech.metric.prefix"): f"{m['best_prefix_matching']:.2f}",
            }
            for name, m in shown.items()
        }
    )
    st.table(table)
    m = shown[names["induction"]]
    st.caption(
        t(
            "mech.metric.caption",
            n=m["n"],
            length=m["block_length"],
            chance=f"{m['chance']:.1%}",
            first=f"{m['first_half_accuracy']:.1%}",
        )
    )


def show_training_curves(two: dict, one: dict, names: dict[str, str]) -> None:
    """Both models' loss curves, then the two-layer model's head scores over training."""
    plotly_chart(
        lines_figure(
            {names["induction"]: two["curve"]["step"], names[ONE_LAYER]: one["curve"]["step"]},
            {names["induction"]: two["curve"]["loss"], names[ONE_LAYER]: one["curve"]["loss"]},
            x_title=t("mech.step"),
            y_title=t("mech.loss"),
            title=t("mech.induction.loss"),
        ),
        key="mech_loss",
    )
    snaps = two["snapshots"]
    st.caption(t("mech.induction.loss_caption", **loss_numbers(two)))
    if not snaps:
        return
    rows = snaps["snapshots"]
    steps = [r["step"] for r in rows]
    c1, c2 = st.columns(2)
    for where, score in ((c1, "prefix_matching"), (c2, "previous_token")):
        plotly_chart(
            head_lines_figure(
                steps,
                [r[score] for r in rows],
                head_label=t("mech.head_lh", layer="{layer}", head="{head}"),
                x_title=t("mech.step"),
                y_title=t(f"mech.score.{score}"),
                title=t(f"mech.score.{score}"),
            ),
            key=f"mech_{score}",
            where=where,
        )
    st.caption(
        t(
            "mech.induction.scores_caption",
            n=snaps["probe"]["n"],
            length=snaps["probe"]["block_length"],
        )
    )


def try_induction(two: dict, names: dict[str, str]) -> None:
    """The reader's own repeated block: what the two-layer model predicts, what it writes
    on its own, and where each model's best head looks."""
    lm2, why = try_model("induction")
    lm1, why1 = try_model(ONE_LAYER)
    if lm2 is None or lm1 is None:
        st.error(t("model.load_failed", name="induction"), icon=":material/error:")
        return
    text = sentence_input(lm2, "induction", key="mind")
    if text is None:
        return
    try:
        block, k = split_block(text)
    except NotARepeat as err:
        st.warning(t(f"mech.induction.not_repeat.{err.reason}"), icon=":material/block:")
        return
    left, right = st.columns([3, 2])
    show_teacher_forced(left, text)
    show_free_run(right, text, block[k:], two, names)
    cols = st.columns(2)
    for col, lm, name in ((cols[0], lm2, "induction"), (cols[1], lm1, ONE_LAYER)):
        show_best_head(col, lm, name, text, names)
    st.caption(t("mech.induction.stripe"))
    circuit_numbers = induction_circuit_numbers(two["metrics"])
    if circuit_numbers:
        st.markdown(t("mech.induction.eos", **circuit_numbers))
        st.markdown(t("mech.induction.others", **circuit_numbers))


def show_teacher_forced(where, text: str) -> None:
    """Each position's prediction with the true prefix fed in, and P(<eos>) at the end."""
    predictions = cached_teacher_forced(selected_device(), text)
    end = predictions[-1]
    where.markdown(t("mech.induction.tf_header"))
    where.dataframe(
        prediction_table(
            predictions,
            {
                k2: t(f"mech.induction.col.{k2}")
                for k2 in ("position", "token", "reference", "predicted", "p")
            },
        ),
        hide_index=True,
    )
    where.caption(
        t("mech.induction.tf_caption", token=code_span(end.token), p_eos=f"{end.p_eos:.1%}")
    )


def show_free_run(where, text: str, reference: list[str], two: dict, names: dict) -> None:
    """The model's own continuation against the block's rest, and how it stopped."""
    generated = free_run(selected_device(), text, len(reference) + 4)
    stop = classify_stop(generated, reference, EOS)
    where.markdown(t("mech.induction.fr_header"))
    where.markdown(
        t(
            "mech.induction.continues",
            model=names["induction"],
            text=code_span(" ".join(generated) or "∅"),
        )
    )
    where.markdown(t("mech.induction.reference", text=code_span(" ".join([*reference, "<eos>"]))))
    verdict = t(f"mech.induction.stop.{stop}")
    if stop == "exact":
        where.success(verdict, icon=":material/check_circle:")
    else:
        where.warning(verdict, icon=":material/warning:")
    fr = two["metrics"].get("free_running")
    if fr:
        where.caption(t("mech.induction.counts", **free_running_numbers(fr)))


def show_best_head(where, lm, name: str, text: str, names: dict[str, str]) -> None:
    """The shipped model's best prefix-matching head on the reader's text."""
    m = shipped_run(name)["metrics"].get("induction", {})
    layer, head = m.get("best_head", [lm.config.n_decoder_layers - 1, 0])
    trace = lm.trace(text)
    q = trace.tgt_tokens
    if name == ONE_LAYER:
        where.markdown(
            t(
                "mech.induction.continues",
                model=names[name],
                text=code_span(lm.translate(text) or "∅"),
            )
        )
    plotly_chart(
        attention_heatmap(
            trace.attention_map("decoder", layer, head),
            q,
            q,
            mask=trace.mask("decoder"),
            title=head_label("decoder", layer, head),
            labels=axis_labels(),
        ),
        key=f"mech_att_{name}",
        where=where,
    )


# ---- the model for tabs 2 to 5 (each picks its own) --------------------------------------
device = selected_device()


def pick_model(where, key: str, models: tuple[str, ...] = MODELS):
    folder = engine_folder()  # the sidebar's LLaMA / Qwen2 / Mistral / GPT-2 folder, if any
    options = (*models, folder) if folder else models
    default = folder or models[0]
    name = linked(
        where.selectbox,
        t("mech.model"),
        options,
        key=key,
        default=default,
        format_func=model_label,
    )
    lm, why = try_model(name)
    if lm is None:
        where.error(t("model.load_failed", name=model_label(name)), icon=":material/error:")
    else:
        show_engine_line(lm, where)
    return lm, name


# ---- 2. Logit lens -----------------------------------------------------------------------
def show_lens() -> None:
    st.markdown(t("mech.lens.plain"))
    lm, name = pick_model(st, "mlens_m")
    text = sentence_input(lm, name, key="mlens") if lm is not None else None
    if text is not None:
        k = st.slider(t("mech.lens.k"), 1, 10, 5, key="mlens_k")
        with st.spinner(t("explorer.running")):
            lens = cached_lens(name, device, text, k)
        labels = layer_labels(len(lens.layers) - 1)
        top1 = [[row[0] for row in layer] for layer in lens.top_tokens]
        lens_chart = drawn(
            grid_heatmap(
                lens.answer_prob,
                labels,
                lens.tokens,
                probability=True,
                value_name=t("mech.lens.prob"),
                x_title=t("mech.lens.positions"),
                title=t("mech.lens.heatmap"),
                text=top1,
            ),
            "mech_lens",
            caption=t("mech.lens.caption"),
        )
        st.caption(t("mech.lens.caption"))
        html_download(
            [lens_chart],
            title=f"{t('mech.title')} · {t('mech.lens.heatmap')}",
            intro=t("chart.export_html_intro", model=model_label(name), text=text),
            name="mechanisms-lens",
            key="mech_lens_html",
        )
        pos = st.select_slider(
            t("mech.lens.position"),
            list(range(len(lens.tokens))),
            value=len(lens.tokens) - 1,
            key="mlens_pos",
            format_func=positions_label(lens.tokens),
        )
        st.markdown(
            t(
                "mech.lens.answer",
                token=code_span(lens.tokens[pos]),
                answer=code_span(lens.answer[pos]),
            )
        )
        st.dataframe(lens_table(lens.top_tokens, lens.top_probs, labels, pos))


# ---- 3. Activation patching --------------------------------------------------------------
def fact_patch_pairs(name: str, pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """A shipped real model's patching pairs, the facts it answers right first, and which it
    answers right said in a caption, English and Korean apart (none right is said too)."""
    with st.spinner(t("mech.patch.facts_running")):
        facts = cached_fact_pairs(name, device)
    for lang, script in (("en", str.isascii), ("ko", lambda text: not text.isascii())):
        right = [code_span(c) for c, _, ok in facts if ok and script(c)]
        key = "mech.patch.facts_right" if right else "mech.patch.facts_none"
        st.caption(
            t(
                key,
                model=model_label(name),
                lang=t(f"mech.patch.lang.{lang}"),
                pairs=", ".join(right),
            )
        )
    known = [(c, d) for c, d, _ in facts]
    return known + [pair for pair in pairs if pair not in known]


def show_patching() -> None:
    st.markdown(t("mech.patch.plain"))
    words = ("recovered", "patched", "corrupted", "clean")
    w = {k: rf"\text{{{t(f'mech.patch.word.{k}')}}}" for k in words}
    st.latex(  # the words in the reader's language, the symbols as they are
        rf"{w['recovered']} = \frac{{LD_{{{w['patched']}}} - LD_{{{w['corrupted']}}}}}"
        rf"{{LD_{{{w['clean']}}} - LD_{{{w['corrupted']}}}}},"
        r"\quad LD = \text{logit}(A) - \text{logit}(B)"
    )
    lm, name = pick_model(st, "mpatch_m")
    if lm is None:
        return
    clean, corrupted = patch_pair_inputs(lm, name)
    result = run_patch(name, clean, corrupted)
    if result is not None:
        show_patch_result(result)


def patch_pair_inputs(lm, name: str) -> tuple[str, str]:
    """The clean and corrupted texts: a new model starts from its example; a model with
    several pairs offers them in a picker that fills both boxes."""
    pairs = [PATCH_DEFAULTS[name]] if name in PATCH_DEFAULTS else even_pairs(lm)
    if name in GGUF_MODELS:  # a real model: the facts it answers right come first
        pairs = fact_patch_pairs(name, pairs)
    if st.session_state.get("mpatch_for") != name:  # a new model starts from its example
        pair = pairs[0] if pairs else FOLDER_PATCH
        st.session_state["mclean"], st.session_state["mcorrupt"] = pair
        st.session_state["mpatch_for"] = name
    if name not in PATCH_DEFAULTS and pairs:

        def use_pair() -> None:
            chosen = st.session_state.get("mpatch_pair")
            if chosen is not None:
                st.session_state["mclean"], st.session_state["mcorrupt"] = pairs[chosen]

        st.selectbox(
            t("mech.patch.pairs"),
            list(range(len(pairs))),
            index=None,
            key="mpatch_pair",
            format_func=lambda i: f"{pairs[i][0]}  ⟶  {pairs[i][1]}",
            on_change=use_pair,
            help=t("mech.patch.pairs_help"),
        )
    c1, c2 = st.columns(2)
    # kept while another tab is open: Streamlit drops an undrawn widget's state, and the
    # example is filled in only for a new model, so coming back found both boxes empty
    clean = c1.text_input(t("mech.patch.clean"), key="mclean", persist_state="session")
    corrupted = c2.text_input(t("mech.patch.corrupted"), key="mcorrupt", persist_state="session")
    return clean_text(clean)[0], clean_text(corrupted)[0]


def run_patch(name: str, clean: str, corrupted: str) -> Patching | None:
    """The patching run, or None with the reason said (the pair cannot be compared)."""
    try:
        with st.spinner(t("explorer.running")):
            return cached_patch(name, device, clean, corrupted)
    except PatchingError as err:
        d = err.details
        which = t(f"mech.patch.which.{d['which']}") if "which" in d else ""
        words = ", ".join(code_span(w) for w in d.get("words", []))
        st.warning(
            t(
                f"mech.patch.error.{err.key}",
                which=which,
                words=words,
                clean=d.get("clean", ""),
                corrupted=d.get("corrupted", ""),
            ),
            icon=":material/block:",
        )
        return None


def show_patch_result(result: Patching) -> None:
    """The two answers, the recovery by layer and position, then by head."""
    p = result.pair
    st.markdown(
        t(
            "mech.patch.answers",
            a=code_span(p.answer),
            b=code_span(p.other),
            clean=f"{result.ld_clean:.2f}",
            corrupted=f"{result.ld_corrupted:.2f}",
        )
    )
    cols = result.position_labels
    plotly_chart(
        grid_heatmap(
            result.by_position,
            layer_labels(len(result.by_position) - 1),
            cols,
            probability=False,
            value_name=t("mech.patch.recovered"),
            x_title=t(f"mech.patch.stream.{p.stream}"),
            title=t("mech.patch.by_position"),
        ),
        key="mech_patch_pos",
    )
    st.markdown(t("mech.patch.reading", **patch_reading(result, cols)))
    st.caption(
        t(
            "mech.patch.check",
            nothing=f"{result.nothing:.3f}",
            whole=f"{result.whole_last_layer:.3f}",
        )
    )
    for kind, grid in result.by_head.items():
        plotly_chart(
            grid_heatmap(
                grid,
                [t("common.layer_n", n=i + 1) for i in range(len(grid))],
                [t("common.head_n", n=h + 1) for h in range(grid.shape[1])],
                probability=False,
                value_name=t("mech.patch.recovered"),
                title=t("mech.patch.by_head", kind=t(f"mech.kind.{kind}")),
            ),
            key=f"mech_patch_{kind}",
        )
    st.caption(t("mech.patch.heads_caption"))


# ---- 4. What a head contributes ----------------------------------------------------------
def show_heads() -> None:
    st.markdown(t("mech.heads.plain"))
    lm, name = pick_model(st, "mheads_m")
    text = sentence_input(lm, name, key="mheads") if lm is not None else None
    if text is None:
        return
    a, pos = chosen_attribution(name, text)
    tokens = a.tokens
    st.markdown(
        t(
            "mech.heads.answer",
            token=code_span(tokens[pos]),
            answer=code_span(a.answer),
            logit=f"{a.logit:.2f}",
            heads=f"{sum(h.direct for h in a.heads):.2f}",
            rest=f"{a.rest:.2f}",
        )
    )
    labels = [head_label(h.kind, h.layer, h.head) for h in a.heads]
    charts = head_scatters(a, labels)
    st.caption(t("mech.heads.caption"))
    charts[-1].caption = t("mech.heads.caption")
    html_download(
        charts,
        title=f"{t('mech.title')} · {t('mech.tab.heads')}",
        intro=t("chart.export_html_intro", model=model_label(name), text=text),
        name=f"mechanisms-heads-position{pos}",
        key="mech_heads_html",
    )
    indirect = a.most_indirect
    st.markdown(
        t(
            "mech.heads.indirect",
            head=head_label(indirect.kind, indirect.layer, indirect.head),
            direct=f"{indirect.direct:+.2f}",
            ablation=f"{indirect.ablation_logit:+.2f}",
            total=f"{-indirect.ablation_logit:+.2f}",
            indirect=f"{-indirect.ablation_logit - indirect.direct:+.2f}",
        )
    )
    frame = pd.DataFrame(
        {
            t("mech.heads.col.head"): labels,
            t("mech.heads.attention"): [h.attention for h in a.heads],
            t("mech.heads.rollout"): [h.rollout for h in a.heads],
            t("mech.heads.ablation"): [h.ablation_logit for h in a.heads],
            t("mech.heads.loss"): [h.ablation_loss for h in a.heads],
            t("mech.heads.direct"): [h.direct for h in a.heads],
        }
    )
    st.dataframe(frame.round(3), hide_index=True)


def chosen_attribution(name: str, text: str) -> tuple[Attribution, int]:
    """The attribution at the position, relevant token (and source token) the reader picks;
    each picker opens on the analysis's own default."""
    with st.spinner(t("explorer.running")):
        first = cached_attribution(name, device, text, None, None, None)
    tokens = first.tokens
    c1, c2 = st.columns(2)
    pos = c1.selectbox(
        t("mech.heads.position"),
        list(range(len(tokens))),
        index=first.position,
        key="mheads_pos",
        format_func=positions_label(tokens),
    )
    base = (
        first if pos == first.position else cached_attribution(name, device, text, pos, None, None)
    )
    rel = c2.selectbox(
        t("mech.heads.relevant"),
        list(range(pos + 1)),
        index=base.relevant,
        key=f"mheads_rel_{pos}",
        format_func=positions_label(tokens),
    )
    rel_src = None
    if base.relevant_src is not None:
        src = base.src_tokens
        rel_src = st.selectbox(
            t("mech.heads.relevant_src"),
            list(range(len(src))),
            index=base.relevant_src,
            key=f"mheads_src_{pos}",
            format_func=positions_label(src),
        )
    return cached_attribution(name, device, text, pos, rel, rel_src), pos


def head_scatters(a: Attribution, labels: list[str]) -> list:
    """Three scatters side by side, each head a dot: is attention a good proxy for what
    switching the head off or its direct logit attribution say?"""
    x_att, x_roll = t("mech.heads.attention"), t("mech.heads.rollout")
    attention = [h.attention for h in a.heads]
    ablation = [h.ablation_logit for h in a.heads]
    scatters = (  # (x, y, x title, y title, chart key)
        (attention, ablation, x_att, t("mech.heads.ablation"), "mech_sc_abl"),
        (attention, [h.direct for h in a.heads], x_att, t("mech.heads.direct"), "mech_sc_dla"),
        ([h.rollout for h in a.heads], ablation, x_roll, t("mech.heads.ablation"), "mech_sc_roll"),
    )
    return [
        drawn(head_scatter(xs, ys, labels, x_title=x_title, y_title=y_title), key, where=where)
        for where, (xs, ys, x_title, y_title, key) in zip(st.columns(3), scatters, strict=True)
    ]


# ---- 5. Find the mechanisms in your model ----------------------------------------------
def show_scan() -> None:
    st.markdown(t("mech.scan.plain", threshold=f"{THRESHOLD:.1f}"))
    lm, name = pick_model(st, "mscan_m", SCAN_MODELS)
    if lm is None:
        return
    if lm.kind != "decoder":
        st.info(t("mech.scan.decoder_only"), icon=":material/info:")
        return
    c1, c2 = st.columns(2)
    most = max(2, min(128, (lm.max_len - 1) // 2))
    length = c1.slider(
        t("mech.scan.length"),
        2,
        most,
        min(default_length(lm), most),
        key=f"mscan_len_{name}",
        help=t("mech.scan.length_help"),
    )
    seed = int(c2.number_input(t("mech.scan.seed"), 0, 10_000, 0, key="mscan_seed"))
    try:
        with st.spinner(t("mech.scan.running")):
            scan = cached_scan(name, device, length, seed)
    except ValueError as err:
        st.warning(t("mech.scan.failed"), icon=":material/block:")
        show_load_detail(str(err))
        return
    show_scan_found(scan)
    show_scan_grid(scan, name)


def show_scan_found(scan: HeadScan) -> None:
    """The heads found in each role, the in-context learning score and the ranked table."""
    found = {role: scan.found(score) for score, role in ROLES.items()}
    for role, heads in found.items():
        names = ", ".join(lh(h) for h in heads[:6])
        if len(heads) > 6:  # "… L3H4 and 5 more.", not "… L3H4 …."
            names = t("mech.scan.more", heads=names, more=len(heads) - 6)
        st.markdown(
            t(f"mech.scan.found.{role}", heads=names, n=len(heads))
            if heads
            else t(f"mech.scan.none.{role}", threshold=f"{THRESHOLD:.1f}")
        )
    st.markdown(
        t(
            "mech.scan.icl",
            first=f"{scan.loss_first:.2f}",
            second=f"{scan.loss_second:.2f}",
            icl=f"{scan.icl:+.2f}",
        )
    )
    st.caption(
        t("mech.scan.setup", n=scan.n, length=scan.length, total=2 * scan.length, seed=scan.seed)
    )
    rows = scan.ranked()
    frame = pd.DataFrame(
        {
            t("mech.heads.col.head"): [lh((r.layer, r.head)) for r in rows],
            t("mech.scan.col.role"): [
                t(f"mech.scan.role.{r.role}") if r.role else "–" for r in rows
            ],
            **{t(f"mech.scan.score.{s}"): [round(r.scores[s], 3) for r in rows] for s in SCORES},
        }
    )
    st.dataframe(frame, hide_index=True, key="mech_scan_table")


def show_scan_grid(scan: HeadScan, name: str) -> None:
    """One score for every head as a grid, the reader picks which, and its HTML file."""
    score = linked(
        st.segmented_control,
        t("mech.scan.grid_score"),
        list(SCORES),
        key="mscan_score",
        required=True,
        format_func=lambda s: t(f"mech.scan.score.{s}"),
    )
    grid = scan.scores[score]
    scan_chart = drawn(
        grid_heatmap(
            grid,
            [t("common.layer_n", n=i + 1) for i in range(grid.shape[0])],
            [t("common.head_n", n=h + 1) for h in range(grid.shape[1])],
            probability=score != "copying",
            value_name=t(f"mech.scan.score.{score}"),
            title=t("mech.scan.grid_title", score=t(f"mech.scan.score.{score}")),
        ),
        "mech_scan_grid",
        caption=t("mech.scan.caption"),
    )
    st.caption(t("mech.scan.caption"))
    setup = t(
        "mech.scan.setup", n=scan.n, length=scan.length, total=2 * scan.length, seed=scan.seed
    )
    html_download(
        [scan_chart],
        title=f"{t('mech.title')} · {t('mech.tab.scan')}",
        intro=f"{model_label(name)}. {setup}",
        name=f"mechanisms-scan-{score}",
        key="mech_scan_html",
    )


SECTIONS = {  # label -> (draw, the query parameters that open it from a link)
    t("mech.tab.induction"): (show_induction, ()),
    t("mech.tab.scan"): (show_scan, ("mscan_m", "mscan_score")),
    t("mech.tab.lens"): (show_lens, ("mlens_m", "mlens")),
    t("mech.tab.patching"): (show_patching, ("mpatch_m",)),
    t("mech.tab.heads"): (show_heads, ("mheads_m", "mheads")),
}
if engine_folder():  # the sidebar holds a folder: its own mechanisms open first, not the toy's
    scan_label = t("mech.tab.scan")
    SECTIONS = {scan_label: SECTIONS.pop(scan_label), **SECTIONS}
lazy_tabs(
    {label: draw for label, (draw, _) in SECTIONS.items()},
    key="mech_tab",
    params=[names for _, names in SECTIONS.values()],  # links open tabs
)
