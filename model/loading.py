"""``load(name_or_path)``: one entry point for shipped checkpoints, MiniLM and local folders."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from model.lab import LabModel, ModelLoadError

ROOT = Path(__file__).resolve().parents[1]
CHECKPOINTS = ROOT / "assets" / "checkpoints"
SHIPPED = ("en2ko", "reverse", "sort")
PRETRAINED = ("minilm",)


def load(name_or_path: str | Path, device: str | torch.device = "auto") -> LabModel:
    """A ready model: "en2ko" | "reverse" | "sort" | "minilm" | a folder path.

    A folder is either a project checkpoint (model.safetensors + config.json + vocab.json)
    or a local Hugging Face model folder. Nothing is ever downloaded, and
    trust_remote_code is never on. Failures raise ModelLoadError with a readable message.
    """
    name = str(name_or_path)
    if name in PRETRAINED:
        from model.pretrained import load_minilm

        return load_minilm(device)
    if name in SHIPPED:
        folder = CHECKPOINTS / name
        if not (folder / "config.json").is_file():
            raise ModelLoadError(
                f"the shipped checkpoint {name!r} is missing from {folder}; "
                f"retrain it with: python -m model.train --task {name} --out {folder}"
            )
        return _load_folder(folder, device, name)
    folder = Path(name).expanduser()
    if folder.is_dir():
        return _load_folder(folder, device, folder.name)
    raise ModelLoadError(
        f"unknown model {name!r}: choose one of {', '.join(SHIPPED + PRETRAINED)}, "
        "or give the path of a model folder"
    )


def _load_folder(folder: Path, device: str | torch.device, name: str) -> LabModel:
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise ModelLoadError(f"{folder} has no config.json, so it is not a model folder")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ModelLoadError(f"{config_path} is not readable JSON: {err}") from err
    if not isinstance(config, dict):
        raise ModelLoadError(f"{config_path} should hold a JSON object")
    if (folder / "vocab.json").is_file() and "d_model" in config:
        from model.checkpoint import load_checkpoint

        return load_checkpoint(folder, device, name)
    if "model_type" in config:
        from model.pretrained import load_hf_folder

        return load_hf_folder(folder, device)
    raise ModelLoadError(
        f"{folder} is neither a project checkpoint (config.json with d_model + vocab.json) "
        "nor a Hugging Face model folder (config.json with model_type)"
    )
