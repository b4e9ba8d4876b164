"""Find the bug: the classic attention bugs, injected into the lab's own reverse model.

Nothing is patched: the shared model is only read. ``forward`` re-runs the network's own
modules (embeddings, projections, FFNs, LayerNorms, output head) with the attention function,
the masks and the decoder input handed in, so a bug lives in one call and cannot leak into
another session. With the correct pieces it equals the model's own forward (a test holds it).
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from model.attention import MultiHeadAttention, scaled_dot_product_attention
from model.layers import AddNorm
from model.masks import attention_mask, future_mask
from model.tasks import EOS, reverse
from practice.core import Feedback, Step
from practice.lab import reverse_model

BUGS = ("mask_after_softmax", "no_sqrt", "pad_wrong_axis", "causal_off_by_one", "not_shifted")
# The attention each bug shows itself in first.
TELLING_KIND = {
    "mask_after_softmax": "decoder",
    "no_sqrt": "cross",
    "pad_wrong_axis": "encoder",
    "causal_off_by_one": "decoder",
    "not_shifted": "cross",
}

Attend = Callable[..., tuple[torch.Tensor, torch.Tensor]]


# --- the attention functions: the lab's own, and two buggy ones -----------------------------


def correct_attention(q, k, v, mask=None):
    return scaled_dot_product_attention(q, k, v, mask)


def attention_mask_after_softmax(q, k, v, mask=None):
    """Bug: softmax over every key, then the forbidden weights zeroed (rows no longer sum to 1)."""
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.to(torch.bool), 0.0)
    return weights @ v, weights


def attention_no_sqrt(q, k, v, mask=None):
    """Bug: softmax(Q Kᵀ) V, the √d_k forgotten."""
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask.to(torch.bool), torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.to(torch.bool), 0.0)
    return weights @ v, weights


# --- a forward pass over the model's own modules ----------------------------------------------


def _mha(m: MultiHeadAttention, query, key, value, mask, attend: Attend):
    q = m.split_heads(m.q_proj(query))  # [B, H, Lq, d_k]
    k = m.split_heads(m.k_proj(key))
    v = m.split_heads(m.v_proj(value))
    heads, weights = attend(q, k, v, mask)
    return m.out_proj(m.merge_heads(heads)), weights


def _add_norm(an: AddNorm, x, sublayer):
    if an.pre_norm:
        return x + sublayer(an.norm(x))
    return an.norm(x + sublayer(x))


@dataclass
class Run:
    logits: torch.Tensor  # [B, Lt, vocab]
    attention: dict[str, list[torch.Tensor]] = field(
        default_factory=dict
    )  # kind -> [B,H,Lq,Lk]/layer


@torch.inference_mode()
def forward(
    net,
    src_ids: torch.Tensor,  # [B, Ls]
    tgt_ids: torch.Tensor,  # [B, Lt] the decoder input
    *,
    attend: Attend = correct_attention,
    enc_mask: torch.Tensor | None,
    self_mask: torch.Tensor | None,
    cross_mask: torch.Tensor | None,
) -> Run:
    """The encoder-decoder ``net`` with every piece of attention handed in."""
    run = Run(logits=torch.empty(0), attention={"encoder": [], "decoder": [], "cross": []})
    x = net.src_embed(src_ids)
    for layer in net.encoder.layers:

        def self_attend(h, layer=layer):
            out, w = _mha(layer.self_attn, h, h, h, enc_mask, attend)
            run.attention["encoder"].append(w)
            return out

        x = _add_norm(layer.attn_norm, x, self_attend)
        x = _add_norm(layer.ffn_norm, x, layer.ffn)
    if net.encoder.final_norm is not None:
        x = net.encoder.final_norm(x)
    memory = x
    y = net.tgt_embed(tgt_ids)
    for layer in net.decoder.layers:

        def dec_attend(h, layer=layer):
            out, w = _mha(layer.self_attn, h, h, h, self_mask, attend)
            run.attention["decoder"].append(w)
            return out

        def cross_attend(h, layer=layer):
            out, w = _mha(layer.cross_attn, h, memory, memory, cross_mask, attend)
            run.attention["cross"].append(w)
            return out

        y = _add_norm(layer.attn_norm, y, dec_attend)
        y = _add_norm(layer.cross_norm, y, cross_attend)
        y = _add_norm(layer.ffn_norm, y, layer.ffn)
    if net.decoder.final_norm is not None:
        y = net.decoder.final_norm(y)
    run.logits = net.generator(y)
    return run


def correct_masks(src_ids, tgt_ids, pad_id: int):
    """The lab's masks: padding on the key axis (and query rows), causal in the decoder."""
    src_valid, tgt_valid = src_ids != pad_id, tgt_ids != pad_id
    return {
        "enc_mask": attention_mask(src_valid, src_valid),
        "self_mask": attention_mask(tgt_valid, tgt_valid, causal=True),
        "cross_mask": attention_mask(tgt_valid, src_valid),
    }


