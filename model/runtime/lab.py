"""A loaded model as the pages and notebooks see it: text in, Trace or decoding steps out.

``LabModel`` joins one of our networks to its tokenizer(s). The toy checkpoints and the
mapped pretrained MiniLM are both LabModels, so every page works the same on either.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator

import torch

from model.runtime.decoding import (
    SeqStepFn,
    beam_steps,
    check_options,
    decode_steps,
    one_sequence,
    stepper,
)
from model.runtime.device import resolve_device
from model.runtime.kept import ByteLRU
from model.runtime.types import (
    DecodeStep,
    Encoded,
    ForcedStep,
    Network,
    Tokenizer,
    decoder_tokens,
)
from model.trace import Trace, summed_blocks_for
from model.transformer import HeadMask

READ_BYTES = 4 * 2**20  # the readings LabModel.encode keeps: a 4,096-token one is ~100 KB


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
        default_new_tokens: int | None = None,
        dtype: torch.dtype | None = None,
    ):
        self.name = name
        self.device = resolve_device(device)
        # dtype: the weights' (None = as built); maps are recomputed in float32 whatever it is
        self.network = network.to(self.device, dtype).eval()
        self.src_tokenizer = src_tokenizer
        self.tgt_tokenizer = tgt_tokenizer or src_tokenizer
        self.info = info or {}  # provenance shown in the UI: task, metrics, source folder
        # Generation budget when a call gives none: None = up to max_len (the toy models stop
        # at <eos> long before); pretrained decoders get a fixed number (CPU time).
        self.default_new_tokens = default_new_tokens
        # The last few texts as read (a page reads its text on every rerun: 10% of a click's
        # time at 4,096 tokens); each caller gets its own copy of the lists
        self._read = ByteLRU(READ_BYTES)

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
    def max_tokens(self) -> int:
        """The longest input this model reads: its own position limit (a folder's
        max_position_embeddings), not a fraction of it. Longer text is cut with a notice."""
        return self.network.config.max_len

    @property
    def dtype(self) -> torch.dtype:
        """The weights' dtype (float32 on a CPU unless asked; a folder's own on a GPU)."""
        return next(self.network.parameters()).dtype

    @property
    def input_tokenizer(self) -> Tokenizer:
        """The tokenizer a typed text goes through (the prompt side for decoder-only models)."""
        tok = self.tgt_tokenizer if self.kind == "decoder" else self.src_tokenizer
        assert tok is not None
        return tok

    def encode(self, text: str) -> Encoded:
        """How the model reads ``text``: tokens, unknown words, whether it was cut."""
        found = self._read.get_or_compute(
            text, lambda: self.input_tokenizer.encode(text, self.max_tokens)
        )
        return dataclasses.replace(
            found, ids=list(found.ids), tokens=list(found.tokens), unknown=list(found.unknown)
        )

    def _tensor(self, ids: list[int]) -> torch.Tensor:
        return torch.tensor([ids], dtype=torch.long, device=self.device)

    def head_mask(self, off: Iterable[tuple[str, int, int]] = ()) -> HeadMask:
        """A head mask with the given (kind, layer, head) switched off, all others on."""
        cfg = self.config
        layers = {"encoder": cfg.n_encoder_layers, "decoder": cfg.n_decoder_layers}
        layers["cross"] = cfg.n_decoder_layers if self.kind == "encoder-decoder" else 0
        mask = {
            kind: torch.ones(n, cfg.n_heads, device=self.device)
            for kind, n in layers.items()
            if n
            and (kind != "encoder" or cfg.has_encoder)
            and (kind == "encoder" or cfg.has_decoder)
        }
        for kind, layer, head in off:
            if (
                kind not in mask
                or not (0 <= layer < len(mask[kind]))
                or not 0 <= head < cfg.n_heads
            ):
                raise ValueError(f"this model has no {kind} head {head + 1} in layer {layer + 1}")
            mask[kind][layer, head] = 0.0
        return mask

    @torch.inference_mode()
    def trace(
        self,
        text: str,
        target: str | None = None,
        stages: bool = False,
        head_mask: HeadMask | None = None,
        max_new_tokens: int | None = None,
        predictions: bool = True,
        n_layers: int | None = None,
    ) -> Trace:
        """Run ``text`` through the traced path and return everything it recorded.

        Encoder-decoder and decoder-only models are teacher-forced on ``target`` when given,
        otherwise on their own greedy output (at most ``max_new_tokens``; 0 = the prompt's
        own map), so the picture shows what the model produces. ``predictions=False``: a
        decoder-only model skips its output head, and the trace has no ``predictions`` (for
        a view of the attention alone over a long text); ``n_layers`` then keeps the first n
        layers alone (a view of early layers need not run the rest).
        """
        if n_layers is not None and (self.kind != "decoder" or predictions):
            raise ValueError("n_layers is for a decoder-only trace with predictions=False")
        enc = self.encode(text)
        if not enc.ids:  # a pretrained tokenizer adds no <bos> of its own to an empty text
            raise ValueError("the text is empty: type a sentence first")
        if self.kind == "encoder":
            out = self.network(
                self._tensor(enc.ids),
                trace=True,
                stages=stages,
                head_mask=head_mask,
                summed_blocks=summed_blocks_for(len(enc.ids), self.device),
            )
            return out.trace(0, enc.tokens, [])
        tgt = self.tgt_tokenizer
        if target is None:
            continuation = [
                s.token_id
                for s in self.decode(text, head_mask=head_mask, max_new_tokens=max_new_tokens)
            ]
        else:
            continuation = tgt.encode_target(target, self.max_len).ids
        if self.kind == "encoder-decoder":
            # Decoder input is the output shifted right: <bos> y1 .. yn (it predicts y1 .. <eos>).
            dec_in = [tgt.bos_id, *[i for i in continuation if i != tgt.eos_id]][: self.max_len]
            out = self.network(
                self._tensor(enc.ids),
                self._tensor(dec_in),
                trace=True,
                stages=stages,
                head_mask=head_mask,
                summed_blocks=summed_blocks_for(max(len(enc.ids), len(dec_in)), self.device),
            )
            return out.trace(0, enc.tokens, tgt.tokens(dec_in), dec_in)
        seq = (enc.ids + [i for i in continuation if i != tgt.eos_id])[: self.max_len]
        out = self.network(
            self._tensor(seq),
            trace=True,
            stages=stages,
            head_mask=head_mask,
            summed_blocks=summed_blocks_for(len(seq), self.device),
            logits=predictions,
            n_layers=n_layers,
        )
        return out.trace(0, [], tgt.tokens(seq), seq)

    @torch.inference_mode()
    def teacher_forcing(
        self, text: str, target: str, head_mask: HeadMask | None = None
    ) -> list[ForcedStep]:
        """Predictions with the true prefix (teacher forcing) beside the model's own output.

        Training always shows the model the true prefix; generation feeds it its own
        guesses, so one early mistake can change everything after it.
        """
        if self.kind == "encoder":
            raise ValueError("an encoder-only model reads text but does not generate it")
        tgt = self.tgt_tokenizer
        gold = [i for i in tgt.encode_target(target, self.max_len).ids if i != tgt.eos_id]
        if not gold:
            raise ValueError("the target has no tokens this model knows")
        enc = self.encode(text)
        if self.kind == "encoder-decoder":
            seq = [tgt.bos_id, *gold][: self.max_len]
            logits = self.network(self._tensor(enc.ids), self._tensor(seq), head_mask=head_mask)
            offset = 0
        else:
            seq = (enc.ids + gold)[: self.max_len]
            logits = self.network(self._tensor(seq), head_mask=head_mask)
            offset = len(enc.ids) - 1
        logits = logits.logits[0]  # the fast path: only logits are read here  [L, vocab]
        free = [s.token for s in self.decode(text, head_mask=head_mask)]
        wanted = [*gold, tgt.eos_id][: len(logits) - offset]
        inputs = tgt.tokens(seq)
        steps = []
        for pos, want in enumerate(wanted):
            probs = torch.softmax(logits[offset + pos].float(), dim=-1)
            steps.append(
                ForcedStep(
                    pos,
                    inputs[offset + pos],
                    tgt.tokens([want])[0],
                    tgt.tokens([int(probs.argmax())])[0],
                    float(probs[want]),
                    free[pos] if pos < len(free) else None,
                )
            )
        return steps

    @property
    def has_chat_template(self) -> bool:
        """Whether ``chat_prompt`` can frame a question (a decoder whose tokenizer has a chat
        template); cheap, unlike the rendering itself."""
        return self.kind == "decoder" and bool(
            getattr(self.input_tokenizer, "has_chat_template", False)
        )

    def chat_prompt(self, question: str) -> str | None:
        """The text a chat-tuned decoder expects for ``question`` (its own template, special
        tokens and all), or None for a model without a chat template."""
        if self.kind != "decoder":
            return None
        make = getattr(self.input_tokenizer, "chat_prompt", None)
        return make(question) if make is not None else None

    def decoder_tokens(self, text: str, generated: list[int]) -> list[str]:
        """What the decoder reads after generating the ids ``generated``, as tokens people
        read (see types.decoder_tokens)."""
        return decoder_tokens(self, text, generated, self.tgt_tokenizer.bos_id)

    def translate(self, text: str, head_mask: HeadMask | None = None) -> str:
        """Greedy output as text (encoder-decoder), or the greedy continuation (decoder-only)."""
        ids = [s.token_id for s in self.decode(text, head_mask=head_mask)]
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
        beam_width: int = 4,
        head_mask: HeadMask | None = None,
    ) -> Iterator[DecodeStep]:
        """Generate one token at a time, yielding each step.

        "greedy" takes the most likely token; "sample" draws from the distribution after
        temperature, top-k and top-p filtering (seeded for repeatable runs); both use the
        key/value cache. "beam" keeps the ``beam_width`` most likely hypotheses and yields
        the steps of the best one, each with the live beams at that step.
        """
        if self.kind == "encoder":
            raise ValueError("an encoder-only model reads text but does not generate it")
        check_options(strategy, temperature, beam_width)
        step, prefix = self._stepper(text, head_mask)
        tgt = self.tgt_tokenizer
        budget = self._budget(len(prefix), max_new_tokens)
        if strategy == "beam":
            yield from beam_steps(
                step, prefix, self.network.new_cache, budget, tgt.tokens, tgt.eos_id, beam_width
            )
            return
        yield from decode_steps(
            step,
            prefix,
            self.network.new_cache,
            budget,
            tgt.tokens,
            tgt.eos_id,
            strategy,
            temperature,
            top_k,
            top_p,
            seed,
        )

    def new_token_budget(self, text: str, max_new_tokens: int | None = None) -> int:
        """The most tokens ``decode(text, max_new_tokens=...)`` generates (it stops sooner at
        <eos>): known before decoding, so a page can say "up to" while the run goes on."""
        n_prefix = 1 if self.kind == "encoder-decoder" else len(self.encode(text).ids)  # <bos>
        return self._budget(n_prefix, max_new_tokens)

    def _budget(self, n_prefix: int, max_new_tokens: int | None) -> int:
        room = self.max_len - n_prefix
        if max_new_tokens is None:
            max_new_tokens = self.default_new_tokens
        return room if max_new_tokens is None else max(0, min(room, max_new_tokens))

    def _stepper(self, text: str, head_mask: HeadMask | None) -> tuple[SeqStepFn, list[int]]:
        """(logits of the last position for new ids given a cache, the decoder's first input)."""
        enc = self.encode(text)
        if not enc.ids:  # a pretrained tokenizer adds no <bos> of its own to an empty text
            raise ValueError("the text is empty: type a sentence first")
        ids = self._tensor(enc.ids)
        step, prefix = stepper(self.network, ids, self.tgt_tokenizer.bos_id, head_mask)
        return one_sequence(step, self.device), prefix[0].tolist()
