"""The GPU path tested like the CPU's (run on a CUDA machine: ``pytest -m gpu``; skipped,
with the reason, where PyTorch sees no CUDA device).

Every layout the engine runs equals transformers on CUDA in float32 (and bfloat16 where
``load`` takes a dtype), the explorer and decoding pages run there through AppTest, a toy
model trains a few hundred steps there, and the README's Python examples pass with
``load()``'s default device (the GPU).
"""

from __future__ import annotations

import contextlib
import csv
import inspect
import io

import pytest
import torch

from model import load
from model.analysis.heads import scan_heads
from model.hf.decoder import transformers_causal_lm
from tests.hf_folders import DECODER_TYPES, build_decoder_folder
from ui.i18n import translate

pytestmark = pytest.mark.gpu
TEXT = "the cat sat on the mat and a dog ran in the park"


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    return {mt: build_decoder_folder(mt, tmp_path_factory.mktemp(mt)) for mt in DECODER_TYPES}


def ids_of(lm, text: str = TEXT) -> torch.Tensor:
    return torch.tensor([lm.encode(text).ids], device=lm.device)


@pytest.mark.parametrize("layout", DECODER_TYPES)
def test_every_engine_layout_equals_transformers_on_cuda_in_float32(folders, layout):
    lm = load(folders[layout], device="cuda")
    assert lm.device.type == "cuda"
    ref = transformers_causal_lm(folders[layout], device="cuda")
    ids = ids_of(lm)
    with torch.inference_mode():
        ours = lm.network(ids).logits
        theirs = ref(input_ids=ids, output_attentions=True)
    torch.testing.assert_close(ours, theirs.logits, atol=1e-3, rtol=1e-3)
    trace = lm.trace(TEXT, max_new_tokens=0)  # the traced path, maps read back to the CPU
    n = ids.shape[1]
    for layer in range(trace.attention["decoder"].shape[0]):
        torch.testing.assert_close(
            trace.attention["decoder"][layer],
            theirs.attentions[layer][0].float().cpu(),
            atol=1e-3,
            rtol=1e-3,
        )
    assert trace.attention["decoder"].shape[-1] == n


def test_the_bert_layout_equals_transformers_on_cuda():
    from transformers import BertModel

    from model.hf.bert import minilm_path

    lm = load("minilm", device="cuda")
    ref = BertModel.from_pretrained(str(minilm_path()), attn_implementation="eager").cuda().eval()
    ids = ids_of(lm)
    with torch.inference_mode():
        theirs = ref(input_ids=ids, output_attentions=True).attentions
    trace = lm.trace(TEXT)
    torch.testing.assert_close(
        trace.attention["encoder"], torch.stack(theirs)[:, 0].float().cpu(), atol=1e-3, rtol=1e-3
    )


@pytest.mark.parametrize("layout", DECODER_TYPES)
def test_every_engine_layout_runs_in_bfloat16_on_cuda_close_to_float32(folders, layout):
    if "dtype" not in inspect.signature(load).parameters:
        pytest.skip("load() takes no dtype yet (issue 34a adds it)")
    lm = load(folders[layout], device="cuda", dtype=torch.bfloat16)
    assert next(lm.network.parameters()).dtype == torch.bfloat16
    ref = transformers_causal_lm(folders[layout], device="cuda").to(torch.bfloat16)
    ids = ids_of(lm)
    with torch.inference_mode():
        ours = lm.network(ids).logits.float()
        theirs = ref(input_ids=ids).logits.float()
    # bfloat16 keeps 8 bits of mantissa: equal to transformers' bfloat16 within its rounding,
    # and the same next-token choice almost everywhere
    scale = theirs.abs().max().item()
    assert (ours - theirs).abs().max().item() <= 0.05 * scale + 0.05
    agree = (ours.argmax(-1) == theirs.argmax(-1)).float().mean().item()
    assert agree >= 0.9
    trace = lm.trace(TEXT, max_new_tokens=4)
    assert trace.attention["decoder"].dtype == torch.float32  # maps are read back in float32


def test_the_head_scan_on_cuda_equals_the_cpus():
    cpu = scan_heads(load("induction", device="cpu"))
    gpu = scan_heads(load("induction", device="cuda"))
    for name in cpu.scores:
        torch.testing.assert_close(gpu.scores[name], cpu.scores[name], atol=1e-3, rtol=1e-3)
    assert [(r.layer, r.head) for r in gpu.ranked()[:3]] == [
        (r.layer, r.head) for r in cpu.ranked()[:3]
    ]


def _on_cuda(page: str, folder, **query):
    from streamlit.testing.v1 import AppTest

    from tests.app.helpers import APP

    at = AppTest.from_file(APP, default_timeout=300)
    at.switch_page(f"pages/{page}.py")
    at.query_params.update({"model": "folder", **query})
    at.session_state["model_folder"] = str(folder)
    at.session_state["device"] = "cuda"
    return at.run()


@pytest.mark.parametrize("layout", ["llama", "gpt2"])
def test_the_explorer_runs_a_folder_on_cuda_and_says_so(folders, layout):
    at = _on_cuda("explorer", folders[layout], text=TEXT)
    assert not at.exception and not at.error
    assert any("on CUDA" in c.value for c in at.caption)
    at.number_input(key="gen").set_value(8).run()
    assert not at.exception and not at.error


def test_decoding_steps_a_folder_on_cuda(folders):
    at = _on_cuda("decoding", folders["llama"], text="the cat sat")
    assert not at.exception and not at.error
    assert any("on CUDA" in c.value for c in at.caption)
    step = next(b for b in at.button if b.label == translate("decoding.step", "en"))
    step.click().run()
    assert not at.exception and at.session_state["step"] == 1


def test_a_toy_model_trains_a_few_hundred_steps_on_cuda(tmp_path):
    from model.training.trainer import main

    out = tmp_path / "run"
    metrics = main(
        [
            "--task",
            "reverse",
            "--out",
            str(out),
            "--steps",
            "300",
            "--warmup",
            "50",
            "--device",
            "cuda",
            "--eval-n",
            "50",
            "--no-progress",
        ]
    )
    assert metrics["steps"] == 300
    with open(out / "curve.csv") as f:
        losses = [float(r["loss"]) for r in csv.DictReader(f)]
    assert losses[-1] < losses[0] * 0.8  # it learnt on the GPU
    assert load(out, device="cuda").translate("a b c") is not None


def test_the_readme_examples_pass_with_loads_default_device():
    from tests.app.test_readme_examples import BLOCKS

    assert load("induction").device.type == "cuda"  # "auto" picks the GPU here
    for source in BLOCKS:
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(source, "README.md", "exec"), {"__name__": "readme_example"})