# --- one case of the gallery ------------------------------------------------------------------


@dataclass
class Side:
    """What one run (correct or buggy) shows: attention maps, predictions, loss."""

    src_tokens: list[str]
    dec_tokens: list[str]  # the decoder input as the run read it
    attention: dict[str, torch.Tensor]  # kind -> [layers, heads, Lq, Lk], this sentence only
    predictions: list[str]  # argmax at every decoder position (teacher forcing)
    labels: list[str]  # what each position should say
    accuracy: float
    loss: float
    row_sums: dict[str, tuple[float, float]]  # kind -> (min, max) of the weights' row sums
    sharpness: dict[str, float]  # kind -> mean largest weight per row (1 = one-hot)


@dataclass
class BugCase:
    bug: str
    seed: int
    source: str
    correct: Side
    buggy: Side
    options: tuple[str, ...] = BUGS

    @property
    def telling_kind(self) -> str:
        return TELLING_KIND[self.bug]

    def check(self, choice: str) -> Feedback:
        if choice not in self.options:
            return Feedback(False, "practice.feedback.unreadable")
        if choice == self.bug:
            return Feedback(True, f"practice.bugs.found.{self.bug}")
        return Feedback(False, f"practice.bugs.not.{choice}")

    @property
    def solution(self) -> list[Step]:
        c, b = self.correct, self.buggy
        return [
            Step(f"practice.bugs.why.{self.bug}"),
            Step(
                "practice.bugs.effect",
                {
                    "acc_ok": f"{100 * c.accuracy:.0f}",
                    "acc_bug": f"{100 * b.accuracy:.0f}",
                    "loss_ok": f"{c.loss:.3f}",
                    "loss_bug": f"{b.loss:.3f}",
                },
            ),
        ]


# The code, wrong and fixed: language-neutral lines for the side-by-side fix.
FIXES: dict[str, tuple[str, str]] = {
    "mask_after_softmax": (
        "weights = softmax(scores / sqrt(d_k))\nweights = weights.masked_fill(~mask, 0)",
        "scores = scores.masked_fill(~mask, -inf)\nweights = softmax(scores / sqrt(d_k))",
    ),
    "no_sqrt": (
        "weights = softmax(q @ k.T)",
        "weights = softmax(q @ k.T / sqrt(d_k))",
    ),
    "pad_wrong_axis": (
        "mask = valid[:, None, :, None]   # [B, 1, Lq, 1]: queries",
        "mask = valid[:, None, None, :]   # [B, 1, 1, Lk]: keys",
    ),
    "causal_off_by_one": (
        "allowed = k_pos <= q_pos + 1    # sees one step ahead",
        "allowed = k_pos <= q_pos        # sees itself and the past",
    ),
    "not_shifted": (
        "dec_input = [y1, ..., yn, <eos>]\nlabels    = [y1, ..., yn, <eos>]",
        "dec_input = [<bos>, y1, ..., yn]\nlabels    = [y1, ..., yn, <eos>]",
    ),
}


def _side(lm, run: Run, index: int, src_ids, dec_ids, labels) -> Side:
    src_tok, tgt_tok = lm.src_tokenizer, lm.tgt_tokenizer
    pad = lm.config.pad_id
    ns = int((src_ids[index] != pad).sum())
    nt = int((dec_ids[index] != pad).sum())
    n_src = ns if ns == src_ids.shape[1] else src_ids.shape[1]  # show padding when there is some
    lengths = {"encoder": (n_src, n_src), "decoder": (nt, nt), "cross": (nt, n_src)}
    attention = {
        kind: torch.stack([w[index, :, : lengths[kind][0], : lengths[kind][1]] for w in ws])
        .float()
        .cpu()
        for kind, ws in run.attention.items()
    }
    logits = run.logits[index, :nt].float()
    gold = torch.tensor(labels[:nt])
    pred = logits.argmax(-1)
    real_rows = {"encoder": ns, "decoder": nt, "cross": nt}  # padded query rows are all 0
    row_sums = {
        kind: (
            float(a[..., : real_rows[kind], :].sum(-1).min()),
            float(a[..., : real_rows[kind], :].sum(-1).max()),
        )
        for kind, a in attention.items()
    }
    sharpness = {
        kind: float(a[..., : real_rows[kind], :].max(-1).values.mean())
        for kind, a in attention.items()
    }
    return Side(
        src_tokens=src_tok.tokens(src_ids[index, :n_src].tolist()),
        dec_tokens=tgt_tok.tokens(dec_ids[index, :nt].tolist()),
        attention=attention,
        predictions=tgt_tok.tokens(pred.tolist()),
        labels=tgt_tok.tokens(gold.tolist()),
        accuracy=float((pred == gold).float().mean()),
        loss=float(F.cross_entropy(logits, gold)),
        row_sums=row_sums,
        sharpness=sharpness,
    )


