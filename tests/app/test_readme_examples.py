"""Every Python block in the README runs, so the documented API cannot drift from the code.

A block whose first line says it needs a CUDA GPU is skipped without one (the lead's GPU run
takes it). tests/e2e/test_fresh_clone.py runs the same blocks again as scripts outside the
repository, with the Python `make run` set up in a fresh clone.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest
import torch

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.DOTALL)


def needs_cuda(source: str) -> bool:
    """The README marks a GPU-only block with a first-line comment "needs a CUDA GPU"."""
    return source.lstrip().startswith("# needs a CUDA GPU")


def test_readme_has_python_examples():
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("source", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_python_block_runs(source):
    if needs_cuda(source) and not torch.cuda.is_available():
        pytest.skip("this README block needs a CUDA GPU")
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(source, str(README), "exec"), {"__name__": "readme_example"})
