"""What a traced forward pass saw: collected per call, then cut per sentence into a Trace.

The Recorder lives for one forward call only (never on a module), so concurrent sessions
sharing one cached model cannot see each other's sentences. It keeps what attention is made
of (each layer's queries and keys, the mask's rule), never the [L, L] maps: a map is one
head's softmax(q kᵀ/√d_k + mask), cheap to recompute for the window a view draws, while
every layer's and head's maps grow with L² (137 GB at 8,192 tokens of a 1B model).
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import torch

from model.attention import (
    QK,
    AttentionStages,
    RowStatistics,
    attention_weights,
    block_edges,
    row_statistics,
    sum_blocks,
)
from model.masks import MaskSpec, block_owner
from model.positional import alibi_bias

KINDS = ("encoder", "decoder", "cross")
STAGE_NAMES = ("scores", "scaled", "masked", "weights")
# Most bytes ``Trace.attention`` / ``Trace.stages`` may stack (every layer and head's whole
# map); longer inputs read maps through ``attention_map`` / ``attention_overview``. None:
# $ATTENTION_LAB_STACK_BUDGET (bytes) when set, else 1 GiB.
STACK_BUDGET: int | None = None
TOP_K = 10  # predictions a Trace keeps per position (never the whole vocabulary)


# A pass over more tokens than this on a CPU also records block sums (Recorder.summed_blocks):
# there, recomputing every head of a 4,096-token input for one picture took a minute.
LONG_TRACE = 512
# Blocks a side the pass sums over: the all-heads view's panels and, joined in pairs, the
# whole-model grid's tiles (other sizes are summed when a view asks, one fused pass a
# layer: half a second at 4,096 tokens). Each is a value column more in the fused kernel,
# with as many zero query/key columns: at 4,096 tokens of a 0.5B model on a CPU, 16 cost
# about 6% of the pass, 32 about 12%, 64 (as many as d_k) 17-40%.
SUMMED_BLOCKS = 32


def summed_blocks_for(n_tokens: int, device: torch.device | str) -> int:
    """How many blocks a side a traced pass over ``n_tokens`` on ``device`` sums its weights
    over: SUMMED_BLOCKS for a long input on a CPU, else 0 (none: on a GPU every map is
    recomputed in milliseconds, and the traced pass must stay as fast as the fused one)."""
    return SUMMED_BLOCKS if n_tokens > LONG_TRACE and torch.device(device).type == "cpu" else 0


# Who hears of each layer a traced pass records (``reporting_progress``): per thread and
# task, so one session's progress bar never hears another session's pass.
_PROGRESS: ContextVar[Callable[[str, int], None] | None] = ContextVar(
    "trace_progress", default=None
)


@contextmanager
def reporting_progress(callback: Callable[[str, int], None]):
    """Within this block, a traced pass calls ``callback(kind, layers_done)`` as it records
    each layer's attention: a long input's first pass takes a minute on a laptop, and the
    page can say how far it is."""
    token = _PROGRESS.set(callback)
    try:
        yield
    finally:
        _PROGRESS.reset(token)


def stack_budget() -> int:
    """The byte budget for stacked maps now: STACK_BUDGET, the environment, or 1 GiB."""
    if STACK_BUDGET is not None:
        return int(STACK_BUDGET)
    env = os.environ.get("ATTENTION_LAB_STACK_BUDGET", "").strip()
    return int(float(env)) if env else 2**30


class StackBudgetError(MemoryError):
    """Stacking every map would pass the byte budget: read one head through attention_map."""


def _token_stats(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token mean and (biased, as LayerNorm uses) std over the feature axis: [B, L].

    On a GPU one fused kernel (torch.std_mean: 50 us for a 1B model's hidden state at
    8,192 tokens on an H200, where a sum and a norm took three times that). On a CPU two
    passes, mean then mean square of the deviations: ten times faster than torch.var's
    reduction, which cost the traced path 5% of a 0.5B model's forward."""
    if x.is_cuda:
        std, mean = torch.std_mean(x, dim=-1, correction=0)
        return mean, std
    mean = x.mean(dim=-1, keepdim=True)
    return mean[..., 0], (x - mean).pow(2).mean(dim=-1).sqrt()


def _plain(x: torch.Tensor) -> torch.Tensor:
    """x without its autograd history; x itself where it has none (inference: one
    dispatch less per statistic, five per layer)."""
    return x.detach() if x.requires_grad else x


