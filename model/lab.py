"""A loaded model as the pages and notebooks see it: text in, Trace or decoding steps out.

``LabModel`` joins one of our networks to its tokenizer(s). The toy checkpoints and the
mapped pretrained MiniLM are both LabModels, so every page works the same on either.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

import torch

from model.device import resolve_device
from model.trace import Recorder, Trace
from model.transformer import DecoderModel, EncoderDecoderModel, EncoderModel


class ModelLoadError(Exception):
    """A model could not be found or read; the message is meant for the person who asked."""


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
    probs: torch.Tensor  # [vocab] next-token probabilities this token was drawn from


Network = EncoderDecoderModel | EncoderModel | DecoderModel


class LabModel:
    """A network plus tokenizers, ready for ``trace``, ``translate`` and ``decode``.

    Inference only: the network is put in eval mode and shared read-only by every caller;
    each call builds its own Recorder and cache, so concurrent calls cannot mix.
    """

    def __init__(
        self,
        name: str,
        network: Network,
        src_tokenizer: Tokenizer | None,
        tgt_tokenizer: Tokenizer | None = None,
        device: str | torch.device = "auto",
        info: dict | None = None,
    ):
        self.name = name
        self.device = resolve_device(device)
        self.network = network.to(self.device).eval()
        self.src_tokenizer = src_tokenizer
        self.tgt_tokenizer = tgt_tokenizer or src_tokenizer
        self.info = info or {}  # provenance shown in the UI: task, metrics, source folder

    @property
    def config(self):
        return self.network.config

    @property
    def kind(self) -> str:
        """ "encoder-decoder" | "encoder" | "decoder"."""
        return self.network.config.kind

    @property
    def max_len(self) -> int:
        return self.network.config.max_len

    @property
    def input_tokenizer(self) -> Tokenizer:
        """The tokenizer a typed text goes through (the prompt side for decoder-only models)."""
        tok = self.tgt_tokenizer if self.kind == "decoder" else self.src_tokenizer
        assert tok is not None
        return tok

    def encode(self, text: str) -> Encoded:
        """How the model reads ``text``: tokens, unknown words, whether it was cut."""
        limit = self.max_len if self.kind != "decoder" else max(2, self.max_len // 2)
        return self.input_tokenizer.encode(text, limit)

    def _tensor(self, ids: list[int]) -> torch.Tensor:
        return torch.tensor([ids], dtype=torch.long, device=self.device)

    @torch.inference_mode()
    def trace(self, text: str, target: str | None = None, stages: bool = False) -> Trace:
        """Run ``text`` through the traced path and return everything it recorded.

        Encoder-decoder and decoder-only models are teacher-forced on ``target`` when given,
        otherwise on their own greedy output, so the picture shows what the model produces.
        """
        enc = self.encode(text)
        if self.kind == "encoder":
            out = self.network(self._tensor(enc.ids), trace=True, stages=stages)
            return out.trace(0, enc.tokens, [])
        tgt = self.tgt_tokenizer
        if target is None:
            continuation = [s.token_id for s in self.decode(text)]
        else:
            continuation = tgt.encode_target(target, self.max_len).ids
        if self.kind == "encoder-decoder":
            # Decoder input is the output shifted right: <bos> y1 .. yn (it predicts y1 .. <eos>).
            dec_in = [tgt.bos_id, *[i for i in continuation if i != tgt.eos_id]][: self.max_len]
            out = self.network(
                self._tensor(enc.ids), self._tensor(dec_in), trace=True, stages=stages
            )
            return out.trace(0, enc.tokens, tgt.tokens(dec_in))
        seq = (enc.ids + [i for i in continuation if i != tgt.eos_id])[: self.max_len]
        out = self.network(self._tensor(seq), trace=True, stages=stages)
        return out.trace(0, [], tgt.tokens(seq))

    def translate(self, text: str) -> str:
        """Greedy output as text (encoder-decoder), or the greedy continuation (decoder-only)."""
        ids = [s.token_id for s in self.decode(text)]
        return self.tgt_tokenizer.detokenize(ids)

    @torch.inference_mode()
    def decode(
        self,
        text: str,
        strategy: str = "greedy",
        max_new_tokens: int | None = None,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int | None = None,
    ) -> Iterator[DecodeStep]:
        """Generate one token at a time with the key/value cache, yielding each step.

        strategy "greedy" takes the most likely token; "sample" draws from the distribution
        after temperature, top-k and top-p filtering (seeded for repeatable runs).
        """
        if self.kind == "encoder":
            raise ValueError("an encoder-only model reads text but does not generate it")
        if strategy not in ("greedy", "sample"):
            raise ValueError(f"unknown decoding strategy {strategy!r}; use 'greedy' or 'sample'")
        if temperature <= 0:
            raise ValueError("temperature must be above 0")
        tgt = self.tgt_tokenizer
        enc = self.encode(text)
        gen = torch.Generator(device="cpu")
        if seed is not None:
            gen.manual_seed(seed)
        cache = self.network.new_cache()
        if self.kind == "encoder-decoder":
            memory, src_valid = self.network.encode(self._tensor(enc.ids))
            prefix = [tgt.bos_id]
        else:
            prefix = list(enc.ids)
        room = self.max_len - len(prefix)
        budget = room if max_new_tokens is None else min(room, max_new_tokens)
        new, out_ids = prefix, []
        for index in range(budget):
            rec = Recorder()
            if self.kind == "encoder-decoder":
                logits = self.network.decode(self._tensor(new), memory, src_valid, rec, cache)
            else:
                logits = self.network.decode(self._tensor(new), rec, cache)
            scores = logits[0, -1].float().cpu()
            probs = torch.softmax(scores / temperature, dim=-1)
            if strategy == "greedy":
                token_id = int(scores.argmax())
            else:
                token_id = int(
                    torch.multinomial(filter_probs(probs, top_k, top_p), 1, generator=gen)
                )
            out_ids.append(token_id)
            attention = {
                kind: torch.stack([w[0, :, -1] for w in ws]).float().cpu()
                for kind, ws in rec.attention.items()
            }
            yield DecodeStep(
                index, tgt.tokens([token_id])[0], token_id, tgt.tokens(out_ids), attention, probs
            )
            if token_id == tgt.eos_id:
                return
            new = [token_id]


def filter_probs(probs: torch.Tensor, top_k: int | None, top_p: float | None) -> torch.Tensor:
    """Keep the top-k tokens and/or the smallest set whose mass reaches top-p; renormalise."""
    keep = torch.ones_like(probs, dtype=torch.bool)
    if top_k is not None and top_k > 0:
        kth = torch.topk(probs, min(top_k, probs.numel())).values[-1]
        keep &= probs >= kth
    if top_p is not None and 0 < top_p < 1:
        sorted_p, order = torch.sort(probs, descending=True)
        # A token stays if the mass before it is still below top_p (the first always stays).
        before = torch.cumsum(sorted_p, 0) - sorted_p
        keep_sorted = before < top_p
        keep &= torch.zeros_like(keep).scatter(0, order, keep_sorted)
    kept = probs * keep
    return kept / kept.sum()
