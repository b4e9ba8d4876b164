"""Which model a session looks at, loaded once per process and traced once per input.

Models are shared by every session (``MODELS``) and are only read; traces are plain data
kept per (model, device, text) (``TRACES``), both in the lab's one cache bounded by bytes
(model.runtime.kept.ByteLRU), so a rerun that changes a layer or a head never runs the
model again.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import streamlit as st

from model.runtime.decoding import DecodingRun
from model.runtime.folders import (
    ENCODER_TYPES,
    ENGINE_DECODER_TYPES,
    GGUF_PREFIX,
    LINK_PREFIX,
    FolderProblem,
    diagnose,
    fallback_reason,
    folder_in_root,
    gguf_in_root,
    in_root,
    layout_name,
    link_name,
    models_root,
    root_folders,
    root_gguf_files,
)
from model.runtime.lab import LabModel
from model.runtime.loading import CONTRAST, GGUF_MODELS, PRETRAINED, SHIPPED, load
from model.runtime.types import ForcedStep, ModelLoadError
from model.trace import Trace
from ui.i18n import current_language, t, translated_widget
from ui.model_card import show_model_card
from ui.model_shelf import ModelShelf
from ui.permalink import linked
from ui.served import ROOT_SHOWN, served
from viz.memo import ByteLRU, budget_bytes

FOLDER = "folder"  # the choice that loads a local Hugging Face / checkpoint folder
MODEL_CHOICES = (*SHIPPED, *PRETRAINED, FOLDER)
DEFAULT_MODEL = "en2ko"  # when no real model is installed (the toy that ships in the repo)
_MODEL_KEY, _DEVICE_KEY, _FOLDER_KEY = "model", "device", "model_folder"
_EXTRA_KEY = "extra_models"  # folder -> (origin, task): models trained or uploaded this session
_REFUSED_KEY = "_refused_model_link"  # a ?model= path this session would not open
_ROOT_PREFIXES = (LINK_PREFIX, GGUF_PREFIX)
# Folders this process made itself (a model trained or uploaded in some session): the only
# paths a served server loads besides the models root.
_MADE_HERE: set[str] = set()
log = logging.getLogger("attention_lab.models")


def add_session_model(folder: str, origin: str, task: str) -> None:
    """Offer a checkpoint folder (``origin``: "trained" | "uploaded") in this session's picker."""
    st.session_state.setdefault(_EXTRA_KEY, {})[str(folder)] = (origin, task)
    _MADE_HERE.add(str(folder))


def session_models() -> dict[str, tuple[str, str]]:
    return st.session_state.get(_EXTRA_KEY, {})


def model_choices() -> tuple[str, ...]:
    """The picker's options: shipped, pretrained, this session's own models, the folders in
    the models root (``folder:NAME``, so a link names them), then any folder by its path,
    except on a served server (ui.served), where nothing a visitor types names a path."""
    typed = () if served() else (FOLDER,)
    return (*SHIPPED, *PRETRAINED, *gguf_models(), *session_models(), *root_choices(), *typed)


@st.cache_data(show_spinner=False)
def gguf_models() -> tuple[str, ...]:
    """The shipped GGUF models ("smollm2", "gemma3") whose packages are installed."""
    from model.runtime.gguf_cache import installed

    return tuple(name for name in GGUF_MODELS if installed(name))


@st.cache_data(show_spinner=False, ttl=10)
def _root_folders(root: str) -> list[str]:
    return root_folders(Path(root))


@st.cache_data(show_spinner=False, ttl=10)
def _root_gguf_files(root: str) -> list[str]:
    return root_gguf_files(Path(root))


def root_choices() -> tuple[str, ...]:
    """``folder:NAME`` for every model folder in $ATTENTION_LAB_MODELS, then ``gguf:NAME`` for
    every .gguf file there (re-read every 10 s)."""
    root = str(models_root())
    folders = tuple(LINK_PREFIX + name for name in _root_folders(root))
    return folders + tuple(GGUF_PREFIX + name for name in _root_gguf_files(root))