class Recorder:
    """Collects what attention is made of (queries, keys, masks), LayerNorm statistics and
    residual norms during forward. Maps are never kept: ``weights`` recomputes them."""

    def __init__(
        self,
        inputs: bool = False,
        summed_blocks: int = 0,
        stages: bool = False,
        statistics: bool = True,
    ):
        self.want_inputs = inputs  # keep each attention's input (the step-by-step page)
        # False: attention only, no LayerNorm statistics or residual norms (a decoding step
        # shows its attention rows alone; the statistics were 8% of its CPU time)
        self.want_statistics = statistics
        # keep QK-norm's queries and keys before and after the norm (Gemma 3's stages view);
        # the other stages are recomputed from the record
        self.want_stages = stages
        # > 0: each layer also sums its weights over this many blocks a side (QK.block_sums),
        # for the views of a long input that show every head at once (``summed_blocks_for``)
        self.summed_blocks = summed_blocks
        self.qk: dict[str, list[QK]] = defaultdict(list)  # kind -> one QK per layer
        self.norms: dict[str, dict[str, torch.Tensor]] = {}  # name -> stat -> [B, L]
        self.residual: dict[str, list[torch.Tensor]] = defaultdict(list)  # stack -> [B, L]/layer
        # kind -> per layer {"query": [B, Lq, D], "memory": [B, Lk, D], "mask": bool or None};
        # "encoder_ffn" / "decoder_ffn": what each layer's feed-forward network read
        self.inputs: dict[str, list[dict]] = defaultdict(list)
        # kind -> the mask that kind's attention used (every layer of a kind uses the same,
        # unless its layers have windows of their own: then the widest, and ``layer_masks``)
        self.masks: dict[str, MaskSpec | torch.Tensor | None] = {}
        # kind -> each layer's own mask, where they differ (Gemma 3's local and global layers)
        self.layer_masks: dict[str, list[MaskSpec | torch.Tensor | None]] = defaultdict(list)

    def add_input(
        self,
        kind: str,
        query: torch.Tensor,
        memory: torch.Tensor,
        mask: MaskSpec | torch.Tensor | None,
    ) -> None:
        """What one attention read (only when asked: it is a full hidden state per layer)."""
        if self.want_inputs:
            if isinstance(mask, MaskSpec):
                mask = mask.dense(device=query.device)
            self.inputs[kind].append(
                {
                    "query": query.detach(),
                    "memory": memory.detach(),
                    "mask": None if mask is None else mask.detach(),
                }
            )

    def add_attention(
        self,
        kind: str,
        qk: QK,
        mask: MaskSpec | torch.Tensor | None = None,  # bool: True = may attend
    ) -> None:
        if not isinstance(qk, QK):
            raise TypeError("the recorder keeps queries and keys (a QK), never maps")
        mask = mask.detach() if isinstance(mask, torch.Tensor) else mask
        if kind not in self.masks or _wider(mask, self.masks[kind]):
            self.masks[kind] = mask
        self.layer_masks[kind].append(mask)
        self.qk[kind].append(qk)
        report = _PROGRESS.get()
        if report is not None:
            report(kind, len(self.qk[kind]))

    @property
    def layers(self) -> dict[str, int]:
        return {kind: len(qks) for kind, qks in self.qk.items() if qks}

    def weights(self, kind: str, layer: int, index: int = 0, rows=None, cols=None) -> torch.Tensor:
        """Sentence ``index``'s weights of one layer, every head: float32 [H, rows, cols]."""
        qk = self.qk[kind][layer]
        return attention_weights(
            qk.q[index],
            qk.k[index],
            _sentence_mask(self.mask_of(kind, layer), index),
            alibi=qk.alibi,
            rows=rows,
            cols=cols,
            scale=qk.scale,
        )

    def mask_of(self, kind: str, layer: int) -> MaskSpec | torch.Tensor | None:
        """The mask layer ``layer`` of ``kind`` attended with."""
        masks = self.layer_masks.get(kind)
        return masks[layer] if masks and layer < len(masks) else self.masks.get(kind)

    @property
    def attention(self) -> dict[str, list[torch.Tensor]]:
        """kind -> per layer [B, H, Lq, Lk] float32, recomputed now (short inputs only)."""
        return {
            kind: [
                torch.stack([self.weights(kind, i, b) for b in range(qks[i].q.shape[0])])
                for i in range(len(qks))
            ]
            for kind, qks in self.qk.items()
            if qks
        }

    def add_norm(self, name: str, x_in: torch.Tensor, x_out: torch.Tensor) -> None:
        if not self.want_statistics:
            return
        in_mean, in_std = _token_stats(_plain(x_in))
        out_mean, out_std = _token_stats(_plain(x_out))
        self.norms[name] = {
            "in_mean": in_mean,
            "in_std": in_std,
            "out_mean": out_mean,
            "out_std": out_std,
        }

    def add_residual(self, stack: str, x: torch.Tensor) -> None:
        if not self.want_statistics:
            return
        self.residual[stack].append(_plain(x).norm(dim=-1))  # [B, L]

    def to_trace(
        self,
        index: int,
        src_tokens: list[str],
        tgt_tokens: list[str],
        logits: torch.Tensor | None = None,
        ids: list[int] | None = None,
    ) -> Trace:
        """Cut sentence ``index`` out of the batch, dropping padded positions on both axes.
        ``ids``: the tokens the logits' positions read (for each one's own probability).

        The record stays in the weights' dtype and on the device that computed it; a view
        of the batch is kept as it is when nothing is cut (no copy)."""
        ns, nt = len(src_tokens), len(tgt_tokens)
        lengths = {"encoder": (ns, ns), "decoder": (nt, nt), "cross": (nt, ns)}
        stack_len = {"encoder": ns, "decoder": nt}
        records = {}
        for kind, qks in self.qk.items():
            if not qks:
                continue
            lq, lk = lengths[kind]
            whole = all(
                qk.block_sums is not None and qk.q.shape[2] == lq and qk.k.shape[2] == lk
                for qk in qks
            )  # block sums are one whole sentence's (a pass over one, never padded)
            shared = self.masks.get(kind)
            record_mask = _cut_mask(shared, index, lq, lk)
            layer_masks = None
            own = self.layer_masks.get(kind, [])
            if len(own) == len(qks) and any(m is not shared for m in own):
                cut = {}  # each distinct mask cut once (a model has one or two)
                for m in own:
                    if id(m) not in cut:
                        cut[id(m)] = record_mask if m is shared else _cut_mask(m, index, lq, lk)
                layer_masks = [cut[id(m)] for m in own]
            stages = None
            if any(qk.norm_stages for qk in qks):
                stages = [
                    {
                        name: _cut(t, index, lq if name.startswith("q") else lk)
                        for name, t in (qk.norm_stages or {}).items()
                    }
                    for qk in qks
                ]
            records[kind] = AttentionRecord(
                [_cut(qk.q, index, lq) for qk in qks],
                [_cut(qk.k, index, lk) for qk in qks],
                record_mask,
                qks[0].alibi,
                torch.cat([qk.block_sums for qk in qks]).cpu() if whole else None,
                layer_masks=layer_masks,
                scale=qks[0].scale,
                norm_stages=stages,
            )
        # First every kernel of the predictions, queued behind the forward's (no copy to
        # the CPU before them: see Predictions.on_device).
        predictions = None
        if logits is not None:
            predictions = Predictions.on_device(logits[index, : (nt or ns)], ids)
        # Every small per-token statistic crosses to the CPU in one copy per stack (one
        # transfer each would make a GPU wait for its queue hundreds of times), stacked
        # whole and cut once (a cut per statistic was ~200 dispatches at 24 layers).
        norms: dict[str, dict[str, torch.Tensor]] = {}
        for stack, n in stack_len.items():
            names = [name for name in self.norms if name.split(".", 1)[0] == stack]
            parts = [v for name in names for v in self.norms[name].values()]  # [B, L] each
            if not parts:
                continue
            flat = iter(torch.stack(parts)[:, index, :n].float().cpu().unbind(0))
            for name in names:
                norms[name] = {k: next(flat) for k in self.norms[name]}
        residual = {
            stack: torch.stack(rs)[:, index, : stack_len[stack]].float().cpu()
            for stack, rs in self.residual.items()
        }
        if predictions is not None:
            predictions = predictions.cpu()
        return Trace(
            list(src_tokens),
            list(tgt_tokens),
            norms=norms,
            residual_norms=residual,
            records=records,
            predictions=predictions,
        )


