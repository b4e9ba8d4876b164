"""Device choice, thread limits, the GPU path, and the one-way arrows between packages."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from model import TransformerConfig, build_model
from model.runtime.device import available_devices, configure_threads, resolve_device

ROOT = Path(__file__).resolve().parents[2]


def test_auto_device_prefers_cuda_then_mps_then_cpu():
    dev = resolve_device("auto")
    assert dev.type == available_devices()[0]
    assert available_devices()[-1] == "cpu"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_asking_for_a_missing_gpu_says_so_instead_of_crashing_later():
    with pytest.raises(ValueError, match="no usable GPU"):
        resolve_device("cuda")


def test_thread_cap_follows_the_environment_override(monkeypatch):
    before = torch.get_num_threads()
    try:
        monkeypatch.setenv("ATTENTION_LAB_THREADS", "1")
        assert configure_threads() == 1 and torch.get_num_threads() == 1
        monkeypatch.setenv("ATTENTION_LAB_THREADS", "nonsense")
        assert 1 <= configure_threads() <= 4
    finally:
        torch.set_num_threads(before)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (none on this machine)")
@pytest.mark.parametrize("kind", ["encoder-decoder", "encoder", "decoder"])
def test_gpu_traced_and_fast_paths_agree_with_the_cpu(kind):
    torch.manual_seed(0)
    model = build_model(TransformerConfig(kind=kind, dropout=0.0)).eval()
    ids = torch.tensor([[5, 6, 7, 8], [5, 6, 0, 0]])
    args = (ids, ids) if kind == "encoder-decoder" else (ids,)
    with torch.no_grad():
        cpu = model(*args, trace=True)
        model.cuda()
        fast = model(*(a.cuda() for a in args))
        traced = model(*(a.cuda() for a in args), trace=True)
    torch.testing.assert_close(fast.logits.cpu(), cpu.logits, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(traced.logits.cpu(), cpu.logits, atol=1e-4, rtol=1e-4)
    for k, layers in traced.record.attention.items():
        for gpu_w, cpu_w in zip(layers, cpu.record.attention[k], strict=True):
            torch.testing.assert_close(gpu_w.cpu(), cpu_w, atol=1e-4, rtol=1e-4)


def imported_modules(folder: Path) -> set[str]:
    found = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    return found


def test_model_package_never_imports_ui_code():
    assert not imported_modules(ROOT / "model") & {"streamlit", "plotly", "viz", "ui", "pages"}


def test_viz_package_never_imports_streamlit():
    assert not imported_modules(ROOT / "viz") & {"streamlit", "ui", "pages"}


def test_importing_model_loads_no_streamlit_in_a_fresh_interpreter():
    code = "import sys, model; print('streamlit' in sys.modules, 'plotly' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]
