"""GGUF files run in the lab's own engine, equal to transformers reading the same file.

Tiny random models are written as GGUFs by the tests themselves (tests/gguf_files.py): one
per architecture the lab maps (LLaMA, Qwen2, GPT-2; Gemma 3 as far as its folder goes) and
per quantisation type (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K). ``load(path)``
must give transformers' token ids and logits (``from_pretrained(dir, gguf_file=...)``), and
the cache must convert once, be read after, and be rebuilt, never half-read, when damaged.
"""

import json
import os
import socket
from pathlib import Path

import numpy as np
import pytest
import torch

from model import load
from model.hf import gguf as gguf_mod
from model.hf.gguf import GGUFProblem, read_gguf
from model.runtime import gguf_cache
from model.runtime.folders import FolderProblem
from tests.gguf_files import write_tiny_gguf

TEXT = "the cat sat on the mat"
# (architecture, quantisation): every supported type once, every architecture once or more.
CASES = [
    ("llama", "F32"),
    ("llama", "F16"),
    ("llama", "BF16"),
    ("llama", "Q8_0"),
    ("llama", "Q4_0"),
    ("llama", "Q4_1"),
    ("llama", "Q4_K"),
    ("llama", "Q5_K"),
    ("llama", "Q6_K"),
    ("mistral", "Q8_0"),
    ("qwen2", "Q8_0"),
    ("gpt2", "Q8_0"),
    ("gemma3", "Q8_0"),
]


def _case_id(case) -> str:
    return "-".join(case)


@pytest.fixture(autouse=True)
def offline_and_own_cache(monkeypatch, tmp_path_factory):
    """No network; converted folders go to a cache of this module's own."""

    def refuse(*args, **kwargs):
        raise AssertionError("a network connection was attempted")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setenv(gguf_cache.CACHE_ENV, str(tmp_path_factory.getbasetemp() / "gguf-cache"))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("ggufs")
    out = {}
    for arch, quant in CASES:
        size = {"d_model": 256, "d_ff": 256} if quant.endswith("_K") else {}
        out[arch, quant] = write_tiny_gguf(root / f"{arch}-{quant}.gguf", arch, quant, **size)
    return out


def _transformers(path: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kw = {"gguf_file": path.name, "local_files_only": True}
    model = AutoModelForCausalLM.from_pretrained(
        str(path.parent), dtype=torch.float32, attn_implementation="eager", **kw
    )
    return model.eval(), AutoTokenizer.from_pretrained(str(path.parent), **kw)


def _logits(model, ids: list[int]) -> torch.Tensor:
    """Next-token scores of our LabModel, transformers' fallback or transformers' model."""
    with torch.inference_mode():
        if hasattr(model, "hf_model"):  # run by transformers (HFLabModel)
            model = model.hf_model
        elif hasattr(model, "network"):
            return model.network(torch.tensor([ids])).logits[0]
        return model(input_ids=torch.tensor([ids])).logits[0]


@pytest.mark.parametrize("case", [c for c in CASES if c[0] != "mistral"], ids=_case_id)
def test_a_tiny_gguf_gives_transformers_ids_and_logits(files, case):
    path = files[case]
    lm = load(str(path), device="cpu")
    ref, ref_tok = _transformers(path)
    ids = lm.encode(TEXT).ids
    assert ids == ref_tok(TEXT)["input_ids"]
    theirs = _logits(ref, ids)
    ours = _logits(lm, ids)
    assert theirs.std() > 0.01  # not a degenerate model that any mapping would match
    torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=1e-4)
    assert lm.info["engine"] == "attention-lab"
    assert lm.info["model_type"] == ("gemma3_text" if case[0] == "gemma3" else case[0])


def test_greedy_decoding_of_a_quantised_llama_equals_transformers_generate(files):
    path = files["llama", "Q4_K"]
    lm = load(str(path), device="cpu")
    ref, _ = _transformers(path)
    ids = lm.encode(TEXT).ids
    ours = [step.token_id for step in lm.decode(TEXT, strategy="greedy", max_new_tokens=8)]
    with torch.inference_mode():
        out = ref.generate(
            torch.tensor([ids]), max_new_tokens=8, do_sample=False, eos_token_id=None
        )
    assert ours and ours == out[0, len(ids) :].tolist()[: len(ours)]


