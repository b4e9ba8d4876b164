"""transformers' answers for the parity tests, computed once per GGUF and library version.

A parity test holds our engine to transformers run on the same GGUF. Our side is computed
live on every run; transformers' side (its tokenizer built from the GGUF, its model read and
dequantized from it: a minute or more of CPU for Gemma 3) is a pure function of the file,
the inputs and the libraries, so it is kept in the lab's cache folder, beside the converted
models (model.runtime.gguf_cache): ``$ATTENTION_LAB_CACHE/reference/``.

The key is the GGUF's sha256, the versions of transformers, tokenizers, torch and gguf, the
inputs, and the source of the function that computes the reference: a change to any of them
computes it again, so a kept answer is always the one transformers would give now.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import torch

from model.runtime import gguf_cache

LIBRARIES = ("transformers", "tokenizers", "torch", "gguf")


def _versions() -> dict[str, str]:
    out = {}
    for name in LIBRARIES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "absent"
    return out


def reference_key(gguf: Path, inputs: object, build: Callable) -> str:
    """The digest that names a reference: file content, libraries, inputs and builder."""
    parts = {
        "gguf_sha256": gguf_cache.sha256_file(gguf),
        "versions": _versions(),
        "inputs": inputs,
        "builder": inspect.getsource(build),
    }
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=repr)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def cached_reference(name: str, gguf: Path, inputs: object, build: Callable[..., dict], *args):
    """``build(*args)``'s result (a dict of tensors, lists, strings and numbers), kept under a key
    of ``gguf``, ``inputs``, the libraries' versions and ``build``'s source."""
    folder = gguf_cache.cache_root() / "reference"
    path = folder / f"{name}-{reference_key(gguf, inputs, build)[:32]}.pt"
    if path.is_file():
        try:
            return torch.load(path, weights_only=True)
        except Exception:  # a damaged file: computed again below
            pass
    result = build(*args)
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob(f"{name}-*.pt"):  # a stale key's file is never read again
        old.unlink(missing_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    torch.save(result, tmp)
    os.replace(tmp, path)  # whole or absent: a killed run leaves no half file
    return result