def model_path(name: str) -> str:
    """What load() reads for a choice: a ``folder:NAME`` inside the models root as its path
    (FolderProblem when it is not one), anything else as it is. Served, only what the picker
    lists gets through: a registry name, a name inside the models root, a folder this
    process made; any other path is refused here, the one door every load passes."""
    if name.startswith(LINK_PREFIX):
        return str(folder_in_root(name[len(LINK_PREFIX) :]))
    if name.startswith(GGUF_PREFIX):
        return str(gguf_in_root(name[len(GGUF_PREFIX) :]))
    if served() and not _servable(name):
        raise FolderProblem("outside_root", "a served lab opens only the models it lists")
    return name


def _servable(name: str) -> bool:
    if name.startswith(GGUF_PREFIX):
        in_root(name[len(GGUF_PREFIX) :])  # the same rule as folders (FolderProblem if not)
        return True
    if name in _MADE_HERE:
        return True
    plain = not any(c in name for c in "/\\:") and not name.startswith((".", "~"))
    return bool(name) and plain and not Path(name).exists()  # a registry name, not a path


def model_label(name: str) -> str:
    extra = session_models().get(name)
    if extra is not None:
        origin, task = extra
        return t(f"model.session.{origin}", task=task, n=_ordinal(name))
    if name.startswith(LINK_PREFIX):
        return t("model.root_folder", name=name[len(LINK_PREFIX) :])
    if name.startswith(GGUF_PREFIX):
        return t("model.root_gguf", name=name[len(GGUF_PREFIX) :])
    if name not in (*SHIPPED, *PRETRAINED, *GGUF_MODELS, *CONTRAST, FOLDER):
        return Path(name).name or name  # a model folder: its own name
    return t(f"model.name.{name}")


def _ordinal(folder: str) -> int:
    """1, 2, ... in the order this session's models arrived, to tell same-task models apart."""
    return list(session_models()).index(folder) + 1


def device_choices() -> list[str]:
    from model.runtime.device import available_devices

    return ["auto", *available_devices()]


def default_model(lang: str | None = None) -> str:
    """The model a first visit looks at: a real one where its package is installed. In
    Korean, Gemma 3, which reads Korean as Korean words (SmolLM2 reads it as UTF-8 bytes);
    otherwise SmolLM2; the toy en2ko when neither is installed."""
    real = gguf_models()
    if (lang or current_language()) == "ko" and "gemma3" in real:
        return "gemma3"
    for name in ("smollm2", "gemma3"):
        if name in real:
            return name
    return DEFAULT_MODEL


def selected_model() -> str:
    """The model name (or folder path) this session chose in the sidebar."""
    choice = st.session_state.get(_MODEL_KEY, default_model())
    if choice == FOLDER and not served():
        return str(st.session_state.get(_FOLDER_KEY) or "").strip()
    return choice if choice in model_choices() else default_model()


def switch_model(name: str) -> None:
    """A button's callback: look at the same input with another model (the link follows)."""
    st.session_state[_MODEL_KEY] = name


def selected_device() -> str:
    device = st.session_state.get(_DEVICE_KEY, "auto")
    return device if device in device_choices() else "auto"


def names_a_path(value: str) -> bool:
    """Whether a ``?model=`` value names a place (a root prefix, a separator, ``~`` or a
    leading dot) rather than one of the picker's own names."""
    return value.startswith((*_ROOT_PREFIXES, "~", ".")) or any(c in value for c in "/\\")


def _note_refused_link(choices: tuple[str, ...]) -> None:
    """A link's ``?model=`` that names a place the picker does not list (``folder:NAME`` or
    ``gguf:NAME`` not inside the root, a path) is kept aside (its message is shown on the
    page), never opened."""
    url = st.query_params.get(_MODEL_KEY, "")
    if _MODEL_KEY not in st.session_state and url not in choices and names_a_path(url):
        st.session_state[_REFUSED_KEY] = url


def _forget_refused_link() -> None:
    st.session_state.pop(_REFUSED_KEY, None)


def _on_folder_typed() -> None:
    """A typed folder inside the models root becomes its ``folder:NAME`` choice, so the
    address bar can carry it."""
    name = link_name(str(st.session_state.get(_FOLDER_KEY) or "").strip())
    if name:
        st.session_state[_MODEL_KEY] = name


