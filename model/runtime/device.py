"""Where tensors live, and how many CPU threads one process may take on a shared server."""

from __future__ import annotations

import os

import torch


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """ "auto" = cuda, then mps, then cpu; anything else is checked, not silently replaced."""
    if isinstance(device, torch.device):
        return device
    if device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("CUDA was asked for, but this machine has no usable GPU")
    if dev.type == "mps" and not (
        getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()
    ):
        raise ValueError("Apple MPS was asked for, but it is not available here")
    return dev


def available_devices() -> list[str]:
    """The choices worth offering on this machine, best first."""
    out = []
    if torch.cuda.is_available():
        out.append("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        out.append("mps")
    return [*out, "cpu"]


def thread_setting() -> int:
    """The intra-op thread cap the app runs with: ATTENTION_LAB_THREADS, else half the
    cores (at least 1, at most 4)."""
    env = os.environ.get("ATTENTION_LAB_THREADS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    return max(1, min(4, (os.cpu_count() or 2) // 2))


def configure_threads(threads: int | None = None) -> int:
    """Cap torch's intra-op threads so one request cannot starve the other sessions.

    Default: ``thread_setting()``. On the 2-core class server that is 1 thread per request,
    leaving a core for the rest.
    """
    threads = thread_setting() if threads is None else threads
    torch.set_num_threads(threads)
    return threads
