"""Checkpoint folders: model.safetensors + config.json + vocab.json (+ metrics.json, curve.csv).

Never pickle: safetensors holds only tensors, JSON only data, so opening a checkpoint cannot
run code. Tied weights (decoder embedding = output projection) are stored once and re-tied
by building the model from its config before loading.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_model, save_model

from model.config import TransformerConfig
from model.runtime.lab import LabModel
from model.runtime.tokenizer import WordTokenizer, load_vocab, save_vocab
from model.runtime.types import ModelLoadError, Network
from model.transformer import build_model

WEIGHTS, CONFIG, VOCAB, METRICS, CURVE = (
    "model.safetensors",
    "config.json",
    "vocab.json",
    "metrics.json",
    "curve.csv",
)
MAX_JSON_BYTES = 4 * 2**20  # our JSON files are kilobytes; anything this big is not ours
HEADER_SLACK = 2**20  # room for the safetensors header beyond the raw tensor bytes
# 1 GiB (~270M float32 parameters): far beyond a teaching model. A shared server refuses a
# config that implies more before building it, so one folder cannot exhaust its memory.
MAX_WEIGHT_BYTES = 2**30


def save_checkpoint(
    folder: str | Path,
    network: Network,
    src_tokenizer: WordTokenizer | None,
    tgt_tokenizer: WordTokenizer,
    info: dict,
) -> Path:
    """Write weights, config, vocabulary and ``info`` (as metrics.json) into ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if next(network.parameters()).device.type != "cpu":
        network = copy.deepcopy(network).cpu()
    # save_model stores each shared (tied) tensor once and notes the dropped name.
    save_model(network, str(folder / WEIGHTS), metadata={"format": "pt"})
    _write_json(folder / CONFIG, network.config.to_dict())
    save_vocab(folder / VOCAB, str(info.get("task", "")), src_tokenizer, tgt_tokenizer)
    write_metrics(folder, info)
    return folder


def _bound_bytes(config: TransformerConfig) -> int:
    """Twice a generous count of the float32 bytes a config's model holds. Below the limit,
    the exact count is not needed: building on the meta device imports torch._dynamo (about
    a second of the first page's wait after a start, for every checkpoint)."""
    d, f = config.d_model, max(config.d_ff, 0)
    vocab = config.src_vocab_size + 2 * config.tgt_vocab_size + config.type_vocab_size
    tables = (vocab + 2 * config.max_len) * d + config.max_len**2
    layer = 8 * d * d + 3 * d * f + 32 * d + 4 * f  # self- and cross-attention, FFN, norms
    layers = config.n_encoder_layers + config.n_decoder_layers
    return 2 * 4 * (tables + layers * layer + config.tgt_vocab_size + 16 * d)


def write_metrics(folder: str | Path, metrics: dict) -> None:
    """(Re)write metrics.json: provenance and held-out results shown beside the model."""
    _write_json(Path(folder) / METRICS, metrics)


def _write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def _read_json(path: Path) -> object:
    if path.stat().st_size > MAX_JSON_BYTES:
        raise ModelLoadError(f"{path} is {path.stat().st_size} bytes, too big to be ours")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ModelLoadError(f"{path} is not readable JSON: {err}") from err


def _weight_bytes(network: torch.nn.Module) -> int:
    """Bytes of the distinct tensors the config implies (tied ones counted once)."""
    seen, total = set(), 0
    for t in network.state_dict().values():
        if t.data_ptr() not in seen:
            seen.add(t.data_ptr())
            total += t.numel() * t.element_size()
    return total


def load_checkpoint(
    folder: str | Path, device: str | torch.device = "auto", name: str = ""
) -> LabModel:
    """A LabModel from a checkpoint folder; any damage raises ModelLoadError saying what and where."""
    folder = Path(folder)
    retrain = "retrain it with: python -m model.train --task TASK --out " + str(folder)
    for file in (CONFIG, VOCAB, WEIGHTS):
        if not (folder / file).is_file():
            raise ModelLoadError(f"{folder} has no {file}; {retrain}")
    data = _read_json(folder / CONFIG)
    try:
        config = TransformerConfig.from_dict(data)  # type: ignore[arg-type]
    except (TypeError, ValueError, AttributeError) as err:
        raise ModelLoadError(f"{folder / CONFIG} is not a valid model config: {err}") from err
    if (folder / VOCAB).stat().st_size > MAX_JSON_BYTES:
        raise ModelLoadError(f"{folder / VOCAB} is too big to be a toy vocabulary")
    try:
        task, src_tok, tgt_tok = load_vocab(folder / VOCAB)
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as err:
        raise ModelLoadError(f"{folder / VOCAB} is not a valid vocabulary: {err}") from err
    if len(tgt_tok) != config.tgt_vocab_size or (
        src_tok is not None and len(src_tok) != config.src_vocab_size
    ):
        raise ModelLoadError(
            f"{folder / VOCAB} does not match {CONFIG}: vocabulary sizes "
            f"{None if src_tok is None else len(src_tok)}/{len(tgt_tok)}, config "
            f"{config.src_vocab_size}/{config.tgt_vocab_size}"
        )
    weights = folder / WEIGHTS
    implied = _bound_bytes(config)
    if implied > MAX_WEIGHT_BYTES:  # near the limit: the exact count, from shapes alone
        with torch.device("meta"):  # nothing is allocated
            meta = build_model(config)
        implied = sum(t.numel() * t.element_size() for t in (*meta.parameters(), *meta.buffers()))
    if max(implied, weights.stat().st_size) > MAX_WEIGHT_BYTES + HEADER_SLACK:
        raise ModelLoadError(
            f"{folder} holds a model of {max(implied, weights.stat().st_size):,} bytes; "
            f"Attention Lab opens models up to {MAX_WEIGHT_BYTES:,} bytes"
        )
    network = build_model(config)
    size, expected = weights.stat().st_size, _weight_bytes(network)
    if size > expected + HEADER_SLACK:
        raise ModelLoadError(
            f"{weights} is {size:,} bytes, far more than the {expected:,} bytes of weights "
            f"{CONFIG} describes; it belongs to another model or is damaged"
        )
    try:
        load_model(network, str(weights), strict=True, device="cpu")
    except (SafetensorError, RuntimeError, OSError, ValueError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ModelLoadError(
            f"{weights} could not be read as weights for {CONFIG} "
            f"(truncated, damaged, or from another model): {first}"
        ) from err
    info: dict = {"task": task, "folder": str(folder)}
    if (folder / METRICS).is_file():
        try:
            metrics = _read_json(folder / METRICS)
            info["metrics"] = metrics if isinstance(metrics, dict) else {}
        except ModelLoadError:
            info["metrics"] = {}  # provenance only: the model itself is fine
    return LabModel(name or folder.name, network, src_tok, tgt_tok, device=device, info=info)
