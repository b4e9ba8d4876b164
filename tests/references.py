"""transformers' answers for the shipped models' parity tests, recorded in the repository.

A parity test holds our engine, run live every time, to transformers run on the same GGUF.
transformers' side is a pure function of the file, the inputs and its version, and costs a
cold machine (a CI runner) two and a half minutes of CPU on every run (Gemma 3's
dequantizing load alone is most of one), so it is recorded once, here, in
``tests/references/<name>.json``, by::

    HF_HUB_OFFLINE=1 .venv/bin/python -m tests.references            # every model
    HF_HUB_OFFLINE=1 .venv/bin/python -m tests.references gemma3-model

Each file names the GGUF's pinned sha256, the versions of transformers, tokenizers, torch and
gguf it was recorded with, and the inputs. A test reading it fails with that command when the
shipped file or the inputs changed (``recorded``), so a stale answer is never compared.

Token ids and greedy tokens are kept whole. A logit row (49,152 or 262,144 numbers) is kept
as a summary a wrong logit cannot hide from (``summarize_logits``): its 32 highest logits
with their ids, 64 fixed vocabulary ids sampled across the whole row, its log-sum-exp, and 16
fixed random projections of the whole row. ``assert_logits_match`` holds ours to each within
the tests' 1e-4 (a projection mixes every logit of the row: see its tolerance).
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np
import pytest
import torch

from model.runtime import gguf_cache

FOLDER = Path(__file__).parent / "references"
LIBRARIES = ("transformers", "tokenizers", "torch", "gguf")
RECORD_COMMAND = "HF_HUB_OFFLINE=1 .venv/bin/python -m tests.references"

TOP_K = 32
N_SAMPLED = 64
N_PROJECTIONS = 16
# Each projection is a row's logits times fixed N(0, 1/V) weights. Ours agreeing within 1e-4
# per logit (the tests' tolerance) moves one by about 1e-4 when the differences are as random
# as rounding's; 2e-3 leaves room for that, while a shift of 2e-3 across the row, or a single
# logit anywhere off by 2 (its weights are about ±1/√V each: one of 16 is large enough), is
# seen.
PROJECTION_ATOL = 2e-3


def _versions() -> dict[str, str]:
    out = {}
    for name in LIBRARIES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "absent"
    return out


def _plain(value):
    """``value`` as JSON gives it back (tuples as lists), to compare recorded inputs."""
    return json.loads(json.dumps(value, ensure_ascii=False))


def recorded(name: str, model: str, inputs: object) -> dict:
    """The recorded answer ``name`` for the shipped GGUF ``model`` on ``inputs``; the test
    fails, naming the command that records it again, when the file or the inputs changed."""
    path = FOLDER / f"{name}.json"
    again = f"record it again: {RECORD_COMMAND} {name}"
    if not path.is_file():
        pytest.fail(f"{path} is missing; {again}")
    kept = json.loads(path.read_text(encoding="utf-8"))
    pinned = gguf_cache.SHIPPED_GGUF[model].sha256
    if kept["gguf_sha256"] != pinned:
        pytest.fail(f"{path.name} was recorded for another {model} GGUF; {again}")
    if kept["inputs"] != _plain(inputs):
        pytest.fail(f"the test's inputs changed since {path.name} was recorded; {again}")
    return kept["answer"]


# --- logit summaries ---------------------------------------------------------------------


@lru_cache(maxsize=2)
def _fixed(vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The sampled ids and the projection weights for a vocabulary of ``vocab``: the same on
    every machine (a seeded CPU generator), so recording and checking agree."""
    gen = torch.Generator().manual_seed(0)
    sampled = torch.randperm(vocab, generator=gen)[:N_SAMPLED].sort().values
    weights = torch.randn(vocab, N_PROJECTIONS, generator=gen, dtype=torch.float64)
    return sampled, weights / vocab**0.5


def _float32s(values: torch.Tensor) -> list:
    """Float32 values as the shortest decimals that read back as the same float32."""
    return [[float(str(np.float32(v))) for v in row] for row in values.float().tolist()]


def summarize_logits(logits: torch.Tensor) -> dict:
    """A [T, V] logit tensor's recorded summary (see the module's docstring)."""
    logits = logits.detach().float().cpu()
    sampled, weights = _fixed(logits.shape[-1])
    top = torch.topk(logits, TOP_K, dim=-1)
    wide = logits.double()
    return {
        "shape": list(logits.shape),
        "top_ids": top.indices.tolist(),
        "top_values": _float32s(top.values),
        "sampled_ids": sampled.tolist(),
        "sampled_values": _float32s(logits[:, sampled]),
        "logsumexp": torch.logsumexp(wide, dim=-1).tolist(),
        "projections": (wide @ weights).tolist(),
    }


