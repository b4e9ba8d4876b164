"""A student's name as a person sees it: at least one visible grapheme, nothing hidden.

A name must show something. Judged by a rule, not a list of bad characters:

- a code point *shows ink* when its general category is a letter, number, punctuation or
  symbol (L*, N*, P*, S*), it is not a Default_Ignorable_Code_Point (Unicode's own list of
  what a renderer draws as nothing: the Hangul fillers U+3164, U+115F, U+1160, U+FFA0, the
  joiners U+200C/U+200D, variation selectors ...), and, for a Braille pattern, it has a dot
  (U+2800 + its 8 dot bits: U+2800 alone is the blank cell);
- combining marks (M*) ride on the grapheme before them and never count alone;
- what does not show ink is *blank*. Blanks at the start or the end are trimmed as spaces are
  (a joiner there joins nothing), and a name that is blank throughout is refused;
- format characters that reorder or hide text (right-to-left override, zero-width space,
  BOM, soft hyphen ...) and control characters are refused anywhere; only the two joiners
  real names and emoji need (ZWNJ in Persian, ZWJ in 👩‍💻) stay inside a name;
- two names are the same student when they read the same: NFKC, case folded, every
  default-ignorable code point dropped and runs of spaces (blank Braille cells too) made one ("Ada\\u200d" is "Ada", "A\\u3164da" is "Ada").
"""

from __future__ import annotations

import bisect
import unicodedata

MAX_NAME = 40  # fits a phone's line and the dashboard's grid

# Default_Ignorable_Code_Point, from Unicode's DerivedCoreProperties.txt (Unicode 15.1.0,
# https://www.unicode.org/Public/15.1.0/ucd/DerivedCoreProperties.txt), adjacent ranges
# merged; inclusive (first, last). Python's unicodedata has no such property, so it is data.
DEFAULT_IGNORABLE: tuple[tuple[int, int], ...] = (
    (0x00AD, 0x00AD),  # SOFT HYPHEN
    (0x034F, 0x034F),  # COMBINING GRAPHEME JOINER
    (0x061C, 0x061C),  # ARABIC LETTER MARK
    (0x115F, 0x1160),  # HANGUL CHOSEONG FILLER, HANGUL JUNGSEONG FILLER
    (0x17B4, 0x17B5),  # KHMER VOWEL INHERENT AQ, AA
    (0x180B, 0x180F),  # MONGOLIAN FREE VARIATION SELECTORS, VOWEL SEPARATOR
    (0x200B, 0x200F),  # ZERO WIDTH SPACE .. RIGHT-TO-LEFT MARK (ZWNJ, ZWJ among them)
    (0x202A, 0x202E),  # the bidirectional embeddings and overrides
    (0x2060, 0x206F),  # WORD JOINER .. NOMINAL DIGIT SHAPES (invisible operators, isolates)
    (0x3164, 0x3164),  # HANGUL FILLER
    (0xFE00, 0xFE0F),  # VARIATION SELECTOR-1..16
    (0xFEFF, 0xFEFF),  # ZERO WIDTH NO-BREAK SPACE (BOM)
    (0xFFA0, 0xFFA0),  # HALFWIDTH HANGUL FILLER
    (0xFFF0, 0xFFF8),  # unassigned specials
    (0x1BCA0, 0x1BCA3),  # SHORTHAND FORMAT CONTROLS
    (0x1D173, 0x1D17A),  # MUSICAL SYMBOL BEGIN BEAM .. END PHRASE
    (0xE0000, 0xE0FFF),  # TAGS, VARIATION SELECTORS SUPPLEMENT, reserved
)
_STARTS = [first for first, _ in DEFAULT_IGNORABLE]
BRAILLE_BLANK = 0x2800  # Braille patterns are U+2800 + dot bits; no bits, no dots
BRAILLE_LAST = 0x28FF
INKED_CATEGORIES = ("L", "N", "P", "S")
REFUSED_CATEGORIES = ("Cc", "Cs", "Co", "Cn", "Zl", "Zp")
KEPT_FORMAT = {"\u200c", "\u200d"}  # ZWNJ, ZWJ: Persian names, emoji sequences


class BadNameError(ValueError):
    """A name that cannot be used; ``reason``: "empty", "long" or "invisible"."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"this name cannot be used ({reason})")
        self.reason = reason


def default_ignorable(c: str) -> bool:
    """Whether ``c`` is a Default_Ignorable_Code_Point (drawn as nothing)."""
    cp = ord(c)
    i = bisect.bisect_right(_STARTS, cp) - 1
    return i >= 0 and DEFAULT_IGNORABLE[i][0] <= cp <= DEFAULT_IGNORABLE[i][1]


def shows_ink(c: str) -> bool:
    """Whether ``c`` draws something by itself (see the module docstring)."""
    if unicodedata.category(c)[0] not in INKED_CATEGORIES or default_ignorable(c):
        return False
    return ord(c) != BRAILLE_BLANK


def blank(c: str) -> bool:
    """A space, filler, joiner or blank cell: what may pad a name but never make one."""
    if c.isspace() or ord(c) == BRAILLE_BLANK:
        return True
    return default_ignorable(c) and not unicodedata.category(c).startswith("M")


def _trim(name: str) -> str:
    start, end = 0, len(name)
    while start < end and blank(name[start]):
        start += 1
    while end > start and blank(name[end - 1]):
        end -= 1
    return name[start:end]


def clean_name(name: object) -> str:
    """A student's name as kept: NFC, blanks trimmed from both ends; BadNameError when
    nothing is left ("empty"), nothing left shows ink ("invisible"), it hides or reorders
    text or holds a control character ("invisible"), or it is longer than MAX_NAME."""
    if not isinstance(name, str):
        raise BadNameError("empty")
    typed = unicodedata.normalize("NFC", name)
    name = _trim(typed)
    if not name:
        raise BadNameError("invisible" if typed.strip() else "empty")
    if len(name) > MAX_NAME:
        raise BadNameError("long")
    for c in name:
        category = unicodedata.category(c)
        if category in REFUSED_CATEGORIES or (category == "Cf" and c not in KEPT_FORMAT):
            raise BadNameError("invisible")
    if not any(shows_ink(c) for c in name):
        raise BadNameError("invisible")
    return name


def name_key(name: str) -> str:
    """What two names of one student share: NFKC, case folded, blanks dropped, spaces one."""
    folded = unicodedata.normalize("NFKC", name).casefold()
    words, word = [], []
    for c in folded:
        if c.isspace() or ord(c) == BRAILLE_BLANK:
            if word:
                words.append("".join(word))
                word = []
        elif not default_ignorable(c):
            word.append(c)
    if word:
        words.append("".join(word))
    return " ".join(words)


def same_name(a: str, b: str) -> bool:
    """Two names a teacher would take for one student (case, width and blanks aside)."""
    return name_key(a) == name_key(b)
