"""Encoder-decoder, encoder-only and decoder-only Transformers, all from the same blocks.

Every model has one forward, always on torch's fused attention kernel; the traced path
(trace=True) also returns a Recorder with each layer's queries and keys (from which any
head's map is recomputed exactly, on demand), LayerNorm statistics and residual norms.
Tests hold the recomputed maps equal to the explicit softmax and to transformers' own.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
from torch import nn

from model.config import TransformerConfig
from model.layers import DecoderLayer, EncoderLayer, make_norm
from model.masks import MaskSpec, mask_spec
from model.positional import build_positional
from model.trace import Recorder, Trace

# kind ("encoder" | "decoder" | "cross") -> [layers, H], or [layers, B, H] a sentence each
HeadMask = dict[str, torch.Tensor]


class Embeddings(nn.Module):
    """Token embedding (x √d_model, paper §3.4) + positions (+ token types, LayerNorm for BERT)."""

    def __init__(self, vocab_size: int, cfg: TransformerConfig):
        super().__init__()
        self.max_len = cfg.max_len
        self.token = nn.Embedding(vocab_size, cfg.d_model)
        self.position = build_positional(cfg.positions, cfg.max_len, cfg.d_model)
        self.token_type = (
            nn.Embedding(cfg.type_vocab_size, cfg.d_model) if cfg.type_vocab_size else None
        )
        self.norm = (
            nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps) if cfg.embedding_norm else None
        )
        self.dropout = nn.Dropout(cfg.dropout)
        self.scale = math.sqrt(cfg.d_model) if cfg.scale_embedding else 1.0

    def forward(
        self, ids: torch.Tensor, offset: int = 0, token_type_ids: torch.Tensor | None = None
    ) -> torch.Tensor:  # [B, L] -> [B, L, D]
        n = ids.shape[1]
        if offset + n > self.max_len:
            raise ValueError(f"{offset + n} tokens exceed this model's limit of {self.max_len}")
        positions = torch.arange(offset, offset + n, device=ids.device).unsqueeze(0)  # [1, L]
        x = self.token(ids)
        if self.scale != 1.0:
            x = x * scale_in(self.scale, x.dtype)
        if self.position is not None:  # absolute schemes; RoPE / ALiBi act inside attention
            x = x + self.position(positions)
        if self.token_type is not None:
            types = torch.zeros_like(ids) if token_type_ids is None else token_type_ids
            x = x + self.token_type(types)
        if self.norm is not None:
            x = self.norm(x)
        return self.dropout(x)


@functools.lru_cache(maxsize=32)
def scale_in(scale: float, dtype: torch.dtype) -> float:
    """``scale`` rounded to ``dtype``, the factor the embeddings are multiplied by in their
    own dtype, as transformers' Gemma does (√640 is 25.25 in bfloat16, not 25.298)."""
    return float(torch.tensor(scale, dtype=dtype))


def _layer_heads(head_mask: HeadMask | None, i: int) -> dict[str, torch.Tensor] | None:
    return None if not head_mask else {kind: m[i] for kind, m in head_mask.items()}