def render_model_picker() -> None:
    """Sidebar widgets: model (kept in ?model=), a folder path when asked for, device."""
    _note_refused_link(model_choices())
    linked(
        st.selectbox,
        f":material/neurology: {t('sidebar.model')}",
        model_choices(),
        key=_MODEL_KEY,
        default=default_model(),
        format_func=model_label,
        help=t("sidebar.model_help"),
        on_change=_forget_refused_link,
    )
    show_model_card(str(st.session_state.get(_MODEL_KEY, "")))
    if st.session_state.get(_MODEL_KEY) == FOLDER:
        st.text_input(
            t("sidebar.folder"),
            key=_FOLDER_KEY,
            placeholder="/path/to/model",
            persist_state="session",
            on_change=_on_folder_typed,
        )
        st.caption(t("sidebar.folder_link", root=shown_root()))
    with st.expander(t("sidebar.layouts"), icon=":material/help:"):
        st.markdown(
            t(
                "sidebar.layouts_body",
                engine=", ".join(layout_name(m) for m in (*ENCODER_TYPES, *ENGINE_DECODER_TYPES)),
                root=shown_root(),
            )
        )
    devices = {d: t(f"sidebar.device_choice.{d}") for d in device_choices()}
    st.selectbox(
        f":material/memory: {t('sidebar.device_choice')}",
        list(devices),
        format_func=devices.__getitem__,  # labels fixed for this run (see ui.permalink.linked)
        key=translated_widget(_DEVICE_KEY),
        persist_state="session",
    )


def code_path(path) -> str:
    return f"`{str(path).replace('`', '')}`"


def shown_root() -> str:
    """The models root as a page names it: its path for the person at this machine, the
    variable's name once served (the path would name a server folder)."""
    return code_path(ROOT_SHOWN if served() else models_root())


MODEL_CACHE_ENV = "ATTENTION_LAB_MODEL_CACHE_MB"
# The models one process keeps loaded: a 0.5B model in float32 (2 GB), Gemma 3 270M and
# SmolLM2 beside the shipped ones; the least recently used goes past it (ui.model_shelf).
DEFAULT_MODEL_CACHE_MB = 4096
MODELS = ModelShelf(budget_bytes(MODEL_CACHE_ENV, DEFAULT_MODEL_CACHE_MB))


def load_model(name: str, device: str) -> LabModel:
    """One shared instance per (model, device) for the whole process, within the models'
    byte budget; raises ModelLoadError (FolderProblem for a ``folder:NAME`` that is not a
    folder inside the models root, or a path a served lab does not open)."""
    lm, dropped = MODELS.get_or_load((name, device), lambda: load(model_path(name), device))
    if dropped:
        log.info("unloaded %s to stay within the models' budget", dropped)
        _UNLOADED.names = [n for n, _ in dropped]  # get_model says it, in this thread's run
    return lm


_UNLOADED = threading.local()  # what this thread's last load pushed out, until said


def _say_unloaded() -> None:
    """The models the load just made pushed out, said where the load was asked for."""
    names = getattr(_UNLOADED, "names", None)
    if not names:
        return
    _UNLOADED.names = None
    shown = ", ".join(model_label(n) if n in model_choices() else Path(n).name for n in names)
    mb = MODELS.budget // 2**20
    st.toast(t("model.unloaded", names=shown, budget=mb), icon=":material/memory:")


def get_model(name: str | None = None, device: str | None = None) -> LabModel | None:
    """The chosen model, with a spinner while it loads and a clear message if it cannot."""
    name = selected_model() if name is None else name
    device = selected_device() if device is None else device
    refused = st.session_state.get(_REFUSED_KEY)
    if refused:
        show_folder_problem(_link_problem(refused))
        return None
    if not name:
        st.info(t("model.folder_missing"), icon=":material/folder_open:")
        return None
    label = model_label(name) if name in model_choices() else Path(name).name
    try:
        with st.spinner(t("model.loading", name=label)):
            lm = load_model(name, device)
    except (ModelLoadError, ValueError, OSError) as err:
        show_load_failure(name, label, err)
        return None
    _say_unloaded()
    show_engine_line(lm)
    show_engine_note(lm)
    return lm


def _link_problem(value: str) -> FolderProblem:
    """Why a link's ``?model=`` value is not opened."""
    name = value
    for prefix in _ROOT_PREFIXES:
        name = name.removeprefix(prefix)
    try:
        folder_in_root(name) if value.startswith(LINK_PREFIX) else in_root(name)
    except FolderProblem as problem:
        return problem
    if not value.startswith(_ROOT_PREFIXES):
        return FolderProblem(
            "outside_root", f"{value!r} is not a name a link may carry", name=value
        )
    return FolderProblem("not_model", f"{name} is not a model", path=name, found="-")