def test_a_mistral_file_runs_as_llama_as_llama_cpp_runs_it(files):
    """llama.cpp writes Mistral as a "llama" file; transformers 5.23 cannot read one named
    "mistral" (gguf 0.19 has no such architecture), so the proof is the same file renamed."""
    lm = load(str(files["mistral", "Q8_0"]), device="cpu")
    assert lm.info["engine"] == "attention-lab" and lm.info["model_type"] == "llama"
    assert lm.config.sliding_window is None


def test_our_header_reader_reads_what_gguf_reader_reads(files):
    import gguf

    path = files["llama", "Q4_1"]
    ours, theirs = read_gguf(path), gguf.GGUFReader(path)
    assert set(ours.metadata) == set(theirs.fields) - {
        "GGUF.version",
        "GGUF.tensor_count",
        "GGUF.kv_count",
    }
    for key, field in theirs.fields.items():
        if key in ours.metadata:
            value = field.contents()
            if isinstance(value, float):
                assert ours.metadata[key] == pytest.approx(value)
            else:
                assert ours.metadata[key] == value, key
    assert list(ours.tensors) == [t.name for t in theirs.tensors]
    for t in theirs.tensors:
        expected = gguf.dequantize(t.data, t.tensor_type)
        np.testing.assert_array_equal(ours.dequantized(t.name), expected.reshape(expected.shape))


def test_the_first_load_converts_and_later_loads_read_the_cache(files, monkeypatch, tmp_path):
    monkeypatch.setenv(gguf_cache.CACHE_ENV, str(tmp_path / "cache"))
    source = tmp_path / "model.gguf"
    source.write_bytes(files["llama", "Q8_0"].read_bytes())
    folder = gguf_cache.gguf_folder(source, progress=False)
    assert folder.is_relative_to(tmp_path / "cache")
    stamp = json.loads((folder / gguf_cache.STAMP).read_text())
    assert stamp["sha256"] == gguf_cache.sha256_file(source)
    assert stamp["format"] == gguf_cache.FORMAT_VERSION
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".")]  # no temp left

    def no_conversion(*args, **kwargs):
        raise AssertionError("converted again")

    monkeypatch.setattr(gguf_cache, "convert", no_conversion)
    assert gguf_cache.gguf_folder(source) == folder
    os.utime(source, ns=(1, 1))  # touched, same bytes: hashed, kept, stamped anew
    assert gguf_cache.gguf_folder(source) == folder
    assert json.loads((folder / gguf_cache.STAMP).read_text())["sources"][0][2] == 1
    monkeypatch.undo()
    monkeypatch.setenv(gguf_cache.CACHE_ENV, str(tmp_path / "cache"))
    source.write_bytes(files["llama", "Q4_0"].read_bytes())  # new content: converted again
    gguf_cache.gguf_folder(source, progress=False)
    assert json.loads((folder / gguf_cache.STAMP).read_text())["sha256"] == (
        gguf_cache.sha256_file(source)
    )


def test_a_shipped_model_seen_through_another_checkouts_link_is_not_converted_again(
    files, monkeypatch, tmp_path
):
    """Two checkouts whose .venv links to one environment share the package's file and the
    cache: each used to stamp the folder with its own path and convert it again, in turn."""
    monkeypatch.setenv(gguf_cache.CACHE_ENV, str(tmp_path / "cache"))
    package = tmp_path / "venv" / "tiny_pkg"
    package.mkdir(parents=True)
    (package / "model.gguf").write_bytes(files["llama", "Q8_0"].read_bytes())
    (tmp_path / "other-checkout").mkdir()
    (tmp_path / "other-checkout" / "venv").symlink_to(tmp_path / "venv")
    sha = gguf_cache.sha256_file(package / "model.gguf")
    tiny = gguf_cache.ShippedGGUF("tiny", "tiny", "tiny_pkg", "model.gguf", sha)
    monkeypatch.setitem(gguf_cache.SHIPPED_GGUF, "tiny", tiny)
    seen_from = [package]
    monkeypatch.setattr(gguf_cache, "_module_dir", lambda module: seen_from[0])
    folder = gguf_cache.shipped_folder("tiny", progress=False)

    def no_conversion(*args, **kwargs):
        raise AssertionError("converted again")

    monkeypatch.setattr(gguf_cache, "convert", no_conversion)
    seen_from[0] = tmp_path / "other-checkout" / "venv" / "tiny_pkg"
    assert gguf_cache.shipped_folder("tiny") == folder
    os.utime(package / "model.gguf", ns=(1, 1))  # touched, same bytes: hashed, stamped anew
    assert gguf_cache.shipped_folder("tiny") == folder
    assert json.loads((folder / gguf_cache.STAMP).read_text())["sources"][0][2] == 1


