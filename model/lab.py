"""A loaded model as the pages and notebooks see it: text in, Trace or decoding steps out.

``LabModel`` joins one of our networks to its tokenizer(s). The toy checkpoints and the
mapped pretrained MiniLM are both LabModels, so every page works the same on either.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

import torch

from model.device import resolve_device
from model.trace import Recorder, Trace
from model.transformer import DecoderModel, EncoderDecoderModel, EncoderModel, HeadMask


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
    probs: torch.Tensor  # [vocab] the distribution this token was chosen from (after
    # temperature, and for sampling after top-k / top-p)
    logits: torch.Tensor | None = None  # [vocab] raw scores, before temperature
    beams: list[tuple[list[str], float]] = field(default_factory=list)  # beam search: the
    # live hypotheses after this step, best first, with their summed log-probabilities


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
    ) -> Trace:
        """Run ``text`` through the traced path and return everything it recorded.

        Encoder-decoder and decoder-only models are teacher-forced on ``target`` when given,
        otherwise on their own greedy output, so the picture shows what the model produces.
        """
        enc = self.encode(text)
        if self.kind == "encoder":
            out = self.network(
                self._tensor(enc.ids), trace=True, stages=stages, head_mask=head_mask
            )
            return out.trace(0, enc.tokens, [])
        tgt = self.tgt_tokenizer
        if target is None:
            continuation = [s.token_id for s in self.decode(text, head_mask=head_mask)]
        else:
            continuation = tgt.encode_target(target, self.max_len).ids
        if self.kind == "encoder-decoder":
            # Decoder input is the output shifted right: <bos> y1 .. yn (it predicts y1 .. <eos>).
            dec_in = [tgt.bos_id, *[i for i in continuation if i != tgt.eos_id]][: self.max_len]
            out = self.network(
                self._tensor(enc.ids), self._tensor(dec_in), trace=True, stages=stages,
                head_mask=head_mask,
            )  # fmt: skip
            return out.trace(0, enc.tokens, tgt.tokens(dec_in))
        seq = (enc.ids + [i for i in continuation if i != tgt.eos_id])[: self.max_len]
        out = self.network(self._tensor(seq), trace=True, stages=stages, head_mask=head_mask)
        return out.trace(0, [], tgt.tokens(seq))

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
        trace = self.trace(text, target=target, head_mask=head_mask)
        if trace.logits is None:
            raise ValueError("this model's traces carry no logits to compare")
        offset = 0 if self.kind == "encoder-decoder" else len(self.encode(text).ids) - 1
        free = [s.token for s in self.decode(text, head_mask=head_mask)]
        wanted = [*gold, tgt.eos_id][: len(trace.logits) - offset]
        inputs = trace.tgt_tokens
        steps = []
        for pos, want in enumerate(wanted):
            probs = torch.softmax(trace.logits[offset + pos], dim=-1)
            steps.append(ForcedStep(
                pos, inputs[offset + pos], tgt.tokens([want])[0],
                tgt.tokens([int(probs.argmax())])[0], float(probs[want]),
                free[pos] if pos < len(free) else None,
            ))  # fmt: skip
        return steps

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
        if strategy not in ("greedy", "sample", "beam"):
            raise ValueError(
                f"unknown decoding strategy {strategy!r}; use 'greedy', 'sample' or 'beam'"
            )
        if temperature <= 0:
            raise ValueError("temperature must be above 0")
        if strategy == "beam":
            if beam_width < 1:
                raise ValueError("beam width must be at least 1")
            yield from self._beam(text, beam_width, max_new_tokens, head_mask)
            return
        tgt = self.tgt_tokenizer
        gen = torch.Generator(device="cpu")
        if seed is not None:
            gen.manual_seed(seed)
        cache = self.network.new_cache()
        step_logits, prefix = self._stepper(text, head_mask)
        budget = self._budget(len(prefix), max_new_tokens)
        new, out_ids = prefix, []
        for index in range(budget):
            rec = Recorder()
            scores = step_logits(new, rec, cache)  # [vocab]
            probs = torch.softmax(scores / temperature, dim=-1)
            if strategy == "greedy":
                token_id = int(scores.argmax())
            else:
                probs = filter_probs(probs, top_k, top_p)
                token_id = int(torch.multinomial(probs, 1, generator=gen))
            out_ids.append(token_id)
            yield DecodeStep(
                index, tgt.tokens([token_id])[0], token_id, tgt.tokens(out_ids),
                _last_rows(rec), probs, scores,
            )  # fmt: skip
            if token_id == tgt.eos_id:
                return
            new = [token_id]

    def _budget(self, n_prefix: int, max_new_tokens: int | None) -> int:
        room = self.max_len - n_prefix
        return room if max_new_tokens is None else max(0, min(room, max_new_tokens))

    def _stepper(self, text: str, head_mask: HeadMask | None):
        """(logits of the last position for new ids given a cache, the decoder's first input)."""
        enc = self.encode(text)
        net = self.network
        if self.kind == "encoder-decoder":
            memory, src_valid = net.encode(self._tensor(enc.ids), head_mask=head_mask)

            def step(ids, rec, cache):
                out = net.decode(self._tensor(ids), memory, src_valid, rec, cache, head_mask)
                return out[0, -1].float().cpu()

            return step, [self.tgt_tokenizer.bos_id]

        def step(ids, rec, cache):
            return net.decode(self._tensor(ids), rec, cache, head_mask)[0, -1].float().cpu()

        return step, list(enc.ids)

    def _beam(
        self, text: str, width: int, max_new_tokens: int | None, head_mask: HeadMask | None
    ) -> Iterator[DecodeStep]:
        """Beam search over summed log-probabilities; the steps of the best hypothesis."""
        tgt = self.tgt_tokenizer
        step_logits, prefix = self._stepper(text, head_mask)
        beams: list[tuple[list[int], float, bool]] = [([], 0.0, False)]  # (ids, logp, done)
        history = []
        for _ in range(self._budget(len(prefix), max_new_tokens)):
            candidates = [b for b in beams if b[2]]
            for ids, score, done in beams:
                if done:
                    continue
                # Hypotheses are short here: recompute each from scratch rather than fork caches.
                logp = torch.log_softmax(step_logits(prefix + ids, None, None), dim=-1)
                top = torch.topk(logp, min(width, logp.numel()))
                for lp, tok in zip(top.values.tolist(), top.indices.tolist(), strict=True):
                    candidates.append((ids + [tok], score + lp, tok == tgt.eos_id))
            beams = sorted(candidates, key=lambda b: b[1], reverse=True)[:width]
            history.append([(tgt.tokens(ids), score) for ids, score, _ in beams])
            if all(done for _, _, done in beams):
                break
        best = beams[0][0]
        # Replay the winner with the cache to get each step's attention rows and distribution.
        cache, new = self.network.new_cache(), prefix
        for index, token_id in enumerate(best):
            rec = Recorder()
            scores = step_logits(new, rec, cache)
            yield DecodeStep(
                index, tgt.tokens([token_id])[0], token_id, tgt.tokens(best[: index + 1]),
                _last_rows(rec), torch.softmax(scores, dim=-1), scores,
                history[min(index, len(history) - 1)],
            )  # fmt: skip
            new = [token_id]


@dataclass
class ForcedStep:
    """One position of teacher forcing beside free running (see LabModel.teacher_forcing)."""

    position: int
    true_prefix_end: str  # the last token of the true prefix the model was given
    target: str  # the token it should produce next
    forced: str  # what it predicts given the true prefix
    forced_prob: float  # probability it gives the target token there
    free: str | None  # what it produced at this position on its own (None: it had stopped)


def _last_rows(rec: Recorder) -> dict[str, torch.Tensor]:
    """kind -> [layers, heads, keys]: the attention of the newest query only."""
    return {
        kind: torch.stack([w[0, :, -1] for w in ws]).float().cpu()
        for kind, ws in rec.attention.items()
    }


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
