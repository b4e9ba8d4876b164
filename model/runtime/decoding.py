"""Decoding strategies in one place: greedy, sampling and beam search, with the key/value cache.

Everything here drives a *step function*: new token ids in, the logits of the last position
out, with an optional Recorder (to collect the attention rows of the new query) and cache.
``stepper`` builds it for an encoder-decoder or a decoder-only network, batched or not, so
training's evaluation (``greedy_decode``) and the pages' one-token-at-a-time decoding
(``decode_steps``, ``beam_steps``) run the same code. ``DecodingRun`` keeps one such run
decoded only as far as somebody has read it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F

from model.runtime.types import DecodeStep
from model.trace import Recorder
from model.transformer import DecoderModel, EncoderDecoderModel, HeadMask

STRATEGIES = ("greedy", "sample", "beam")

# (new ids [B, n], recorder or None, cache or None) -> logits of the last position [B, vocab]
StepFn = Callable[[torch.Tensor, Recorder | None, dict | None], torch.Tensor]
# the same for one sequence: (new ids, recorder or None, cache or None) -> logits [vocab]
SeqStepFn = Callable[[list[int], Recorder | None, dict | None], torch.Tensor]


def stepper(
    network: EncoderDecoderModel | DecoderModel,
    ids: torch.Tensor,
    bos_id: int | None,
    head_mask: HeadMask | None = None,
) -> tuple[StepFn, torch.Tensor]:
    """(the step function, the decoder's first input [B, P]) for source or prompt ``ids``.

    Encoder-decoder: ``ids`` is the source [B, Ls], encoded once; the decoder starts from
    <bos>. Decoder-only: ``ids`` is the prompt [B, Lp] (no padding), continued in place.
    Only the last position goes through the output head: the prompt's other rows are unread.
    """
    if isinstance(network, EncoderDecoderModel):
        memory, src_valid = network.encode(ids, head_mask=head_mask)

        def step(new, rec, cache):
            logits = network.decode(new, memory, src_valid, rec, cache, head_mask, last_only=True)
            return logits[:, -1]

        return step, torch.full((ids.shape[0], 1), bos_id, dtype=torch.long, device=ids.device)

    def step(new, rec, cache):
        return network.decode(new, rec, cache, head_mask, last_only=True)[:, -1]

    return step, ids


@torch.no_grad()
def greedy_decode(
    model: EncoderDecoderModel | DecoderModel,
    ids: torch.Tensor,
    bos_id: int,
    eos_id: int,
    max_new_tokens: int,
    use_cache: bool = True,
    cache: dict | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Batched greedy decoding: the most likely next token until <eos> or ``max_new_tokens``.

    Returns (generated ids [B, T], the logits that chose each one [B, T, vocab]).
    Without the cache the whole prefix is recomputed each step: slower, same answer.
    ``cache``: an empty ``model.new_cache()`` to fill, so the caller can look at it afterwards.
    """
    was_training = model.training
    model.eval()
    b = ids.shape[0]
    step, prefix = stepper(model, ids, bos_id)
    if not use_cache:
        cache = None
    elif cache is None:
        cache = model.new_cache()
    new = prefix
    generated, chosen_logits = [], []
    done = torch.zeros(b, dtype=torch.bool, device=ids.device)
    for _ in range(max_new_tokens):
        logits = step(new if use_cache else prefix, None, cache)  # [B, vocab]
        token = logits.argmax(dim=-1)
        pad = model.config.pad_id if model.config.pad_id is not None else eos_id
        token = torch.where(done, torch.full_like(token, pad), token)
        generated.append(token)
        chosen_logits.append(logits)
        done |= token == eos_id
        new = token[:, None]
        prefix = torch.cat([prefix, new], dim=1)
        if bool(done.all()):
            break
    model.train(was_training)
    return torch.stack(generated, dim=1), torch.stack(chosen_logits, dim=1)


def check_options(strategy: str, temperature: float, beam_width: int) -> None:
    """Refuse impossible settings with a message a person can act on."""
    if strategy not in STRATEGIES:
        raise ValueError(
            f"unknown decoding strategy {strategy!r}; use 'greedy', 'sample' or 'beam'"
        )
    if temperature <= 0:
        raise ValueError("temperature must be above 0")
    if strategy == "beam" and beam_width < 1:
        raise ValueError("beam width must be at least 1")


def decode_steps(
    step: SeqStepFn,
    prefix: list[int],
    new_cache: Callable[[], dict],
    budget: int,
    tokens_of: Callable[[list[int]], list[str]],
    eos_id: int | None,
    strategy: str = "greedy",
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
) -> Iterator[DecodeStep]:
    """Greedy or sampled decoding of one sequence, one DecodeStep per token, cache on.

    "greedy" takes the most likely token; "sample" draws from the distribution after
    temperature, top-k and top-p filtering (seeded for repeatable runs).
    """
    gen = torch.Generator(device="cpu")
    if seed is not None:
        gen.manual_seed(seed)
    cache = new_cache()
    new, out_ids = prefix, []
    for index in range(budget):
        rec = Recorder(statistics=False)  # the attention rows alone (last_rows)
        scores = step(new, rec, cache)  # [vocab]
        probs = torch.softmax(scores / temperature, dim=-1)
        if strategy == "greedy":
            token_id = int(scores.argmax())
        else:
            probs = filter_probs(probs, top_k, top_p)
            token_id = int(torch.multinomial(probs, 1, generator=gen))
        out_ids.append(token_id)
        yield DecodeStep(
            index,
            tokens_of([token_id])[0],
            token_id,
            tokens_of(out_ids),
            last_rows(rec),
            probs,
            scores,
        )
        if token_id == eos_id:
            return
        new = [token_id]


def beam_steps(
    step: SeqStepFn,
    prefix: list[int],
    new_cache: Callable[[], dict],
    budget: int,
    tokens_of: Callable[[list[int]], list[str]],
    eos_id: int | None,
    width: int,
) -> Iterator[DecodeStep]:
    """Beam search over summed log-probabilities; the steps of the best hypothesis."""
    beams: list[tuple[list[int], float, bool]] = [([], 0.0, False)]  # (ids, logp, done)
    history = []
    for _ in range(budget):
        candidates = [b for b in beams if b[2]]
        for ids, score, done in beams:
            if done:
                continue
            # Hypotheses are short here: recompute each from scratch rather than fork caches.
            logp = torch.log_softmax(step(prefix + ids, None, None), dim=-1)
            top = torch.topk(logp, min(width, logp.numel()))
            for lp, tok in zip(top.values.tolist(), top.indices.tolist(), strict=True):
                candidates.append((ids + [tok], score + lp, tok == eos_id))
        beams = sorted(candidates, key=lambda b: b[1], reverse=True)[:width]
        history.append([(tokens_of(ids), score) for ids, score, _ in beams])
        if all(done for _, _, done in beams):
            break
    best = beams[0][0]
    # Replay the winner with the cache to get each step's attention rows and distribution.
    cache, new = new_cache(), prefix
    for index, token_id in enumerate(best):
        rec = Recorder(statistics=False)  # the attention rows alone (last_rows)
        scores = step(new, rec, cache)
        yield DecodeStep(
            index,
            tokens_of([token_id])[0],
            token_id,
            tokens_of(best[: index + 1]),
            last_rows(rec),
            torch.softmax(scores, dim=-1),
            scores,
            history[min(index, len(history) - 1)],
        )
        new = [token_id]


def one_sequence(step: StepFn, device: torch.device) -> SeqStepFn:
    """The batched step function narrowed to one sequence: ids -> logits [vocab] on the CPU."""

    def run(ids: list[int], rec: Recorder | None, cache: dict | None) -> torch.Tensor:
        new = torch.tensor([ids], dtype=torch.long, device=device)
        return step(new, rec, cache)[0].float().cpu()

    return run


def last_rows(rec: Recorder) -> dict[str, torch.Tensor]:
    """kind -> [layers, heads, keys]: the attention of the newest query only. A sliding
    layer's cache holds only its window: the keys it let go get weight 0, as its mask
    gives them, so every layer's row spans every key."""
    out = {}
    for kind, n in rec.layers.items():
        rows = [rec.weights(kind, i, rows=[-1])[:, 0] for i in range(n)]
        keys = max(r.shape[-1] for r in rows)
        out[kind] = torch.stack([F.pad(r, (keys - r.shape[-1], 0)) for r in rows]).cpu()
    return out


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


class DecodingRun:
    """One decoding run, decoded only as far as it has been read: step ``n`` costs ``n``
    steps, not the whole continuation (SmolLM2's 30 steps were ~2 CPU-s before a page could
    draw step 0).

    ``steps`` is the generator ``LabModel.decode`` returns, the one source of the steps. It
    keeps the run's key/value cache and the sampler's seeded generator between reads, so
    reading further continues the run where it stopped, and the steps are exactly those of
    ``list(steps)``: the same tokens, probabilities and attention rows. Every reader shares
    the run (two sessions on one sentence, a page and the thread decoding ahead): one of them
    decodes at a time, under a lock, and what was decoded is kept for all.

    ``budget``: the most steps the run may take; it ends sooner at ``eos_id``. ``total`` is
    None until the run has ended, so a page never states a length it does not know.
    ``changed(run)`` is called after the run grew or failed (its keeper counts it again).
    A byte count of the run (``kept.nbytes``) sees its steps; an unfinished run's key/value
    cache lives in the generator, uncounted, and goes when the run ends.
    """

    def __init__(
        self,
        steps: Iterator[DecodeStep],
        budget: int,
        eos_id: int | None,
        changed: Callable[[DecodingRun], None] | None = None,
    ):
        self.budget = budget
        self.eos_id = eos_id
        self.changed = changed
        self._source: Iterator[DecodeStep] | None = steps if budget > 0 else None
        self._steps: list[DecodeStep] = []
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._ahead = False  # whether a thread has taken on decoding the rest

    @property
    def done(self) -> bool:
        """Whether the run has ended (at <eos> or its budget) and every step is decoded."""
        return self._source is None and self.error is None

    @property
    def decoded(self) -> int:
        return len(self._steps)

    @property
    def total(self) -> int | None:
        """How many steps the run has: known once it has ended, None before."""
        return len(self._steps) if self.done else None

    def upto(self, n: int) -> list[DecodeStep]:
        """The first ``n`` steps (all of them if the run ends sooner), decoding the missing
        ones now. A failure is raised here and to every later reader: the run cannot resume."""
        if n <= len(self._steps):  # decoded before: no wait for a reader decoding further
            return self._steps[:n]
        grew = False
        try:
            with self._lock:
                if self.error is not None:
                    raise self.error
                while len(self._steps) < n and self._source is not None:
                    try:
                        step = next(self._source, None)
                    except Exception as err:
                        self.error, self._source, grew = err, None, True
                        raise
                    if step is not None:
                        self._steps.append(step)
                        grew = True
                    if step is None or self._ended(step):
                        self._source = None  # lets go of the cache: the run is whole
                return self._steps[:n]
        finally:
            if grew and self.changed is not None:
                self.changed(self)

    def all(self) -> list[DecodeStep]:
        """Every step of the run, decoding the rest now."""
        return self.upto(self.budget)

    def _ended(self, step: DecodeStep) -> bool:
        # known without asking the generator for one more step (which returns at once)
        return step.token_id == self.eos_id or len(self._steps) >= self.budget

    def take_ahead(self) -> bool:
        """True once, for the one thread that will decode the rest ahead of the readers."""
        with self._lock:
            taken, self._ahead = self._ahead, True
        return not taken and not self.done and self.error is None

    def decode_next(self) -> bool:
        """Decode one more step; whether the run goes on after it."""
        self.upto(self.decoded + 1)
        return not self.done
