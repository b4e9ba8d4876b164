"""The Korean catalogs speak with one voice: one term per concept, 합니다체, particles that fit.

GLOSSARY maps each concept to the term the lab uses and the variants it must not use beside
it. A new Korean string that says 층 정규화, 워밍업, 교차 어텐션 or 랩 fails here, naming
the key, so a translator sees at once which word to change.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CATALOG_DIR = ROOT / "assets" / "i18n"

# concept: (the term used, [patterns of the other terms for the same concept])
GLOSSARY: dict[str, tuple[str, list[str]]] = {
    "LayerNorm": (
        "레이어 정규화",
        [r"층\s*정규화", r"계층\s*정규화", r"(?<![(`.\w])LayerNorm(?![)`\w])"],
    ),
    "layer": ("레이어", [r"층"]),
    "attention": ("어텐션", [r"주의\s*집중", r"주의를\s*기울", r"집중\s*메커니즘"]),
    "head": ("헤드", [r"머리"]),
    "query/key/value": ("쿼리/키/값", [r"질의", r"열쇠", r"밸류"]),
    "positional encoding": ("위치 인코딩", [r"위치\s*부호화", r"포지셔널", r"위치\s*임베딩"]),
    "mask": ("마스크", [r"마스킹", r"가림막"]),
    "decoder input": ("디코더 입력", [r"디코더\s*인풋"]),
    "warm-up": ("웜업", [r"워밍\s*업", r"예열"]),
    "cross-attention": ("크로스 어텐션", [r"교차\s*어텐션", r"인코더-디코더\s*주의"]),
    "step (training, decoding)": (
        "스텝",
        [
            r"\d+\s*단계",
            r"\{\w+\}\s*단계",
            r"(?:다음|매|첫|마지막|웜업|이)\s*단계(?!별)",
            r"단계\(step\)",
        ],
    ),
    "softmax": ("소프트맥스", [r"(?<![\w$\\])softmax(?![\w(])"]),
    "normalisation placement": ("정규화 위치", [r"(?:논문의|정규화|LN의?)\s*배치"]),
    "held-out split": ("평가용", [r"검증"]),
    "lab": ("실습실", [r"(?<![가-힣])랩"]),
    "encoder-only": ("인코더 전용", [r"(?:인코더|디코더)\s*유형"]),
}

# 합니다체 everywhere: no 해요체 endings, no -세요 requests (-십시오 instead).
HAEYO = re.compile(r"(?:세요|어요|아요|해요|에요|예요|죠)(?=[\s.!?\")]|$)")
# A particle right after a placeholder must fit any value: 은(는), 이(가), (으)로, ... .
# Placeholders whose values always end the same way may take the plain particle.
FIXED_SOUND = {"bos", "eos", "act"}
PARTICLE = re.compile(r"\{(\w+)\}(으로|이나|은|는|이|가|을|를|과|와|로|나)(?![가-힣(])")


def korean_catalogs() -> dict[str, dict[str, str]]:
    return {
        p.name: json.loads(p.read_text(encoding="utf-8"))
        for p in sorted(CATALOG_DIR.glob("ko*.json"))
    }


def two_terms(catalog: dict[str, str]) -> list[str]:
    """'key: concept: found «variant», use «term»' for every variant a catalog uses."""
    found = []
    for key, text in catalog.items():
        for concept, (term, variants) in GLOSSARY.items():
            for pattern in variants:
                for match in re.finditer(pattern, text):
                    found.append(f"{key}: {concept}: found «{match.group(0)}», use «{term}»")
    return found


def wrong_register(catalog: dict[str, str]) -> list[str]:
    return [f"{key}: «{m.group(0)}»" for key, text in catalog.items() for m in HAEYO.finditer(text)]


def unfitted_particles(catalog: dict[str, str]) -> list[str]:
    return [
        f"{key}: «{m.group(0)}»"
        for key, text in catalog.items()
        for m in PARTICLE.finditer(text)
        if m.group(1) not in FIXED_SOUND
    ]


@pytest.mark.parametrize("name", sorted(korean_catalogs()))
def test_each_korean_catalog_uses_one_term_per_concept(name):
    assert two_terms(korean_catalogs()[name]) == []


@pytest.mark.parametrize("name", sorted(korean_catalogs()))
def test_each_korean_catalog_speaks_hamnida_style(name):
    assert wrong_register(korean_catalogs()[name]) == []


@pytest.mark.parametrize("name", sorted(korean_catalogs()))
def test_particles_after_placeholders_fit_any_value(name):
    assert unfitted_particles(korean_catalogs()[name]) == []


def test_every_glossary_term_is_in_use():
    everything = " ".join(v for c in korean_catalogs().values() for v in c.values())
    for concept, (term, _) in GLOSSARY.items():
        for part in term.split("/"):
            assert part in everything, f"{concept}: «{part}» appears nowhere"


def test_the_checks_fail_on_a_catalog_that_mixes_terms():
    mixed = {
        "a": "층 정규화와 레이어 정규화",
        "b": "워밍업 스텝",
        "c": "교차 어텐션",
        "d": "이 랩에서는",
        "e": "post-LN(논문의 배치)",
        "f": "2층",
        "g": "{text}는 {tokens}가 됩니다",
        "h": "입력해 보세요.",
        "i": "다음 단계",
    }
    problems = " ".join(two_terms(mixed))
    for concept in (
        "LayerNorm",
        "warm-up",
        "cross-attention",
        "lab",
        "normalisation placement",
        "layer",
        "step",
    ):
        assert concept in problems
    assert len(unfitted_particles(mixed)) == 2
    assert wrong_register(mixed) == ["h: «세요»"]
    fine = {
        "a": "레이어 정규화(LayerNorm)",
        "b": "웜업 스텝",
        "c": "{text}은(는) {bos}로",
        "d": "계산 단계별 보기",
        "e": "배치 64",
        "f": "softmax(QKᵀ/√d_k)는 소프트맥스",
    }
    assert two_terms(fine) == [] and unfitted_particles(fine) == [] and wrong_register(fine) == []
