"""A Hugging Face folder's config as transformers resolves it, read back without transformers.

``AutoConfig`` fills in what config.json leaves out (a LLaMA's ``attention_bias``, Gemma 3's
``layer_types``, transformers 5's ``rope_parameters``), and our engine reads those resolved
fields. Importing transformers' configuration machinery for it was most of a cached SmolLM2
load (~2 of 2.6 s of CPU on the 2-core machine), and so most of the wait of a first explorer
visit after a start. The resolved fields are kept once in a small JSON memo beside the
converted models, keyed by config.json's bytes and transformers' installed version (a new
version resolves again), and read back as a ``ResolvedConfig``: the same attributes, for a
model our own engine runs. A model that runs through transformers' own code gets the real
``AutoConfig`` (model.runtime.loading asks for it).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from model.runtime.types import ModelLoadError

log = logging.getLogger(__name__)
MEMO_DIR = "hf-configs"  # under model.runtime.gguf_cache.cache_root()


class ResolvedConfig:
    """A resolved config's fields as attributes (``config.num_attention_heads``), with
    ``to_dict()`` as transformers' configs have it; nothing else of PretrainedConfig."""

    def __init__(self, fields: dict):
        self.__dict__.update(fields)

    def to_dict(self) -> dict:
        return dict(self.__dict__)

    def __repr__(self) -> str:
        return f"ResolvedConfig(model_type={getattr(self, 'model_type', None)!r})"


def _transformers_version() -> str | None:
    try:
        return version("transformers")
    except PackageNotFoundError:
        return None


def memo_path(folder: Path) -> Path | None:
    """Where the resolved config of ``folder``'s config.json is kept (None: no transformers)."""
    from model.runtime.gguf_cache import cache_root

    tf = _transformers_version()
    if tf is None:
        return None
    digest = hashlib.sha256((folder / "config.json").read_bytes()).hexdigest()[:32]
    return cache_root() / MEMO_DIR / f"{digest}-transformers-{tf}.json"


def resolved_config(folder: str | Path):
    """``folder``'s config, resolved: from the memo when there is one, else through
    ``AutoConfig`` (model.hf.common.read_hf_config, which also refuses custom code and
    unusable files), writing the memo for the next load. The folder's own checks run
    every time."""
    from model.hf.common import check_hf_folder, read_hf_config

    folder = Path(folder)
    check_hf_folder(folder)
    try:
        path = memo_path(folder)
    except OSError as err:
        raise ModelLoadError(f"{folder}/config.json could not be read: {err}") from err
    if path is not None:
        try:
            fields = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(fields, dict) and fields.get("model_type"):
                return ResolvedConfig(fields)
        except (OSError, ValueError):
            pass  # no memo yet, or a damaged one: resolve again
    config = read_hf_config(folder)
    if path is not None:
        _write(path, config.to_dict())
    return config


def _write(path: Path, fields: dict) -> None:
    """The memo, written atomically; a cache that cannot be written only costs the next load
    the same resolving again."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(fields, default=str), encoding="utf-8")
        os.replace(tmp, path)
    except (OSError, TypeError, ValueError) as err:
        log.info("config memo not written (%s): %s", path, err)
