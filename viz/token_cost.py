"""The token-cost table: one row per model, Korean beside English, and their ratio."""

from __future__ import annotations

import pandas as pd

from model.analysis.token_cost import TokenCost

COLUMNS = ("model", "korean", "english", "ratio", "korean_tokens", "english_tokens")
# Between tokens in a cell: spaces inside a token are always the lab's own ("␣" is the
# text's), so " | " never splits one.
SEPARATOR = " | "


def token_cost_frame(
    costs: list[TokenCost], headers: dict[str, str], names: dict[str, str] | None = None
) -> pd.DataFrame:
    """One row per model: token counts (with "(n unknown)" where the vocabulary could not
    spell a word), Korean tokens per English token to two decimals, and the tokens
    themselves, separated by " | ". ``headers`` names the COLUMNS (already translated); ``names`` the
    models' labels (their names otherwise)."""
    names = names or {}
    rows = []
    for cost in costs:
        rows.append(
            {
                "model": names.get(cost.name, cost.name),
                "korean": cost.korean.n,
                "english": cost.english.n,
                "ratio": None if cost.ratio is None else round(cost.ratio, 2),
                "korean_tokens": SEPARATOR.join(cost.korean.tokens),
                "english_tokens": SEPARATOR.join(cost.english.tokens),
            }
        )
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    return frame.rename(columns={c: headers.get(c, c) for c in COLUMNS})


def token_cost_summary(costs: list[TokenCost], line: str, names: dict[str, str] | None = None):
    """One sentence a screen reader says before the table: ``line`` is a translated
    template with {model}, {ko}, {en} and {ratio}, filled for every model, joined by "; "."""
    names = names or {}
    parts = []
    for cost in costs:
        ratio = "–" if cost.ratio is None else f"{cost.ratio:.2f}"
        parts.append(
            line.format(
                model=names.get(cost.name, cost.name),
                ko=cost.korean.n,
                en=cost.english.n,
                ratio=ratio,
            )
        )
    return "; ".join(parts)