class Encoder(nn.Module):
    """N encoder layers; pre-LN adds the final LayerNorm that post-LN does not need."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.n_encoder_layers))
        pre = cfg.norm_placement == "pre"
        self.final_norm = make_norm(cfg) if pre else None

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None,
        rec: Recorder | None = None,
        head_mask: HeadMask | None = None,
    ) -> torch.Tensor:
        if rec is not None:
            rec.add_residual("encoder", x)
        for i, layer in enumerate(self.layers):
            x = layer(x, mask, rec, f"encoder.{i}", _layer_heads(head_mask, i))
            if rec is not None:
                rec.add_residual("encoder", x)
        if self.final_norm is not None:
            h = self.final_norm(x)
            if rec is not None:
                rec.add_norm("encoder.final", x, h)
            x = h
        return x


class Decoder(nn.Module):
    """N decoder layers, with cross-attention when an encoder feeds them."""

    def __init__(self, cfg: TransformerConfig, cross: bool):
        super().__init__()
        self.layers = nn.ModuleList(
            DecoderLayer(cfg, cross, i) for i in range(cfg.n_decoder_layers)
        )
        pre = cfg.norm_placement == "pre"
        self.final_norm = make_norm(cfg) if pre else None

    def forward(
        self,
        y: torch.Tensor,
        self_mask: torch.Tensor | None,
        memory: torch.Tensor | None = None,
        cross_mask: torch.Tensor | None = None,
        rec: Recorder | None = None,
        cache: dict | None = None,
        head_mask: HeadMask | None = None,
        n_layers: int | None = None,
    ) -> torch.Tensor:
        """``n_layers``: the first n layers alone, without the final norm (a view that reads
        only early layers; the output head needs them all)."""
        if rec is not None:
            rec.add_residual("decoder", y)
        layers = self.layers if n_layers is None else self.layers[:n_layers]
        for i, layer in enumerate(layers):
            layer_cache = None if cache is None else cache["layers"][i]
            y = layer(
                y,
                self_mask,
                memory,
                cross_mask,
                rec,
                f"decoder.{i}",
                layer_cache,
                _layer_heads(head_mask, i),
            )
            if rec is not None:
                rec.add_residual("decoder", y)
        if self.final_norm is not None and len(layers) == len(self.layers):
            h = self.final_norm(y)
            if rec is not None:
                rec.add_norm("decoder.final", y, h)
            y = h
        return y


@dataclass
class ModelOutput:
    logits: torch.Tensor | None  # [B, L, vocab]; None for an encoder without output head
    record: Recorder | None = None  # only on the traced path

    def trace(
        self,
        index: int,
        src_tokens: list[str],
        tgt_tokens: list[str],
        ids: list[int] | None = None,
    ) -> Trace:
        """Sentence ``index`` of the batch as a Trace (needs trace=True); ``ids``: the
        tokens the output positions read, for each one's own probability."""
        if self.record is None:
            raise ValueError("this forward pass was not traced; call it with trace=True")
        return self.record.to_trace(index, src_tokens, tgt_tokens, self.logits, ids)


class _Model(nn.Module):
    """Shared plumbing: init, output head, device, key/value cache."""

    config: TransformerConfig

    def _output_head(self, embed: Embeddings, vocab_in: int) -> nn.Linear:
        head = nn.Linear(self.config.d_model, self.config.tgt_vocab_size, bias=False)
        if self.config.tie_embeddings and vocab_in == self.config.tgt_vocab_size:
            head.weight = embed.token.weight  # one matrix reads and writes tokens (paper §3.4)
        return head

    def _init_weights(self) -> None:
        d = self.config.d_model
        for name, p in self.named_parameters():
            if p.dim() < 2:
                continue  # LayerNorm and biases keep PyTorch's defaults (1, 0)
            if "position.embedding" in name:
                nn.init.normal_(p, std=0.02)
            elif ".token" in name or name.startswith("token"):
                # Scaled by √d_model on the way in, so unit-variance inputs to the first layer.
                nn.init.normal_(p, std=d**-0.5)
            else:
                nn.init.xavier_uniform_(p)

    def valid(self, ids: torch.Tensor) -> torch.Tensor:
        """True where ``ids`` holds a real token, False at padding (none without a pad id)."""
        if self.config.pad_id is None:
            return torch.ones_like(ids, dtype=torch.bool)
        return ids != self.config.pad_id

    def _self_mask(self, ids: torch.Tensor) -> MaskSpec:
        """Self-attention over ``ids`` (encoder): padding hidden on both sides."""
        valid = None if self.config.pad_id is None else self.valid(ids)
        return mask_spec(valid, valid, lengths=(ids.shape[1], ids.shape[1]))

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def new_cache(self) -> dict:
        """Empty key/value cache for incremental decoding; owned by the caller, one per sequence batch."""
        return {"length": 0, "valid": None, "layers": [{} for _ in self.decoder.layers]}

    def _decoder_masks(
        self,
        ids: torch.Tensor,
        cache: dict | None,
        src_valid: torch.Tensor | None,
        spec: bool = False,
    ) -> tuple[MaskSpec | torch.Tensor, MaskSpec | torch.Tensor | None, int]:
        """Masked self-attention (causal + padding + the sliding window) and cross-attention
        masks for ``ids``: MaskSpecs with ``spec``, else bool [B, 1, Lq, Lk] tensors."""
        padded = self.config.pad_id is not None
        valid = self.valid(ids) if padded else None
        offset = 0 if cache is None else cache["length"]
        key_valid = valid
        if cache is not None:
            if cache["valid"] is not None and padded:
                key_valid = torch.cat([cache["valid"], valid], dim=1)
            cache["valid"], cache["length"] = key_valid, offset + ids.shape[1]
        n = ids.shape[1]
        # one window for every layer (Mistral); a layer with its own narrows this itself
        window = self.config.shared_window
        self_mask = mask_spec(valid, key_valid, True, offset, window, (n, offset + n))
        cross_mask = None
        if src_valid is not None:
            src = src_valid if padded else None
            cross_mask = mask_spec(valid, src, lengths=(n, src_valid.shape[1]))
        if spec:
            return self_mask, cross_mask, offset
        dense = self_mask.dense(device=ids.device)
        if dense is None:
            dense = torch.ones(1, 1, n, offset + n, dtype=torch.bool, device=ids.device)
        return dense, None if cross_mask is None else cross_mask.dense(device=ids.device), offset


