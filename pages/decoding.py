"""Step through masked decoding: one token at a time, never seeing the future."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from model.analysis.stepping import candidate_labels, distribution_before, growing_mask
from model.analysis.tokens import written_text
from model.analysis.view import model_special_tokens
from model.runtime.types import DecodeStep
from model.tasks import reference_answer
from ui.a11y import announce
from ui.downloads import drawn, html_download
from ui.frame import require_frame
from ui.i18n import axis_labels, head_titles, t, translated_widget
from ui.models import get_decoding, get_model, get_teacher_forcing, model_label, selected_model
from ui.permalink import linked
from ui.preload import decode_ahead
from ui.sentence import code_span, sentence_read, special_span
from viz.decoding import growing_mask_figure, head_rows_figure, next_token_figure

require_frame()

STRATEGIES = ("greedy", "beam", "sample")
SEGMENTED_LAYERS_MAX = 12
PLAY_SECONDS = 0.9  # one token per tick while playing: slow enough to follow
STEP_KEY, PLAY_KEY = "step", "dec_playing"
SAID_KEY = "_decoding_said_step"  # the step the live region last said


st.title(t("decoding.title"))
intro = st.empty()  # under the title, above the model's engine line
lm = get_model()
# A decoder-only model (SmolLM2, Gemma) reads no source: its intro speaks of no cross-attention.
intro.caption(
    t("decoding.intro_decoder" if lm is not None and lm.kind == "decoder" else "decoding.intro")
)
if lm is None:
    st.stop()
if lm.kind == "encoder":
    st.info(t("decoding.encoder_only"), icon=":material/info:")
    st.stop()
ours = lm.info.get("engine") != "transformers"  # transformers' own models: no ablation, no beam
model_name = selected_model()
read = sentence_read(lm, model_name)  # the text and its tokens: read once a rerun
if read is None:
    st.stop()
text, encoded = read
# A chat-tuned decoder (SmolLM2-Instruct) answers a question when it is framed by its own
# chat template; the template's special tokens are then part of what the decoder reads.
# Offered where a template exists; rendered only once asked for (it imports transformers).
chat = getattr(lm, "has_chat_template", False) and st.toggle(
    t("decoding.chat"), key="chat", bind="query-params", help=t("decoding.chat_help")
)
framed = lm.chat_prompt(text) if chat else None
if chat and framed is None:  # a template that needs more than one user turn
    st.warning(t("decoding.chat_unusable"), icon=":material/warning:")
elif framed is not None:
    text = framed
    encoded = lm.encode(text)
    st.caption(t("decoding.chat_caption", n=len(encoded.tokens)))

# ---- strategy (in the URL, like everything a link should restore) ----
strategies = [s for s in STRATEGIES if ours or s != "beam"]
# The strategy on a row of its own: beside the sliders its options were cut off at 1024 px.
strategy = linked(
    st.segmented_control,
    t("decoding.strategy"),
    strategies,
    key="strategy",
    required=True,
    format_func=lambda s: t(f"decoding.strategy.{s}"),
    help=t("decoding.strategy_help"),
)
options: dict = {"strategy": strategy}
# Columns only for a strategy with options: empty ones still stack into a gap on a phone.
if strategy != "greedy":
    c2, c3, c4 = st.columns(3, vertical_alignment="bottom")
if strategy == "beam":
    options["beam_width"] = c2.slider(
        t("decoding.beam_width"), 2, 8, 4, key="width", bind="query-params"
    )
elif strategy == "sample":
    options["temperature"] = c2.slider(
        t("decoding.temperature"),
        0.1,
        2.0,
        1.0,
        0.1,
        key="temp",
        bind="query-params",
        help=t("decoding.temperature_help"),
    )
    top_k = c3.number_input(
        t("decoding.top_k"),
        0,
        1000,
        0,
        key="topk",
        bind="query-params",
        help=t("decoding.top_k_help"),
    )
    top_p = c4.slider(
        t("decoding.top_p"),
        0.05,
        1.0,
        1.0,
        0.05,
        key="topp",
        bind="query-params",
        help=t("decoding.top_p_help"),
    )
    options["top_k"] = int(top_k) or None
    options["top_p"] = float(top_p) if top_p < 1.0 else None
    options["seed"] = int(
        st.number_input(t("decoding.seed"), 0, 2**31 - 1, 0, key="seed", bind="query-params")
    )

# ---- head ablation (our models only): heads switched off for the whole run ----
head_off: tuple = ()
if ours:
    with st.expander(t("decoding.ablation"), icon=":material/block:"):
        st.caption(t("decoding.ablation_caption"))
        cfg = lm.config
        layers = {
            "encoder": cfg.n_encoder_layers if cfg.has_encoder else 0,
            "decoder": cfg.n_decoder_layers,
            "cross": cfg.n_decoder_layers if lm.kind == "encoder-decoder" else 0,
        }
        chosen = []
        for attention_kind, n_layers in layers.items():
            if not n_layers:
                continue
            heads = [
                (attention_kind, layer, head)
                for layer in range(n_layers)
                for head in range(cfg.n_heads)
            ]
            picked = st.pills(
                t(f"common.kind.{attention_kind}"),
                heads,
                selection_mode="multi",
                key=translated_widget(f"off_{attention_kind}"),
                format_func=lambda h: t("decoding.head_short", layer=h[1] + 1, head=h[2] + 1),
                persist_state="session",
            )
            chosen += picked or []
        head_off = tuple(sorted(chosen))
if head_off:
    options["head_off"] = head_off

# ---- the stepper: state in the session and the URL ----
if STEP_KEY not in st.session_state:
    raw = st.query_params.get(STEP_KEY, "0")
    st.session_state[STEP_KEY] = int(raw) if raw.isdigit() else 0

# The run is decoded as far as it is read (a real model's whole continuation was ~2 CPU-s
# before step 0 could be drawn): here up to the step shown, the rest ahead in the background.
with st.spinner(t("decoding.running")):
    run = get_decoding(text, **options)
    reached = run.upto(max(1, st.session_state[STEP_KEY]))
if not reached:
    st.warning(t("decoding.no_room"), icon=":material/warning:")
    st.stop()
st.session_state[STEP_KEY] = max(0, min(st.session_state[STEP_KEY], len(reached)))
decode_ahead(run)


def move(delta: int | None) -> None:
    """delta None resets to the start; otherwise steps back or forward within the run (a
    step past its end is taken back where the step is drawn, once the end is known)."""
    now = st.session_state[STEP_KEY]
    st.session_state[STEP_KEY] = 0 if delta is None else max(0, now + delta)
    if delta is None or delta < 0:
        st.session_state[PLAY_KEY] = False


def toggle_play() -> None:
    playing = not st.session_state.get(PLAY_KEY, False)
    st.session_state[PLAY_KEY] = playing
    if playing and run.total is not None and st.session_state[STEP_KEY] >= run.total:
        st.session_state[STEP_KEY] = 0  # play again from the start


def total_said(total: int | None) -> int | str:
    """The run's length once it is known (``run.total``); until then "up to" its budget,
    which it cannot pass (it may stop sooner, at <eos>): never a length it does not know."""
    return total if total is not None else t("decoding.total_upto", n=run.budget)


n_layers = next(iter(reached[0].attention.values())).shape[0]
layer_col, play_col = st.columns([5, 1], vertical_alignment="bottom")
with layer_col:
    # A row of buttons up to 12 layers; a real model's 18 or 30 would run off the page.
    many = n_layers > SEGMENTED_LAYERS_MAX
    layer = linked(
        st.selectbox if many else st.segmented_control,
        t("common.layer"),
        list(range(n_layers)),
        key="dlayer",
        format_func=lambda i: t("common.layer_n", n=i + 1),
        **({} if many else {"required": True}),
    )
# Play sits outside the fragment: starting the timer needs a run of the whole page.
playing = st.session_state.get(PLAY_KEY, False)
play_col.button(
    t("decoding.pause") if playing else t("decoding.play"),
    icon=":material/pause:" if playing else ":material/play_arrow:",
    on_click=toggle_play,
    width="stretch",
)


def show_step() -> None:
    """Everything that depends on the step. A fragment: the buttons and the play timer rerun
    only this part, not the model or the rest of the page."""
    live = st.empty()  # first and always there: what a step changed is said here
    if st.session_state.get(PLAY_KEY):
        if run.total is None or st.session_state[STEP_KEY] < run.total:
            st.session_state[STEP_KEY] += 1
        else:  # the end: stop, and rerun the page so the timer is switched off too
            st.session_state[PLAY_KEY] = False
            st.rerun(scope="app")
    step_buttons()
    steps = run.upto(st.session_state[STEP_KEY])  # decodes the step pressed for, if new
    step = st.session_state[STEP_KEY] = min(st.session_state[STEP_KEY], len(steps))
    if st.query_params.get(STEP_KEY) != str(step):
        st.query_params[STEP_KEY] = str(step)
    total = run.total  # read once: the thread decoding ahead may end the run meanwhile
    position = t("decoding.position", step=step, total=total_said(total))
    st.progress(step / (total or run.budget), text=position)
    # The decoder's tokens so far, prompt and output read as one text: a generated byte of a
    # Korean syllable shows the syllable ("위 · 1/3") once it is whole, as the prompt's do.
    ids = [s.token_id for s in steps[:step]]
    read = lm.decoder_tokens(text, ids)
    generated = read[len(read) - step :] if step else []
    say_step(live, step, generated, total_said(total))
    show_decoder_input(ids, generated)
    if step == 0:
        st.info(t("decoding.press_step"), icon=":material/chevron_right:")
        return
    current = steps[step - 1]
    st.markdown(t("decoding.new_token", token=code_span(generated[-1]), n=step))
    charts = step_charts(steps, read, current)
    html_download(
        charts,
        title=f"{t('decoding.title')} · {position}",
        intro=t("chart.export_html_intro", model=model_label(model_name), text=text),
        name=f"decoding-{strategy}-step{step}-layer{layer + 1}",
        key="decoding_html",
    )
    if current.beams:
        show_beams(current)


def step_buttons() -> None:
    """One row, each button as wide as its label: fixed columns cut "다음 스텝" to "다." at
    1024 px."""
    buttons = st.container(horizontal=True)
    for label, icon, delta, kind in (
        ("decoding.reset", ":material/first_page:", None, "secondary"),
        ("decoding.back", ":material/chevron_left:", -1, "secondary"),
        ("decoding.step", ":material/chevron_right:", 1, "primary"),
    ):
        buttons.button(
            t(label), icon=icon, on_click=move, args=(delta,), type=kind, width="content"
        )


def say_step(live, step: int, generated: list[str], total: int | str) -> None:
    """Said once when the step changes (not on the first drawing, nor on other reruns)."""
    said = st.session_state.get(SAID_KEY)
    st.session_state[SAID_KEY] = step
    if said is not None and said != step:
        with live:
            if step:
                announce(t("decoding.say_step", step=step, total=total, token=generated[-1]))
            else:
                announce(t("decoding.say_start", total=total))


def show_decoder_input(ids: list[int], generated: list[str]) -> None:
    """What the decoder reads at this step beside what it has written so far. Teacher
    forcing's "shifted right": the newest token is not yet an input."""
    dec_input = lm.decoder_tokens(text, ids[:-1])
    left, right = st.columns(2)
    specials = lm.input_tokenizer.special_tokens
    left.markdown(
        t(
            # a decoder-only model reads the prompt and its own tokens: no target is shifted
            "decoding.decoder_input_lm" if lm.kind == "decoder" else "decoding.decoder_input",
            tokens=" ".join(special_span(x) if x in specials else code_span(x) for x in dec_input),
        )
    )
    right.markdown(
        t("decoding.output_so_far", tokens=" ".join(code_span(x) for x in generated) or "—")
    )