def _wider(mask, than) -> bool:
    """Whether MaskSpec ``mask`` hides fewer keys than ``than`` by its window alone (a
    global layer's against a sliding one's): the kind's shared mask is the widest."""
    if not (isinstance(mask, MaskSpec) and isinstance(than, MaskSpec)):
        return False
    if than.window is None:
        return False
    return mask.window is None or mask.window > than.window


def _sentence_mask(mask: MaskSpec | torch.Tensor | None, index: int):
    if mask is None or isinstance(mask, MaskSpec):
        if isinstance(mask, MaskSpec):
            return mask.cut(index, mask.lq, mask.lk)
        return None
    return mask[index if mask.shape[0] > 1 else 0]


def _cut(x: torch.Tensor, index: int, n: int) -> torch.Tensor:
    """x[index, :, :n] ([B, H, L, d] -> [H, n, d]): a view when it is the whole batch."""
    part = x[index] if n == x.shape[2] else x[index, :, :n]
    if x.shape[0] == 1 and n == x.shape[2]:
        return part
    return part.clone()


def _cut_mask(mask, index: int, lq: int, lk: int) -> MaskSpec | torch.Tensor | None:
    if mask is None:
        return None
    if isinstance(mask, MaskSpec):
        return mask.cut(index, lq, lk)
    row = mask[index if mask.shape[0] > 1 else 0]  # [1 or H, Lq or 1, Lk]
    full = torch.broadcast_to(row[0], (max(row.shape[-2], lq), max(row.shape[-1], lk)))
    return full[:lq, :lk].cpu().clone()


