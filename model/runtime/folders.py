"""Model folders as people keep them: a models root, links into it, and why a folder won't run.

``ATTENTION_LAB_MODELS`` (default ``~/attention-lab-models``) holds model folders; a link names
one by its path relative to that root (``?model=folder:tinyllama``), so a copied link reopens
the same model on any machine that has the folder, and a link can never reach outside it.
``diagnose`` says, for a folder that fails to load, which of a handful of plain problems it
has, with what was found, so a page can say it in the reader's language.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from model.runtime.types import ModelLoadError

MODELS_ENV = "ATTENTION_LAB_MODELS"
DEFAULT_MODELS_ROOT = "~/attention-lab-models"
LINK_PREFIX = "folder:"  # ?model=folder:NAME
GGUF_PREFIX = "gguf:"  # ?model=gguf:NAME, a .gguf file directly in the models root

ENCODER_TYPES = ("bert",)
ENGINE_DECODER_TYPES = ("llama", "qwen2", "mistral", "gemma3_text", "gpt2")
ENGINE_TYPES = (*ENCODER_TYPES, *ENGINE_DECODER_TYPES)
LAYOUT_NAMES = {
    "bert": "BERT",
    "llama": "LLaMA",
    "qwen2": "Qwen2",
    "mistral": "Mistral",
    "gpt2": "GPT-2",
    "t5": "T5",
    "bart": "BART",
    "phi3": "Phi-3",
    "gemma": "Gemma",
    "gemma3_text": "Gemma 3",
    "gpt_neox": "GPT-NeoX",
    "distilbert": "DistilBERT",
}
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "vocab.txt",
    "vocab.json",
    "spiece.model",
)


class FolderProblem(ModelLoadError):
    """A folder that cannot be opened, for a plain reason: ``key`` names it (not_found,
    outside_root, not_model, layout_unsupported, weights_missing, tokenizer_missing),
    ``details`` holds what a message states."""

    def __init__(self, key: str, message: str, **details: str):
        super().__init__(message)
        self.key = key
        self.details = details


def models_root() -> Path:
    """The folder that holds model folders a link may name."""
    return Path(os.environ.get(MODELS_ENV) or DEFAULT_MODELS_ROOT).expanduser()


def layout_name(model_type: str | None) -> str:
    return LAYOUT_NAMES.get(model_type or "", model_type or "?")


def root_folders(root: Path | None = None) -> list[str]:
    """Names of the model folders (a config.json inside) directly in the models root that
    stay inside it once links are followed, sorted."""
    root = models_root() if root is None else root
    try:
        entries = sorted(root.iterdir())
    except OSError:
        return []
    names = []
    for entry in entries:
        if entry.name.startswith("."):
            continue
        try:
            folder_in_root(entry.name, root)
        except FolderProblem:
            continue
        if (entry / "config.json").is_file():
            names.append(entry.name)
    return names


def in_root(name: str, root: Path | None = None) -> Path:
    """The path ``name`` (relative to the models root, as a link carries it) inside the root,
    whatever it is (a folder, a file); refuses absolute paths, ``..``, a drive or prefix
    (``:``) and links that lead out of the root, with a FolderProblem. Every name a link or
    a served page may carry goes through here (``folder:NAME``, ``gguf:NAME``)."""
    root = models_root() if root is None else root
    if not name or name.startswith(("/", "\\", "~")) or Path(name).is_absolute() or ":" in name:
        raise FolderProblem(
            "outside_root",
            f"a link may only name a folder inside the models root {root}, not {name!r}",
            name=name,
            root=str(root),
        )
    parts = Path(name.replace("\\", "/")).parts
    if ".." in parts:
        raise FolderProblem(
            "outside_root",
            f"a link may not leave the models root {root} ({name!r} has '..')",
            name=name,
            root=str(root),
        )
    try:
        real_root = root.resolve(strict=True)
    except OSError:
        raise FolderProblem(
            "not_found", f"the models root {root} does not exist", name=name, root=str(root)
        ) from None
    path = root / name
    if not path.resolve().is_relative_to(real_root):
        raise FolderProblem(  # where it leads is not said: it is outside the root
            "outside_root",
            f"{name!r} leads out of the models root {root}",
            name=name,
            root=str(root),
        )
    return path


def links_out(folder: Path, root: Path) -> list[str]:
    """The entries of ``folder`` (all the way down) that are symbolic links leading out of
    the models root ``root``, by their path inside ``folder``: a weights file linked to
    /etc/passwd would be read as the model's."""
    real_root = root.resolve()
    out = []
    for here, dirs, files in os.walk(folder):  # links to folders are not walked into
        for entry in (*dirs, *files):
            path = Path(here) / entry
            if path.is_symlink() and not path.resolve().is_relative_to(real_root):
                out.append(path.relative_to(folder).as_posix())
    return sorted(out)


def folder_in_root(name: str, root: Path | None = None) -> Path:
    """The folder ``name`` inside the models root (see in_root), none of whose files is a
    link out of the root."""
    root = models_root() if root is None else root
    folder = in_root(name, root)
    if not folder.resolve().is_dir():
        raise FolderProblem(
            "not_found", f"no folder {name!r} in the models root {root}", name=name, root=str(root)
        )
    if links_out(folder, root):
        raise FolderProblem(
            "outside_root",
            f"{name!r} holds links that lead out of the models root {root}",
            name=name,
            root=str(root),
        )
    return folder


