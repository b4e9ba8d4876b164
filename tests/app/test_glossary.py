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
    "encoder-only": (
        "인코더 전용",
        [r"(?:인코더|디코더)\s*유형", r"인코더만(?=\s*[(:]|\s*쓰는)", r"인코더\s*온리"],
    ),
    # "디코더만으로 충분합니다" (a decoder alone is enough) is a sentence, not the family's name.
    "decoder-only": ("디코더 전용", [r"디코더만(?=\s*[(:]|\s*쓰는)", r"디코더\s*온리"]),
    # 정답 is the correct answer; the sequence a decoder is trained to produce is the target.
    "target sequence": (
        "목표 시퀀스",
        [r"정답\s*(?:시퀀스|접두사)", r"(?:민|밀지 않은)\s*정답", r"정답의\s*(?:첫|마지막|앞부분)"],
    ),
    "teacher forcing": ("티처 포싱", [r"교사\s*강요", r"강제\s*교사"]),
    "free-running generation": ("자유 생성", [r"스스로\s*이어\s*쓰", r"자유\s*실행"]),
    "ablation": ("어블레이션", [r"\(제거\)", r"헤드\s*제거", r"제거\s*실험"]),
    "Transformer (in prose)": (
        "트랜스포머",
        [r"(?<![\w`])(?<!Annotated )(?<!the )Transformer(?![\w`]| Architecture)", r"트렌스포머"],
    ),
    "KV cache": ("KV 캐시", [r"키\s*[/-]\s*값\s*캐시", r"KV캐시"]),
    "KV head": ("KV 헤드", [r"키\s*[/-]\s*값\s*헤드", r"KV헤드"]),
    "ordinary attention": (
        "일반 어텐션",
        [r"보통의?\s*어텐션", r"표준\s*어텐션", r"평범한\s*어텐션"],
    ),
    "clock hand": ("시곗바늘", [r"시계의?\s*바늘", r"시곗\s+바늘"]),
    "added once": ("한 번만 더합니다", [r"한 번 더합니다"]),
    "generating tokens": ("생성합니다", [r"토큰(?:을)?\s*(?:하나씩|한 개씩)\s*씁니다"]),
    "the scheme without positions": (
        "위치 정보가 없는 모델",
        [r"(?<![“‘'\"*])없음(?:은|이어도|도|이)(?=\s)", r"\*\*없음\*\*"],
    ),
    "layer / head labels": ("레이어 {layer} 헤드 {head}", [r"레이어(?=\d|\{)", r"헤드(?=\d|\{)"]),
}

# 합니다체 everywhere: no 해요체 endings, no -세요 requests (-십시오 instead).
HAEYO = re.compile(r"(?:세요|어요|아요|해요|에요|예요|죠)(?=[\s.!?\")]|$)")
# A particle right after a placeholder must fit any value: 은(는), 이(가), (으)로, ... .
# Placeholders whose values always end the same way may take the plain particle.
FIXED_SOUND = {"bos", "eos", "act"}
PARTICLE = re.compile(r"\{(\w+)\}(으로|이나|은|는|이|가|을|를|과|와|로|나)(?![가-힣(])")


# Fallback particles ("은(는)", "(으)로") read as a form to fill in: on screen, a sentence
# is built so that its particle fits any value instead.
FALLBACK = re.compile(r"\((?:으|이)\)|[은을이과와]\([는를가와과]\)")
# The one sentence for a bad grouped-query setting, word for word wherever it is said.
KV_DIVIDE = "쿼리 헤드 수({n_heads})는 KV 헤드 수({n_kv_heads})로 나누어떨어져야 합니다."


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


@pytest.mark.parametrize("name", sorted(korean_catalogs()))
def test_no_fallback_particles_on_screen(name):
    found = [
        f"{key}: «{m.group(0)}»"
        for key, text in korean_catalogs()[name].items()
        for m in FALLBACK.finditer(text)
    ]
    assert found == []


def english_catalog() -> dict[str, str]:
    out: dict[str, str] = {}
    for path in sorted(CATALOG_DIR.glob("en*.json")):
        out.update(json.loads(path.read_text(encoding="utf-8")))
    return out


# What a translation carries over unchanged: code (`...`), special tokens (<eos>, <pad>),
# and numbers (not placeholders' names, not parts of words like "d_k" or "2017a").
CARRIED = {
    "code": re.compile(r"`[^`]+`"),
    "special token": re.compile(r"<[a-z]+>"),
    "number": re.compile(r"(?<![\w.{])\d+(?:[.,]\d+)*(?![\w}])"),
}


def test_the_korean_says_every_code_span_special_token_and_number_the_english_says():
    """A number, a `<pad>` or a code span in the English and not in the Korean is drift:
    the two say different things (a caption once quoted different counts per language)."""
    english = english_catalog()
    korean = {k: v for c in korean_catalogs().values() for k, v in c.items()}
    drift = [
        f"{key}: {what} «{m}» missing in Korean"
        for key, text in english.items()
        for what, pattern in CARRIED.items()
        for m in sorted(set(pattern.findall(text)))
        if m not in korean.get(key, "")
    ]
    assert drift == []


def test_the_grouped_query_divisibility_sentence_is_said_one_way():
    said = [
        text
        for catalog in korean_catalogs().values()
        for text in catalog.values()
        if "나누어떨어" in text and "KV 헤드" in text
    ]
    assert said and all(KV_DIVIDE in text for text in said)


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
    more = {
        "j": "밀지 않은 정답 그대로",
        "k": "교사 강요로는",
        "l": "키/값 캐시와 키/값 헤드",
        "m": "보통의 어텐션",
        "n": "시계 바늘처럼",
        "o": "헤드를 껐을 때(제거)",
        "p": "레이어{layer} 헤드{head}",
        "q": "**없음**이어도",
    }
    problems_more = " ".join(two_terms(more))
    for concept in (
        "target sequence",
        "teacher forcing",
        "KV cache",
        "KV head",
        "ordinary attention",
        "clock hand",
        "ablation",
        "layer / head labels",
        "the scheme without positions",
    ):
        assert concept in problems_more, concept
    assert FALLBACK.findall("{model}은(는) {x}(으)로 {y}을(를)") == ["은(는)", "(으)", "을(를)"]
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
