"""Which model a session looks at, loaded once per process and traced once per input.

Models are shared by every session (st.cache_resource) and are only read; traces are plain
data kept per (model, device, text) in a cache bounded by bytes (``TRACES``), so a rerun
that changes a layer or a head never runs the model again.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from model.runtime.lab import LabModel
from model.runtime.loading import CONTRAST, PRETRAINED, SHIPPED, load
from model.runtime.types import DecodeStep, ForcedStep, ModelLoadError
from model.trace import Trace
from ui.i18n import t, translated_widget
from ui.permalink import linked
from viz.memo import ByteLRU, budget_bytes

FOLDER = "folder"  # the choice that loads a local Hugging Face / checkpoint folder
MODEL_CHOICES = (*SHIPPED, *PRETRAINED, FOLDER)
DEFAULT_MODEL = "en2ko"
_MODEL_KEY, _DEVICE_KEY, _FOLDER_KEY = "model", "device", "model_folder"
_EXTRA_KEY = "extra_models"  # folder -> (origin, task): models trained or uploaded this session


def add_session_model(folder: str, origin: str, task: str) -> None:
    """Offer a checkpoint folder (``origin``: "trained" | "uploaded") in this session's picker."""
    st.session_state.setdefault(_EXTRA_KEY, {})[str(folder)] = (origin, task)


def session_models() -> dict[str, tuple[str, str]]:
    return st.session_state.get(_EXTRA_KEY, {})


def model_choices() -> tuple[str, ...]:
    """The picker's options: shipped, pretrained, this session's own models, then a folder."""
    return (*SHIPPED, *PRETRAINED, *session_models(), FOLDER)


def model_label(name: str) -> str:
    extra = session_models().get(name)
    if extra is not None:
        origin, task = extra
        return t(f"model.session.{origin}", task=task, n=_ordinal(name))
    if name not in (*SHIPPED, *PRETRAINED, *CONTRAST, FOLDER):
        return Path(name).name or name  # a model folder: its own name
    return t(f"model.name.{name}")


def _ordinal(folder: str) -> int:
    """1, 2, ... in the order this session's models arrived, to tell same-task models apart."""
    return list(session_models()).index(folder) + 1


def device_choices() -> list[str]:
    from model.runtime.device import available_devices

    return ["auto", *available_devices()]


def selected_model() -> str:
    """The model name (or folder path) this session chose in the sidebar."""
    choice = st.session_state.get(_MODEL_KEY, DEFAULT_MODEL)
    if choice == FOLDER:
        return str(st.session_state.get(_FOLDER_KEY) or "").strip()
    return choice if choice in model_choices() else DEFAULT_MODEL


def switch_model(name: str) -> None:
    """A button's callback: look at the same input with another model (the link follows)."""
    st.session_state[_MODEL_KEY] = name


def selected_device() -> str:
    device = st.session_state.get(_DEVICE_KEY, "auto")
    return device if device in device_choices() else "auto"


def render_model_picker() -> None:
    """Sidebar widgets: model (kept in ?model=), a folder path when asked for, device."""
    linked(
        st.selectbox,
        f":material/neurology: {t('sidebar.model')}",
        model_choices(),
        key=_MODEL_KEY,
        default=DEFAULT_MODEL,
        format_func=model_label,
        help=t("sidebar.model_help"),
    )
    if st.session_state.get(_MODEL_KEY) == FOLDER:
        st.text_input(
            t("sidebar.folder"),
            key=_FOLDER_KEY,
            placeholder="/path/to/model",
            persist_state="session",
        )
    devices = {d: t(f"sidebar.device_choice.{d}") for d in device_choices()}
    st.selectbox(
        f":material/memory: {t('sidebar.device_choice')}",
        list(devices),
        format_func=devices.__getitem__,  # labels fixed for this run (see ui.permalink.linked)
        key=translated_widget(_DEVICE_KEY),
        persist_state="session",
    )


@st.cache_resource(show_spinner=False, max_entries=8)
def load_model(name: str, device: str) -> LabModel:
    """One shared instance per (model, device) for the whole process; raises ModelLoadError."""
    return load(name, device)


def get_model(name: str | None = None, device: str | None = None) -> LabModel | None:
    """The chosen model, with a spinner while it loads and a clear message if it cannot."""
    name = selected_model() if name is None else name
    device = selected_device() if device is None else device
    if not name:
        st.info(t("model.folder_missing"), icon=":material/folder_open:")
        return None
    label = model_label(name) if name in model_choices() else Path(name).name
    try:
        with st.spinner(t("model.loading", name=label)):
            lm = load_model(name, device)
    except (ModelLoadError, ValueError, OSError) as err:
        st.error(t("model.load_failed", name=label), icon=":material/error:")
        show_load_detail(str(err))
        return None
    show_engine_note(lm)
    return lm


