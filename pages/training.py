"""Train your own: a small Transformer learns live, and its attention pattern forms on screen."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import streamlit as st

from model.runtime.bundle import load_zip, pack
from model.runtime.types import ModelLoadError
from model.training.live import MAX_STEPS, SIZES, Busy, LiveRun, Progress, Settings, Snapshot
from ui.charts import plotly_chart
from ui.chrome import upload_limit_mb
from ui.frame import require_frame
from ui.i18n import axis_labels, head_titles, t, translated_widget
from ui.models import add_session_model, model_label, show_load_detail
from viz.attention import heads_figure
from viz.concepts import lines_figure

require_frame()

TASKS = ("reverse", "sort", "en2ko", "induction")
LR_FACTORS = (0.25, 0.5, 1.0, 2.0, 4.0)
POLL_SECONDS = 1.0  # the live view's refresh; each refresh is also the run's heartbeat
RUN_KEY, DIR_KEY, UPLOADS_KEY = "training_run", "training_dir", "training_uploads"
ENDED = {  # how a finished run is reported: (message key, st call)
    "done": ("training.state.done", st.success),
    "timeout": ("training.state.timeout", st.warning),
    "cancelled": ("training.state.cancelled", st.info),
    "abandoned": ("training.state.abandoned", st.info),
    "failed": ("training.state.failed", st.error),
}


def session_dir() -> Path:
    """This session's own temp folder: trained and uploaded models go here, never to assets/."""
    if DIR_KEY not in st.session_state:
        st.session_state[DIR_KEY] = tempfile.mkdtemp(prefix="attention-lab-session-")
    return Path(st.session_state[DIR_KEY])


def current_run() -> LiveRun | None:
    return st.session_state.get(RUN_KEY)


def settings_from_widgets() -> Settings:
    return Settings(
        task=st.session_state["tr_task"],
        size=st.session_state["tr_size"],
        steps=int(st.session_state["tr_steps"]),
        warmup=bool(st.session_state["tr_warmup"]),
        norm=st.session_state["tr_norm"],
        lr_factor=float(st.session_state["tr_lr"]),
    )


def start_run() -> None:
    previous = current_run()
    if previous is not None and previous.snapshot().active:
        return  # one run per session (a double click, or a second tab of it)
    run = LiveRun(settings_from_widgets(), out_root=session_dir())
    try:
        run.start()
    except Busy:
        st.session_state["tr_busy"] = True
        return
    st.session_state[RUN_KEY] = run


def cancel_run() -> None:
    run = current_run()
    if run is not None:
        run.cancel()


def controls(active: bool) -> None:
    """The run's settings, locked while it runs, then its buttons."""
    # Two columns, not three: at 1024 px a third of the page cut the Korean option labels off.
    c1, c2 = st.columns(2)
    # Drop-downs, not pills: the labels carry the details and would be cut off in a column.
    c1.selectbox(
        t("training.task"),
        TASKS,
        key=translated_widget("tr_task"),
        format_func=lambda k: t(f"training.task.{k}"),
        disabled=active,
        persist_state="session",
    )
    c2.selectbox(
        t("training.size"),
        list(SIZES),
        key=translated_widget("tr_size"),
        disabled=active,
        format_func=lambda s: t(f"training.size.{s}"),
        help=t("training.size_help"),
        persist_state="session",
    )
    c3, c6 = st.columns(2)
    c3.segmented_control(
        t("training.norm"),
        ("post", "pre"),
        key=translated_widget("tr_norm"),
        default="post",
        required=True,
        format_func=lambda n: t(f"training.norm.{n}"),
        disabled=active,
        persist_state="session",
        help=t("training.norm_help"),
    )
    c6.toggle(
        t("training.warmup"),
        value=True,
        key="tr_warmup",
        disabled=active,
        help=t("training.warmup_help"),
        persist_state="session",
    )
    c4, c5 = st.columns(2)
    c4.slider(
        t("training.steps"),
        50,
        MAX_STEPS,
        300,
        step=50,
        key="tr_steps",
        disabled=active,
        persist_state="session",
    )
    c5.select_slider(
        t("training.lr_factor"),
        LR_FACTORS,
        value=1.0,
        key="tr_lr",
        disabled=active,
        format_func=lambda f: f"× {f:g}",
        help=t("training.lr_factor_help"),
        persist_state="session",
    )
    run_buttons(active)