def show_load_failure(name: str, label: str, err: BaseException) -> None:
    """The plain problem of a folder (in the reader's language) when one is seen, else the
    generic message; the loader's own words always behind a disclosure."""
    problem = err if isinstance(err, FolderProblem) else None
    if problem is None and name not in (*SHIPPED, *PRETRAINED, *GGUF_MODELS, *CONTRAST):
        linked_name = name.startswith((LINK_PREFIX, GGUF_PREFIX))
        gguf = name.lower().endswith(".gguf")
        problem = diagnose(model_path(name)) if not (linked_name or gguf) else None
    if problem is None:
        st.error(t("model.load_failed", name=label), icon=":material/error:")
        show_load_detail(str(err))
        return
    show_folder_problem(problem, str(err))


def show_folder_problem(problem: FolderProblem, detail: str | None = None) -> None:
    """The problem in the reader's language. Served, a refused place is not named back, and
    a path is shown by its last part alone: no message names a folder of the server."""
    details = dict(problem.details)
    key = problem.key
    if served():
        if key == "outside_root":
            key, details = "outside_root_served", {}
        if "path" in details:
            details["path"] = Path(details["path"]).name or "-"
        details.pop("root", None)
    details = {
        name: code_path(value) if name in ("path", "root") else value
        for name, value in details.items()
    }
    details.setdefault("root", shown_root())
    details.setdefault("engine", ", ".join(layout_name(m) for m in ENGINE_DECODER_TYPES))
    st.error(t(f"model.problem.{key}", **details), icon=":material/error:")
    show_load_detail(detail or str(problem))


def parameter_count(lm) -> int:
    network = getattr(lm, "network", None) or getattr(lm, "hf_model", None)
    return sum(p.numel() for p in network.parameters()) if network is not None else 0


def _size(n: int) -> str:
    for scale, unit in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return str(n)


def engine_line(lm) -> str:
    """ "Attention Lab engine · LLaMA layout · 1.1 B parameters · bfloat16 on CUDA" """
    network = getattr(lm, "network", None) or getattr(lm, "hf_model", None)
    first = next(network.parameters(), None) if network is not None else None
    dtype = str(first.dtype).removeprefix("torch.") if first is not None else "?"
    engine = "transformers" if lm.info.get("engine") == "transformers" else "lab"
    model_type = lm.info.get("model_type")
    if model_type is None and "task" not in lm.info and lm.kind == "encoder":
        model_type = "bert"  # MiniLM and BERT folders, mapped into our encoder
    layout = (
        t("model.layout", layout=layout_name(model_type))
        if model_type
        else t("model.layout_checkpoint")
    )
    return " · ".join(
        (
            t(f"model.engine.{engine}"),
            layout,
            t("model.params", n=_size(parameter_count(lm))),
            t("model.dtype_device", dtype=dtype, device=lm.device.type.upper()),
        )
    )


def show_engine_line(lm, where=st) -> None:
    where.caption(f":material/memory: {engine_line(lm)}")


def sidebar_folder() -> str | None:
    """The sidebar's model folder (a typed path or a ``folder:NAME``), whatever runs it."""
    choice = st.session_state.get(_MODEL_KEY)
    if choice != FOLDER and not str(choice).startswith(LINK_PREFIX):
        return None
    return selected_model() or None


def engine_folder() -> str | None:
    """The sidebar's real decoder when our own engine runs it: a shipped GGUF model (SmolLM2,
    Gemma 3), a .gguf file or a LLaMA, Qwen2, Mistral, GPT-2 or Gemma 3 folder, or a decoder
    checkpoint; else None. Pages built on our engine (mechanisms, "Attention since 2017")
    offer it beside their own toy models, and open on it."""
    choice = str(st.session_state.get(_MODEL_KEY, default_model()))
    real = choice in GGUF_MODELS or choice.startswith((LINK_PREFIX, GGUF_PREFIX))
    if choice != FOLDER and not real:
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
    layout = layout_name(lm.info.get("model_type"))
    key, details = fallback_reason(lm.info.get("fallback_reason", ""))
    reason = t(f"models.fallback.{key}", layout=layout, detail=details["detail"].replace("`", "'"))
    st.caption(t("models.fallback_note", model_type=layout, reason=reason))
    if key == "other":  # the loader's words, literally, behind a disclosure
        show_load_detail(lm.info.get("fallback_reason", ""))