def engine_folder() -> str | None:
    """The sidebar's model folder when our own engine runs it as a decoder (a LLaMA, Qwen2,
    Mistral or GPT-2 folder, or a decoder checkpoint), else None: pages built on our engine
    (mechanisms, "Attention since 2017") offer it beside their own models."""
    if st.session_state.get(_MODEL_KEY) != FOLDER:
        return None
    name = selected_model()
    if not name:
        return None
    try:
        lm = load_model(name, selected_device())
    except (ModelLoadError, ValueError, OSError):
        return None
    return name if isinstance(lm, LabModel) and lm.kind == "decoder" else None


def show_engine_note(lm) -> None:
    """A folder transformers runs says so, and what it lacks (its reason stays literal)."""
    if lm.info.get("engine") != "transformers":
        return
    reason = lm.info.get("fallback_reason", "")
    st.caption(
        t(
            "models.fallback_note",
            model_type=lm.info.get("model_type", "?"),
            reason=reason.replace("`", "'"),  # literal, in the loader's words
        )
    )


def show_load_detail(detail: str) -> None:
    """The loader's own words (paths, the command that fixes it), literally, behind a
    translated label: they are technical and stay in their original English."""
    with st.expander(t("model.load_failed_detail"), icon=":material/info:"):
        st.code(detail, language=None, wrap_lines=True)


TRACE_CACHE_ENV = "ATTENTION_LAB_TRACE_CACHE_MB"
# Every session's traces together: with 20 students, about 300 MB each (a 4,096-token
# record of a 0.5B model) beside the shared models, on a 24 GiB machine (README).
DEFAULT_TRACE_CACHE_MB = 6144
TRACES = ByteLRU(budget_bytes(TRACE_CACHE_ENV, DEFAULT_TRACE_CACHE_MB))


def cached_trace(
    name: str, device: str, text: str, target: str | None = None, stages: bool = False
) -> Trace:
    """The trace of ``text``, computed once and kept (bounded by bytes, not entries). A hit
    is the very object kept, never a copy: st.cache_data pickled a whole Trace in and out
    on every click (2 GB at 1,024 tokens). Views only read it."""
    return TRACES.get_or_compute(
        (name, device, text, target, stages),
        lambda: load_model(name, device).trace(text, target=target, stages=stages),
    )


def trace_with(name: str, text: str) -> Trace | None:
    """A cached trace of ``text`` through another model (compare mode); None if it cannot load."""
    try:
        return cached_trace(name, selected_device(), text, None, False)
    except (ModelLoadError, ValueError, OSError) as err:
        st.error(t("model.load_failed", name=model_label(name)), icon=":material/error:")
        show_load_detail(str(err))
        return None


def get_trace(text: str, target: str | None = None, stages: bool = False) -> Trace:
    """A cached trace of ``text`` through the session's model (get_model() loaded it)."""
    return cached_trace(selected_model(), selected_device(), text, target, stages)


def _decode(name: str, device: str, text: str, options: tuple) -> list[DecodeStep]:
    """Every step of one run, kept beside the traces, in the same byte budget (read-only)."""

    def run() -> list[DecodeStep]:
        lm = load_model(name, device)
        kwargs = dict(options)
        head_off = kwargs.pop("head_off", ())
        if head_off:
            kwargs["head_mask"] = lm.head_mask(head_off)
        return list(lm.decode(text, **kwargs))

    return TRACES.get_or_compute(("decode", name, device, text, options), run)


def get_decoding(text: str, **options) -> list[DecodeStep]:
    """Every step of one decoding run, computed once and cached, so stepping back and forth
    costs only the figures. ``head_off``: (kind, layer, head) triples switched off."""
    return _decode(selected_model(), selected_device(), text, tuple(sorted(options.items())))


def _teacher_forcing(
    name: str, device: str, text: str, target: str, head_off: tuple
) -> list[ForcedStep]:
    def run() -> list[ForcedStep]:
        lm = load_model(name, device)
        return lm.teacher_forcing(text, target, lm.head_mask(head_off) if head_off else None)

    return TRACES.get_or_compute(("forced", name, device, text, target, head_off), run)


def get_teacher_forcing(text: str, target: str, head_off: tuple = ()) -> list[ForcedStep]:
    """Cached LabModel.teacher_forcing for the session's model."""
    return _teacher_forcing(selected_model(), selected_device(), text, target, head_off)
