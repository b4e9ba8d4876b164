"""Activation patching: run the corrupted input, put back one clean activation, see what returns.

Clean and corrupted inputs differ in a word (or digit, or letter) and have the same length.
Both are continued with the clean output up to the first token where the two runs part;
there the clean run says A, the corrupted one B. The logit difference LD = logit(A) -
logit(B) is measured on the corrupted run with one activation restored from the clean run:

    recovered = (LD_patched - LD_corrupted) / (LD_clean - LD_corrupted)

0 = restoring it changes nothing, 1 = it brings the whole clean answer back. Restoring
nothing gives 0 and restoring the whole stream after the last layer gives 1, exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import zip_longest

import torch

from model.analysis.circuit import Edit, Site, check_network, run
from model.analysis.lens import Inputs, decoder_inputs
from model.runtime.lab import LabModel


class PatchingError(ValueError):
    """Inputs patching cannot compare; ``key`` names the message for the page's catalogs."""

    def __init__(self, key: str, message: str, **details):
        super().__init__(message)
        self.key, self.details = key, details


@dataclass
class Pair:
    """Clean and corrupted inputs, continued alike up to the token where the answers part."""

    clean: Inputs
    corrupted: Inputs
    answer: str  # the clean run's token (A)
    other: str  # the corrupted run's token (B)
    answer_id: int
    other_id: int
    position: int  # the decoder position whose prediction is read
    changed: list[int]  # positions (of the patched stream) where the two inputs differ
    stream: str  # the stream patched by position: "decoder" or "encoder"


def _parting(lm: LabModel, clean: str, corrupted: str) -> tuple[list[int], int, int] | None:
    """Both greedy continuations, side by side until they part: the tokens they share, then
    the clean one's and the corrupted one's; None when they never part (an ending counts as
    the end-of-sequence token). Stopping there, not at the whole budget, spares a real model
    up to 2 x 64 decoding steps."""
    eos = lm.tgt_tokenizer.eos_id
    shared: list[int] = []
    for a, b in zip_longest(lm.decode(clean), lm.decode(corrupted)):
        x, y = (eos if s is None else s.token_id for s in (a, b))
        if x != y:
            return shared, x, y
        if x == eos:
            return None
        shared.append(x)
    return None


def make_pair(lm: LabModel, clean: str, corrupted: str) -> Pair:
    """Check the two inputs and find the first token where the model's answers differ."""
    check_network(lm.network)
    a, b = lm.encode(clean), lm.encode(corrupted)
    for which, enc, text in (("clean", a, clean), ("corrupted", b, corrupted)):
        if not text.strip() or len(enc.ids) == len(lm.encode("").ids):
            raise PatchingError("empty", f"the {which} input is empty", which=which)
        if enc.unknown:
            raise PatchingError(
                "unknown",
                f"the {which} input has unknown words: {', '.join(enc.unknown)}",
                which=which,
                words=enc.unknown,
            )
        if enc.truncated:
            raise PatchingError("too_long", f"the {which} input is too long", which=which)
    if len(a.ids) != len(b.ids):
        specials = len(lm.encode("").ids)  # <bos> (and <sep>, <eos>): not what was typed
        clean_n, corrupted_n = len(a.ids) - specials, len(b.ids) - specials
        raise PatchingError(
            "length",
            f"the inputs must have the same length: {clean_n} and {corrupted_n} tokens",
            clean=clean_n,
            corrupted=corrupted_n,
        )
    changed = [i for i, (x, y) in enumerate(zip(a.ids, b.ids)) if x != y]
    if not changed:
        raise PatchingError("same", "the corrupted input is the same as the clean one")
    parting = _parting(lm, clean, corrupted)
    if parting is None:
        raise PatchingError("same_answer", "both inputs get the same answer: nothing to restore")
    prefix, answer_id, other_id = parting
    ci, ki = decoder_inputs(lm, clean, prefix), decoder_inputs(lm, corrupted, prefix)
    if ci.ids.shape[1] >= lm.max_len:
        raise PatchingError("too_long", "the answers part too late for this model's length")
    tok = lm.tgt_tokenizer
    stream = "encoder" if lm.kind == "encoder-decoder" else "decoder"
    return Pair(
        clean=ci,
        corrupted=ki,
        answer=tok.tokens([answer_id])[0],
        other=tok.tokens([other_id])[0],
        answer_id=answer_id,
        other_id=other_id,
        position=ci.ids.shape[1] - 1,
        changed=changed,
        stream=stream,
    )


@dataclass
class Patching:
    """Recovered fraction of the logit difference for every restoration tried."""

    pair: Pair
    ld_clean: float
    ld_corrupted: float
    stream_tokens: list[str]  # the positions of the patched stream (clean tokens)
    corrupted_tokens: list[str]
    by_position: torch.Tensor  # [layers + 1, positions]: row 0 = embeddings, i = after layer i
    by_head: dict[str, torch.Tensor]  # kind -> [layers, heads], head output at all positions
    whole_last_layer: float  # the whole stream after the last layer restored (1 by design)
    nothing: float  # nothing restored (0 by design)

    @property
    def position_labels(self) -> list[str]:
        """The patched stream's positions as a chart names them: a changed token as
        clean→corrupted, an unchanged one as itself."""
        return [
            f"{tok}→{bad}" if tok != bad else tok
            for tok, bad in zip(self.stream_tokens, self.corrupted_tokens)
        ]


