"""One view of a trace's attention: what a chart draws, below Streamlit.

``AttentionView(trace, kind, layer, head, aggregate, merge=, unit=, hide=, renorm=,
specials=, n_prompt=)`` is the reader's choice made into numbers: its tokens (a decoder's generated ones
marked), its mask, any window of its map (``map``), the map pooled to a screen
(``overview``), the rollout, per-head statistics and the arrays the export files hold. The
explorer draws through it, the HTML export draws the same numbers from it, and the unit
tests hold it to the stacked maps (``trace.attention[kind]``) with no Streamlit at all.

Short and long inputs go through the same methods: maps are read from the trace's record
(``attention_map`` / ``attention_overview``), never stacked, and what takes time (merged
words, a rollout, an overview, a statistics table) is kept with the trace it came from
(``model.analysis.kept.KEPT``, bounded by bytes), so a rerun that builds a new view of the
same trace redraws at once.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch

from model.analysis.export import window_maps
from model.analysis.kept import KEPT
from model.analysis.summaries import trace_head_statistics, trace_rollout_layer
from model.analysis.tokens import (
    DEFAULT_SPECIAL_TOKENS,
    UNITS,
    hide_special_tokens,
    merge_subwords,
    word_groups,
)
from model.trace import LONG_TRACE, Trace, block_edges, pool_map

AGGREGATES = ("head", "mean", "max", "rollout")
REDUCES = ("max", "mean")
# A side longer than this is drawn as a pooled overview and a zoom window, never whole;
# merging words and hiding specials need every map whole, so a long view does neither
LONG_ABOVE = LONG_TRACE
# Blocks a side of a long map's overview: 256 x 256 cells send about 0.5 MB to the browser
# and take a quarter second to draw (ui.maps has the measurements)
OVERVIEW_SIZE = 256
GENERATED_MARK = "⁺"  # after a generated token's label: the prompt's tokens stay plain


def is_long(n_queries: int, n_keys: int) -> bool:
    """Whether a map of this size is drawn as an overview and a zoom window."""
    return max(n_queries, n_keys) > LONG_ABOVE


def rollout_means_flow(model_kind: str, attention_kind: str) -> bool:
    """Whether rollout over ``attention_kind`` is how the model's input reaches each position.

    Rollout follows one self-attention stack. That is the whole flow for an encoder and for a
    decoder-only model; an encoder-decoder's decoder also reads the source through
    cross-attention, and cross-attention maps queries of one sequence onto keys of another."""
    if attention_kind == "encoder":
        return True
    return attention_kind == "decoder" and model_kind == "decoder"


def model_special_tokens(lm) -> frozenset[str]:
    """Every special token the model's tokenizers name ([CLS], <bos>, <sep>, ...)."""
    found: set[str] = set(getattr(lm, "special_tokens", ()) or ())
    for tok in (getattr(lm, "src_tokenizer", None), getattr(lm, "tgt_tokenizer", None)):
        found |= set(getattr(tok, "special_tokens", ()) or ())
    return frozenset(found)


@dataclass(frozen=True)
class Pooled:
    """A map pooled block by block: values [..., blocks, blocks] float32 (NaN where the mask
    allows no cell of a block), and the blocks' query and key edges."""

    values: np.ndarray
    row_edges: list[int]
    col_edges: list[int]
    reduce: str

    def __iter__(self):  # (values, row edges, col edges), as the viz functions take them
        return iter((self.values, self.row_edges, self.col_edges))


