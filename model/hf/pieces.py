"""A tokenizer's pieces as people read them: one function, decided by the tokenizer's family.

Byte-level BPE (GPT-2, SmolLM2) spells every byte as a printable stand-in ("Ġ" is a space,
"ì" the byte 0xEC), and SentencePiece (Gemma) writes a space as "▁" and a byte it has no
piece for as "<0xEC>". Shown raw, a Korean sentence is noise (``ìķĪ``). Here the pieces of
one text are read back into the bytes they hold, the bytes into characters, and each token
shows the text it holds, by one convention for every tokenizer:

- a token shows what it holds; whitespace is made visible: "␣" a space, "↵" a new line,
  "⇥" a tab (the "␣" that ``viz.attention.token_label`` already draws for blank tokens);
  WordPiece keeps its own "##" (it stores no spaces: "##" is how it says "no space before");
- a token that holds part of a character shows the character and which part it is:
  "학 · 2/3" is the 2nd of the 3 tokens that share 학's bytes; a token that holds the end of
  one character and the start of the next shows both, joined by " + " ("안 · 2/2 + 녕 · 1/2");
- bytes that make no character (a text cut mid-character, a lone token out of context) show
  as "<0xEC>", SentencePiece's own notation: honest, never mojibake.

Spaces inside a display string are always this module's own (the text's spaces are "␣"), so
``display_text`` reads the strings back into the text they came from.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from functools import lru_cache

STYLES = ("wordpiece", "byte-level", "sentencepiece")
SPACE, NEWLINE, TAB = "␣", "↵", "⇥"
PART = " · "  # "학 · 2/3"
JOIN = " + "  # between the segments of a token that holds parts of two characters
_PART = re.compile(r"^(.+) · (\d+)/(\d+)$")
_HEX = re.compile(r"<0x([0-9A-F]{2})>")
_CODEPOINT = re.compile(r"<U\+([0-9A-F]{4,6})>")
_SP_BYTE = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")
_DOTTED_CIRCLE = "◌"  # the base a lone combining mark is drawn on (Unicode's own convention)


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


BYTE_OF_CHAR = {c: b for b, c in _bytes_to_unicode().items()}


# --- which family --------------------------------------------------------------------------


def style_of_vocab(vocab: Iterable[str]) -> str | None:
    """The family most pieces of a vocabulary mark: "##", "Ġ" or "▁" (None: whole words)."""
    counts = {"wordpiece": 0, "byte-level": 0, "sentencepiece": 0}
    for piece in vocab:
        if piece.startswith("##"):
            counts["wordpiece"] += 1
        elif piece.startswith("Ġ"):
            counts["byte-level"] += 1
        elif piece.startswith("▁"):
            counts["sentencepiece"] += 1
    style, n = max(counts.items(), key=lambda kv: kv[1])
    return style if n else None


def _component(part) -> str:
    """A tokenizers component's own JSON (small: never the vocabulary), or ""."""
    if part is None:
        return ""
    try:
        state = part.__getstate__()
    except Exception:  # an older tokenizers without pickling support: fall back to its type
        return type(part).__name__
    return state.decode("utf-8", "replace") if isinstance(state, bytes) else str(state)


def style_of(backend) -> str | None:
    """The family of a ``tokenizers.Tokenizer`` (transformers' fast tokenizers hold one as
    ``backend_tokenizer``), read from its parts rather than guessed from its tokens: a
    WordPiece model, a ByteLevel pre-tokenizer or decoder, a SentencePiece decoder ("▁"
    replaced, or Metaspace) or a BPE model with byte fallback."""
    model = getattr(backend, "model", None)
    if type(model).__name__ == "WordPiece":
        return "wordpiece"
    parts = _component(getattr(backend, "pre_tokenizer", None)) + _component(
        getattr(backend, "decoder", None)
    )
    if "ByteLevel" in parts:
        return "byte-level"
    if "Metaspace" in parts or "▁" in parts or getattr(model, "byte_fallback", False):
        return "sentencepiece"
    try:
        return style_of_vocab(backend.get_vocab())
    except Exception:  # not a tokenizers object after all
        return None


# --- pieces -> bytes -> what each token shows ------------------------------------------------