def show_load_detail(detail: str) -> None:
    """The loader's own words (paths, the command that fixes it), literally, behind a
    translated label: they are technical and stay in their original English. Served, they
    go to the server's log instead: they may name the server's folders."""
    if served():
        log.warning("model problem (not shown to a served page): %s", detail)
        st.caption(t("model.detail_in_log"))
        return
    with st.expander(t("model.load_failed_detail"), icon=":material/info:"):
        st.code(detail, language=None, wrap_lines=True)


TRACE_CACHE_ENV = "ATTENTION_LAB_TRACE_CACHE_MB"
# Every session's traces together: with 20 students, about 300 MB each (a 4,096-token
# record of a 0.5B model) beside the shared models, on a 24 GiB machine (README).
DEFAULT_TRACE_CACHE_MB = 6144
TRACES = ByteLRU(budget_bytes(TRACE_CACHE_ENV, DEFAULT_TRACE_CACHE_MB))


def get_trace_by_name(name: str, text: str) -> Trace | None:
    """``get_trace`` through the model named ``name`` (compare mode's second model), loaded
    here; None, with the error shown, if it cannot load."""
    try:
        return get_trace(load_model(name, selected_device()), text)
    except (ModelLoadError, ValueError, OSError) as err:
        st.error(t("model.load_failed", name=model_label(name)), icon=":material/error:")
        show_load_detail(str(err))
        return None


def get_trace(
    lm, text: str, target: str | None = None, stages: bool = False, new_tokens: int | None = None
) -> Trace:
    """The trace of ``text`` through ``lm`` (the page's model, passed along: never looked up
    again), computed once and kept (bounded by bytes, not entries). A hit is the very
    object kept, never a copy: st.cache_data pickled a whole Trace in and out on every
    click (2 GB at 1,024 tokens). Views only read it. ``new_tokens``: how many tokens a
    decoder generates after the prompt (None: its default). Keyed by the model object's
    name, device and identity, beside the text.

    The one verb for tracing: ``LabModel.trace`` runs a pass; ``get_trace`` keeps it."""

    def run() -> Trace:
        if new_tokens is None:
            return lm.trace(text, target=target, stages=stages)
        return lm.trace(text, target=target, stages=stages, max_new_tokens=new_tokens)

    key = (lm.name, str(lm.device), text, target, stages, new_tokens, id(lm))
    return TRACES.get_or_compute(key, run)


# A run this cheap (parameters x new tokens; en2ko's 63 tokens are 0.05e9, ~10 ms of CPU) is
# decoded whole when it is first asked for, so the page can say its length at once; a real
# model's (SmolLM2: 4.3e9, ~2 CPU-s) is decoded as far as it is read.
WHOLE_RUN_MAX = 250_000_000


def _decoding_run(name: str, device: str, text: str, options: tuple) -> DecodingRun:
    """One run per (model, device, text, options), kept beside the traces in the same byte
    budget, counted again as it grows; a run that failed is dropped, so a rerun tries again."""
    key = ("decode", name, device, text, options)

    def changed(run: DecodingRun) -> None:
        if run.error is not None:
            TRACES.discard(lambda kept: kept != key)
        else:
            TRACES.recount(key, run)

    def start() -> DecodingRun:
        lm = load_model(name, device)
        kwargs = dict(options)
        head_off = kwargs.pop("head_off", ())
        if head_off:
            kwargs["head_mask"] = lm.head_mask(head_off)
        budget = lm.new_token_budget(text, kwargs.get("max_new_tokens"))
        run = DecodingRun(lm.decode(text, **kwargs), budget, lm.tgt_tokenizer.eos_id, changed)
        if parameter_count(lm) * budget <= WHOLE_RUN_MAX:
            run.all()
        return run

    return TRACES.get_or_compute(key, start)


def get_decoding(text: str, **options) -> DecodingRun:
    """The session's model's decoding run of ``text``, shared by every session and decoded
    as far as anyone has read it (``DecodingRun.upto``), so stepping back and forth costs
    only the figures. ``head_off``: (kind, layer, head) triples switched off."""
    return _decoding_run(selected_model(), selected_device(), text, tuple(sorted(options.items())))


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