def assert_logits_match(ours: torch.Tensor, kept: dict, atol=1e-4, rtol=1e-4) -> None:
    """Ours against a recorded summary: the same shape; the recorded top and sampled logits
    within ``atol``/``rtol`` each; nothing outside the recorded top above its lowest; the
    log-sum-exp within the same; every projection within ``PROJECTION_ATOL``."""
    ours = ours.detach().float().cpu()
    assert list(ours.shape) == kept["shape"]
    sampled, weights = _fixed(ours.shape[-1])
    assert sampled.tolist() == kept["sampled_ids"]
    top_ids = torch.tensor(kept["top_ids"])
    top = torch.tensor(kept["top_values"])
    close = dict(atol=atol, rtol=rtol)
    torch.testing.assert_close(ours.gather(-1, top_ids), top, **close, msg="the top logits")
    sampled_values = torch.tensor(kept["sampled_values"])
    torch.testing.assert_close(ours[:, sampled], sampled_values, **close, msg="sampled logits")
    rest = ours.scatter(-1, top_ids, float("-inf")).max(dim=-1).values
    floor = top[:, -1]
    assert bool((rest <= floor + atol + rtol * floor.abs()).all()), "a logit outside the top"
    wide = ours.double()
    lse = torch.tensor(kept["logsumexp"], dtype=torch.float64)
    torch.testing.assert_close(torch.logsumexp(wide, -1), lse, **close, msg="log-sum-exp")
    proj = torch.tensor(kept["projections"], dtype=torch.float64)
    torch.testing.assert_close(
        wide @ weights, proj, atol=PROJECTION_ATOL, rtol=0, msg="a projection of the row"
    )


# --- what transformers answers -------------------------------------------------------------


def _tokenizer(path: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(
        str(path.parent), gguf_file=path.name, local_files_only=True
    )


def _causal_lm(path: Path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(
        str(path.parent),
        gguf_file=path.name,
        dtype=torch.float32,
        attn_implementation="eager",
        local_files_only=True,
    ).eval()


def smollm2_answer(path: Path, inputs: dict) -> dict:
    """transformers' ids for every text, logits for a few, and its greedy tokens."""
    tok = _tokenizer(path)
    model = _causal_lm(path)
    ids = {name: tok(text)["input_ids"] for name, text in inputs["ids"].items()}
    with torch.inference_mode():
        logits = {
            name: summarize_logits(model(input_ids=torch.tensor([ids[name]])).logits[0])
            for name in inputs["logits"]
        }
        prompt = torch.tensor([tok(inputs["prompt"])["input_ids"]])
        out = model.generate(prompt, max_new_tokens=inputs["n"], do_sample=False)
    del model
    gc.collect()
    greedy = out[0, prompt.shape[1] :].tolist()
    return {"ids": ids, "logits": logits, "greedy": greedy, "prompt": prompt[0].tolist()}


def gemma3_tokenizer_answer(path: Path, texts: list[str]) -> dict:
    """transformers' ids and decoded text for each text (it builds its GGUF tokenizer of
    262,144 tokens in 25 s to two minutes)."""
    ref = _tokenizer(path)
    out = {}
    for text in texts:
        ids = ref(text)["input_ids"]
        out[text] = {"ids": ids, "decoded": ref.decode(ids, skip_special_tokens=True)}
    return out


def gemma3_model_answer(path: Path, inputs: dict) -> dict:
    """transformers' ids and logits for each text, and its greedy tokens after the prompt."""
    tok = _tokenizer(path)
    ids = {text: tok(text)["input_ids"] for text in inputs["texts"]}
    prompt = tok(inputs["prompt"])["input_ids"]
    del tok
    model = _causal_lm(path)
    with torch.inference_mode():
        logits = {
            text: summarize_logits(model(input_ids=torch.tensor([i])).logits[0])
            for text, i in ids.items()
        }
        out = model.generate(torch.tensor([prompt]), max_new_tokens=inputs["n"], do_sample=False)
    del model
    gc.collect()
    greedy = out[0, len(prompt) :].tolist()
    return {"ids": ids, "prompt": prompt, "logits": logits, "greedy": greedy}


def write(name: str, model: str, inputs: object, answer: dict) -> Path:
    """Record ``answer`` (transformers' on ``inputs``) as ``tests/references/<name>.json``."""
    FOLDER.mkdir(exist_ok=True)
    path = FOLDER / f"{name}.json"
    kept = {
        "recorded_by": RECORD_COMMAND,
        "gguf_sha256": gguf_cache.SHIPPED_GGUF[model].sha256,
        "versions": _versions(),
        "inputs": _plain(inputs),
        "answer": answer,
    }
    path.write_text(json.dumps(kept, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return path


def _recorders() -> dict:
    """Each recorded answer: (model, inputs, how transformers computes it), from the tests
    that read them, so the inputs are written in one place."""
    from tests.unit import test_gguf_gemma3 as gemma3
    from tests.unit import test_gguf_smollm2 as smollm2

    return {
        "smollm2": ("smollm2", smollm2.INPUTS, smollm2_answer),
        "gemma3-tokenizer": ("gemma3", gemma3.TOKENIZER_TEXTS, gemma3_tokenizer_answer),
        "gemma3-model": ("gemma3", gemma3.MODEL_INPUTS, gemma3_model_answer),
    }


def main(argv: list[str] | None = None) -> int:
    recorders = _recorders()
    parser = argparse.ArgumentParser(prog="python -m tests.references", description=__doc__)
    parser.add_argument("names", nargs="*", help=f"any of {', '.join(recorders)} (default: all)")
    names = parser.parse_args(argv).names or list(recorders)
    if unknown := [n for n in names if n not in recorders]:
        parser.error(f"no recorded answer named {', '.join(unknown)}")
    for name in names:
        model, inputs, answer = recorders[name]
        path = gguf_cache.shipped_gguf(model)
        print(f"{name}: transformers on {path.name} ...", flush=True)
        print(f"  wrote {write(name, model, inputs, answer(path, inputs))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