def _ld(logits: torch.Tensor, pair: Pair) -> float:
    row = logits[0, pair.position].double()
    return float(row[pair.answer_id] - row[pair.other_id])


# Restorations run together as one batch: the whole grid of a 270M model in passes of this many
# (each keeps its stream and attention for every layer: small at a sentence's length).
CHUNK = 16


@torch.no_grad()
def patch(lm: LabModel, clean: str, corrupted: str) -> Patching:
    """Every (layer, position) of the stream the inputs differ in, and every head's output."""
    pair = make_pair(lm, clean, corrupted)
    net = lm.network
    c, k = pair.clean, pair.corrupted
    clean_run = run(net, c.ids, c.src_ids)
    stored = clean_run.resid, clean_run.heads
    ld_clean = _ld(clean_run.logits, pair)
    corrupted_run = run(net, k.ids, k.src_ids)
    ld_corr = _ld(corrupted_run.logits, pair)
    corrupted_resid = corrupted_run.resid["decoder"]  # the decoder's stream, after each layer
    span = ld_clean - ld_corr  # > 0: A wins the clean run, B the corrupted one

    def recovered_all(edits: list[tuple[int, Edit]]) -> list[float]:
        """The recovered fraction of each restoration (the resid site it first touches, its
        edit), run CHUNK at a time as one batch of the corrupted input (row j restored by
        edits[j]), reading the answer's position only. A decoder-only model's batch starts
        from the corrupted stream below its lowest site: the layers under it compute the
        same thing in every row."""
        out: list[float] = []
        for begin in range(0, len(edits), CHUNK):
            chunk = edits[begin : begin + CHUNK]
            ids = k.ids.expand(len(chunk), -1)
            src = None if k.src_ids is None else k.src_ids.expand(len(chunk), -1)
            start = None
            if src is None:
                first = min(site for site, _ in chunk)
                start = (first, corrupted_resid[first].expand(len(chunk), -1, -1))
            edit = _rowwise([e for _, e in chunk])
            logits = run(net, ids, src, edit=edit, logits_at=pair.position, start=start).logits
            rows = logits[:, 0].double()
            lds = rows[:, pair.answer_id] - rows[:, pair.other_id]
            out += [(float(ld) - ld_corr) / span for ld in lds]
        return out

    def restore_resid(layer: int, position: int | None):
        def edit(site: Site, x: torch.Tensor) -> torch.Tensor:
            if site != ("resid", pair.stream, layer):
                return x
            clean_x = stored[0][pair.stream][layer]
            if position is None:
                return clean_x
            x = x.clone()
            x[:, position] = clean_x[:, position]
            return x

        return edit

    def restore_head(kind: str, layer: int, head: int):
        def edit(site: Site, x: torch.Tensor) -> torch.Tensor:
            if site != ("heads", kind, layer):
                return x
            x = x.clone()
            x[:, head] = stored[1][(kind, layer)][:, head]
            return x

        return edit

    n_layers = len(stored[0][pair.stream]) - 1
    n_pos = stored[0][pair.stream][0].shape[1]
    n_heads = net.config.n_heads
    kinds = sorted({kind for kind, _ in stored[1]}, key=("encoder", "decoder", "cross").index)
    layers_of = {kind: sum(1 for kk, _ in stored[1] if kk == kind) for kind in kinds}
    # (the resid site below which a restoration changes nothing, the restoration); the
    # decoder's heads of layer i read its stream at site i, the encoder's and the cross
    # attention's are reached only by a whole pass (0)
    edits = [(i, restore_resid(i, p)) for i in range(n_layers + 1) for p in range(n_pos)]
    if pair.stream != "decoder":
        edits = [(0, e) for _, e in edits]
    edits += [
        (i if kind == "decoder" else 0, restore_head(kind, i, h))
        for kind in kinds
        for i in range(layers_of[kind])
        for h in range(n_heads)
    ]
    edits += [(n_layers, restore_resid(n_layers, None)), (0, lambda site, x: x)]  # the checks
    found = recovered_all(edits)
    grid = torch.tensor(found[: (n_layers + 1) * n_pos]).view(n_layers + 1, n_pos)
    by_head, at = {}, (n_layers + 1) * n_pos
    for kind in kinds:
        size = layers_of[kind] * n_heads
        by_head[kind] = torch.tensor(found[at : at + size]).view(layers_of[kind], n_heads)
        at += size
    tokens = c.src_tokens if pair.stream == "encoder" else c.tokens
    corr_tokens = k.src_tokens if pair.stream == "encoder" else k.tokens
    return Patching(
        pair=pair,
        ld_clean=ld_clean,
        ld_corrupted=ld_corr,
        stream_tokens=tokens,
        corrupted_tokens=corr_tokens,
        by_position=grid,
        by_head=by_head,
        whole_last_layer=found[-2],
        nothing=found[-1],
    )


def _rowwise(edits: list):
    """One edit for a batch whose row j is restored by ``edits[j]`` (each written for one
    sequence); a site no edit touches passes through untouched."""

    def edit(site: Site, x: torch.Tensor) -> torch.Tensor:
        rows = [x[j : j + 1] for j in range(len(edits))]
        done = [e(site, row) for e, row in zip(edits, rows)]
        if all(d is row for d, row in zip(done, rows)):
            return x
        return torch.cat(done)

    return edit
