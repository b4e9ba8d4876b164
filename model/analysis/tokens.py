"""Views of a Trace for people: subword pieces merged into words, special tokens hidden.

Pure functions, Trace in and Trace out, so every attention plot works on the result too.
Merging sums attention over a word's key pieces (a word receives what its pieces received)
and averages it over its query pieces (a word attends as its pieces do on average), so every
row still sums to 1. Only tokens and attention are carried over: stages, LayerNorm statistics
and logits belong to pieces, not words.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence

import torch

from model.trace import Trace

# Tokens that frame a text rather than carry it, across the common tokenizer families.
DEFAULT_SPECIAL_TOKENS = frozenset(
    {
        "[CLS]",
        "[SEP]",
        "[PAD]",
        "[MASK]",
        "<s>",
        "</s>",
        "<bos>",
        "<eos>",
        "<pad>",
        "<mask>",
        "<|endoftext|>",
    }
)
STYLES = ("wordpiece", "byte-level", "sentencepiece")
_SPACE_MARKS = ("Ġ", "Ċ", "ĉ")  # byte-level space, newline, tab


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's table: every byte as a printable character (so "Ġ" is a space)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    printable += range(ord("®"), ord("ÿ") + 1)
    table, extra = {b: chr(b) for b in printable}, 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


_BYTE_OF_CHAR = {c: b for b, c in _bytes_to_unicode().items()}


def written_text(tokenizer, tokens: Sequence[str], specials: Iterable[str] = ()) -> str:
    """A model's output tokens as a sentence is written. The lab's word tokenizers glue
    Korean particles back to their noun ("나 는" -> "나는"); other tokenizers join by spaces."""
    shown = [tok for tok in tokens if tok not in frozenset(specials)]
    written = getattr(tokenizer, "written", None)
    return written(shown) if callable(written) else " ".join(shown)


def special_token_set(tokenizer=None, extra: Iterable[str] = ()) -> frozenset[str]:
    """The defaults, plus the tokenizer's own ``special_tokens`` (if given), plus ``extra``."""
    own = getattr(tokenizer, "special_tokens", None) or ()
    return DEFAULT_SPECIAL_TOKENS | frozenset(own) | frozenset(extra)


def subword_style(tokens: Sequence[str]) -> str | None:
    """Guess the piece marker from the tokens themselves: ## , Ġ or ▁ (None: whole words)."""
    if any(t.startswith("##") for t in tokens):
        return "wordpiece"
    if any(t.startswith(_SPACE_MARKS) for t in tokens):
        return "byte-level"
    if any(t.startswith("▁") for t in tokens):
        return "sentencepiece"
    return None


def _continues(prev: str, token: str, style: str | None) -> bool:
    """Whether ``token`` is a later piece of the word ``prev`` belongs to."""
    if style == "wordpiece":
        return token.startswith("##")
    if style == "byte-level":
        return not token.startswith(_SPACE_MARKS) and not prev.endswith(_SPACE_MARKS)
    if style == "sentencepiece":
        return not token.startswith("▁")
    return False


def word_groups(
    tokens: Sequence[str], specials: Iterable[str] | None = None, style: str | None = None
) -> list[list[int]]:
    """Token positions grouped into words, in order; a special token is always alone.

    ``style`` is "wordpiece", "byte-level" or "sentencepiece"; None guesses it from ``tokens``.
    """
    specials = DEFAULT_SPECIAL_TOKENS if specials is None else frozenset(specials)
    style = style or subword_style(tokens)
    if style is not None and style not in STYLES:
        raise ValueError(f"unknown subword style {style!r}; expected one of {STYLES}")
    groups: list[list[int]] = []
    for i, token in enumerate(tokens):
        prev = tokens[groups[-1][-1]] if groups else None
        if (
            prev is not None
            and token not in specials
            and prev not in specials
            and _continues(prev, token, style)
        ):
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def word_text(pieces: Sequence[str], style: str | None) -> str:
    """The word a run of pieces spells, markers removed (and byte-level bytes decoded)."""
    if style == "wordpiece":
        text = pieces[0] + "".join(p.removeprefix("##") for p in pieces[1:])
    elif style == "byte-level":
        joined = "".join(pieces)
        if all(c in _BYTE_OF_CHAR for c in joined):
            text = bytes(_BYTE_OF_CHAR[c] for c in joined).decode("utf-8", errors="replace")
        else:
            text = joined.replace("Ġ", " ")
    elif style == "sentencepiece":
        text = "".join(pieces).replace("▁", " ")
    else:
        text = "".join(pieces)
    # NFC joins what a tokenizer took apart (BERT-uncased splits Hangul into jamo).
    text = unicodedata.normalize("NFC", text.strip())
    return text or "".join(pieces)


