"""Views of a Trace for people: subword pieces merged into words, special tokens hidden.

Pure functions, Trace in and Trace out, so every attention plot works on the result too.
Merging sums attention over a word's key pieces (a word receives what its pieces received)
and averages it over its query pieces (a word attends as its pieces do on average), so every
row still sums to 1. Only tokens and attention are carried over: stages, LayerNorm statistics
and logits belong to pieces, not words.

Tokens arrive as the lab shows them (model.hf.pieces): WordPiece's "##ing", and for
byte-level BPE and SentencePiece "␣cat" and "학 · 2/3"; raw pieces ("Ġcat", "▁cat") from a
notebook are read into that form first.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence

import torch

from model.hf.pieces import (
    BYTE_OF_CHAR,
    JOIN,
    SPACE,
    display_pieces,
    display_text,
    ends_word,
    part_of,
    starts_word,
    visible,
)
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
# "spaced": the lab's display of byte-level and SentencePiece pieces; the other two raw.
STYLES = ("wordpiece", "byte-level", "sentencepiece", "spaced")
UNITS = ("word", "character")
_SPACE_MARKS = ("Ġ", "Ċ", "ĉ")  # byte-level space, newline, tab
_JAMO_AFTER_LEAD = ("\u1161", "\u11ff")  # Hangul vowels and final consonants (conjoining)


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


def token_names(tokenizer, ids: Iterable[int]) -> list[str]:
    """Each id's token read alone (lens candidates, each position's answer): ``tokens``
    reads its ids as one text, where the bytes of neighbours join into characters."""
    names: dict[int, str] = {}
    out = []
    for i in ids:
        i = int(i)
        if i not in names:
            names[i] = tokenizer.tokens([i])[0]
        out.append(names[i])
    return out


def _shows_spaces(token: str) -> bool:
    """Whether a token is in the lab's spaced display: a visible blank or a character part."""
    return any(c in token for c in "␣↵⇥") or part_of(token.split(JOIN)[-1]) is not None


def subword_style(tokens: Sequence[str]) -> str | None:
    """Guess how ``tokens`` mark words, from the tokens themselves: "byte-level" /
    "sentencepiece" for raw pieces ("Ġcat", "▁cat"), "spaced" for their display ("␣cat",
    "학 · 2/3"), "wordpiece" for "##" pieces, None for whole words (nothing to join).

    A guess: a text with no space and no split character gives no sign. Pass the
    tokenizer's own ``subword_style`` where it is known."""
    if any(t.startswith(_SPACE_MARKS) for t in tokens):
        return "byte-level"
    if any(t.startswith("▁") for t in tokens):
        return "sentencepiece"
    if any(_shows_spaces(t) for t in tokens):
        return "spaced"
    if any(t.startswith("##") and len(t) > 2 for t in tokens):
        return "wordpiece"
    return None


def _as_shown(
    tokens: Sequence[str], specials: frozenset[str], style: str | None
) -> tuple[list[str], str | None]:
    """``tokens`` in the lab's display, with the rule their words follow: raw byte-level or
    SentencePiece pieces are read into display strings; the rest stay as they are."""
    style = style or subword_style(tokens)
    if style is not None and style not in STYLES:
        raise ValueError(f"unknown subword style {style!r}; expected one of {STYLES}")
    if style not in ("byte-level", "sentencepiece"):
        return list(tokens), style
    raw = _looks_raw([t for t in tokens if t not in specials])
    return (display_pieces(tokens, style, specials) if raw else list(tokens)), "spaced"


def _looks_raw(tokens: Sequence[str]) -> bool:
    """Whether tokens are a vocabulary's raw pieces rather than their display: a space mark
    ("Ġcat", "▁cat"), or only byte stand-ins with at least one of those that stand for a
    byte no text shows (U+0100-U+0143: "ķ", "Ī", ...). A display string holds a blank
    symbol, a part's spaces, or a character outside the stand-ins."""
    if any(t.startswith((*_SPACE_MARKS, "▁")) for t in tokens):
        return True
    chars = [c for t in tokens for c in t]
    return all(c in BYTE_OF_CHAR for c in chars) and any("\u0100" <= c <= "\u0143" for c in chars)


