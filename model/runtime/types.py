"""The runtime's shared vocabulary: what a tokenizer returns, what decoding yields, what fails.

A module of its own at the bottom of ``model.runtime`` so the transformers adapters
(``model.hf``) and the LabModel facade both use these types without importing each other.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import torch

from model.transformer import DecoderModel, EncoderDecoderModel, EncoderModel


class ModelLoadError(Exception):
    """A model could not be found or read; the message is meant for the person who asked."""


def short_error(err: BaseException) -> str:
    """First line of an exception, for a message a person reads (no traceback)."""
    text = str(err).strip().splitlines()[0] if str(err).strip() else ""
    text = text if len(text) <= 300 else text[:297] + "..."
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def read_json_object(path: Path) -> dict:
    """A model folder's JSON file (config.json, ...) as a dict; ModelLoadError otherwise."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ModelLoadError(f"{path} is not readable JSON: {short_error(err)}") from err
    if not isinstance(data, dict):
        raise ModelLoadError(f"{path} should hold a JSON object")
    return data


@dataclass
class Encoded:
    """One text as the model reads it, with what a person should be told about it."""

    ids: list[int]
    tokens: list[str]
    unknown: list[str] = field(default_factory=list)  # words the vocabulary does not know
    truncated: bool = False  # the text was cut to the model's limit


class Tokenizer(Protocol):
    """What LabModel needs of a tokenizer (word-level toy vocabularies and WordPiece alike)."""

    pad_id: int
    bos_id: int | None
    eos_id: int | None
    special_tokens: frozenset[str]

    def encode(self, text: str, max_len: int) -> Encoded:
        """Input text -> the ids the model reads, with the special tokens it expects
        (e.g. [CLS] .. [SEP], or a decoder-only prompt's separator), at most ``max_len``."""
        ...

    def encode_target(self, text: str, max_len: int) -> Encoded:
        """Output text -> bare ids, no special tokens (for teacher forcing on a given target)."""
        ...

    def tokens(self, ids: list[int]) -> list[str]:
        """Ids -> token strings, one per id."""
        ...

    def detokenize(self, ids: list[int]) -> str:
        """Ids -> readable text (special tokens dropped)."""
        ...


@dataclass
class DecodeStep:
    """One generated token, with the attention its query row paid and the distribution it came from."""

    index: int  # 0 for the first generated token
    token: str
    token_id: int
    tokens: list[str]  # the output so far, this token included
    attention: dict[str, torch.Tensor]  # kind -> [layers, heads, keys] for the new query
    probs: torch.Tensor  # [vocab] the distribution this token was chosen from (after
    # temperature, and for sampling after top-k / top-p)
    logits: torch.Tensor | None = None  # [vocab] raw scores, before temperature
    beams: list[tuple[list[str], float]] = field(default_factory=list)  # beam search: the
    # live hypotheses after this step, best first, with their summed log-probabilities


Network = EncoderDecoderModel | EncoderModel | DecoderModel


@dataclass
class ForcedStep:
    """One position of teacher forcing beside free running (see LabModel.teacher_forcing)."""

    position: int
    true_prefix_end: str  # the last token of the true prefix the model was given
    target: str  # the token it should produce next
    forced: str  # what it predicts given the true prefix
    forced_prob: float  # probability it gives the target token there
    free: str | None  # what it produced at this position on its own (None: it had stopped)


def decoder_tokens(model, text: str, generated: list[str], start_id: int | None) -> list[str]:
    """What a model's decoder reads after generating ``generated``: the output shifted right,
    "<start> y1 .. yn" (encoder-decoder), or the prompt followed by it (decoder-only).

    ``model`` is a LabModel or an HFLabModel (kind, encode, tgt_tokenizer)."""
    if model.kind == "encoder":
        raise ValueError("an encoder-only model has no decoder")
    if model.kind == "encoder-decoder":
        return [*model.tgt_tokenizer.tokens([start_id]), *generated]
    return [*model.encode(text).tokens, *generated]