def merge_attention(
    weights: torch.Tensor, query_groups: list[list[int]], key_groups: list[list[int]]
) -> torch.Tensor:
    """[..., Lq, Lk] -> [..., Wq, Wk]: keys summed within a word, queries averaged."""
    lq, lk = weights.shape[-2], weights.shape[-1]
    average = torch.zeros(len(query_groups), lq, dtype=weights.dtype)  # [Wq, Lq]
    for w, group in enumerate(query_groups):
        average[w, group] = 1.0 / len(group)
    total = torch.zeros(lk, len(key_groups), dtype=weights.dtype)  # [Lk, Wk]
    for w, group in enumerate(key_groups):
        total[group, w] = 1.0
    return average.to(weights.device) @ weights @ total.to(weights.device)


def _sides(kind: str) -> tuple[str, str]:
    """Which token list ("src" / "tgt") holds the queries and the keys of an attention kind."""
    sides = {"encoder": ("src", "src"), "decoder": ("tgt", "tgt"), "cross": ("tgt", "src")}
    if kind not in sides:
        raise KeyError(f"unknown attention kind {kind!r}; expected one of {tuple(sides)}")
    return sides[kind]


def merge_subwords(
    trace: Trace, specials: Iterable[str] | None = None, style: str | None = None
) -> Trace:
    """The trace with pieces joined into words, for every attention kind (cross included)."""
    specials = DEFAULT_SPECIAL_TOKENS if specials is None else frozenset(specials)
    tokens = {"src": trace.src_tokens, "tgt": trace.tgt_tokens}
    groups, words = {}, {}
    for side, toks in tokens.items():
        side_style = style or subword_style(toks)
        groups[side] = word_groups(toks, specials, side_style)
        words[side] = [word_text([toks[i] for i in g], side_style) for g in groups[side]]
    attention, masks = {}, {}
    for kind, weights in trace.attention.items():
        q_side, k_side = _sides(kind)
        attention[kind] = merge_attention(weights, groups[q_side], groups[k_side])
        # A word may attend a word when any of its pieces may attend any of the other's.
        allowed = trace.mask(kind).to(weights.dtype)
        masks[kind] = merge_attention(allowed, groups[q_side], groups[k_side]) > 0
    return Trace(words["src"], words["tgt"], attention, masks=masks)


def hide_special_tokens(
    trace: Trace, specials: Iterable[str] | None = None, renormalize: bool = True
) -> tuple[Trace, dict[str, torch.Tensor]]:
    """The trace without special tokens, and the share of attention they took away.

    Returns (trace, removed) where removed[kind] is [layers, heads]: the mean, over the kept
    queries, of the weight those queries paid to hidden keys. With ``renormalize`` each kept
    row is rescaled to sum to 1 again; otherwise rows keep their original values.
    """
    specials = DEFAULT_SPECIAL_TOKENS if specials is None else frozenset(specials)
    tokens = {"src": trace.src_tokens, "tgt": trace.tgt_tokens}
    keep = {
        side: [i for i, t in enumerate(toks) if t not in specials] for side, toks in tokens.items()
    }
    attention, removed, masks = {}, {}, {}
    for kind, weights in trace.attention.items():
        q_side, k_side = _sides(kind)
        masks[kind] = trace.mask(kind)[keep[q_side]][:, keep[k_side]]
        rows = weights[..., keep[q_side], :]  # [layers, heads, kept queries, all keys]
        kept = rows[..., keep[k_side]]  # [layers, heads, kept queries, kept keys]
        row_sum, kept_sum = rows.sum(-1), kept.sum(-1)  # [layers, heads, kept queries]
        share = torch.where(row_sum > 0, 1 - kept_sum / row_sum.clamp_min(1e-12), 0.0)
        removed[kind] = share.mean(-1) if share.shape[-1] else share.sum(-1)
        if renormalize:
            # A row that paid everything to hidden keys has nothing left to rescale: zeros.
            kept = torch.where(
                kept_sum[..., None] > 0, kept / kept_sum[..., None].clamp_min(1e-12), 0.0
            )
        attention[kind] = kept
    new_tokens = {side: [tokens[side][i] for i in keep[side]] for side in tokens}
    return Trace(new_tokens["src"], new_tokens["tgt"], attention, masks=masks), removed
