"""``load(name_or_path)``: one entry point for shipped checkpoints, MiniLM and local folders."""

from __future__ import annotations

from pathlib import Path

import torch

from model.runtime.device import dtype_name, resolve_device, resolve_dtype
from model.runtime.lab import LabModel
from model.runtime.types import ModelLoadError, read_json_object

ROOT = Path(__file__).resolve().parents[2]
CHECKPOINTS = ROOT / "assets" / "checkpoints"
SHIPPED = ("en2ko", "reverse", "sort", "induction")
# Shipped for comparison only (not offered in the model picker): the one-layer induction
# model that cannot form an induction head.
CONTRAST = ("induction-1layer",)
PRETRAINED = ("minilm",)
# Real decoders shipped as GGUF files inside registry packages (model.runtime.gguf_cache),
# offered where their packages are installed.
GGUF_MODELS = ("smollm2", "gemma3")


def load(
    name_or_path: str | Path,
    device: str | torch.device = "auto",
    dtype: str | torch.dtype = "auto",
) -> LabModel:
    """A ready model: "en2ko" | "reverse" | "sort" | "induction" | "minilm" | "smollm2" |
    "gemma3" | a folder path | the path of a .gguf file.

    dtype: "auto" runs a Hugging Face folder in its own torch_dtype (bfloat16 / float16) on
    a CUDA GPU and in float32 on a CPU (the shipped checkpoints are float32); or
    "float32" | "bfloat16" | "float16". Attention maps are recomputed in float32 whatever
    the weights' dtype.

    A folder is either a project checkpoint (model.safetensors + config.json + vocab.json)
    or a local Hugging Face model folder. Nothing is ever downloaded, and
    trust_remote_code is never on. Failures raise ModelLoadError with a readable message.
    Loading leaves torch's global random state as it found it (a network is built, randomly
    initialised, before its weights are read in): a seeded notebook or exercise draws the
    same numbers whether or not a model was loaded first.
    """
    with torch.random.fork_rng(devices=[]):
        lm = _load(str(name_or_path), device, dtype)
    if dtype != "auto" and isinstance(lm, LabModel):  # explicit: every kind of model
        lm.network.to(resolve_dtype(dtype, lm.device))
    return lm


def _load(name: str, device: str | torch.device, dtype: str | torch.dtype = "auto") -> LabModel:
    if name in PRETRAINED:
        return load_minilm(device)
    if name in GGUF_MODELS:
        return load_gguf(name, device, dtype)
    if name in SHIPPED or name in CONTRAST:
        folder = CHECKPOINTS / name
        if not (folder / "config.json").is_file():
            task = name.split("-", 1)[0]
            raise ModelLoadError(
                f"the shipped checkpoint {name!r} is missing from {folder}; "
                f"retrain it with: python -m model.train --task {task} --out {folder}"
            )
        return _load_folder(folder, device, name)
    folder = Path(name).expanduser()
    if folder.is_dir():
        return _load_folder(folder, device, folder.name, dtype)
    if folder.suffix.lower() == ".gguf":
        return load_gguf(folder, device, dtype)
    if any(c in name for c in "/\\~.") or folder.exists():  # a path, not a model's name
        raise ModelLoadError(f"there is no folder at {folder}")
    raise ModelLoadError(
        f"unknown model {name!r}: choose one of {', '.join(SHIPPED + PRETRAINED + GGUF_MODELS)}, "
        "or give the path of a model folder or a .gguf file"
    )


def _load_folder(
    folder: Path, device: str | torch.device, name: str, dtype: str | torch.dtype = "auto"
) -> LabModel:
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise ModelLoadError(f"{folder} has no config.json, so it is not a model folder")
    config = read_json_object(config_path)
    if (folder / "vocab.json").is_file() and "d_model" in config:
        from model.runtime.checkpoint import load_checkpoint

        return load_checkpoint(folder, device, name)
    if "model_type" in config:
        return load_hf_folder(folder, device, dtype)
    raise ModelLoadError(
        f"{folder} is neither a project checkpoint (config.json with d_model + vocab.json) "
        "nor a Hugging Face model folder (config.json with model_type)"
    )


def load_gguf(
    name_or_path: str | Path, device: str | torch.device = "auto", dtype: str | torch.dtype = "auto"
):
    """A shipped GGUF model ("smollm2", "gemma3") or any .gguf file, converted once into a
    cached Hugging Face folder (model.runtime.gguf_cache) and run from it like any folder:
    our own engine where the layout maps, transformers' otherwise. A cached folder that does
    not load is converted again, once."""
    from model.runtime import gguf_cache
    from model.runtime.folders import FolderProblem

    shipped = str(name_or_path) in gguf_cache.SHIPPED_GGUF
    try:
        folder = (
            gguf_cache.shipped_folder(str(name_or_path))
            if shipped
            else gguf_cache.gguf_folder(name_or_path)
        )
        try:
            lm = load_hf_folder(folder, device, dtype)
        except ModelLoadError:  # damaged since it was stamped: convert again, once
            gguf_cache.forget(folder)
            folder = (
                gguf_cache.shipped_folder(str(name_or_path))
                if shipped
                else gguf_cache.gguf_folder(name_or_path)
            )
            lm = load_hf_folder(folder, device, dtype)
    except gguf_cache.GGUFProblem as problem:  # said in the reader's language by the UI
        raise FolderProblem(problem.key, str(problem), **problem.details) from problem
    lm.name = str(name_or_path) if shipped else Path(name_or_path).stem
    lm.info["gguf"] = str(name_or_path)
    if shipped:
        model = gguf_cache.SHIPPED_GGUF[str(name_or_path)]
        lm.info["source"] = model.source
        lm.info["license"] = model.license
        if model.terms:
            lm.info["terms"] = str(model.terms_path())
    return lm


