"""Hugging Face models our code cannot map (GPT-2, BART, T5, ...), run by transformers itself.

``HFLabModel`` offers LabModel's public surface (name, kind, max_len, encode, trace, translate,
decode) over transformers' eager attention, so the attention pages work on any local folder.
Attention stages and LayerNorm statistics need our own code, so its Traces leave them empty.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import torch

from model.hf.common import HFTokenizer, hf_kind, load_tokenizer, read_hf_config, short_error
from model.masks import causal_mask
from model.runtime.decoding import filter_probs
from model.runtime.device import resolve_device
from model.runtime.types import DecodeStep, Encoded, ModelLoadError, decoder_tokens
from model.trace import Trace

# Generation budget when none is given: big models are slow on CPU (a step of Gemma 3 reads
# its 671 MB output head: 0.115 CPU-s), and 32 tokens hold a sentence or two; at 64 Gemma's
# Korean continuation was one 19-token sentence over again, 5 of its 7.3 CPU-s.
DEFAULT_NEW_TOKENS = 32
FALLBACK_MAX_LEN = 512  # for models without absolute positions (T5's are relative)


def _stack(layers) -> torch.Tensor:
    """transformers' per-layer tuple of [1, H, Lq, Lk] -> float32 CPU [layers, H, Lq, Lk]."""
    if not layers or any(a is None for a in layers):
        raise ValueError("this model does not return attention weights")
    return torch.stack([a[0] for a in layers]).float().cpu()


def _last_rows(layers) -> torch.Tensor:
    """The newest query's row of every layer and head: [layers, H, Lk]."""
    return torch.stack([a[0, :, -1] for a in layers]).float().cpu()


def _max_len(config, tokenizer: HFTokenizer) -> int:
    n = None
    for attr in ("max_position_embeddings", "n_positions"):
        value = getattr(config, attr, None)
        if isinstance(value, int) and value > 0:
            n = value
            break
    tok_max = tokenizer.hf.model_max_length
    # Tokenizers without a limit report ~1e30; RoBERTa-like ones are stricter than config.
    if isinstance(tok_max, int) and 0 < tok_max < 1_000_000:
        n = tok_max if n is None else min(n, tok_max)
    return n or FALLBACK_MAX_LEN


def _until_eos(ids: list[int], eos_id: int | None) -> list[int]:
    return ids[: ids.index(eos_id)] if eos_id is not None and eos_id in ids else ids