def _pad(rows: list[list[int]], pad: int) -> torch.Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor([r + [pad] * (width - len(r)) for r in rows])


@functools.cache
def _test_pool() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(4..6 symbol, 10 or more symbol) test sequences: one fixed draw for the process (it
    took thousands of draws each time, most of a case's cost)."""
    pool = [s for s, _ in reverse.sample(200, 7, split="test")]
    short = tuple(s for s in pool if 4 <= len(s.split()) <= 6)
    return short, tuple(s for s in pool if len(s.split()) >= 10)


def _sources(rng: random.Random) -> tuple[str, str]:
    """A 4..6 symbol test sequence, and a partner of 10 or more to pad it against (much
    padding, so a padding bug has room to show)."""
    shorts, longs = _test_pool()
    return rng.choice(shorts), rng.choice(longs)


def case(bug: str, seed: int) -> BugCase:
    """The reverse model with ``bug`` injected, beside the same model done right."""
    if bug not in BUGS:
        raise ValueError(f"unknown bug {bug!r}; choose one of {BUGS}")
    lm = reverse_model()
    net, pad = lm.network, lm.config.pad_id
    src_tok, tgt_tok = lm.src_tokenizer, lm.tgt_tokenizer
    rng = random.Random(f"practice-bug:{bug}:{seed}")
    short, long = _sources(rng)
    # A batch of two: the short sequence (the one shown) padded against a longer one, so the
    # padding mask has something to do.
    pairs = [(short, reverse.reference(short)), (long, reverse.reference(long))]
    src = _pad([src_tok.encode(s, lm.max_len).ids for s, _ in pairs], pad)
    ys = [tgt_tok.encode_target(t, lm.max_len).ids for _, t in pairs]
    eos = tgt_tok.index[EOS]
    dec = _pad([[tgt_tok.bos_id, *y] for y in ys], pad)
    labels = [[*y, eos] for y in ys]
    masks = correct_masks(src, dec, pad)
    right = forward(net, src, dec, **masks)

    attend, bug_src, bug_dec, bug_masks = correct_attention, src, dec, dict(masks)
    if bug == "mask_after_softmax":
        attend = attention_mask_after_softmax
    elif bug == "no_sqrt":
        attend = attention_no_sqrt
    elif bug == "pad_wrong_axis":
        src_valid, tgt_valid = src != pad, dec != pad
        bug_masks["enc_mask"] = src_valid[:, None, :, None]  # queries, not keys
        bug_masks["cross_mask"] = tgt_valid[:, None, :, None]
    elif bug == "causal_off_by_one":
        lt = dec.shape[1]
        tgt_valid = dec != pad
        bug_masks["self_mask"] = attention_mask(tgt_valid, tgt_valid) & future_mask(
            lt, lt, offset=1
        )
    elif bug == "not_shifted":
        bug_dec = _pad(labels, pad)  # the labels themselves fed in: nothing to predict
        bug_masks = correct_masks(src, bug_dec, pad)
    wrong = forward(net, bug_src, bug_dec, attend=attend, **bug_masks)
    return BugCase(
        bug=bug,
        seed=seed,
        source=short,
        correct=_side(lm, right, 0, src, dec, labels[0]),
        buggy=_side(lm, wrong, 0, bug_src, bug_dec, labels[0]),
    )


GALLERY_SIZE = 5
# The attention a case opens on: the same for every case, so it says nothing about the bug
# (opening on the bug's TELLING_KIND would give it away: Encoder could only mean pad_wrong_axis).
NEUTRAL_KIND = "cross"


def gallery(seed: int, size: int = GALLERY_SIZE) -> list[BugCase]:
    """``size`` cases, each bug drawn independently (a bug may come twice, another not at all),
    so the last case never follows by elimination; the same for a whole class."""
    return [case(bug, sub) for bug, sub in draws(seed, size)]


def draws(seed: int, size: int = GALLERY_SIZE) -> list[tuple[str, int]]:
    """(bug, case seed) of each case of gallery ``seed``, without running the model."""
    rng = random.Random(f"practice-gallery:{seed}")
    return [(rng.choice(BUGS), rng.randrange(10**9)) for _ in range(size)]
