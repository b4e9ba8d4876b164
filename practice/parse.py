"""Typed answers to numbers, lists, shapes and tokens, with a catalog key for every mistake.

The page reads text boxes through these functions, so it decides every message itself:
empty, not a number, NaN or infinity, too large, the wrong count, a unit that does not fit.
Numbers are read as people write them: "8,192", "33 088", "33,088개", "9%", "192 MiB".
"""

from __future__ import annotations

import math
import re
import unicodedata

LIMIT = 1e12  # no answer here is anywhere near this; larger is a typo (or a test of us)
MAX_CHARS = 500
MAX_DIMS = 4  # no tensor in these exercises has more (the message says so)

_SPLIT = re.compile(r"[\s,;]+")
_SHAPE_SPLIT = re.compile(r"[\s,;×xX*]+")
_FRACTION = re.compile(r"^([+-]?[0-9.]+(?:e[+-]?\d+)?)\s*/\s*([+-]?[0-9.]+(?:e[+-]?\d+)?)$", re.I)
# 1,000 / 8,192 / -1,234.5: thousands grouped by commas, one number (not "1" and "000").
_GROUPED = re.compile(r"(?<![\d.,])[+-]?[1-9]\d{0,2}(?:,\d{3})+(?:\.\d+)?(?![\d,]*\d)")
# 33 088 / 33 088 (thin space; NFKC makes it a space): grouped by spaces, where one number
# is asked for and the whole answer is that one grouped number.
_SPACE_GROUPED = re.compile(r"^[+-]?[1-9]\d{0,2}(?: \d{3})+(?:\.\d+)?$")
# A unit after the number: "192 MiB", "0.1875 GiB", "9%", "33,088개", "33088 parameters".
_UNIT_TAIL = re.compile(
    r"^(?P<number>[\d\s.,+\-−/×·*^()eE⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻]*[\d)⁰¹²³⁴⁵⁶⁷⁸⁹])\s*(?P<unit>%|개|[A-Za-z]+)$"
)
BINARY_BYTES = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
DECIMAL_BYTES = {"kB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
_BYTE_NAMES = {name.lower(): name for name in (*BINARY_BYTES, *DECIMAL_BYTES)}
_BYTE_NAMES.update({"byte": "B", "bytes": "B"})
COUNTERS = {"개", "params", "parameters", "param"}  # a count's own word, nothing to convert
_SUPERSCRIPT = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻", "0123456789+-")
# 9.76×10⁻⁴, 9.76 x 10^-4, 9.76*10**(-4), 9.76·10⁻⁴: scientific notation as people write it
# (a plain exponent needs its ^ or **, so the shape "4 x 100" stays 4 by 100).
_TIMES_TEN = re.compile(
    r"([+-]?(?:\d+\.?\d*|\.\d+))\s*[×xX*·]\s*10"
    r"(?:\s*([⁺⁻]?[⁰¹²³⁴⁵⁶⁷⁸⁹]+)|\s*(?:\^|\*\*)\s*\(?\s*([+-−]?\d+)\s*\)?)"
)


class AnswerError(ValueError):
    """A typed answer that cannot be read; ``key`` and ``params`` make the message."""

    def __init__(self, key: str, **params: object):
        super().__init__(key)
        self.key, self.params = key, params


def _clean(text: object) -> str:
    if text is None:
        raise AnswerError("practice.input.empty")
    text = str(text).strip()
    if not text:
        raise AnswerError("practice.input.empty")
    if len(text) > MAX_CHARS:
        raise AnswerError("practice.input.too_long", limit=MAX_CHARS)
    return text


def _normal(text: str) -> str:
    """Typed text in the form the number reader knows: ×10⁻⁴ as e-4, full-width signs and
    digits (，１２) as ASCII, the minus sign − as -."""

    def exponent(m: re.Match) -> str:
        power = (m.group(2) or m.group(3)).translate(_SUPERSCRIPT).replace("−", "-")
        return f"{m.group(1)}e{power}"

    text = _TIMES_TEN.sub(exponent, text)
    text = unicodedata.normalize("NFKC", text)
    return text.replace("−", "-").replace("、", ",")


def _ungroup(text: str) -> str:
    """Thousands separators dropped: "8,192" is one number."""
    return _GROUPED.sub(lambda m: m.group(0).replace(",", ""), text)


def _shown(token: str) -> str:
    """A typed token as a message quotes it: at most 40 characters."""
    return token if len(token) <= 40 else token[:39] + "…"


_NON_FINITE = re.compile(r"^[+-]?(?:nan|inf|infinity)$", re.I)


def _number(token: str, typed: str | None = None) -> float:
    """One number from a normalized token; messages quote ``typed``, what the user wrote."""
    shown = _shown(typed if typed is not None else token)
    if _NON_FINITE.match(token):
        raise AnswerError("practice.input.not_finite", value=shown)
    fraction = _FRACTION.match(token)
    try:
        if fraction:
            num, den = float(fraction.group(1)), float(fraction.group(2))
        else:
            num, den = float(token), 1.0
    except (ValueError, OverflowError):
        raise AnswerError("practice.input.not_a_number", value=shown) from None
    if math.isinf(num) or math.isinf(den):  # a finite number written, too large for a float
        raise AnswerError("practice.input.too_large", value=shown)
    if den == 0:
        raise AnswerError("practice.input.divide_by_zero", value=shown)
    value = num / den
    if math.isnan(value) or math.isinf(value) or abs(value) > LIMIT:
        raise AnswerError("practice.input.too_large", value=shown)
    return value


def _tokens(text: str, splitter: re.Pattern = _SPLIT, group: bool = False) -> list[tuple[str, str]]:
    """(normalized, as typed) pairs, so a message can quote the user's own writing;
    ``group``: commas that group thousands are dropped first ("8,192" is one number)."""
    ungroup = _ungroup if group else (lambda x: x)
    typed = [p for p in splitter.split(ungroup(text)) if p]
    normal = [p for p in splitter.split(ungroup(_normal(text))) if p]
    if len(typed) != len(normal):  # normalizing merged or split something: quote the result
        typed = normal
    return list(zip(normal, typed))


def _split_unit(text: str) -> tuple[str, str | None]:
    """The number and the unit typed after it ("192 MiB" -> "192", "MiB"), if any."""
    # as typed first (NFKC would turn 10³ into 103), then full-width (１９２ ＭｉＢ)
    m = _UNIT_TAIL.match(text) or _UNIT_TAIL.match(unicodedata.normalize("NFKC", text))
    if not m or _NON_FINITE.match(m.group("unit")) or m.group("unit").lower() in ("e", "x"):
        return text, None
    return m.group("number").strip(), m.group("unit")


def _in_unit(value: float, typed: str | None, unit: str | None, shown: str) -> float:
    """``value`` typed in unit ``typed``, read in the question's ``unit``: bytes convert
    exactly between B, KiB, MiB and GiB; MB (10⁶ bytes) for a MiB question is not silently
    converted but named, the classic mix-up; "%" is a hundredth; a count's word is nothing."""
    if typed is None or typed in COUNTERS or typed.lower() in COUNTERS:
        return value
    if typed == "%" and unit is None:
        return value / 100
    byte = _BYTE_NAMES.get(typed.lower())
    if byte is None:
        raise AnswerError("practice.input.unit_unknown", value=shown)
    if unit is None:
        raise AnswerError("practice.input.unit_unexpected", value=shown)
    if byte in DECIMAL_BYTES and unit in BINARY_BYTES:
        raise AnswerError("practice.input.unit_decimal", value=shown, typed=byte, unit=unit)
    scale = {**BINARY_BYTES, **DECIMAL_BYTES}
    return value * scale[byte] / scale[unit]


def parse_number(text: object, unit: str | None = None) -> float:
    """One number: "0.25", "-1e-3", "1/3", "8,192", "33 088", "9.76×10⁻⁴", "9%"; with the
    question's ``unit`` ("MiB"), an answer in another byte unit is converted ("0.1875 GiB")."""
    typed = _clean(text)
    number, typed_unit = _split_unit(typed)
    spaced = _normal(number)
    if _SPACE_GROUPED.match(spaced):
        number = spaced.replace(" ", "")
    parts = _tokens(number, group=True)
    if len(parts) != 1:
        raise AnswerError("practice.input.one_number", got=len(parts))
    try:
        value = _number(*parts[0])
    except AnswerError as err:  # quote all that was typed, the unit too
        if "value" in err.params and typed_unit is not None:
            raise AnswerError(err.key, **{**err.params, "value": _shown(typed)}) from None
        raise
    return _in_unit(value, typed_unit, unit, _shown(typed))


def parse_int(text: object, unit: str | None = None) -> int:
    value = parse_number(text, unit)
    if value != int(value):
        raise AnswerError("practice.input.not_integer", value=str(text).strip()[:40])
    return int(value)


def parse_numbers(text: object, n: int) -> tuple[float, ...]:
    """Exactly ``n`` numbers, separated by commas, semicolons or spaces; brackets allowed."""
    raw = _clean(text).strip("[]()［］（）")
    parts = _tokens(raw)
    if len(parts) != n:  # "1,000, 2,500": commas may group thousands when the count says so
        grouped = _tokens(raw, group=True)
        if len(grouped) == n:
            parts = grouped
    values = tuple(_number(*p) for p in parts)
    if len(values) != n:
        raise AnswerError("practice.input.count", expected=n, got=len(values))
    return values


def parse_shape(text: object) -> tuple[int, ...]:
    """A tensor shape: "[2, 8, 5, 16]", "(2, 8, 5, 16)" or "2 x 8 x 5 x 16"."""
    text = _clean(text).strip("[]()［］（）")
    parts = _tokens(text, _SHAPE_SPLIT)
    if not parts:
        raise AnswerError("practice.input.empty")
    if len(parts) > MAX_DIMS:
        raise AnswerError("practice.input.too_many_dims", got=len(parts), limit=MAX_DIMS)
    dims = []
    for normal, typed in parts:
        value = _number(normal, typed)
        if value != int(value) or value < 1:
            raise AnswerError("practice.input.bad_dim", value=_shown(typed))
        dims.append(int(value))
    return tuple(dims)


def parse_tokens(text: object) -> list[str]:
    """Tokens separated by spaces or commas: "<bos> a b c"."""
    text = unicodedata.normalize("NFKC", _clean(text))
    return [p for p in _SPLIT.split(text.strip("[]")) if p]