class HFLabModel:
    """A transformers model (eager attention) behind LabModel's public surface.

    Inference only and shared by every session: each call makes its own inputs and cache,
    and attention comes back from forward, so concurrent calls cannot mix.
    """

    def __init__(
        self,
        name: str,
        hf_model,
        tokenizer: HFTokenizer,
        kind: str,
        max_len: int,
        device: str | torch.device = "auto",
        info: dict | None = None,
    ):
        self.name = name
        self.kind = kind
        self.max_len = max_len
        self.device = resolve_device(device)
        self.hf_model = hf_model.to(self.device).eval()
        self.src_tokenizer = self.tgt_tokenizer = tokenizer
        self.info = {"engine": "transformers", **(info or {})}
        self.config = config = hf_model.config  # transformers' config, not a TransformerConfig
        start = getattr(config, "decoder_start_token_id", None)
        if start is None:
            start = getattr(
                getattr(hf_model, "generation_config", None), "decoder_start_token_id", None
            )
        self.decoder_start_id = start if start is not None else tokenizer.bos_id

    @classmethod
    def from_folder(
        cls, folder: str | Path, device: str | torch.device = "auto", config=None
    ) -> HFLabModel:
        """Load a local folder with eager attention, float32, safetensors only, no remote code."""
        folder = Path(folder)
        config = config if config is not None else read_hf_config(folder)
        kind = hf_kind(config)
        tokenizer = load_tokenizer(folder)
        from transformers import AutoModel, AutoModelForCausalLM, AutoModelForSeq2SeqLM

        auto = {
            "encoder": AutoModel,
            "decoder": AutoModelForCausalLM,
            "encoder-decoder": AutoModelForSeq2SeqLM,
        }[kind]
        try:
            model = auto.from_pretrained(
                str(folder),
                local_files_only=True,
                trust_remote_code=False,
                use_safetensors=True,
                attn_implementation="eager",  # the fused kernels do not return weights
                dtype=torch.float32,
            )
        except Exception as err:  # corrupt or mismatched weights: one readable message
            raise ModelLoadError(
                f"{folder}: the model could not be loaded ({short_error(err)})"
            ) from err
        lm = cls(
            folder.name,
            model,
            tokenizer,
            kind,
            _max_len(config, tokenizer),
            device,
            {"folder": str(folder), "model_type": config.model_type},
        )
        if kind == "encoder-decoder" and lm.decoder_start_id is None:
            raise ModelLoadError(f"{folder}: config.json names no decoder_start_token_id")
        return lm

    @property
    def input_tokenizer(self) -> HFTokenizer:
        return self.src_tokenizer

    @property
    def max_tokens(self) -> int:
        """The longest input it reads: its own position limit (as LabModel.max_tokens)."""
        return self.max_len

    def encode(self, text: str) -> Encoded:
        """How the model reads ``text``: tokens, unknown words, whether it was cut."""
        return self.src_tokenizer.encode(text, self.max_tokens)

    def decoder_tokens(self, text: str, generated: list[int]) -> list[str]:
        """What the decoder reads after generating the ids ``generated``, as tokens people
        read (see types.decoder_tokens)."""
        return decoder_tokens(self, text, generated, self.decoder_start_id)

    def _tensor(self, ids: list[int]) -> torch.Tensor:
        return torch.tensor([ids], dtype=torch.long, device=self.device)

    def _encoded(self, text: str) -> Encoded:
        enc = self.encode(text)
        if not enc.ids:
            raise ValueError("the text is empty: type a sentence first")
        return enc

    def new_token_budget(self, text: str, max_new_tokens: int | None = None) -> int:
        """The most tokens ``decode(text, max_new_tokens=...)`` generates (LabModel's)."""
        return self._budget(len(self._encoded(text).ids), max_new_tokens)

    def _budget(self, n_prompt: int, max_new_tokens: int | None) -> int:
        room = self.max_len - (n_prompt if self.kind == "decoder" else 1)
        return max(0, min(room, DEFAULT_NEW_TOKENS if max_new_tokens is None else max_new_tokens))

    def _generate(self, ids: list[int], max_new_tokens: int | None = None) -> list[int]:
        """transformers' generate, greedy; the new ids only, up to (not with) the first eos."""
        budget = self._budget(len(ids), max_new_tokens)
        if budget == 0:
            return []
        src = self._tensor(ids)
        out = self.hf_model.generate(
            input_ids=src,
            attention_mask=torch.ones_like(src),
            max_new_tokens=budget,
            do_sample=False,
            num_beams=1,
            pad_token_id=self.tgt_tokenizer.pad_id,
        )
        new = out[0, len(ids) :] if self.kind == "decoder" else out[0, 1:]  # drop decoder start
        return _until_eos(new.tolist(), self.tgt_tokenizer.eos_id)

    @torch.inference_mode()
    def trace(
        self,
        text: str,
        target: str | None = None,
        stages: bool = False,
        max_new_tokens: int | None = None,
        predictions: bool = True,
        n_layers: int | None = None,
    ) -> Trace:
        """Attention of every layer and head, teacher-forced on ``target`` or the greedy output.

        ``stages`` and ``predictions`` are accepted for LabModel's signature; transformers
        does not expose the stages, so ``Trace.stages``, ``norms`` and ``residual_norms``
        stay empty, and its traces keep no predictions either way. ``n_layers``: a
        decoder-only trace keeps its first n layers (transformers still runs them all).
        """
        enc = self._encoded(text)
        tok = self.tgt_tokenizer
        if self.kind == "encoder":
            out = self.hf_model(input_ids=self._tensor(enc.ids), output_attentions=True)
            return Trace(enc.tokens, [], {"encoder": _stack(out.attentions)})
        if target is None:
            continuation = self._generate(enc.ids, max_new_tokens)
        else:
            continuation = _until_eos(tok.encode_target(target, self.max_len).ids, tok.eos_id)
        if self.kind == "decoder":
            seq = (enc.ids + continuation)[: self.max_len]
            out = self.hf_model(input_ids=self._tensor(seq), output_attentions=True)
            masks = {"decoder": causal_mask(len(seq))}  # a causal LM: transformers' own rule
            maps = _stack(out.attentions[:n_layers])
            return Trace([], tok.tokens(seq), {"decoder": maps}, masks=masks)
        # Decoder input is the output shifted right: <start> y1 .. yn.
        dec_in = [self.decoder_start_id, *continuation][: self.max_len]
        out = self.hf_model(
            input_ids=self._tensor(enc.ids),
            decoder_input_ids=self._tensor(dec_in),
            output_attentions=True,
        )
        attention = {
            "encoder": _stack(out.encoder_attentions),
            "decoder": _stack(out.decoder_attentions),
            "cross": _stack(out.cross_attentions),
        }
        return Trace(
            enc.tokens, tok.tokens(dec_in), attention, masks={"decoder": causal_mask(len(dec_in))}
        )

    @torch.inference_mode()
    def translate(self, text: str) -> str:
        """Greedy output of transformers' generate (enc-dec), or the continuation (decoder)."""
        if self.kind == "encoder":
            raise ValueError("an encoder-only model reads text but does not generate it")
        return self.tgt_tokenizer.detokenize(self._generate(self._encoded(text).ids))

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
        """One token at a time with transformers' key/value cache, yielding each step's rows.

        The raw model distribution, as LabModel.decode: the generation config's extra rules
        (forced tokens, repetition limits) that ``translate`` follows are not applied here.
        """
        if self.kind == "encoder":
            raise ValueError("an encoder-only model reads text but does not generate it")
        if strategy not in ("greedy", "sample"):
            raise ValueError(f"unknown decoding strategy {strategy!r}; use 'greedy' or 'sample'")
        if temperature <= 0:
            raise ValueError("temperature must be above 0")
        tok = self.tgt_tokenizer
        enc = self._encoded(text)
        gen = torch.Generator(device="cpu")
        if seed is not None:
            gen.manual_seed(seed)
        inputs: dict = {}
        if self.kind == "encoder-decoder":
            src = self._tensor(enc.ids)
            inputs["encoder_outputs"] = self.hf_model.get_encoder()(input_ids=src, return_dict=True)
            new = [self.decoder_start_id]
        else:
            new = list(enc.ids)
        past, out_ids = None, []
        for index in range(self._budget(len(enc.ids), max_new_tokens)):
            key = "decoder_input_ids" if self.kind == "encoder-decoder" else "input_ids"
            out = self.hf_model(
                **inputs,
                **{key: self._tensor(new)},
                past_key_values=past,
                use_cache=True,
                output_attentions=True,
            )
            past = out.past_key_values
            scores = out.logits[0, -1].float().cpu()
            probs = torch.softmax(scores / temperature, dim=-1)
            if strategy == "greedy":
                token_id = int(scores.argmax())
            else:
                token_id = int(
                    torch.multinomial(filter_probs(probs, top_k, top_p), 1, generator=gen)
                )
            out_ids.append(token_id)
            if self.kind == "encoder-decoder":
                attention = {
                    "decoder": _last_rows(out.decoder_attentions),
                    "cross": _last_rows(out.cross_attentions),
                }
            else:
                attention = {"decoder": _last_rows(out.attentions)}
            yield DecodeStep(
                index, tok.tokens([token_id])[0], token_id, tok.tokens(out_ids), attention, probs
            )
            if token_id == tok.eos_id:
                return
            new = [token_id]