def step_charts(steps: list[DecodeStep], read: list[str], current: DecodeStep) -> list:
    """The growing mask, the next-token distribution and the new query's attention per
    head (self, then cross), as drawn: the step's HTML file holds the same. ``steps``: the
    run up to the step shown; ``read``: the decoder's input and output so far, as one text."""
    step = len(steps)
    grown = growing_mask(steps, step, layer, read)
    heads = current.attention["decoder"].shape[1]
    mask_col, dist_col = st.columns(2)
    charts = [
        drawn(
            growing_mask_figure(
                grown.rows,
                grown.queries,
                grown.keys,
                mask=grown.mask,
                title=t("decoding.mask_title", n=layer + 1),
                labels=axis_labels(),
            ),
            "mask_chart",
            where=mask_col,
        )
    ]
    charts.append(
        drawn(
            next_token_figure(
                distribution_before(current).numpy(),
                current.probs.numpy(),
                candidate_labels(lm, text, steps, step),
                current.token_id,
                names=(t("decoding.dist.raw"), t("decoding.dist.used"), t("decoding.dist.chosen")),
                axis=t("decoding.dist.axis"),
            ),
            "dist_chart",
            where=dist_col,
            caption=t(f"decoding.dist_caption.{strategy}"),
        )
    )
    dist_col.caption(t(f"decoding.dist_caption.{strategy}"))
    self_col, cross_col = st.columns(2)
    for kind, where, keys in (("decoder", self_col, grown.keys), ("cross", cross_col, None)):
        if kind not in current.attention:
            cross_col.caption(t("decoding.no_cross"))
            continue
        title = "decoding.self_title" if kind == "decoder" else "decoding.cross_title"
        charts.append(
            drawn(
                head_rows_figure(
                    current.attention[kind][layer],
                    keys if keys is not None else encoded.tokens,
                    head_titles=head_titles(heads),
                    title=t(title, n=layer + 1),
                    labels=axis_labels(rows="common.head"),
                ),
                "self_chart" if kind == "decoder" else "cross_chart",
                where=where,
            )
        )
    return charts