@pytest.mark.parametrize("damage", ["truncated weights", "no stamp", "garbage weights"])
def test_a_damaged_cache_is_converted_again_never_half_read(files, monkeypatch, tmp_path, damage):
    monkeypatch.setenv(gguf_cache.CACHE_ENV, str(tmp_path / "cache"))
    path = files["llama", "Q8_0"]
    expected = _logits(load(str(path), device="cpu"), [1, 2, 3])
    folder = gguf_cache.gguf_folder(path)
    weights = folder / "model.safetensors"
    if damage == "truncated weights":
        weights.write_bytes(weights.read_bytes()[:1000])
    elif damage == "no stamp":
        (folder / gguf_cache.STAMP).unlink()
    else:  # same size, so the stamp's sizes still agree: the loader's failure rebuilds it
        data = bytearray(weights.read_bytes())
        data[8:40] = b"\xff" * 32
        weights.write_bytes(bytes(data))
    torch.testing.assert_close(_logits(load(str(path), device="cpu"), [1, 2, 3]), expected)
    assert gguf_cache.read_stamp(folder) is not None


def test_a_failed_conversion_leaves_no_folder_and_no_temporary_files(files, monkeypatch, tmp_path):
    monkeypatch.setenv(gguf_cache.CACHE_ENV, str(tmp_path / "cache"))

    def fail(f, folder, progress=True):
        (folder / "config.json").write_text("{}")
        raise RuntimeError("disk full")

    monkeypatch.setattr(gguf_cache, "convert", fail)
    with pytest.raises(RuntimeError, match="disk full"):
        gguf_cache.gguf_folder(files["llama", "Q8_0"])
    assert not [p for p in (tmp_path / "cache" / "gguf").iterdir() if p.is_dir()]