@dataclass(frozen=True)
class AttentionView:
    """The attention a reader chose to see, as numbers any chart or file draws from.

    ``aggregate``: "head" (``head`` alone), "mean" or "max" over the layer's heads, or
    "rollout" (Abnar & Zuidema 2020: through every layer up to ``layer``). ``merge`` joins
    subword pieces into words, or with ``unit="character"`` only the pieces of one
    character (a byte-level BPE's parts of a Hangul syllable), ``hide`` drops ``specials`` (``renorm``: kept rows rescaled
    to sum to 1); both are off for a long input. ``n_prompt``: a decoder's prompt length,
    after which its tokens are marked as generated (None: none marked)."""

    trace: Trace
    kind: str
    layer: int = 0
    head: int = 0
    aggregate: str = "head"
    merge: bool = False
    unit: str = "word"
    hide: bool = False
    renorm: bool = True
    specials: frozenset[str] = DEFAULT_SPECIAL_TOKENS
    n_prompt: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in self.trace.kinds():
            raise KeyError(
                f"this trace has no {self.kind!r} attention; it has {self.trace.kinds()}"
            )
        if self.unit not in UNITS:
            raise ValueError(f"unknown unit {self.unit!r}; choose one of {UNITS}")
        if self.aggregate not in AGGREGATES:
            raise ValueError(f"unknown aggregate {self.aggregate!r}; choose one of {AGGREGATES}")
        layers, heads, n_q, n_k = self.trace.shape(self.kind)
        if not 0 <= self.layer < layers:
            raise IndexError(f"{self.kind} attention has layers 0..{layers - 1}, not {self.layer}")
        if not 0 <= self.head < heads:
            raise IndexError(f"{self.kind} attention has heads 0..{heads - 1}, not {self.head}")
        if self.aggregate == "rollout" and n_q != n_k:
            raise ValueError("rollout needs self-attention (as many queries as keys)")
        if is_long(n_q, n_k):  # merging and hiding need every map whole
            object.__setattr__(self, "merge", False)
            object.__setattr__(self, "hide", False)

    def choose(self, **changes) -> AttentionView:
        """The same view with some choices changed (another layer, head, aggregate)."""
        return dataclasses.replace(self, **changes)

    # --- the traces drawn from: as the model produced it, words merged, specials hidden ---

    @cached_property
    def _derived(self) -> tuple[Trace, Trace, dict[str, torch.Tensor] | None]:
        """(merged trace, shown trace, share of attention hidden per kind or None), kept
        with the model's trace so their own kept rollouts and overviews outlive this view."""
        if not (self.merge or self.hide):
            return self.trace, self.trace, None
        unit = self.unit if self.merge else None
        key = (self.specials, self.merge, unit, self.hide, self.hide and self.renorm)
        return KEPT.get_or_compute_with(self.trace, ("derived", *key), self._derive)

    def _derive(self):
        base = (
            merge_subwords(self.trace, self.specials, unit=self.unit) if self.merge else self.trace
        )
        if not self.hide:
            return base, base, None
        shown, removed = hide_special_tokens(base, self.specials, renormalize=self.renorm)
        return base, shown, removed

    @property
    def base(self) -> Trace:
        """The trace with words merged when asked (what rollout runs over: specials too)."""
        return self._derived[0]

    @property
    def shown(self) -> Trace:
        """The trace as drawn: words merged and specials hidden when asked."""
        return self._derived[1]

    def hidden_share(self, layer: int | None = None) -> float | None:
        """The mean share of attention the hidden specials took in a layer (None: none hidden)."""
        removed = self._derived[2]
        if removed is None:
            return None
        return float(removed[self.kind][self.layer if layer is None else layer].mean())

    # --- what there is ---------------------------------------------------------------------

    @cached_property
    def shape(self) -> tuple[int, int, int, int]:
        """(layers, heads, queries, keys) as drawn, computing no map."""
        return self.shown.shape(self.kind)

    @property
    def n_layers(self) -> int:
        return self.shape[0]

    @property
    def n_heads(self) -> int:
        return self.shape[1]

    @property
    def long(self) -> bool:
        """Drawn as a pooled overview and a zoom window, never whole."""
        return is_long(self.shape[2], self.shape[3])

    @cached_property
    def tokens(self) -> tuple[list[str], list[str]]:
        """(query tokens, key tokens) as drawn, a decoder's generated ones marked with
        GENERATED_MARK (the strings are otherwise the tokenizer's, passed through)."""
        q_tokens, k_tokens = self.shown.tokens(self.kind)
        marked = self._marked_target()
        if marked is None:
            return list(q_tokens), list(k_tokens)
        q_side = {"decoder": marked, "cross": marked}.get(self.kind, q_tokens)
        k_side = marked if self.kind == "decoder" else k_tokens
        return list(q_side), list(k_side)

    def _marked_target(self) -> list[str] | None:
        """The shown target tokens with the generated ones marked (None: nothing to mark)."""
        raw = self.trace.tgt_tokens
        if self.n_prompt is None or self.n_prompt >= len(raw) or self.kind == "encoder":
            return None
        last = list(range(len(raw)))  # each shown token's last piece in the model's tokens
        if self.merge:
            last = [group[-1] for group in word_groups(raw, self.specials, unit=self.unit)]
        if self.hide:
            last = [i for i, tok in zip(last, self.base.tgt_tokens) if tok not in self.specials]
        shown = self.shown.tgt_tokens
        return [
            f"{tok}{GENERATED_MARK}" if i >= self.n_prompt else tok for tok, i in zip(shown, last)
        ]

    def mask(self, rows=None, cols=None) -> torch.Tensor:
        """Where the chosen map can hold weight: bool [rows, cols]. The model's own mask
        (``model_mask``) for a head, a mean or a max; for a rollout, where it reaches: a
        position flows on through the layers past one layer's sliding window, so the cells
        no path reaches (exact zeros) are the grey ones."""
        if self.aggregate == "rollout":
            return _window(self.rollout(), rows, cols) > 0
        return self.model_mask(rows, cols)

    def model_mask(self, rows=None, cols=None) -> torch.Tensor:
        """The model's own mask as drawn: bool [rows, cols], True = may attend."""
        return self.shown.mask(self.kind, rows, cols)

    # --- maps ------------------------------------------------------------------------------

    def heads(self, rows=None, cols=None, layer: int | None = None) -> torch.Tensor:
        """Every head of a layer for one window: float32 [heads, rows, cols]."""
        layer = self.layer if layer is None else layer
        return self.shown.attention_heads(self.kind, layer, rows=rows, cols=cols)

    def map(self, rows=None, cols=None, layer: int | None = None) -> torch.Tensor:
        """[rows, cols] of the chosen head, the mean or max of the heads, or the rollout,
        at ``layer`` (default the chosen one) and for one window (None: every position)."""
        layer = self.layer if layer is None else layer
        if self.aggregate == "head":
            return self.shown.attention_map(self.kind, layer, self.head, rows=rows, cols=cols)
        if self.aggregate == "rollout":
            return _window(self.rollout(layer), rows, cols)
        maps = self.heads(rows, cols, layer)
        return maps.mean(0) if self.aggregate == "mean" else maps.amax(0)

    def overview(
        self, size: int = OVERVIEW_SIZE, reduce: str = "max", layer: int | None = None
    ) -> Pooled:
        """The map pooled to at most ``size`` blocks a side: each block the max or the mean
        of the cells the mask allows, NaN where it allows none (drawn grey). Kept with the
        trace: moving the zoom window redraws the same overview."""
        if reduce not in REDUCES:
            raise ValueError(f"reduce must be one of {REDUCES}, not {reduce!r}")
        layer = self.layer if layer is None else layer
        head = self.head if self.aggregate == "head" else None
        key = (self.kind, layer, self.aggregate, head, reduce, size, self._rollout_key)
        return KEPT.get_or_compute_with(
            self.shown, ("pooled", *key), lambda: self._pool(size, reduce, layer)
        )

    def _pool(self, size: int, reduce: str, layer: int) -> Pooled:
        if self.aggregate == "head":
            ov = self.shown.attention_overview(self.kind, layer, self.head, size, reduce)
        else:
            _, _, n_q, n_k = self.shape
            ov = pool_map(
                lambda rows: self.map(rows, None, layer),
                block_edges(n_q, size),
                block_edges(n_k, size),
                reduce,
            )
        return self._over_allowed(ov, layer)

    def heads_overview(
        self, size: int = OVERVIEW_SIZE, reduce: str = "mean", layer: int | None = None
    ) -> Pooled:
        """``overview`` of every head of a layer at once: values [heads, blocks, blocks]."""
        layer = self.layer if layer is None else layer
        ov = self.shown.attention_overviews(self.kind, layer, size=size, reduce=reduce)
        return self._over_allowed(ov, None)

    def _over_allowed(self, ov, layer: int | None) -> Pooled:
        """Pooled values as a reader of the map expects: a mean over the cells the mask
        allows (masked cells hold no weight), NaN where it allows none. ``layer``: the
        rollout's (None: heads, under the model's mask)."""
        if self.aggregate == "rollout" and layer is not None:
            rolled, cols = self.rollout(layer), list(ov.col_edges[:-1])
            edges = list(ov.row_edges)
            counts = np.stack(  # a band of rows at a time: no [n, n] of counts
                [
                    np.add.reduceat((rolled[a:b] > 0).sum(0).numpy(), cols)
                    for a, b in zip(edges[:-1], edges[1:])
                ]
            )
        else:
            counts = self.shown.allowed_counts(self.kind, ov.row_edges, ov.col_edges).numpy()
        values = ov.values.numpy().astype(np.float32)
        if ov.reduce == "mean":
            cells = np.outer(np.diff(ov.row_edges), np.diff(ov.col_edges))
            values = (values * cells / np.maximum(counts, 1)).astype(np.float32)
        values[..., counts == 0] = np.nan
        return Pooled(values, list(ov.row_edges), list(ov.col_edges), ov.reduce)

    # --- rollout ---------------------------------------------------------------------------

    @property
    def _rollout_key(self):
        """What the rollout depends on beyond the trace: hidden tokens, renormalised rows."""
        return (self.hide, self.hide and self.renorm) if self.aggregate == "rollout" else None

    def rollout(self, layer: int | None = None, progress=None) -> torch.Tensor:
        """[n, n]: row i is how much each position reaches position i through attention and
        the residual path up to ``layer`` (Abnar & Zuidema 2020). One path for every input:
        run over every token of the (merged) trace, since the residual stream carries the
        specials too, then the hidden ones dropped. Kept with the trace; a deeper layer
        goes on from the deepest kept below it. ``progress(done, total)`` per layer."""
        layer = self.layer if layer is None else layer
        rolled = self._rolled(layer, progress)
        if not self.hide:
            return rolled
        queries = self.base.tokens(self.kind)[0]
        keep = [i for i, tok in enumerate(queries) if tok not in self.specials]
        rolled = rolled[keep][:, keep]
        if self.renorm:
            rolled = rolled / rolled.sum(-1, keepdim=True).clamp_min(1e-12)
        return rolled

    def rollout_ready(self, layer: int | None = None) -> bool:
        """Whether ``rollout(layer)`` is kept already (a long one takes seconds a layer)."""
        layer = self.layer if layer is None else layer
        return KEPT.get_with(self.base, ("rollout", self.kind, layer)) is not None

    def _rolled(self, layer: int, progress=None) -> torch.Tensor:
        base, kind = self.base, self.kind
        found = KEPT.get_with(base, ("rollout", kind, layer))
        if found is not None:
            return found
        below = [
            (k[2], r)
            for k, r in KEPT.items_with(base)
            if k[:2] == ("rollout", kind) and k[2] < layer
        ]
        start = max(below, key=lambda kept: kept[0]) if below else None
        found = trace_rollout_layer(base, kind, layer, start, progress)
        KEPT.put_with(base, ("rollout", kind, layer), found)
        return found

    # --- numbers beside the maps -----------------------------------------------------------

    def statistics(self, progress=None) -> dict[str, torch.Tensor]:
        """Per head of every layer: "entropy", "mean_distance" (self-attention only) and
        "first_token", each [layers, heads] (``trace_head_statistics``), kept with the trace.
        ``progress(done, layers)`` after each layer."""
        key = (self.kind, "statistics")

        def compute() -> dict[str, torch.Tensor]:
            stats = trace_head_statistics(self.shown, self.kind, progress)
            if self.kind == "cross":
                stats.pop("mean_distance", None)
            return stats

        return dict(KEPT.get_or_compute_with(self.shown, ("statistics", *key), compute))

    def top_cells(self, k: int = 5, rows=None, cols=None) -> list[tuple[int, int, float]]:
        """The ``k`` strongest cells of the map (in a window), strongest first: (query
        position, key position, weight), positions counted in the whole text."""
        found = self.map(rows, cols)
        flat = torch.nan_to_num(found, nan=-1.0).flatten()
        top = flat.topk(min(k, flat.numel()))
        r0 = _start(rows)
        c0 = _start(cols)
        width = found.shape[1]
        return [
            (r0 + int(i) // width, c0 + int(i) % width, float(w))
            for w, i in zip(top.values, top.indices)
        ]

    def stacked(self, layers=None) -> torch.Tensor:
        """Every head of ``layers`` (default all): [layers, heads, queries, keys] (the short
        input's CSV: a long one exports ``window``)."""
        layers = range(self.n_layers) if layers is None else layers
        return torch.stack([self.heads(layer=layer) for layer in layers])

    def window(self, rows: slice, cols: slice) -> dict:
        """One window of the chosen layer, every head, as arrays (``window_maps``): what a
        long input's downloads hold; positions count in the whole text."""
        return window_maps(self.shown, self.kind, self.layer, rows, cols)


def _window(m: torch.Tensor, rows, cols) -> torch.Tensor:
    m = m if rows is None else m[rows]
    return m if cols is None else m[:, cols]


def _start(index) -> int:
    if isinstance(index, slice):
        return index.start or 0
    return 0