def piece_bytes(piece: str, style: str | None) -> bytes | None:
    """The bytes a piece stands for (None for an empty piece, shown as it is)."""
    if style == "byte-level":
        if not piece:
            return None
        if any(c not in BYTE_OF_CHAR for c in piece):  # an added token, kept as its text
            return piece.encode("utf-8")
        return bytes(BYTE_OF_CHAR[c] for c in piece)
    if style == "sentencepiece":
        byte = _SP_BYTE.match(piece)
        if byte:
            return bytes([int(byte.group(1), 16)])
        return piece.replace("▁", " ").encode("utf-8")
    return piece.encode("utf-8")


def visible(char: str, alone: bool = False) -> str:
    """One character as a label can show it: whitespace and control characters as symbols,
    invisible format characters by code point, a combining mark on a dotted circle when it
    has no base before it in the same token (``alone``)."""
    if char == " ":
        return SPACE
    if char == "\n":
        return NEWLINE
    if char == "\t":
        return TAB
    code = ord(char)
    if code < 0x20:
        return chr(0x2400 + code)  # Unicode's control pictures: ␍ ␀ ...
    if code == 0x7F:
        return "␡"
    category = unicodedata.category(char)
    if category == "Zs":
        return SPACE
    if category in ("Cc", "Cf", "Zl", "Zp", "Co", "Cs"):
        return f"<U+{code:04X}>"
    if alone and category in ("Mn", "Me", "Mc"):
        return _DOTTED_CIRCLE + char
    return char


def _utf8_size(lead: int) -> int:
    """How many bytes a UTF-8 character starting with ``lead`` has (0: not a start byte)."""
    if lead < 0x80:
        return 1
    if 0xC2 <= lead <= 0xDF:
        return 2
    if 0xE0 <= lead <= 0xEF:
        return 3
    if 0xF0 <= lead <= 0xF4:
        return 4
    return 0


def _units(data: bytes) -> list[tuple[int, int, str | None]]:
    """``data`` cut into characters (start, end, char) and undecodable bytes (start, end, None)."""
    units, i = [], 0
    while i < len(data):
        size = _utf8_size(data[i])
        if size:
            try:
                units.append((i, i + size, data[i : i + size].decode("utf-8")))
                i += size
                continue
            except UnicodeDecodeError:  # cut short, or not a real character
                pass
        units.append((i, i + 1, None))
        i += 1
    return units