def show_beams(current: DecodeStep) -> None:
    """Beam search's live hypotheses after the step, best first."""
    st.markdown(f"**{t('decoding.beams')}**")
    st.dataframe(
        pd.DataFrame(
            {
                t("decoding.beam_rank"): range(1, len(current.beams) + 1),
                # each hypothesis as the text it spells: a character's byte tokens joined
                t("decoding.beam_tokens"): [
                    written_text(lm.tgt_tokenizer, toks, model_special_tokens(lm))
                    for toks, _ in current.beams
                ],
                t("decoding.beam_score"): [score for _, score in current.beams],
            }
        ),
        hide_index=True,
        column_config={t("decoding.beam_score"): st.column_config.NumberColumn(format="%.3f")},
    )


st.fragment(show_step, run_every=PLAY_SECONDS if playing else None)()

# ---- what ablation changed ----
if head_off:  # the whole runs, with and without the heads: decoded here, as before
    ablated = run.all()
    plain = get_decoding(
        text, **{name: value for name, value in options.items() if name != "head_off"}
    ).all()
    st.subheader(t("decoding.ablation_result"))
    a, b = st.columns(2)
    for col, key, whole in ((a, "decoding.unchanged", plain), (b, "decoding.ablated", ablated)):
        sentence = written_text(
            lm.tgt_tokenizer, [s.token for s in whole], model_special_tokens(lm)
        )
        col.markdown(t(key, tokens=code_span(sentence)))
    n = max(len(plain), len(ablated))
    st.dataframe(
        pd.DataFrame(
            {
                t("decoding.position_col"): range(1, n + 1),
                t("decoding.unchanged_col"): [
                    f"{s.token} ({float(s.probs[s.token_id]):.2f})" for s in plain
                ]
                + [""] * (n - len(plain)),
                t("decoding.ablated_col"): [
                    f"{s.token} ({float(s.probs[s.token_id]):.2f})" for s in ablated
                ]
                + [""] * (n - len(ablated)),
            }
        ),
        hide_index=True,
    )


