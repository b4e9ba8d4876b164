"""The models root and broken folders: links never leave the root; a folder that will not
run is named by its plain problem."""

import json
import os

import pytest

from model.runtime.folders import (
    FolderProblem,
    diagnose,
    fallback_reason,
    folder_in_root,
    link_name,
    models_root,
    root_folders,
)
from tests.hf_folders import build_decoder_folder


@pytest.fixture
def root(tmp_path):
    root = tmp_path / "models"
    (root / "tiny").mkdir(parents=True)
    (root / "tiny" / "config.json").write_text("{}")
    outside = tmp_path / "secret"
    outside.mkdir()
    (outside / "config.json").write_text("{}")
    os.symlink(outside, root / "escape")
    return root


def test_the_models_root_comes_from_the_environment_with_a_home_default(monkeypatch, tmp_path):
    monkeypatch.delenv("ATTENTION_LAB_MODELS", raising=False)
    assert models_root() == models_root().home() / "attention-lab-models"
    monkeypatch.setenv("ATTENTION_LAB_MODELS", str(tmp_path))
    assert models_root() == tmp_path


@pytest.mark.parametrize("name", ["../secret", "tiny/../../secret", "/etc", "~/x", "escape", "C:x"])
def test_a_link_never_opens_a_folder_outside_the_root(root, name):
    with pytest.raises(FolderProblem) as problem:
        folder_in_root(name, root)
    assert problem.value.key == "outside_root"
    assert str(root) in str(problem.value)


def test_a_link_opens_a_folder_inside_the_root_and_lists_only_those(root):
    assert folder_in_root("tiny", root) == root / "tiny"
    assert root_folders(root) == ["tiny"]  # the symlink out of the root is not listed
    assert link_name(str(root / "tiny"), root) == "folder:tiny"
    assert link_name(str(root.parent / "secret"), root) is None
    with pytest.raises(FolderProblem) as problem:
        folder_in_root("nothing", root)
    assert problem.value.key == "not_found"


def broken(tmp_path, what: str):
    folder = build_decoder_folder("llama", tmp_path / what)
    if what == "not_model":
        (folder / "config.json").unlink()
    elif what == "layout_unsupported":
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**config, "model_type": "wibble"}))
    elif what == "weights_missing":
        (folder / "model.safetensors").unlink()
        (folder / "pytorch_model.bin").write_bytes(b"pickle")
    elif what == "weights_unreadable":
        (folder / "model.safetensors").write_bytes(b"not a safetensors file at all")
    elif what == "tokenizer_missing":
        for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
            (folder / name).unlink(missing_ok=True)
    return folder


BROKEN = (
    "not_model",
    "layout_unsupported",
    "weights_missing",
    "weights_unreadable",
    "tokenizer_missing",
)


@pytest.mark.parametrize("what", BROKEN)
def test_each_broken_folder_is_named_by_its_plain_problem(tmp_path, what):
    from model import load
    from model.runtime.types import ModelLoadError

    folder = broken(tmp_path, what)
    with pytest.raises(ModelLoadError):
        load(folder, device="cpu")
    assert diagnose(folder).key == what


def test_a_missing_folder_and_a_sound_one(tmp_path):
    assert diagnose(tmp_path / "nope").key == "not_found"
    assert diagnose(build_decoder_folder("gpt2", tmp_path / "ok")) is None


def test_the_fallback_reason_is_a_key_a_page_can_translate():
    key, details = fallback_reason(
        "its rotary positions are rescaled ('llama3'), which our RoPE does not do"
    )
    assert (key, details["detail"]) == ("rope_scaled", "llama3")
    assert fallback_reason("model_type 't5' is not one Attention Lab maps")[0] == "layout"
    assert fallback_reason("something new") == ("other", {"detail": "something new"})