@lru_cache(maxsize=1 << 16)
def _whole(data: bytes) -> str | None:
    """A token's display when its bytes are whole characters (most tokens): then no
    neighbour shares a character with it. None when a character is cut at either end."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return "".join(visible(c, alone=i == 0) for i, c in enumerate(text)) if text else None


def _display_run(pieces: list[str], chunks: list[bytes]) -> list[str]:
    """One run of text pieces (no special token inside) as display strings, read together:
    tokens of whole characters alone (cached), the rest in stretches, byte by byte."""
    shown: list[str] = []
    start = 0
    for i, chunk in enumerate([*chunks, b""]):
        whole = _whole(chunk) if i < len(chunks) else None
        if whole is None and i < len(chunks):
            continue
        shown.extend(_display_cut(pieces[start:i], chunks[start:i]))
        if i < len(chunks):
            shown.append(whole)
        start = i + 1
    return shown


def _display_cut(pieces: list[str], chunks: list[bytes]) -> list[str]:
    """Tokens whose characters are cut between them, read together byte by byte."""
    if not pieces:
        return []
    data = b"".join(chunks)
    owner: list[int] = []
    for t, chunk in enumerate(chunks):
        owner.extend([t] * len(chunk))
    segments: list[list] = [[] for _ in pieces]
    for start, end, char in _units(data):
        holders = sorted(set(owner[start:end]))
        if char is None:
            segments[holders[0]].append(f"<0x{data[start]:02X}>")
        elif len(holders) == 1:
            t = holders[0]
            segments[t].append(visible(char, alone=not segments[t]))
        else:
            for k, t in enumerate(holders, start=1):
                segments[t].append((visible(char, alone=True), k, len(holders)))
    shown = []
    for piece, segs in zip(pieces, segments):
        merged: list = []
        for seg in segs:  # runs of plain text become one segment
            if isinstance(seg, str) and merged and isinstance(merged[-1], str):
                merged[-1] += seg
            else:
                merged.append(seg)
        parts = [f"{s[0]}{PART}{s[1]}/{s[2]}" if isinstance(s, tuple) else s for s in merged]
        shown.append(JOIN.join(parts) if parts else piece)
    return shown


def display_pieces(
    pieces: Sequence[str], style: str | None, specials: Iterable[str] = ()
) -> list[str]:
    """A tokenizer's pieces of one text (in order) as display strings, one per piece.

    ``style`` is the tokenizer's family (``style_of``): "byte-level" and "sentencepiece"
    pieces are read back into text as the module docstring says; "wordpiece" pieces and
    whole words (None) are already text and come back as they are. ``specials`` ([CLS],
    <bos>, <|im_start|>...) are shown as they are and split the text into runs: a character
    never spans one. Read the pieces of one text together: a piece alone (a lens candidate)
    cannot know the character its bytes belong to, and shows them as "<0xEC>".
    """
    if style is not None and style not in STYLES:
        raise ValueError(f"unknown subword style {style!r}; expected one of {STYLES}")
    if style not in ("byte-level", "sentencepiece"):
        return [str(p) for p in pieces]
    specials = frozenset(specials)
    shown: list[str] = []
    run: list[str] = []
    chunks: list[bytes] = []
    for piece in pieces:
        data = None if piece in specials else piece_bytes(piece, style)
        if data is None:
            shown.extend(_display_run(run, chunks))
            run, chunks = [], []
            shown.append(str(piece))
        else:
            run.append(piece)
            chunks.append(data)
    shown.extend(_display_run(run, chunks))
    return shown


# --- display strings -> the text they came from ----------------------------------------------

_INVISIBLE = {SPACE: " ", NEWLINE: "\n", TAB: "\t", "␡": "\x7f"}
_INVISIBLE.update({chr(0x2400 + b): chr(b) for b in range(0x20)})


def part_of(shown: str) -> tuple[str, int, int] | None:
    """("학", 2, 3) for a display segment "학 · 2/3"; None for anything else."""
    found = _PART.match(shown)
    if not found:
        return None
    return _unshow(found.group(1)), int(found.group(2)), int(found.group(3))


def _unshow(text: str) -> str:
    """Undo ``visible`` on a run of shown characters."""
    text = _CODEPOINT.sub(lambda m: chr(int(m.group(1), 16)), text)
    text = "".join(_INVISIBLE.get(c, c) for c in text)
    return re.sub(
        _DOTTED_CIRCLE + r"(?=[\u0300-\u036f\u1ab0-\u1aff\u20d0-\u20ff\ufe20-\ufe2f])", "", text
    )


def display_text(shown: Sequence[str], specials: Iterable[str] = ()) -> str:
    """The text that display strings (of ``display_pieces``, read together or one by one)
    spell: whitespace symbols back to whitespace, a character's parts once, "<0xEC>" bytes
    joined with their neighbours' into characters (a character generated one byte-token at a
    time reads whole). Special tokens are left out."""
    specials = frozenset(specials)
    out = bytearray()
    pending: tuple[str, int, int] | None = None  # the part last written: (char, k, n)
    for token in shown:
        if token in specials:
            pending = None
            continue
        for segment in token.split(JOIN) if JOIN in token else [token]:
            part = part_of(segment)
            if part is not None:
                char, k, n = part
                continues = pending is not None and pending[0] == char and pending[2] == n
                if not (continues and k == pending[1] + 1):
                    out += char.encode("utf-8")
                pending = part
                continue
            pending = None
            pos = 0
            for byte in _HEX.finditer(segment):
                out += _unshow(segment[pos : byte.start()]).encode("utf-8")
                out.append(int(byte.group(1), 16))
                pos = byte.end()
            out += _unshow(segment[pos:]).encode("utf-8")
    return out.decode("utf-8", errors="replace")


def starts_word(shown: str) -> bool:
    """Whether a display string begins with whitespace (a byte-level or SentencePiece word
    start: "␣cat", "↵")."""
    return shown[:1] in _INVISIBLE


def ends_word(shown: str) -> bool:
    """Whether a display string ends with whitespace, so the next token starts a word."""
    return shown[-1:] in _INVISIBLE
