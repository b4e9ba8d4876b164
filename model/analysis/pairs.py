"""Prompt pairs for activation patching that a given tokenizer reads as equally long.

Patching compares two inputs position by position, so they need the same number of tokens;
a pair that is even for one tokenizer ("Mary" / "John" as one token each) is uneven for
another (31 vs 28 tokens on a small byte-level BPE). Candidates are filled from templates
and kept only where the loaded tokenizer makes them the same length.
"""

from __future__ import annotations

TEMPLATES = (
    # the indirect-object sentence of interpretability work: the names swap, so the answer does
    ("When {a} and {b} went to the store, {b} gave a drink to", "ioi"),
    ("the {a} sat on the mat and the", "word"),
    ("I study {a} every day, and every day I study", "word"),
    ("hello world, {a} is all you need, so", "word"),
)
NAMES = (("Mary", "John"), ("Tom", "Anna"), ("Sam", "Kim"))
# Facts a real model may know: (clean, corrupted, the answer to each). One country for
# another changes the answer (Paris / Rome), and whether the model answers right is checked
# (``fact_pairs``), not hoped. Tried before the templates above. The last Korean pair gives
# one example first: Gemma 3 270M names no capital from "일본의 수도는" alone.
FACTS = (
    ("The capital of France is", "The capital of Italy is", "Paris", "Rome"),
    ("Paris is the capital of", "Rome is the capital of", "France", "Italy"),
    ("The capital of Japan is", "The capital of China is", "Tokyo", "Beijing"),
    ("The capital of Germany is", "The capital of Spain is", "Berlin", "Madrid"),
    ("프랑스의 수도는", "이탈리아의 수도는", "파리", "로마"),
    ("일본의 수도는", "중국의 수도는", "도쿄", "베이징"),
    (
        "대한민국의 수도는 서울이고, 일본의 수도는",
        "대한민국의 수도는 서울이고, 중국의 수도는",
        "도쿄",
        "베이징",
    ),
)
WORDS = (("cat", "dog"), ("math", "art"), ("park", "mat"), ("attention", "memory"))


def candidate_pairs() -> list[tuple[str, str]]:
    out = []
    for template, kind in TEMPLATES:
        for a, b in NAMES if kind == "ioi" else WORDS:
            if kind == "ioi":
                swapped = template.replace("{b} gave", "{a} gave")
                out.append((template.format(a=a, b=b), swapped.format(a=a, b=b)))
            else:
                out.append((template.format(a=a), template.format(a=b)))
    return out


def even_pairs(lm, candidates: list[tuple[str, str]] | None = None, most: int = 6):
    """The candidate (clean, corrupted) pairs ``lm``'s tokenizer reads as equally many tokens
    with at least one token different and none unknown, at most ``most``: the facts first,
    then the templates."""
    found = []
    facts = [(clean, corrupted) for clean, corrupted, _, _ in FACTS]
    for clean, corrupted in [*facts, *candidate_pairs()] if candidates is None else candidates:
        a, b = lm.encode(clean), lm.encode(corrupted)
        if a.unknown or b.unknown or a.truncated or b.truncated:
            continue
        if len(a.ids) == len(b.ids) and a.ids != b.ids:
            found.append((clean, corrupted))
        if len(found) == most:
            break
    return found


def answers(lm, text: str, answer: str, new_tokens: int = 4) -> bool:
    """Whether ``lm``'s greedy continuation of ``text`` starts with ``answer``."""
    ids = [step.token_id for step in lm.decode(text, max_new_tokens=new_tokens)]
    return lm.tgt_tokenizer.detokenize(ids).strip().startswith(answer)


def fact_pairs(lm) -> list[tuple[str, str, bool]]:
    """The FACTS pairs ``lm`` reads as equally long, each with whether its greedy answers are
    right on both sides; the right ones first, then in FACTS order."""
    even = set(even_pairs(lm, [(c, d) for c, d, _, _ in FACTS], most=len(FACTS)))
    found = [
        (clean, corrupted, answers(lm, clean, a) and answers(lm, corrupted, b))
        for clean, corrupted, a, b in FACTS
        if (clean, corrupted) in even
    ]
    return sorted(found, key=lambda pair: not pair[2])