class EncoderDecoderModel(_Model):
    """The paper's Transformer: encoder self-attention, decoder masked self- and cross-attention."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.config = cfg
        self.src_embed = Embeddings(cfg.src_vocab_size, cfg)
        self.tgt_embed = (
            self.src_embed if cfg.share_src_tgt_embeddings else Embeddings(cfg.tgt_vocab_size, cfg)
        )
        self.encoder = Encoder(cfg)
        self.decoder = Decoder(cfg, cross=True)
        self.generator = self._output_head(self.tgt_embed, cfg.tgt_vocab_size)
        self._init_weights()

    def encode(
        self, src_ids: torch.Tensor, rec: Recorder | None = None, head_mask: HeadMask | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Source ids [B, Ls] -> (memory [B, Ls, D], source validity [B, Ls])."""
        valid = self.valid(src_ids)
        memory = self.encoder(self.src_embed(src_ids), self._self_mask(src_ids), rec, head_mask)
        return memory, valid

    def decode(
        self,
        tgt_ids: torch.Tensor,
        memory: torch.Tensor,
        src_valid: torch.Tensor,
        rec: Recorder | None = None,
        cache: dict | None = None,
        head_mask: HeadMask | None = None,
        last_only: bool = False,
    ) -> torch.Tensor:
        """Decoder input ids [B, Lt] (shifted right, <bos> first) -> logits [B, Lt, vocab].

        With a cache, ``tgt_ids`` are only the new tokens; earlier keys/values are reused.
        ``last_only``: the logits of the last position alone [B, 1, vocab], all a decoding
        step reads (the output head is a large share of a step's work).
        """
        self_mask, cross_mask, offset = self._decoder_masks(tgt_ids, cache, src_valid, spec=True)
        y = self.decoder(
            self.tgt_embed(tgt_ids, offset), self_mask, memory, cross_mask, rec, cache, head_mask
        )
        return self.generator(y[:, -1:] if last_only else y)

    def forward(
        self,
        src_ids: torch.Tensor,
        tgt_ids: torch.Tensor,
        *,
        trace: bool = False,
        stages: bool = False,
        head_mask: HeadMask | None = None,
        summed_blocks: int = 0,
    ) -> ModelOutput:
        rec = Recorder(summed_blocks=summed_blocks, stages=stages) if trace or stages else None
        memory, src_valid = self.encode(src_ids, rec, head_mask)
        return ModelOutput(self.decode(tgt_ids, memory, src_valid, rec, None, head_mask), rec)