def test_an_unsupported_architecture_or_quantisation_is_named(tmp_path):
    import gguf

    writer = gguf.GGUFWriter(str(tmp_path / "rwkv.gguf"), "rwkv6")  # transformers: no either
    writer.add_tensor("token_embd.weight", np.zeros((4, 32), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(FolderProblem, match="'rwkv6' is not one Attention Lab reads") as err:
        load(str(tmp_path / "rwkv.gguf"))
    assert err.value.key == "gguf_arch_unsupported" and err.value.details["arch"] == "rwkv6"

    path = write_tiny_gguf(tmp_path / "q2k.gguf", "llama", "Q4_K", d_model=256, d_ff=256)
    f = read_gguf(path)
    f.tensors["blk.0.attn_q.weight"].qtype = gguf.GGMLQuantizationType.Q2_K
    problem = gguf_mod.unsupported(f)
    assert problem is not None and problem.key == "gguf_quant_unsupported"
    assert problem.details["quant"] == "Q2_K" and "Q6_K" in str(problem)


@pytest.mark.parametrize("content", [b"", b"not a gguf at all", b"GGUF\x03\x00\x00\x00\xff"])
def test_a_file_that_is_not_a_whole_gguf_gets_a_plain_message(tmp_path, content):
    path = tmp_path / "broken.gguf"
    path.write_bytes(content)
    with pytest.raises(FolderProblem) as err:
        load(str(path))
    assert err.value.key == "gguf_unreadable" and "broken.gguf" in str(err.value)
    assert not (tmp_path / "missing.gguf").exists()
    with pytest.raises(FolderProblem) as err:
        load(str(tmp_path / "missing.gguf"))
    assert err.value.key == "gguf_not_found"


def test_a_cut_gguf_is_refused_before_anything_is_converted(files, tmp_path):
    data = files["llama", "Q8_0"].read_bytes()
    (tmp_path / "cut.gguf").write_bytes(data[: len(data) - 100])
    with pytest.raises(GGUFProblem, match="cut short"):
        read_gguf(tmp_path / "cut.gguf")


def test_the_chat_template_and_special_tokens_are_kept(tmp_path):
    template = "{% for m in messages %}<|im_start|>{{ m['content'] }}{% endfor %}"
    path = write_tiny_gguf(tmp_path / "chat.gguf", "qwen2", "F32", chat_template=template)
    lm = load(str(path), device="cpu")
    tok = lm.input_tokenizer.hf
    assert tok.chat_template == template
    assert tok.convert_ids_to_tokens(tok("<|im_start|>the")["input_ids"])[0] == "<|im_start|>"
    folder = Path(lm.info["folder"])
    assert json.loads((folder / "tokenizer_config.json").read_text())["chat_template"] == template


@pytest.mark.parametrize("text", ["", "   ", "😀", "the  cat\n\tsat", "카레 the", "x" * 300])
@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_tokenizer_edge_cases_match_transformers(files, arch, text):
    from transformers import AutoTokenizer

    path = files[arch, "Q8_0"]
    lm = load(str(path), device="cpu")
    ref = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    assert lm.input_tokenizer.hf(text)["input_ids"] == ref(text)["input_ids"]
    assert lm.input_tokenizer.hf.decode(ref(text)["input_ids"]) == ref.decode(
        ref(text)["input_ids"]
    )


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_a_converted_folder_reads_its_tokenizer_json_as_autotokenizer_does(files, arch):
    """A converted folder's tokenizer is built straight from tokenizer.json (the quick
    path of a cached load), and reads every text as AutoTokenizer reads that folder."""
    from transformers import AutoTokenizer

    from model.hf.common import _plain_fast_tokenizer

    lm = load(str(files[arch, "Q8_0"]), device="cpu")
    folder = Path(lm.info["folder"])
    quick = _plain_fast_tokenizer(folder)
    assert quick is not None and type(lm.input_tokenizer.hf) is type(quick)
    auto = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    # what HFTokenizer reads of it: the specials, their ids, the length limit, the vocabulary
    for name in ("all_special_tokens", "bos_token_id", "eos_token_id", "pad_token_id",
                 "unk_token", "unk_token_id", "model_max_length"):  # fmt: skip
        assert getattr(quick, name) == getattr(auto, name), name
    assert len(quick) == len(auto) and quick.get_vocab() == auto.get_vocab()
    assert quick.num_special_tokens_to_add(False) == auto.num_special_tokens_to_add(pair=False)
    for text in ["", "   ", "😀", "the  cat\n\tsat", "카레 the", "<|im_start|>the"]:
        ids = auto(text)["input_ids"]
        assert quick(text)["input_ids"] == ids, text
        assert quick.convert_ids_to_tokens(ids) == auto.convert_ids_to_tokens(ids), text
        for skip in (True, False):
            assert quick.decode(ids, skip_special_tokens=skip) == auto.decode(
                ids, skip_special_tokens=skip
            ), text
        for cut in (None, 2, 5):  # the explorer cuts a long text to the model's length
            ours = quick(text, truncation=cut is not None, max_length=cut,
                         return_offsets_mapping=True)  # fmt: skip
            theirs = auto(text, truncation=cut is not None, max_length=cut,
                          return_offsets_mapping=True)  # fmt: skip
            assert ours["input_ids"] == theirs["input_ids"], (text, cut)
            assert [tuple(o) for o in ours["offset_mapping"]] == [
                tuple(o) for o in theirs["offset_mapping"]
            ], (text, cut)
        assert quick.decode(ids) == auto.decode(ids)
    for name in ("bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id"):
        assert getattr(quick, name) == getattr(auto, name), name
    assert quick.all_special_tokens == auto.all_special_tokens
    assert quick.chat_template == auto.chat_template and quick.get_vocab() == auto.get_vocab()


def test_recovered_merges_follow_the_given_order_then_longer_pieces():
    from model.hf.gguf_tokenizer import recovered_merges

    tokens = ["a", "b", "c", "ab", "bc", "abc"]
    order = {t: i for i, t in enumerate(tokens)}
    assert recovered_merges(tokens, order) == [("a", "b"), ("b", "c"), ("ab", "c"), ("a", "bc")]


def test_gguf_files_in_the_models_root_are_listed_beside_folders_and_stay_inside(files, tmp_path):
    from model.runtime.folders import gguf_in_root, root_gguf_files

    root = tmp_path / "models"
    (root / "a-folder.gguf").mkdir(parents=True)  # a folder, whatever its name
    (root / "tiny.gguf").write_bytes(files["llama", "Q8_0"].read_bytes())
    (root / "notes.txt").write_text("not a model")
    outside = tmp_path / "outside.gguf"
    outside.write_bytes(b"GGUF")
    (root / "escape.gguf").symlink_to(outside)
    assert root_gguf_files(root) == ["tiny.gguf"]
    assert gguf_in_root("tiny.gguf", root) == root / "tiny.gguf"
    for name, key in [
        ("../outside.gguf", "outside_root"),
        ("/etc/passwd.gguf", "outside_root"),
        ("escape.gguf", "outside_root"),
        ("a-folder.gguf", "not_found"),
        ("notes.txt", "outside_root"),
        ("missing.gguf", "not_found"),
    ]:
        with pytest.raises(FolderProblem) as err:
            gguf_in_root(name, root)
        assert err.value.key == key, name
    lm = load(str(gguf_in_root("tiny.gguf", root)), device="cpu")
    assert lm.name == "tiny" and lm.info["engine"] == "attention-lab"


def test_the_bench_section_states_each_model_against_its_target():
    from bench.gguf_load import markdown

    run = {"engine": "attention-lab", "model_type": "llama"}
    data = {
        "models": {
            "smollm2": {
                "first": {"load_s": 20.0, "load_cpu_s": 9.0, **run},
                "cached": {"load_s": 1.5, "load_cpu_s": 1.2, **run},
                "folder_bytes": 540 * 2**20,
            }
        },
        "memory": {
            "python": 2**27,
            "imports": 2**28,
            "after_minilm": 2**29,
            "after_smollm2": 3 * 2**30,
        },
        "missing": ["gemma3"],
    }
    text = "\n".join(markdown(data))
    assert "| smollm2 | 20.0 s | 9.0 s | 1.50 s | 1.20 s | ≤ 3 s (first ≤ 30 s)" in text
    assert "smollm2 3.00 GB" in text and "missed" in text and "540 MiB" in text
    assert "Not installed, not measured: gemma3." in text


def test_an_architecture_only_transformers_reads_runs_there_and_says_so(tmp_path):
    """Qwen3 has no layout in our engine: transformers writes its folder once, runs it, and
    the model says which engine runs it and why."""
    path = write_tiny_gguf(tmp_path / "qwen3.gguf", "qwen3", "Q8_0", d_model=256, n_heads=2, n_kv=1)
    lm = load(str(path), device="cpu")
    assert lm.info["engine"] == "transformers" and "qwen3" in lm.info["fallback_reason"]
    ref, ref_tok = _transformers(path)
    ids = lm.encode(TEXT).ids
    assert ids == ref_tok(TEXT)["input_ids"]
    torch.testing.assert_close(_logits(lm, ids), _logits(ref, ids), atol=1e-4, rtol=1e-4)
    folder = Path(lm.info["folder"])
    assert gguf_cache.read_stamp(folder)["model_type"] == "qwen3"


def test_the_real_models_bench_runs_on_a_tiny_gguf_and_states_each_target(tmp_path, monkeypatch):
    """bench.real_models' measurements run end to end (a tiny LLaMA GGUF beside
    transformers on the same folder) and its section names every target, met or missed."""
    from bench import real_models as rm
    from model.hf.decoder import transformers_causal_lm
    from model.runtime import gguf_cache

    monkeypatch.setenv(gguf_cache.CACHE_ENV, str(tmp_path / "cache"))
    lm = load(str(write_tiny_gguf(tmp_path / "tiny.gguf", "llama", "F32")), device="cpu")
    reference = transformers_causal_lm(lm.info["folder"])
    traced = rm.traced_vs_transformers(lm, reference, 12, 1)
    assert traced["tokens"] == 12 and traced["max_logit_difference"] < 1e-4
    view = rm.first_view_vs_fast(lm, 40, 1)
    assert 30 <= view["tokens"] <= 40 and view["first_view_ms"] > 0
    gen = rm.generation_vs_transformers(lm, reference, 4, 1)
    assert gen["same_tokens"] and gen["ours_tok_s"] > 0 and gen["transformers_tok_s"] > 0
    load_run = {"load_s": 4.0, "load_cpu_s": 2.0, "engine": "attention-lab"}
    result = {
        "threads": 1,
        "load_average_before": [1.0, 1.0, 1.0],
        "load_average_after": [1.0, 1.0, 1.0],
        "models": {
            "smollm2": {
                "traced": traced,
                "first_view": view,
                "generation": gen,
                "cached_load": {**load_run, "runs": [load_run]},
            }
        },
        "replica": {"imports": 6e8, "loaded": 1.1e9, "traced": 1.3e9, "peak": 1.4e9},
        "enter": [
            {
                "model": "smollm2",
                "tokens": [29, 31],
                "enter_to_drawn_s": [1.2, 1.8],
                "median_s": 1.5,
                "server_cpu_ms": [400.0, 600.0],
                "median_server_cpu_ms": 500.0,
            }
        ],
        "missing": ["gemma3"],
    }
    text = "\n".join(rm.markdown(result))
    assert text.count("≥ 0.9× transformers") == 2 and "≤ 1.3× the fast forward" in text
    assert "| 4.00 s | 2.00 s | **missed** (CPU: met) |" in text
    assert "| 1.30 GB | | **missed** |" in text and "Not installed, not measured: gemma3." in text
    assert (
        "about 30 tokens (29–31) typed" in text
        and "| 1.50 s | 0.50 s (server script) | met |" in text
    )


def test_the_real_models_run_alone_replaces_only_its_section(tmp_path, monkeypatch):
    """`make bench`'s --real-only: the real models' section and json key, the rest kept."""
    from bench import benchreport
    from bench import real_models as rm

    loads = {"load_s": 2.0, "load_cpu_s": 1.0, "engine": "attention-lab"}
    fake = {
        "threads": 1,
        "load_average_before": [1.0, 1.0, 1.0],
        "load_average_after": [1.0, 1.0, 1.0],
        "models": {
            "gemma3": {
                "traced": {
                    "tokens": 128,
                    "ours_traced_ms": 90.0,
                    "ours_fast_ms": 80.0,
                    "transformers_eager_ms": 100.0,
                    "max_logit_difference": 1e-5,
                    "speed_vs_transformers": 1.11,
                    "cpu_speed_vs_transformers": 1.05,
                },
                "first_view": {
                    "tokens": 2048,
                    "first_view_ms": 1200.0,
                    "fast_ms": 1000.0,
                    "first_view_over_fast": 1.2,
                    "cpu_first_view_over_fast": 1.1,
                },
                "cached_load": {**loads, "runs": [loads]},
            }
        },
        "missing": ["smollm2"],
    }
    monkeypatch.setattr(rm, "run", lambda **kwargs: json.loads(json.dumps(fake)))
    report, data = tmp_path / "benchmarks.md", tmp_path / "benchmarks.json"
    report.write_text("# Bench\n\n## Memory\n\nsome\n", encoding="utf-8")
    data.write_text('{"memory": {"rss": 1}}', encoding="utf-8")
    for _ in range(2):  # run again: the section is replaced, not added twice
        benchreport.main(["--real-only", "--report", str(report), "--json", str(data)])
    text = report.read_text(encoding="utf-8")
    assert text.startswith("# Bench\n\n## Memory\n\nsome\n") and text.count(rm.TITLE) == 1
    assert "| gemma3 | 2,048 tokens, first view ≤ 1.3× the fast forward" in text
    assert "| 1.20× | 1.10× | met |" in text and "| 2.00 s | 1.00 s | met (CPU: met) |" in text
    stored = json.loads(data.read_text(encoding="utf-8"))
    assert stored["memory"] == {"rss": 1} and stored["real_models"]["missing"] == ["smollm2"]