def run_buttons(active: bool) -> None:
    """Start and cancel, and what a start that found the machine busy said."""
    b1 = b2 = st.container(horizontal=True)  # each button as wide as its label, at any width
    b1.button(
        t("training.start"),
        icon=":material/play_arrow:",
        type="primary",
        disabled=active,
        on_click=start_run,
        key="tr_start",
        width="content",
    )
    b2.button(
        t("training.cancel"),
        icon=":material/stop:",
        disabled=not active,
        on_click=cancel_run,
        key="tr_cancel",
        width="content",
    )
    if st.session_state.pop("tr_busy", False):
        st.warning(t("training.busy"), icon=":material/hourglass_top:")


def curves(p: Progress) -> None:
    step = t("training.axis.step")
    c1, c2, c3 = st.columns(3)
    loss = lines_figure(
        [s for s, _ in p.loss],
        {t("training.loss"): [loss for _, loss in p.loss]},
        x_title=step,
        y_title=t("training.loss"),
        title=t("training.loss_title"),
        height=240,
    )
    plotly_chart(loss, key="tr_loss", where=c1)
    acc = lines_figure(
        [s for s, _ in p.accuracy],
        {t("training.accuracy"): [accuracy for _, accuracy in p.accuracy]},
        x_title=step,
        y_title=t("training.accuracy"),
        title=t("training.accuracy_title"),
        markers=True,
        height=240,
    )
    acc.update_yaxes(range=[0, 1])
    plotly_chart(acc, key="tr_acc", where=c2)
    lr = lines_figure(
        [s for s, _ in p.lr],
        {t("training.lr"): [lr for _, lr in p.lr]},
        x_title=step,
        y_title=t("training.lr"),
        title=t("training.lr_title"),
        height=240,
    )
    plotly_chart(lr, key="tr_lr_curve", where=c3)
    if p.heads:  # induction: watch the heads' scores jump when the loss drops
        heads = lines_figure(
            [s for s, _, _ in p.heads],
            {
                t("training.heads.prefix"): [prefix for _, prefix, _ in p.heads],
                t("training.heads.previous"): [previous for _, _, previous in p.heads],
            },
            x_title=step,
            y_title=t("training.heads.score"),
            title=t("training.heads.title"),
            markers=True,
            height=260,
        )
        heads.update_yaxes(range=[0, 1])
        plotly_chart(heads, key="tr_heads")
        st.caption(t("training.heads.caption"))


def snapshot_figure(snap: Snapshot, layer: int, key: str) -> None:
    kind_label = t(f"common.kind.{snap.kind}")
    st.markdown(t("training.snapshot_title", step=snap.step, kind=kind_label, layer=layer + 1))
    weights = snap.attention[layer]  # [H, Lq, Lk]
    fig = heads_figure(
        weights,
        snap.query_tokens,
        snap.key_tokens,
        mask=snap.mask,
        titles=head_titles(weights.shape[0]),
        labels=axis_labels(),
    )
    plotly_chart(fig, key=key)


def live_view() -> None:
    """Polled every POLL_SECONDS while the run is active; each poll is the page's heartbeat."""
    run = current_run()
    if run is None:
        return
    run.heartbeat()
    p = run.snapshot()
    if not p.active:
        st.rerun(scope="app")  # switch to the finished view (timeline, download)
    st.progress(
        p.step / max(1, p.total),
        text=t("training.progress", step=p.step, total=p.total, seconds=f"{p.elapsed_s:.0f}"),
    )
    curves(p)
    if p.snapshots:
        snap = p.snapshots[-1]
        snapshot_figure(snap, snap.attention.shape[0] - 1, key="tr_live_snap")