class EncoderModel(_Model):
    """Encoder-only (BERT-like): every token attends every token; a token-level output head."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.config = cfg
        self.embed = Embeddings(cfg.src_vocab_size, cfg)
        self.encoder = Encoder(cfg)
        self.head = self._output_head(self.embed, cfg.src_vocab_size) if cfg.output_head else None
        self._init_weights()

    def encode(
        self,
        ids: torch.Tensor,
        rec: Recorder | None = None,
        head_mask: HeadMask | None = None,
        token_type_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Ids [B, L] -> hidden states [B, L, D]."""
        x = self.embed(ids, token_type_ids=token_type_ids)
        return self.encoder(x, self._self_mask(ids), rec, head_mask)

    def forward(
        self,
        ids: torch.Tensor,
        *,
        token_type_ids: torch.Tensor | None = None,
        trace: bool = False,
        stages: bool = False,
        head_mask: HeadMask | None = None,
        summed_blocks: int = 0,
    ) -> ModelOutput:
        rec = Recorder(summed_blocks=summed_blocks, stages=stages) if trace or stages else None
        hidden = self.encode(ids, rec, head_mask, token_type_ids)  # [B, L, D]
        return ModelOutput(None if self.head is None else self.head(hidden), rec)


class DecoderModel(_Model):
    """Decoder-only (GPT-like): masked self-attention only, next-token output head."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.config = cfg
        self.embed = Embeddings(cfg.tgt_vocab_size, cfg)
        self.decoder = Decoder(cfg, cross=False)
        self.head = self._output_head(self.embed, cfg.tgt_vocab_size)
        self._init_weights()

    def decode(
        self,
        ids: torch.Tensor,
        rec: Recorder | None = None,
        cache: dict | None = None,
        head_mask: HeadMask | None = None,
        last_only: bool = False,
    ) -> torch.Tensor:
        """Ids [B, L] -> logits [B, L, vocab]; with a cache only the new ids are passed.
        ``last_only``: the last position's logits alone [B, 1, vocab]: a prompt's other
        positions through a 262k-token head (Gemma 3) cost a step's worth each, unread."""
        y = self.hidden(ids, rec, cache, head_mask)
        return self.head(y[:, -1:] if last_only else y)

    def hidden(
        self,
        ids: torch.Tensor,
        rec: Recorder | None = None,
        cache: dict | None = None,
        head_mask: HeadMask | None = None,
        n_layers: int | None = None,
    ) -> torch.Tensor:
        """Ids [B, L] -> the decoder stack's output [B, L, d_model], before the output head;
        ``n_layers``: the output of the first n layers instead (Decoder.forward)."""
        self_mask, _, offset = self._decoder_masks(ids, cache, None, spec=True)
        y = self.embed(ids, offset)
        return self.decoder(y, self_mask, None, None, rec, cache, head_mask, n_layers)

    def forward(
        self,
        ids: torch.Tensor,
        *,
        trace: bool = False,
        stages: bool = False,
        head_mask: HeadMask | None = None,
        summed_blocks: int = 0,
        logits: bool = True,
        n_layers: int | None = None,
    ) -> ModelOutput:
        """``logits=False``: the record alone, no output head (Gemma 3's 262k-token head over
        1,024 positions is more work than its 18 layers, and 1 GiB of float32 logits).
        ``n_layers`` (only with ``logits=False``): the record of the first n layers alone."""
        if n_layers is not None and logits:
            raise ValueError("the output head reads the last layer: n_layers needs logits=False")
        rec = Recorder(summed_blocks=summed_blocks, stages=stages) if trace or stages else None
        if not logits:
            self.hidden(ids, rec, None, head_mask, n_layers)
            return ModelOutput(None, rec)
        return ModelOutput(self.decode(ids, rec, None, head_mask), rec)


MODEL_CLASSES = {
    "encoder-decoder": EncoderDecoderModel,
    "encoder": EncoderModel,
    "decoder": DecoderModel,
}


def build_model(cfg: TransformerConfig) -> EncoderDecoderModel | EncoderModel | DecoderModel:
    """A fresh, randomly initialised model of the config's kind."""
    return MODEL_CLASSES[cfg.kind](cfg)
