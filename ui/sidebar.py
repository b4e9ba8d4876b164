"""The sidebar every page shares: language picker and the device the model runs on."""

from __future__ import annotations

from typing import NamedTuple

import streamlit as st

from ui.charts import render_image_format_picker
from ui.i18n import LANGUAGES, current_language, set_language, sync_language_to_url, t
from ui.models import render_model_picker

_PICKER_KEY = "_language_picker"


class DeviceInfo(NamedTuple):
    kind: str  # "cuda" | "mps" | "cpu"
    name: str  # GPU name; empty for cpu and mps
    threads: int  # CPU threads torch uses for one operation


@st.cache_resource(show_spinner=False)
def device_info() -> DeviceInfo:
    """What PyTorch sees, probed once per process; torch loads here, not at import time."""
    import torch

    from model.runtime.device import resolve_device

    device = resolve_device("auto")
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else ""
    return DeviceInfo(device.type, name, torch.get_num_threads())


def _device_label(info: DeviceInfo) -> str:
    if info.kind == "cuda":
        return t("sidebar.device_cuda", name=info.name)
    if info.kind == "mps":
        return t("sidebar.device_mps")
    if info.threads == 1:
        return t("sidebar.device_cpu_one")
    return t("sidebar.device_cpu", threads=info.threads)


def _on_language_picked() -> None:
    # A callback runs before the script, so the whole rerun is already in the new language.
    set_language(st.session_state[_PICKER_KEY])


def render_sidebar() -> None:
    """Draw the shared sidebar; call once per run, before the page, so its state never drops."""
    sync_language_to_url()
    with st.sidebar:
        st.segmented_control(
            f":material/translate: {t('sidebar.language')}",
            options=list(LANGUAGES),
            format_func=LANGUAGES.__getitem__,  # each language in its own script
            default=current_language(),
            required=True,
            key=_PICKER_KEY,
            on_change=_on_language_picked,
            width="stretch",
        )
        render_model_picker()
        st.caption(f":material/memory: {t('sidebar.device', device=_device_label(device_info()))}")
        render_image_format_picker()