def load_bert_folder(
    folder: str | Path,
    device: str | torch.device = "auto",
    name: str | None = None,
    info: dict | None = None,
    config=None,
    tokenizer=None,
) -> LabModel:
    """A BERT-layout folder as a LabModel running our own EncoderModel."""
    from model.hf.bert import build_bert

    network, tokenizer = build_bert(folder, config, tokenizer)
    info = {"engine": "attention-lab", "folder": str(folder), **(info or {})}
    return LabModel(name or Path(folder).name, network, tokenizer, device=device, info=info)


def load_minilm(device: str | torch.device = "auto") -> LabModel:
    """all-MiniLM-L6-v2 (6 layers x 12 heads) mapped into our own encoder; no caching here.
    Its config and tokenizer are read without transformers (model.hf.wordpiece: ~1.7 s less
    on the first visit of a page that shows it)."""
    from model.hf.bert import MINILM_SOURCE, minilm_path
    from model.hf.wordpiece import WordPieceTokenizer, read_bert_config

    folder = minilm_path()
    return load_bert_folder(
        folder,
        device,
        "minilm",
        {"source": MINILM_SOURCE},
        config=read_bert_config(folder),
        tokenizer=WordPieceTokenizer(folder),
    )


def load_decoder_folder(
    folder: str | Path,
    device: str | torch.device = "auto",
    config=None,
    dtype: str | torch.dtype = "auto",
) -> LabModel:
    """A LLaMA / Qwen2 / Mistral / GPT-2 folder as a LabModel running our own DecoderModel."""
    from model.hf.common import read_hf_config
    from model.hf.decoder import build_decoder
    from model.hf.fallback import DEFAULT_NEW_TOKENS

    folder = Path(folder)
    config = config if config is not None else read_hf_config(folder)
    network, tokenizer = build_decoder(folder, config)
    info = {"engine": "attention-lab", "folder": str(folder), "model_type": config.model_type}
    own = dtype_name(getattr(config, "dtype", None) or getattr(config, "torch_dtype", None))
    return LabModel(
        folder.name,
        network,
        tokenizer,
        device=device,
        info=info,
        default_new_tokens=DEFAULT_NEW_TOKENS,  # big models are slow on CPU
        dtype=resolve_dtype(dtype, resolve_device(device), own),
    )


def load_hf_folder(
    folder: str | Path, device: str | torch.device = "auto", dtype: str | torch.dtype = "auto"
):
    """A local Hugging Face folder: our own engine when the layout maps (BERT encoders;
    LLaMA, Qwen2, Mistral and GPT-2 decoders), transformers' own code otherwise.

    Returns a LabModel, or an HFLabModel with the same public surface whose ``info["note"]``
    says what it cannot show.
    """
    # transformers is imported only here, when a pretrained model is first asked for.
    from model.hf.bert import bert_unmappable
    from model.hf.common import weight_files
    from model.hf.decoder import DECODER_TYPES, decoder_unmappable
    from model.hf.fallback import HFLabModel
    from model.runtime.config_memo import ResolvedConfig, resolved_config

    folder = Path(folder).expanduser()
    config = resolved_config(folder)  # AutoConfig's fields, kept from an earlier load
    weight_files(folder)  # no weights / pickle-only weights: refuse before anything loads
    if bert_unmappable(config) is None:
        return load_bert_folder(folder, device, folder.name, config=config)
    reason = decoder_unmappable(config)
    if reason is None:
        return load_decoder_folder(folder, device, config=config, dtype=dtype)
    if config.model_type not in (*DECODER_TYPES, "bert"):
        reason = f"model_type {config.model_type!r} is not one Attention Lab maps"
    # transformers' own code needs its own config object, not the kept fields
    lm = HFLabModel.from_folder(
        folder, device, config=None if isinstance(config, ResolvedConfig) else config
    )
    lm.info["note"] = fallback_note(reason)
    lm.info["fallback_reason"] = reason
    return lm


def fallback_note(reason: str) -> str:
    """What a folder run by transformers' own code lacks, and why (the engine may map its
    layout in general and still not this folder: a llama3-rescaled LLaMA, say)."""
    return (
        f"Runs through transformers' own code because {reason}. Attention Lab's engine runs "
        "BERT, LLaMA, Qwen2, Mistral, GPT-2 and Gemma 3 folders that match their reference layout; "
        "here: attention maps and decoding only; the four attention stages, head ablation, "
        "the KV-cache view, the logit lens, patching and attribution need our engine."
    )