@dataclass
class AttentionRecord:
    """One kind's attention in every layer as the pass computed it: per layer the queries
    [H, Lq, d_k] (rotary positions applied) and keys [G, Lk, d_k], the mask (a MaskSpec,
    or bool [Lq, Lk]) and whether ALiBi biased the scores. Any head's weights for any
    window are recomputed from these, never stored.

    ``mask`` is the one every layer shares, or, where layers have windows of their own
    (Gemma 3's local and global layers), the widest; ``layer_masks`` then holds each
    layer's own (read it through ``mask_of``)."""

    q: list[torch.Tensor]
    k: list[torch.Tensor]
    mask: MaskSpec | torch.Tensor | None
    alibi: bool = False
    # float32 CPU [layers, heads, R, C]: each head's weights summed over the blocks of
    # block_edges(Lq, R) x block_edges(Lk, C), when the pass recorded them (QK.block_sums)
    block_sums: torch.Tensor | None = None
    layer_masks: list[MaskSpec | torch.Tensor | None] | None = None
    scale: float | None = None  # the factor on q·k where it is not 1/√d_k (Gemma)
    # per layer, QK-norm's input and output before the rotary positions (where the pass
    # kept stages): "q_before" / "q_after" [H, Lq, d_k], "k_before" / "k_after" [G, Lk, d_k]
    norm_stages: list[dict[str, torch.Tensor]] | None = None

    def mask_of(self, layer: int) -> MaskSpec | torch.Tensor | None:
        """The mask layer ``layer`` attended with."""
        return self.mask if self.layer_masks is None else self.layer_masks[layer]

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """(layers, heads, queries, keys) of the maps this record stands for."""
        return (len(self.q), self.q[0].shape[0], self.q[0].shape[1], self.k[0].shape[1])

    @property
    def nbytes(self) -> int:
        extra = [] if self.block_sums is None else [self.block_sums]
        for stages in self.norm_stages or ():
            extra.extend(stages.values())
        return sum(t.numel() * t.element_size() for t in (*self.q, *self.k, *extra))

    def summed(self, layer: int, size: int) -> Overview | None:
        """Every head's mean per block from the recorded sums, at most ``size`` blocks a side
        (recorded blocks joined in equal groups), or None when there are none or ``size``
        asks for finer blocks than were recorded."""
        if self.block_sums is None:
            return None
        _, _, n_q, n_k = self.shape
        found = self.block_sums[layer]  # [H, R, C]
        edges = []
        for axis, n in ((1, n_q), (2, n_k)):
            fine = found.shape[axis]
            if size > fine and fine < n:
                return None
            group = min(g for g in range(1, fine + 1) if fine % g == 0 and fine // g <= size)
            found = found.unflatten(axis, (fine // group, group)).sum(axis + 1)
            edges.append(block_edges(n, fine)[::group])
        return block_means(found, edges[0], edges[1])

    def weights(self, layer: int, heads=None, rows=None, cols=None, stages: bool = False):
        """float32 [len(heads), rows, cols] on the record's device (or AttentionStages)."""
        return attention_weights(
            self.q[layer],
            self.k[layer],
            self.mask_of(layer),
            heads=heads,
            alibi=self.alibi,
            rows=rows,
            cols=cols,
            stages=stages,
            scale=self.scale,
        )


def top_k(x: torch.Tensor, k: int, width: int = 128, chunked: bool | None = None) -> torch.Tensor:
    """Indices of the k largest values of each row of x [n, V], largest first.

    On a GPU, torch.topk's radix passes over a whole 32,000-token row took 2.6 ms at 8,192
    positions. The k largest values lie in the k chunks (``width`` columns each) with the
    largest maxima (a chunk holding one of them has a maximum at least that large, and at
    most k chunks can), so: chunk maxima (one pass), the best k chunks, then top-k among
    their k·width values. Ties may pick other indices of equal value, as topk's may.
    ``chunked``: that way or torch.topk's (None: chunks on a GPU only, where it was timed)."""
    n, vocab = x.shape
    full = vocab // width
    chunked = x.is_cuda if chunked is None else chunked
    if not chunked or full <= k or x.stride(1) != 1:
        return x.topk(k, dim=-1).indices
    maxima = x.as_strided((n, full, width), (x.stride(0), width, 1)).amax(dim=-1)
    if full * width < vocab:  # the last, shorter chunk
        maxima = torch.cat([maxima, x[:, full * width :].amax(dim=-1, keepdim=True)], dim=1)
    chunks = maxima.topk(k, dim=-1).indices  # [n, k]
    cols = (chunks[:, :, None] * width + torch.arange(width, device=x.device)).view(n, -1)
    outside = cols >= vocab  # past the end of a shorter last chunk
    values = x.gather(1, cols.clamp(max=vocab - 1)).masked_fill_(outside, float("-inf"))
    return cols.gather(1, values.topk(k, dim=-1).indices)


@dataclass
class Predictions:
    """What a page reads of the logits, not [L, vocab]: each position's ``TOP_K`` most likely
    next tokens (ids and probabilities, best first), and the probability of the token that
    actually follows (``next_probs[p]`` for the token at p + 1; needs the ids)."""

    top_ids: torch.Tensor  # long [L, k]
    top_probs: torch.Tensor  # float32 [L, k]
    next_probs: torch.Tensor | None = None  # float32 [L - 1]

    @classmethod
    def from_logits(cls, logits: torch.Tensor, ids: list[int] | None = None) -> Predictions:
        """From logits [L, vocab] (see ``on_device``), copied to the CPU."""
        return cls.on_device(logits, ids).cpu()

    @classmethod
    def on_device(cls, logits: torch.Tensor, ids: list[int] | None = None) -> Predictions:
        """The predictions, left on the logits' device: every kernel is queued and nothing
        waits for the GPU, so their launches overlap the forward's queued work (a copy to
        the CPU first made the GPU idle while Python launched them: 2-3 ms at 8,192 tokens).

        The top-k of the logits themselves (softmax keeps their order; ``top_k``), over
        every row at once; log-probabilities in float32 a band of rows at a time (upcast
        inside the kernel, no float32 copy of the logits: a whole [L, vocab] float32 softmax
        would be 1 GB at 8,192 x 32,000), of which only the kept values are read."""
        n, vocab = logits.shape
        top_ids = top_k(logits, min(TOP_K, vocab))
        following = None
        if ids is not None:  # pinned and non-blocking: a plain copy would wait for the GPU
            host = torch.tensor(ids[1:n], dtype=torch.long)
            if logits.is_cuda:
                host = host.pin_memory()
            following = host.to(logits.device, non_blocking=True)
        # Bands of 16M cells (64 MB of float32: about 500 rows of a 32k vocabulary).
        step = max(1, 2**24 // max(1, vocab))
        top_lp, next_lp = [], []
        for a in range(0, n, step):
            logp = torch.log_softmax(logits[a : a + step], dim=-1, dtype=torch.float32)
            top_lp.append(logp.gather(1, top_ids[a : a + step]))
            if following is not None:
                f = following[a : a + step]
                next_lp.append(logp[: len(f)].gather(1, f[:, None])[:, 0])
        return cls(
            top_ids,
            torch.cat(top_lp).exp_(),
            torch.cat(next_lp).exp_() if following is not None else None,
        )

    def cpu(self) -> Predictions:
        """These predictions on the CPU."""
        return Predictions(
            self.top_ids.cpu(),
            self.top_probs.cpu(),
            None if self.next_probs is None else self.next_probs.cpu(),
        )


class _Stacked(Mapping):
    """kind -> [layers, heads, Lq, Lk], stacked on first access (within the byte budget)."""

    def __init__(self, trace: Trace, stages: bool = False):
        self.trace, self.stages = trace, stages

    def __getitem__(self, kind: str):
        if self.stages:
            return self.trace._stacked_stages(kind)
        return self.trace._stacked_maps(kind)

    def _kinds(self) -> list[str]:
        if self.stages:  # stages exist where a record (or given stages) does
            t = self.trace
            return [k for k in KINDS if k in t.records or k in t.given_stages]
        return self.trace.kinds()

    def __contains__(self, kind) -> bool:
        return kind in self._kinds()

    def __iter__(self) -> Iterator[str]:
        return iter(self._kinds())

    def __len__(self) -> int:
        return len(self._kinds())


class Trace:
    """Plain data from one traced pass: tokens, small CPU records, and per attention kind
    ("encoder" self, "decoder" masked self, "cross" decoder queries over encoder keys) the
    queries and keys each layer compared. Decoder-only models put their tokens in
    ``tgt_tokens``.

    Maps are computed when asked: ``attention_map`` (one head, one window),
    ``attention_overview`` (one head pooled block by block), ``attention_stages`` (the four
    steps for one head). ``attention[kind]`` stacks [layers, heads, queries, keys] float32 on
    first access for short inputs and notebooks, refusing past ``stack_budget()`` bytes.
    Traces made from maps computed elsewhere (transformers' own code, merged words) pass
    them as ``attention`` and are read through the same methods.
    """

    def __init__(
        self,
        src_tokens: list[str],
        tgt_tokens: list[str],
        attention: dict[str, torch.Tensor] | None = None,
        stages: dict[str, dict[str, torch.Tensor]] | None = None,
        norms: dict[str, dict[str, torch.Tensor]] | None = None,
        residual_norms: dict[str, torch.Tensor] | None = None,
        logits: torch.Tensor | None = None,
        masks: dict[str, torch.Tensor] | None = None,
        *,
        records: dict[str, AttentionRecord] | None = None,
        predictions: Predictions | None = None,
    ):
        self.src_tokens = src_tokens
        self.tgt_tokens = tgt_tokens
        self.records = dict(records or {})
        self.given = {k: v.float().cpu() for k, v in (attention or {}).items()}
        self.given_stages = dict(stages or {})
        self.norms = dict(norms or {})  # LayerNorm in/out statistics
        self.residual_norms = dict(residual_norms or {})  # stack -> [layers+1, tokens]
        if predictions is None and logits is not None:
            predictions = Predictions.from_logits(logits)
        self.predictions = predictions
        # kind -> bool [queries, keys] for given maps: True = may attend
        self.given_masks = dict(masks or {})
        self._stack_cache: dict[tuple[str, bool], object] = {}
        # (kind, layer, blocks) -> block sums [H, R, C] summed on demand (small: kept)
        self._block_sums_cache: dict[tuple[str, int, int], torch.Tensor] = {}
        self._counts_cache: dict[tuple, torch.Tensor] = {}  # (kind, edges) -> [R, C]

    def __setstate__(self, state: dict) -> None:  # a trace pickled before the caches
        self.__dict__.update(
            {"_stack_cache": {}, "_block_sums_cache": {}, "_counts_cache": {}, **state}
        )

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_stack_cache"] = {}  # recomputed on demand: never pickled
        state["_block_sums_cache"] = {}
        state["_counts_cache"] = {}
        return state

    # --- what there is -------------------------------------------------------------------

    def has_stages(self, kind: str) -> bool:
        """Whether ``attention_stages`` can show ``kind`` (our engine's record)."""
        return kind in self.records or kind in self.given_stages

    def kinds(self) -> list[str]:
        """The attention kinds this trace holds, in KINDS order."""
        return [k for k in KINDS if k in self.records or k in self.given]

    def shape(self, kind: str) -> tuple[int, int, int, int]:
        """(layers, heads, queries, keys) of ``kind``'s maps, computing none of them."""
        if kind in self.records:
            return self.records[kind].shape
        if kind in self.given:
            return tuple(self.given[kind].shape)
        raise KeyError(f"this trace has no {kind!r} attention; it has {self.kinds()}")

    @property
    def record_bytes(self) -> int:
        """Bytes of the query/key record (what a stored trace costs, not L² per head)."""
        return sum(r.nbytes for r in self.records.values())

    @property
    def logits(self) -> None:
        """Full-vocabulary logits are no longer kept; see ``predictions``."""
        return None

    # --- maps ----------------------------------------------------------------------------

    def _device_map(self, kind, layer, heads, rows, cols, stages=False):
        if kind in self.records:
            return self.records[kind].weights(layer, heads, rows, cols, stages=stages)
        if kind not in self.given:
            raise KeyError(f"this trace has no {kind!r} attention; it has {self.kinds()}")
        full = self.given[kind][layer]  # [H, Lq, Lk]
        if heads is not None:
            full = full[list(heads)]
        return torch.stack([_window(m, rows, cols) for m in full])

    def attention_map(
        self,
        kind: str,
        layer: int,
        head: int,
        rows: slice | list[int] | None = None,
        cols: slice | list[int] | None = None,
    ) -> torch.Tensor:
        """One head's attention weights for a window: float32 CPU [len(rows), len(cols)].

        Computed now from the pass's own queries and keys, exactly as the model did, so
        what a picture costs follows what it draws."""
        self._check(kind, layer, head)
        return self._device_map(kind, layer, [head], rows, cols)[0].float().cpu()

    def attention_heads(
        self, kind: str, layer: int, rows=None, cols=None, on_device: bool = False
    ) -> torch.Tensor:
        """Every head of one layer for a window: float32 [heads, rows, cols], on the CPU, or
        ``on_device`` where the record lives (a GPU's: reduced there, never copied out)."""
        self._check(kind, layer, 0)
        maps = self._device_map(kind, layer, None, rows, cols).float()
        return maps if on_device else maps.cpu()

    def attention_stages(
        self, kind: str, layer: int, head: int, rows=None, cols=None
    ) -> AttentionStages:
        """The four steps (scores, scaled, masked, weights) of one head and window, each
        float32 CPU [rows, cols], recomputed from the record."""
        self._check(kind, layer, head)
        if kind not in self.records:
            if kind in self.given_stages:
                return AttentionStages(
                    *(
                        _window(self.given_stages[kind][s][layer, head], rows, cols).float()
                        for s in STAGE_NAMES
                    )
                )
            raise KeyError(f"this trace has no stages for {kind!r} (maps computed elsewhere)")
        st = self._device_map(kind, layer, [head], rows, cols, stages=True)
        return AttentionStages(*(getattr(st, s)[0].float().cpu() for s in STAGE_NAMES))

    def has_norm_stages(self, kind: str) -> bool:
        """Whether ``norm_stages`` can show ``kind``: a QK-norm model traced with stages."""
        record = self.records.get(kind)
        return record is not None and bool(record.norm_stages)

    def norm_stages(self, kind: str, layer: int, head: int) -> dict[str, torch.Tensor]:
        """QK-norm for one query head: its queries and the keys of the key/value head it
        reads, before and after the norm (before the rotary positions), float32 CPU
        "q_before" / "q_after" [Lq, d_k], "k_before" / "k_after" [Lk, d_k]. Only a traced
        pass that kept stages (``trace(..., stages=True)``) of a QK-norm model has them."""
        self._check(kind, layer, head)
        if not self.has_norm_stages(kind):
            raise KeyError(f"this trace has no QK-norm stages for {kind!r}")
        record = self.records[kind]
        seen = record.norm_stages[layer]
        group = record.q[layer].shape[0] // record.k[layer].shape[0]
        return {
            name: t[head if name.startswith("q") else head // group].float().cpu()
            for name, t in seen.items()
        }

    def attention_overview(
        self, kind: str, layer: int, head: int, size: int = 1024, reduce: str = "max"
    ) -> Overview:
        """One head's map pooled to at most size x size blocks (max or mean per block),
        computed a band of query rows at a time on the record's device."""
        self._check(kind, layer, head)
        summed = self._summed(kind, layer, size, reduce)
        if summed is not None:
            return Overview(summed.values[head], summed.row_edges, summed.col_edges, reduce)
        _, _, n_q, n_k = self.shape(kind)
        row_edges, col_edges = block_edges(n_q, size), block_edges(n_k, size)
        on_gpu = self.records[kind].q[0].is_cuda if kind in self.records else False
        return pool_map(
            lambda rows: self._device_map(kind, layer, [head], rows, None)[0],
            row_edges,
            col_edges,
            reduce,
            max_cells=2**25 if on_gpu else 2**22,  # a band's cells (x4 bytes, x a few)
        )

    def attention_overviews(
        self, kind: str, layer: int, size: int = 1024, reduce: str = "max"
    ) -> Overview:
        """Every head of one layer pooled as ``attention_overview`` pools one: values
        [heads, blocks, blocks], the heads computed together a band of rows at a time.

        Block means of a pass that recorded block sums (``summed_blocks_for``) are read from
        them instead, in equal groups of the recorded blocks: at most ``size`` a side."""
        self._check(kind, layer, 0)
        summed = self._summed(kind, layer, size, reduce)
        if summed is not None:
            return summed
        _, heads, n_q, n_k = self.shape(kind)
        on_gpu = self.records[kind].q[0].is_cuda if kind in self.records else False
        return pool_map(
            lambda rows: self._device_map(kind, layer, None, rows, None),
            block_edges(n_q, size),
            block_edges(n_k, size),
            reduce,
            max_cells=max(1, (2**25 if on_gpu else 2**22) // heads),
        )

    def summed_blocks(self, kind: str) -> int:
        """Blocks a side of the block sums the traced pass recorded for ``kind`` (0: none)."""
        record = self.records.get(kind)
        return 0 if record is None or record.block_sums is None else record.block_sums.shape[-1]

    def _summed(self, kind: str, layer: int, size: int, reduce: str) -> Overview | None:
        """Every head's block means from block sums: recorded by the pass when they serve
        ``size``, else summed now for this layer by the fused kernel (one pass for all heads,
        kept with the trace), or None where only pool_map can (max, or more blocks than the
        kernel takes value columns)."""
        record = self.records.get(kind)
        if reduce != "mean" or record is None:
            return None
        found = record.summed(layer, size)
        if found is not None:
            return found
        d_k = record.q[layer].shape[-1]
        _, _, n_q, n_k = record.shape
        if min(size, n_k) > d_k:
            return None
        key = (kind, layer, size)
        if key not in self._block_sums_cache:
            q, k = record.q[layer].float()[None], record.k[layer].float()[None]
            bias = None
            if record.alibi:
                positions = torch.arange(n_k, device=q.device)
                bias = alibi_bias(q.shape[1], positions[n_k - n_q :], positions)
            _, block_sums = sum_blocks(q, k, record.mask_of(layer), bias, size, scale=record.scale)
            self._block_sums_cache[key] = block_sums[0].cpu()
        return block_means(
            self._block_sums_cache[key], block_edges(n_q, size), block_edges(n_k, size)
        )

    def row_statistics(self, kind: str, layer: int) -> RowStatistics | None:
        """Every head's entropy and mean key position for each query of one layer, from one
        fused pass over the record (``model.attention.row_statistics``); None where that
        cannot serve (maps given, a record on a GPU, keys after their query): read the maps
        in bands then (``model.analysis.summaries.trace_head_statistics``)."""
        self._check(kind, layer, 0)
        record = self.records.get(kind)
        if record is None:
            return None
        mask = record.mask_of(layer)
        return row_statistics(record.q[layer], record.k[layer], mask, record.alibi, record.scale)

    def _check(self, kind: str, layer: int, head: int) -> None:
        layers, heads, _, _ = self.shape(kind)
        if not (0 <= layer < layers and 0 <= head < heads):
            raise IndexError(
                f"{kind} attention has layers 0..{layers - 1} and heads 0..{heads - 1}, "
                f"not layer {layer}, head {head}"
            )

    # --- stacked, for short inputs and notebooks -----------------------------------------

    @property
    def attention(self) -> Mapping[str, torch.Tensor]:
        """kind -> float32 [layers, heads, queries, keys], stacked on first access."""
        return _Stacked(self)

    @property
    def stages(self) -> Mapping[str, dict[str, torch.Tensor]]:
        """kind -> stage name -> [layers, heads, queries, keys], stacked on first access."""
        return _Stacked(self, stages=True)

    def _budget_check(self, kind: str, copies: int) -> None:
        layers, heads, n_q, n_k = self.shape(kind)
        need = layers * heads * n_q * n_k * 4 * copies
        if need > stack_budget():
            raise StackBudgetError(
                f"stacking every {kind} map ({layers} layers x {heads} heads x {n_q} x {n_k}) "
                f"needs {need / 2**30:.2f} GiB, over the {stack_budget() / 2**30:.2f} GiB "
                "budget (ATTENTION_LAB_STACK_BUDGET); read one head with "
                "trace.attention_map(kind, layer, head, rows, cols) or "
                "trace.attention_overview(kind, layer, head)"
            )

    def _stacked_maps(self, kind: str) -> torch.Tensor:
        if kind in self.given:
            return self.given[kind]
        if (kind, False) not in self._stack_cache:
            self._budget_check(kind, 1)
            layers, heads, n_q, n_k = self.shape(kind)
            out = torch.empty(layers, heads, n_q, n_k)
            for layer in range(layers):
                for head in range(heads):
                    out[layer, head] = self.attention_map(kind, layer, head)
            self._stack_cache[(kind, False)] = out
        return self._stack_cache[(kind, False)]

    def _stacked_stages(self, kind: str) -> dict[str, torch.Tensor]:
        if kind in self.given_stages:
            return self.given_stages[kind]
        if kind not in self.records:
            raise KeyError(f"this trace has no stages for {kind!r}")
        if (kind, True) not in self._stack_cache:
            self._budget_check(kind, len(STAGE_NAMES))
            layers, heads, n_q, n_k = self.shape(kind)
            out = {s: torch.empty(layers, heads, n_q, n_k) for s in STAGE_NAMES}
            for layer in range(layers):
                for head in range(heads):
                    st = self.attention_stages(kind, layer, head)
                    for s in STAGE_NAMES:
                        out[s][layer, head] = getattr(st, s)
            self._stack_cache[(kind, True)] = out
        return self._stack_cache[(kind, True)]

    # --- masks and tokens ----------------------------------------------------------------

    @property
    def masks(self) -> dict[str, torch.Tensor]:
        """kind -> bool [queries, keys] (built now; prefer ``mask(kind, rows, cols)``)."""
        return {kind: self.mask(kind) for kind in self.kinds()}

    def mask(self, kind: str, rows=None, cols=None, layer: int | None = None) -> torch.Tensor:
        """The model's own mask for ``kind`` as bool [queries, keys] (True = may attend),
        for a window when rows / cols are given. ``layer``: that layer's own, where layers
        differ (Gemma 3's sliding-window layers); None: the kind's widest."""
        queries, keys = self.tokens(kind)
        full = None
        if kind in self.records:
            record = self.records[kind]
            spec = record.mask if layer is None else record.mask_of(layer)
            if isinstance(spec, MaskSpec):
                dense = spec.dense(rows, cols)
                if dense is not None:
                    return dense[0, 0].cpu()
            elif spec is not None:
                full = spec
        elif kind in self.given_masks:
            full = self.given_masks[kind]
        if full is None:
            full = torch.ones(len(queries), len(keys), dtype=torch.bool)
            if rows is None and cols is None:
                return full
        return _window(full, rows, cols)

    def allowed_counts(
        self, kind: str, row_edges: list[int], col_edges: list[int], layer: int | None = None
    ):
        """How many cells of each block the model's mask allows for ``kind``: int64
        [blocks, blocks] (from the mask's rule when the record keeps one: no L x L mask).
        ``layer``: that layer's own mask, where layers differ (see ``mask``)."""
        record = self.records.get(kind)
        if layer is not None and (record is None or record.layer_masks is None):
            layer = None  # every layer shares the kind's mask
        key = (kind, tuple(row_edges), tuple(col_edges), layer)
        if key not in self._counts_cache:  # a kind's heads share its mask
            self._counts_cache[key] = self._allowed_counts(kind, row_edges, col_edges, layer)
        return self._counts_cache[key]

    def _allowed_counts(self, kind: str, row_edges, col_edges, layer: int | None = None):
        record = self.records.get(kind)
        spec = None
        if record is not None:
            spec = record.mask if layer is None else record.mask_of(layer)
        if isinstance(spec, MaskSpec):
            return spec.block_counts(row_edges, col_edges)
        m = self.mask(kind, layer=layer).long()
        by_rows = torch.zeros(len(row_edges) - 1, m.shape[1], dtype=torch.long)
        by_rows.index_add_(0, block_owner(row_edges), m)
        counts = torch.zeros(len(row_edges) - 1, len(col_edges) - 1, dtype=torch.long)
        return counts.index_add_(1, block_owner(col_edges), by_rows)

    def tokens(self, kind: str) -> tuple[list[str], list[str]]:
        """(query tokens, key tokens) for an attention kind."""
        if kind == "encoder":
            return self.src_tokens, self.src_tokens
        if kind == "decoder":
            return self.tgt_tokens, self.tgt_tokens
        if kind == "cross":
            return self.tgt_tokens, self.src_tokens
        raise KeyError(f"unknown attention kind {kind!r}; expected one of {KINDS}")


def _window(m: torch.Tensor, rows, cols) -> torch.Tensor:
    """m[rows][:, cols] for a slice, an index list or None (everything) on each axis."""
    if rows is not None:
        m = m[rows] if isinstance(rows, slice) else m[torch.as_tensor(rows, dtype=torch.long)]
    if cols is not None:
        m = m[:, cols] if isinstance(cols, slice) else m[:, torch.as_tensor(cols, dtype=torch.long)]
    return m


@dataclass
class Overview:
    """A map pooled block by block: values [len(row_edges)-1, len(col_edges)-1] (after any
    leading axis, such as heads), block i covering query positions row_edges[i]..
    row_edges[i+1]-1 (likewise for keys)."""

    values: torch.Tensor
    row_edges: list[int]
    col_edges: list[int]
    reduce: str


def block_means(block_sums: torch.Tensor, row_edges: list[int], col_edges: list[int]) -> Overview:
    """Block sums [..., R, C] as the mean over each block's cells, an Overview."""
    cells = torch.outer(*(torch.tensor(e).diff().float() for e in (row_edges, col_edges)))
    return Overview(block_sums / cells, list(row_edges), list(col_edges), "mean")


def pool_map(
    read_rows, row_edges: list[int], col_edges: list[int], reduce: str, max_cells: int = 2**22
) -> Overview:
    """Pool a map a band of query rows at a time, so the whole map is never held.

    read_rows(slice) -> float32 [..., rows, keys] on any device (leading axes, such as a
    layer's heads, are pooled alike); a band spans as many row blocks as fit in
    ``max_cells`` cells per leading index, pooled where it was computed (one transfer of the
    pooled result). reduce is "max" or "mean" over each block: a mean is the mean of
    equal-width row means, two matrix products with the blocks' averaging matrices (a
    scatter over every cell was most of a 4,096-token overview's time on a CPU)."""
    if reduce not in ("max", "mean"):
        raise ValueError(f"reduce must be 'max' or 'mean', not {reduce!r}")
    n_rb, n_cb = len(row_edges) - 1, len(col_edges) - 1
    n_k = col_edges[-1] - col_edges[0]
    col_sizes = torch.tensor([b - a for a, b in zip(col_edges[:-1], col_edges[1:])])
    col_owner = block_owner(col_edges)  # key -> column block
    col_mean = None  # [Lk, n_cb]: 1/size where a key is in the block
    out = None
    i = 0
    while i < n_rb:
        j = i + 1  # blocks i..j-1 in this band
        while j < n_rb and (row_edges[j + 1] - row_edges[i]) * max(n_k, 1) <= max_cells:
            j += 1
        band = read_rows(slice(row_edges[i], row_edges[j]))  # [..., rows, Lk]
        sizes = torch.tensor([row_edges[r + 1] - row_edges[r] for r in range(i, j)])
        row_owner = block_owner(row_edges[i : j + 1], band.device)  # band row -> its block
        if col_owner.device != band.device:  # once: the key -> block map lives by the band
            col_owner = col_owner.to(band.device)
        if reduce == "mean":
            if col_mean is None:
                col_mean = torch.zeros(n_k, n_cb, device=band.device)
                col_mean[torch.arange(n_k, device=band.device), col_owner] = (
                    1.0 / col_sizes.to(band.device, torch.float32)
                )[col_owner]
            row_mean = torch.zeros(j - i, band.shape[-2], device=band.device)
            row_mean[row_owner, torch.arange(band.shape[-2], device=band.device)] = (
                1.0 / sizes.to(band.device, torch.float32)
            )[row_owner]
            pooled = row_mean @ band.float() @ col_mean  # [..., blocks, n_cb]
        elif band.device.type == "cpu":
            # Each row block's max, then every key block's by segments: a third of the
            # scatters' time on a 4,096-token map (which stay on the GPU, where they were timed)
            flat = band.reshape(-1, *band.shape[-2:])  # [lead, rows, Lk]
            first = row_edges[i]
            by_rows = torch.stack(
                [
                    flat[:, a - first : b - first].amax(1)
                    for a, b in zip(row_edges[i:j], row_edges[i + 1 : j + 1])
                ],
                dim=1,
            )  # [lead, blocks, Lk]
            lengths = col_sizes.expand(*by_rows.shape[:2], n_cb).contiguous()
            pooled = torch.segment_reduce(by_rows, "max", lengths=lengths, axis=2)
            pooled = pooled.reshape(*band.shape[:-2], j - i, n_cb)
        else:
            flat = band.reshape(-1, *band.shape[-2:])  # [lead, rows, Lk]
            owner = row_owner[None, :, None].expand_as(flat)
            by_rows = torch.zeros(flat.shape[0], j - i, flat.shape[-1], device=band.device)
            by_rows = by_rows.scatter_reduce(1, owner, flat, "amax", include_self=False)
            owner = col_owner[None, None].expand_as(by_rows)
            pooled = torch.zeros(*by_rows.shape[:2], n_cb, device=band.device).scatter_reduce(
                2, owner, by_rows, "amax", include_self=False
            )
            pooled = pooled.reshape(*band.shape[:-2], j - i, n_cb)
        if out is None:
            out = torch.empty(*band.shape[:-2], n_rb, n_cb)
        out[..., i:j, :] = pooled.cpu()
        i = j
    if out is None:  # no query rows at all
        out = torch.empty(n_rb, n_cb)
    return Overview(out, list(row_edges), list(col_edges), reduce)