def _continues(prev: str, token: str, style: str | None) -> bool:
    """Whether ``token`` is a later piece of the word ``prev`` belongs to."""
    if style == "wordpiece":
        return token.startswith("##")
    if style == "spaced":  # a blank-only token ("␣") is the space before the next word
        return not starts_word(token) and (not ends_word(prev) or set(prev) == {SPACE})
    return False


def _continues_character(prev: str, token: str, style: str | None) -> bool:
    """Whether ``token`` holds more of the character ``prev`` ends with: its next byte part
    ("학 · 2/3" after "학 · 1/3"), or for WordPiece a Hangul vowel or final jamo."""
    if style == "wordpiece":
        first = token.removeprefix("##")[:1]
        return token.startswith("##") and _JAMO_AFTER_LEAD[0] <= first <= _JAMO_AFTER_LEAD[1]
    last, first = part_of(prev.split(JOIN)[-1]), part_of(token.split(JOIN)[0])
    return last is not None and first is not None and first[0] == last[0] and first[1] > 1


def word_groups(
    tokens: Sequence[str],
    specials: Iterable[str] | None = None,
    style: str | None = None,
    unit: str = "word",
) -> list[list[int]]:
    """Token positions grouped into words (or characters), in order; a special token is
    always alone.

    ``style`` is one of STYLES; None guesses it from ``tokens``. For "spaced" tokens a word
    starts at a blank ("␣cat", or after "↵"), so Korean pieces join into 어절, the words
    spaces separate ("␣학생" "입니다" "." -> "학생입니다."). ``unit="character"`` joins only
    the tokens that share one character (its byte parts, or WordPiece's jamo of a syllable).
    """
    specials = DEFAULT_SPECIAL_TOKENS if specials is None else frozenset(specials)
    if unit not in UNITS:
        raise ValueError(f"unknown unit {unit!r}; expected one of {UNITS}")
    shown, style = _as_shown(tokens, specials, style)
    joins = _continues if unit == "word" else _continues_character
    groups: list[list[int]] = []
    for i, token in enumerate(shown):
        prev = shown[groups[-1][-1]] if groups else None
        if (
            prev is not None
            and token not in specials
            and prev not in specials
            and joins(prev, token, style)
        ):
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def word_text(
    pieces: Sequence[str], style: str | None, specials: Iterable[str] = (), unit: str = "word"
) -> str:
    """The word a run of tokens spells, marks removed and bytes decoded; for
    ``unit="character"`` the run's characters as a token shows them ("␣학교": the space
    stays visible, as on the token it came from)."""
    shown, style = _as_shown(pieces, frozenset(specials), style)
    if unit == "character" and style == "spaced":
        if len(shown) == 1:
            return shown[0]
        return "".join(visible(c) for c in display_text(shown))
    if style == "wordpiece":
        text = shown[0] + "".join(p.removeprefix("##") for p in shown[1:])
    elif style == "spaced":
        text = display_text(shown)
    else:
        text = "".join(shown)
    # NFC joins what a tokenizer took apart (BERT-uncased splits Hangul into jamo).
    text = unicodedata.normalize("NFC", text.strip())
    return text or "".join(shown)


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
    trace: Trace,
    specials: Iterable[str] | None = None,
    style: str | None = None,
    unit: str = "word",
) -> Trace:
    """The trace with pieces joined into words (or, ``unit="character"``, only the pieces
    of one character), for every attention kind (cross included)."""
    specials = DEFAULT_SPECIAL_TOKENS if specials is None else frozenset(specials)
    tokens = {"src": trace.src_tokens, "tgt": trace.tgt_tokens}
    groups, words = {}, {}
    for side, toks in tokens.items():
        side_style = style or subword_style(toks)
        groups[side] = word_groups(toks, specials, side_style, unit)
        words[side] = [
            word_text([toks[i] for i in g], side_style, specials, unit) for g in groups[side]
        ]
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
