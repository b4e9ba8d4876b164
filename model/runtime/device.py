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


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def dtype_name(value) -> str | None:
    """ "bfloat16" for torch.bfloat16 or "bfloat16" (a config's torch_dtype), else None."""
    if isinstance(value, torch.dtype):
        return str(value).removeprefix("torch.")
    return value if isinstance(value, str) else None


def resolve_dtype(
    dtype: str | torch.dtype | None, device: torch.device, own: str | None = None
) -> torch.dtype | None:
    """The weights' dtype to run in. "auto": a folder's own half precision (``own``:
    "bfloat16" / "float16") on a CUDA GPU, float32 elsewhere (a CPU runs half precision
    slowly); None leaves the weights as built. Or a name / torch.dtype, checked."""
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    if dtype == "auto":
        if device.type == "cuda" and own in ("bfloat16", "float16"):
            if own == "bfloat16" and not torch.cuda.is_bf16_supported():
                return torch.float16
            return DTYPES[own]
        return torch.float32
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be 'auto' or one of {', '.join(DTYPES)}, not {dtype!r}")
    return DTYPES[dtype]
