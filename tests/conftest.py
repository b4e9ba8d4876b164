"""Shared pytest set-up: the `gpu` marker's skip, and tiny local Hugging Face models."""

from __future__ import annotations

import os
import tempfile

import pytest

# AppTests run app.py in this process: no background preloading competing with the tests
# (the servers the browser tests start preload as in production: bench.loadtest.serve).
os.environ.setdefault("ATTENTION_LAB_PRELOAD", "0")
# The class store (classroom/): tests and the servers they start never write into the
# checkout's .data/; a test that needs its own store sets these itself.
os.environ.setdefault("ATTENTION_LAB_DATA", tempfile.mkdtemp(prefix="lab-test-data-"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip `gpu` tests, with the reason shown, where PyTorch sees no CUDA device."""
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    import torch  # only when gpu tests were collected: torch takes a second or two to import

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU; PyTorch sees none")
    for item in gpu_items:
        item.add_marker(skip)


@pytest.fixture(scope="session")
def hf_folders(tmp_path_factory):
    """name -> folder of a tiny random Hugging Face model (bert, distilbert, gpt2, bart, t5)."""
    from tests.hf_folders import build_folders

    return build_folders(tmp_path_factory)