def finished_view(run: LiveRun, p: Progress) -> None:
    message, show = ENDED.get(p.state, ENDED["failed"])
    show(t(message, step=p.step, total=p.total, seconds=f"{p.elapsed_s:.0f}"))
    if p.state == "failed":
        show_load_detail(p.error)
    if p.folder:
        if p.folder not in st.session_state.get("extra_models", {}):
            add_session_model(p.folder, "trained", run.settings.task)
            st.rerun()  # so the sidebar's model picker lists it at once
        st.markdown(t("training.in_picker", name=model_label(p.folder)))
        c1, c2, _ = st.columns([1, 1, 3])
        c1.page_link(
            "pages/explorer.py", label=t("training.open_explorer"), icon=":material/grid_view:"
        )
        c2.download_button(
            t("training.download"),
            data=pack(p.folder),
            icon=":material/download:",
            file_name=f"attention-lab-{run.settings.task}.zip",
            mime="application/zip",
            key="tr_download",
        )
    if p.loss:
        curves(p)
    if p.snapshots:
        st.subheader(t("training.timeline"))
        st.caption(t("training.timeline_caption"))
        steps = [s.step for s in p.snapshots]
        c1, c2 = st.columns([3, 1])
        chosen = c1.select_slider(
            t("training.timeline_step"),
            steps,
            value=steps[-1],
            key=translated_widget("tr_timeline"),
            format_func=lambda s: t("training.step_n", n=s),
        )
        snap = p.snapshots[steps.index(chosen)]
        n_layers = snap.attention.shape[0]
        layer = c2.selectbox(
            t("training.layer"),
            list(range(n_layers)),
            index=n_layers - 1,
            key=translated_widget("tr_layer"),
            format_func=lambda i: t("common.layer_n", n=i + 1),
        )
        snapshot_figure(snap, layer, key="tr_timeline_snap")


def upload_section() -> None:
    st.subheader(t("training.upload_title"))
    file = st.file_uploader(t("training.upload"), type=["zip"], key="tr_upload")
    st.caption(t("training.upload_limit", mb=upload_limit_mb()))
    if file is None:
        return
    done: dict = st.session_state.setdefault(UPLOADS_KEY, {})
    if file.file_id not in done:  # extract once per upload, not on every rerun
        dest = Path(tempfile.mkdtemp(prefix="upload-", dir=session_dir()))
        try:
            lm = load_zip(file.getvalue(), dest)
            # The name comes from the uploaded file: keep it to plain word characters, so it
            # can never become markdown (a link, an image) where it is shown.
            task = re.sub(r"[^\w-]", "", str(lm.info.get("task") or ""))[:40] or "?"
            add_session_model(str(dest), "uploaded", task)
            done[file.file_id] = ("ok", str(dest))
            st.rerun()  # so the sidebar's model picker lists it at once
        except (ModelLoadError, ValueError, OSError, KeyError, TypeError) as err:
            done[file.file_id] = ("error", str(err))
    status, detail = done[file.file_id]
    if status == "ok":
        st.success(t("training.upload_ok", name=model_label(detail)), icon=":material/check:")
    else:
        st.error(t("training.upload_failed", file=file.name), icon=":material/error:")
        show_load_detail(detail)


st.title(t("training.title"))
st.caption(t("training.intro"))

run = current_run()
progress = run.snapshot() if run is not None else None
active = progress is not None and progress.active
with st.container(border=True):
    controls(active)
if run is not None and progress is not None:
    if active:
        st.fragment(live_view, run_every=POLL_SECONDS)()
    else:
        finished_view(run, progress)
else:
    st.info(t("training.idle"), icon=":material/school:")
upload_section()