def root_gguf_files(root: Path | None = None) -> list[str]:
    """Names of the .gguf files directly in the models root that stay inside it once links
    are followed, sorted (offered beside the folders as ``gguf:NAME``)."""
    root = models_root() if root is None else root
    try:
        entries = sorted(root.iterdir())
    except OSError:
        return []
    names = []
    for entry in entries:
        if entry.name.startswith(".") or entry.suffix.lower() != ".gguf":
            continue
        try:
            gguf_in_root(entry.name, root)
        except FolderProblem:
            continue
        names.append(entry.name)
    return names


def gguf_in_root(name: str, root: Path | None = None) -> Path:
    """The .gguf file ``name`` directly in the models root, under the rules of
    ``folder_in_root`` (no absolute paths, no ``..``, no link out of the root, no folder)."""
    root = models_root() if root is None else root
    if not name.lower().endswith(".gguf") or "/" in name or "\\" in name:
        raise FolderProblem(
            "outside_root",
            f"a link may only name a .gguf file directly in the models root {root}, not {name!r}",
            name=name,
            root=str(root),
        )
    try:
        path = folder_in_root(name, root)  # raises: it is not a folder
    except FolderProblem as problem:
        if problem.key != "not_found" or not (root / name).resolve().is_file():
            raise
        return root / name
    raise FolderProblem(
        "not_found", f"{path} is a folder, not a .gguf file", name=name, root=str(root)
    )


def link_name(path: str, root: Path | None = None) -> str | None:
    """``folder:NAME`` for a folder directly inside the models root, else None."""
    root = models_root() if root is None else root
    try:
        folder = Path(path).expanduser().resolve()
        name = folder.relative_to(root.resolve()).as_posix()
    except (OSError, ValueError):
        return None
    return LINK_PREFIX + name if name and name in root_folders(root) else None


def _found(folder: Path) -> str:
    try:
        names = sorted(p.name for p in folder.iterdir())
    except OSError:
        return ""
    shown = ", ".join(names[:8]) + (", …" if len(names) > 8 else "")
    return shown or "-"


def known_layout(model_type: str) -> bool:
    """Whether transformers (this version) knows the layout at all."""
    if model_type in ENGINE_TYPES:
        return True
    try:
        from transformers import CONFIG_MAPPING

        return model_type in CONFIG_MAPPING
    except Exception:  # an old transformers without the mapping: say it is known
        return True


def _readable_safetensors(path: Path) -> bool:
    """Whether the file's header reads (the tensors themselves are not loaded)."""
    try:
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as f:
            f.keys()
    except Exception:  # SafetensorError, OSError: all mean unreadable
        return False
    return True


def diagnose(path: str | Path) -> FolderProblem | None:
    """The plain problem of a folder that will not load, or None when none is seen."""
    folder = Path(path).expanduser()
    where = str(folder)
    if not folder.is_dir():
        return FolderProblem("not_found", f"there is no folder at {folder}", path=where)
    found = _found(folder)
    config_path = folder / "config.json"
    if not config_path.is_file():
        return FolderProblem("not_model", f"{folder} has no config.json", path=where, found=found)
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        config = None
    if not isinstance(config, dict):
        return FolderProblem(
            "not_model", f"{config_path} is not readable JSON", path=where, found=found
        )
    checkpoint = (folder / "vocab.json").is_file() and "d_model" in config
    model_type = config.get("model_type")
    if not checkpoint and not model_type:
        return FolderProblem(
            "not_model", "config.json names no model_type", path=where, found=found
        )
    if not checkpoint and not known_layout(str(model_type)):
        return FolderProblem(
            "layout_unsupported",
            f"model_type {model_type!r} is not a layout this lab or transformers knows",
            path=where,
            layout=str(model_type),
        )
    weights = list(folder.glob("*.safetensors"))
    if not weights:
        return FolderProblem(
            "weights_missing", f"{folder} has no .safetensors weights", path=where, found=found
        )
    for file in weights:
        if not _readable_safetensors(file):
            return FolderProblem(
                "weights_unreadable",
                f"{file} is not a readable safetensors file",
                path=where,
                file=file.name,
            )
    if not checkpoint and not any((folder / name).is_file() for name in TOKENIZER_FILES):
        return FolderProblem(
            "tokenizer_missing", f"{folder} has no tokenizer files", path=where, found=found
        )
    return None


_FALLBACK_REASONS = (  # (words in the loader's reason, key), first match wins
    ("not one Attention Lab maps", "layout"),
    ("is not one of", "layout"),
    ("is not BERT", "layout"),
    ("rotary positions are rescaled", "rope_scaled"),
    ("activation", "activation"),
    ("cross-attention", "cross_attention"),
    ("not used as", "not_lm"),
    ("positions are not absolute", "positions"),
    ("tensor parallelism", "parallel"),
)


def fallback_reason(reason: str) -> tuple[str, dict[str, str]]:
    """Why transformers, not the lab's engine, runs a folder: a key a page translates, and
    what the message names (the rescaling type); "other" keeps the loader's words."""
    import re

    for words, key in _FALLBACK_REASONS:
        if words in reason:
            found = re.search(r"\('([^']+)'\)", reason)
            return key, {"detail": found.group(1) if found else ""}
    return "other", {"detail": reason}