# ---- teacher forcing beside free running ----
def miss(token: str, expected: str) -> str:
    """A token that differs from the expected one says so in text ("✗"), not by colour alone."""
    return token if token == expected else f"✗ {token}"


if ours:
    st.subheader(t("decoding.forcing"))
    st.caption(t("decoding.forcing_caption"))
    reference = reference_answer(lm.info.get("task"), text) or ""
    target = st.text_input(  # as Korean is written: the tokenizer splits particles off again
        t("decoding.target"),
        value=written_text(lm.tgt_tokenizer, reference.split()),
        key=f"target::{text}",
        help=t("decoding.target_help"),
    )
    if target.strip():
        try:
            forced = get_teacher_forcing(text, target, head_off)
        except ValueError:
            st.warning(t("decoding.target_unusable"), icon=":material/warning:")
        else:
            frame = pd.DataFrame(
                {
                    t("decoding.position_col"): [f.position + 1 for f in forced],
                    t("decoding.given"): [f.true_prefix_end for f in forced],
                    t("decoding.expected"): [f.target for f in forced],
                    t("decoding.forced"): [miss(f.forced, f.target) for f in forced],
                    t("decoding.forced_prob"): [f.forced_prob for f in forced],
                    t("decoding.free"): [
                        miss(f.free, f.target) if f.free is not None else "—" for f in forced
                    ],
                }
            )
            wrong = [f.forced != f.target for f in forced], [f.free != f.target for f in forced]

            def shade(column: pd.Series) -> list[str]:
                flags = {t("decoding.forced"): wrong[0], t("decoding.free"): wrong[1]}.get(
                    column.name
                )
                return [
                    "background-color: #ffd6d6" if flags and flags[i] else ""
                    for i in range(len(column))
                ]

            st.dataframe(
                frame.style.apply(shade).format({t("decoding.forced_prob"): "{:.2f}"}),
                hide_index=True,
            )
            mistakes = sum(wrong[1])
            st.caption(t("decoding.forcing_summary", forced=sum(wrong[0]), free=mistakes))

st.divider()
# How today's decoders keep their keys and values: the cache, GQA and FlashAttention.
st.page_link(
    "pages/modern.py", label=t("modern.link.from_decoding"), icon=":material/rocket_launch:"
)
