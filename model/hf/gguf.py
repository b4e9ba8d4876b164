"""A GGUF file (llama.cpp's single-file format) turned into a local Hugging Face model folder.

The lab runs real models through its own engine from a Hugging Face folder (config.json,
safetensors, tokenizer.json). A GGUF holds the same model in llama.cpp's terms, so this
module translates, once, what transformers' own GGUF loader translates on every load:

- the metadata (``llama.block_count``, ...) into a config.json of transformers' form;
- the tensors (``blk.3.attn_q.weight``, quantised) into float32 under transformers' names,
  dequantised by ggml's own ``gguf.dequantize``, with llama.cpp's changes undone: LLaMA's
  query and key rows are permuted for its rotary layout (reversed here), Gemma's RMSNorm
  weights are stored as 1 + w (1 is taken off), GPT-2's Conv1D weights are transposed;
- the tokenizer (model.hf.gguf_tokenizer) into tokenizer.json.

The header is read by ``read_gguf`` below rather than by ``gguf.GGUFReader``: the latter
makes a numpy array for every element of every array field, which for Gemma's 262,144-token
vocabulary took 20 s here; this reads the same header in well under a second (a test holds
the two readers equal). The tensors are memory-mapped; nothing is read until it is needed.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from model.runtime.types import ModelLoadError

# Architectures whose tensors map into a transformers layout here. llama.cpp writes Mistral
# models as "llama" files (no sliding window: llama.cpp does not apply one), so they run as
# LLaMA, as llama.cpp runs them. gemma3 becomes a gemma3_text folder (Gemma3ForCausalLM's).
ARCHITECTURES = ("llama", "qwen2", "gpt2", "gemma3")
# Any other architecture transformers' own GGUF loader reads (phi3, qwen3, falcon, ...) is
# written out by transformers (convert_with_transformers) and runs through transformers.
# Quantisation types read (by gguf's own numpy dequantize); others are refused by name.
QUANT_TYPES = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K")

_SCALARS = {  # GGUFValueType -> struct format
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}
_NUMPY = {0: np.uint8, 1: np.int8, 2: np.uint16, 3: np.int16, 4: np.uint32, 5: np.int32}
_NUMPY |= {6: np.float32, 7: np.bool_, 10: np.uint64, 11: np.int64, 12: np.float64}
STRING, ARRAY = 8, 9


class GGUFProblem(ModelLoadError):
    """A GGUF that cannot be read or mapped, for a plain reason: ``key`` names it (gguf_*),
    ``details`` holds what the message states, so a page can say it in the reader's language."""

    def __init__(self, key: str, message: str, **details: str):
        super().__init__(message)
        self.key = key
        self.details = details


@dataclass
class GGUFTensor:
    name: str
    shape: tuple[int, ...]  # numpy order (outermost first), as dequantised
    qtype: int  # gguf.GGMLQuantizationType value
    offset: int  # from the start of the file
    nbytes: int


@dataclass
class GGUFFile:
    """A GGUF's header: metadata as Python values, the tensor table, and the file mapped."""

    path: Path
    metadata: dict
    tensors: dict[str, GGUFTensor]
    data: np.ndarray = field(repr=False)  # np.memmap of the whole file, uint8

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", "?"))

    def arch_key(self, name: str, default=None):
        """``<architecture>.<name>``, the way llama.cpp prefixes model hyperparameters."""
        return self.metadata.get(f"{self.architecture}.{name}", default)

    def dequantized(self, name: str) -> np.ndarray:
        """One tensor as float32, in numpy order (rows x columns as transformers stores it)."""
        import gguf

        t = self.tensors[name]
        raw = self.data[t.offset : t.offset + t.nbytes]
        qtype = gguf.GGMLQuantizationType(t.qtype)
        if qtype == gguf.GGMLQuantizationType.BF16:  # the numpy quants module reads raw bytes
            bits = raw.view(np.uint16).astype(np.uint32) << 16
            return bits.view(np.float32).reshape(t.shape)
        values = gguf.dequantize(raw.reshape(t.shape[:-1] + (-1,)), qtype)
        return np.asarray(values, dtype=np.float32).reshape(t.shape)


class _Cursor:
    def __init__(self, buf: memoryview | bytes):
        self.buf, self.pos = buf, 0

    def take(self, fmt: str):
        (value,) = struct.unpack_from("<" + fmt, self.buf, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return value

    def string(self) -> str:
        n = self.take("Q")
        text = bytes(self.buf[self.pos : self.pos + n]).decode("utf-8", errors="replace")
        self.pos += n
        return text

    def value(self, vtype: int):
        if vtype == STRING:
            return self.string()
        if vtype == ARRAY:
            etype, n = self.take("I"), self.take("Q")
            if etype in _NUMPY:  # numbers: one numpy read
                dtype = np.dtype(_NUMPY[etype]).newbyteorder("<")
                out = np.frombuffer(self.buf, dtype=dtype, count=n, offset=self.pos)
                self.pos += n * dtype.itemsize
                return out.tolist()
            return [self.value(etype) for _ in range(n)]
        if vtype in _SCALARS:
            return self.take(_SCALARS[vtype])
        raise ValueError(f"unknown GGUF value type {vtype}")


def read_gguf(path: str | Path) -> GGUFFile:
    """The header of a GGUF (version 2 or 3, little-endian) and its tensors, mapped."""
    import gguf

    path = Path(path)
    try:
        data = np.memmap(path, dtype=np.uint8, mode="r")
    except (OSError, ValueError) as err:
        raise GGUFProblem(
            "gguf_unreadable", f"{path} could not be opened: {err}", path=str(path)
        ) from err
    buf = memoryview(data)
    try:
        cur = _Cursor(buf)
        if bytes(buf[:4]) != b"GGUF":
            raise ValueError("it does not start with the GGUF magic bytes")
        cur.pos = 4
        version = cur.take("I")
        if version not in (2, 3):
            raise ValueError(f"GGUF version {version} (read: 2 and 3)")
        n_tensors, n_kv = cur.take("Q"), cur.take("Q")
        metadata = {}
        for _ in range(n_kv):
            key = cur.string()
            metadata[key] = cur.value(cur.take("I"))
        infos = []
        for _ in range(n_tensors):
            name = cur.string()
            dims = [cur.take("Q") for _ in range(cur.take("I"))]
            infos.append((name, dims, cur.take("I"), cur.take("Q")))
        align = int(metadata.get("general.alignment", 32))
        start = -(-cur.pos // align) * align
    except (ValueError, struct.error, UnicodeDecodeError) as err:
        raise GGUFProblem(
            "gguf_unreadable", f"{path} is not a readable GGUF file: {err}", path=str(path)
        ) from err
    tensors = {}
    for name, dims, qtype, offset in infos:
        shape = tuple(int(d) for d in reversed(dims))
        try:
            block, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(qtype)]
        except (ValueError, KeyError):
            block, size = 1, 0
        nbytes = int(np.prod(shape, dtype=np.int64)) // block * size
        tensors[name] = GGUFTensor(name, shape, qtype, start + offset, nbytes)
        if start + offset + nbytes > len(data):
            raise GGUFProblem(
                "gguf_unreadable",
                f"{path} is cut short: tensor {name} runs past the end of the file",
                path=str(path),
            )
    return GGUFFile(path, metadata, tensors, data)


# --- metadata -> config.json ----------------------------------------------------------------


def model_type(f: GGUFFile) -> str:
    """transformers' model_type for the file. (transformers 5.23 reads a LLaMA file named
    "mistral" as Mistral, then fails: gguf 0.19 has no "mistral" architecture. Here it stays
    LLaMA, which is what llama.cpp runs.)"""
    return f.architecture


def unsupported(f: GGUFFile) -> GGUFProblem | None:
    """Why the file cannot be converted here (architecture, quantisation type), or None."""
    import gguf

    arch = f.architecture
    if arch not in ARCHITECTURES:
        return GGUFProblem(
            "gguf_arch_unsupported",
            f"{f.path.name}: the GGUF architecture {arch!r} is not one Attention Lab reads "
            f"({', '.join(ARCHITECTURES)})",
            arch=arch,
            file=f.path.name,
            supported=", ".join(ARCHITECTURES),
        )
    for t in f.tensors.values():
        try:
            qname = gguf.GGMLQuantizationType(t.qtype).name
        except ValueError:
            qname = str(t.qtype)
        if qname not in QUANT_TYPES:
            return GGUFProblem(
                "gguf_quant_unsupported",
                f"{f.path.name}: tensor {t.name} is quantised as {qname}, which Attention Lab "
                f"does not read ({', '.join(QUANT_TYPES)})",
                quant=qname,
                file=f.path.name,
                supported=", ".join(QUANT_TYPES),
            )
    return None


def _token_ids(f: GGUFFile) -> dict:
    ids = {}
    for ours, theirs in (
        ("bos_token_id", "bos_token_id"),
        ("eos_token_id", "eos_token_id"),
        ("pad_token_id", "padding_token_id"),
        ("unk_token_id", "unknown_token_id"),
    ):
        value = f.metadata.get(f"tokenizer.ggml.{theirs}")
        if value is not None:
            ids[ours] = int(value)
    return ids


def _vocab_size(f: GGUFFile) -> int:
    return int(f.arch_key("vocab_size") or len(f.metadata.get("tokenizer.ggml.tokens") or ()))


def hf_config(f: GGUFFile) -> dict:
    """config.json in transformers' form for the file's metadata (as transformers' GGUF
    loader reads it; values the file does not state keep transformers' defaults)."""
    mt = model_type(f)
    key = f.arch_key
    tied = "output.weight" not in f.tensors
    if mt == "gpt2":
        n_embd = int(key("embedding_length"))
        return {
            "model_type": "gpt2",
            "architectures": ["GPT2LMHeadModel"],
            "vocab_size": _vocab_size(f),
            "n_embd": n_embd,
            "n_layer": int(key("block_count")),
            "n_head": int(key("attention.head_count")),
            "n_ctx": int(key("context_length")),
            "n_positions": f.tensors["position_embd.weight"].shape[0],
            "n_inner": int(key("feed_forward_length", 4 * n_embd)),
            "layer_norm_epsilon": float(key("attention.layer_norm_epsilon", 1e-5)),
            "tie_word_embeddings": tied,
            "dtype": "float32",
            **_token_ids(f),
        }
    heads = int(key("attention.head_count"))
    config = {
        "model_type": mt,
        "vocab_size": _vocab_size(f),
        "hidden_size": int(key("embedding_length")),
        "intermediate_size": int(key("feed_forward_length")),
        "num_hidden_layers": int(key("block_count")),
        "num_attention_heads": heads,
        "num_key_value_heads": int(key("attention.head_count_kv", heads)),
        "max_position_embeddings": int(key("context_length")),
        "rms_norm_eps": float(key("attention.layer_norm_rms_epsilon")),
        "tie_word_embeddings": tied,
        "dtype": "float32",
        **_token_ids(f),
    }
    base = float(key("rope.freq_base", 10000.0))
    if mt == "llama":
        config["architectures"] = ["LlamaForCausalLM"]
        config["hidden_act"] = "silu"
        if key("rope.dimension_count") is not None:
            config["head_dim"] = int(key("rope.dimension_count"))
        config["rope_parameters"] = {"rope_type": "default", "rope_theta": base}
    elif mt == "qwen2":
        config["architectures"] = ["Qwen2ForCausalLM"]
        config["hidden_act"] = "silu"
        config["rope_parameters"] = {"rope_type": "default", "rope_theta": base}
    elif mt == "gemma3":
        layers = config["num_hidden_layers"]
        head_dim = int(key("attention.key_length"))
        config |= {
            "model_type": "gemma3_text",
            "architectures": ["Gemma3ForCausalLM"],
            "head_dim": head_dim,
            "hidden_activation": "gelu_pytorch_tanh",
            # llama.cpp scales scores by 1/sqrt(head_dim) (all but the 27B); 256 for the 270M,
            # as transformers' default
            "query_pre_attn_scalar": head_dim,
            "sliding_window": int(key("attention.sliding_window")),
            # five sliding-window layers, then a global one (llama.cpp's and transformers'
            # pattern for Gemma 3; the file does not state it)
            "layer_types": [
                "full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(layers)
            ],
            "rope_parameters": {
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {"rope_type": "default", "rope_theta": base},
            },
            "final_logit_softcapping": None,
            "attn_logit_softcapping": None,
            "use_bidirectional_attention": False,
        }
    return config


# --- tensors -> transformers' names ----------------------------------------------------------

_LLAMA_BLOCK = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_GEMMA3_BLOCK = _LLAMA_BLOCK | {
    "ffn_norm": "pre_feedforward_layernorm",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "post_attention_norm": "post_attention_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
}
_GPT2_BLOCK = {
    "attn_norm": "ln_1",
    "attn_qkv": "attn.c_attn",
    "attn_output": "attn.c_proj",
    "ffn_norm": "ln_2",
    "ffn_up": "mlp.c_fc",
    "ffn_down": "mlp.c_proj",
}
_GPT2_CONV1D = ("attn_qkv", "attn_output", "ffn_up", "ffn_down")
IGNORED = ("rope_freqs.weight",)  # llama.cpp's precomputed rope factors; transformers skips it


def hf_name(gguf_name: str, mt: str) -> str | None:
    """transformers' name for a GGUF tensor name, or None when it has none."""
    if gguf_name in IGNORED:
        return None
    if mt == "gpt2":
        top = {
            "token_embd.weight": "transformer.wte.weight",
            "position_embd.weight": "transformer.wpe.weight",
            "output_norm.weight": "transformer.ln_f.weight",
            "output_norm.bias": "transformer.ln_f.bias",
            "output.weight": "lm_head.weight",
        }
        block, prefix = _GPT2_BLOCK, "transformer.h"
    else:
        top = {
            "token_embd.weight": "model.embed_tokens.weight",
            "output_norm.weight": "model.norm.weight",
            "output.weight": "lm_head.weight",
        }
        block, prefix = (_GEMMA3_BLOCK if mt == "gemma3" else _LLAMA_BLOCK), "model.layers"
    if gguf_name in top:
        return top[gguf_name]
    parts = gguf_name.split(".")
    if len(parts) == 4 and parts[0] == "blk" and parts[2] in block:
        return f"{prefix}.{parts[1]}.{block[parts[2]]}.{parts[3]}"
    return None


def unpermute_rotary(w: np.ndarray, n_heads: int) -> np.ndarray:
    """Undo llama.cpp's permutation of LLaMA's query / key rows: it interleaves each head's
    two rotary halves (GGML's rotary pairs neighbours; transformers' rotates halves)."""
    half = w.shape[0] // n_heads // 2
    return w.reshape(n_heads, half, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def hf_tensor(f: GGUFFile, gguf_name: str, config: dict) -> np.ndarray:
    """One tensor as transformers stores it: dequantised, llama.cpp's changes undone."""
    w = f.dequantized(gguf_name)
    arch, kind = f.architecture, gguf_name.split(".")[-2]
    if arch == "llama" and kind in ("attn_q", "attn_k") and gguf_name.endswith(".weight"):
        heads = config["num_attention_heads"]
        w = unpermute_rotary(w, heads if kind == "attn_q" else config["num_key_value_heads"])
    elif arch == "gemma3" and gguf_name.endswith("norm.weight"):
        w = w - np.float32(1.0)  # llama.cpp stores Gemma's (1 + w) scale
    elif arch == "gpt2" and kind in _GPT2_CONV1D and gguf_name.endswith(".weight"):
        w = w.T  # nn.Linear [out, in] in the file; GPT-2's Conv1D holds [in, out]
    return np.ascontiguousarray(w, dtype=np.float32)


def tokenizer_metadata(f: GGUFFile) -> dict:
    """The ``tokenizer.*`` metadata under short names, for model.hf.gguf_tokenizer."""
    prefix = "tokenizer.ggml."
    meta = {k[len(prefix) :]: v for k, v in f.metadata.items() if k.startswith(prefix)}
    meta["unk_token_id"] = meta.get("unknown_token_id")
    if "tokenizer.chat_template" in f.metadata:
        meta["chat_template"] = f.metadata["tokenizer.chat_template"]
    if "tokens" not in meta:
        raise GGUFProblem(
            "gguf_unreadable",
            f"{f.path.name} has no tokenizer vocabulary (tokenizer.ggml.tokens)",
            path=str(f.path),
        )
    return meta


def convert(f: GGUFFile, folder: Path, progress: bool = True) -> dict:
    """Write config.json, model.safetensors, tokenizer.json and tokenizer_config.json for
    the file into ``folder`` (which exists and is empty); returns the config."""
    from safetensors.numpy import save_file
    from tqdm import tqdm

    from model.hf.gguf_tokenizer import write_tokenizer

    problem = unsupported(f)
    if problem is not None and problem.key == "gguf_arch_unsupported" and transformers_reads(f):
        return convert_with_transformers(f, folder)
    if problem is not None:
        raise problem
    mt = model_type(f)
    config = hf_config(f)
    write_tokenizer(tokenizer_metadata(f), f.architecture, folder)
    tensors, unknown = {}, []
    names = list(f.tensors)
    for name in tqdm(
        names, desc=f"Converting {f.path.name}", unit="tensor", disable=not progress, leave=False
    ):
        target = hf_name(name, mt)
        if target is None:
            if name not in IGNORED:
                unknown.append(name)
            continue
        tensors[target] = hf_tensor(f, name, config)
    if unknown:
        shown = ", ".join(unknown[:4]) + (" ..." if len(unknown) > 4 else "")
        raise GGUFProblem(
            "gguf_arch_unsupported",
            f"{f.path.name}: tensors with no place in the {mt} layout: {shown}",
            arch=mt,
            file=f.path.name,
            supported=", ".join(ARCHITECTURES),
        )
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    (folder / "config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    return config


def transformers_reads(f: GGUFFile) -> bool:
    """Whether transformers' own GGUF loader reads this architecture (it needs accelerate)."""
    from importlib.util import find_spec

    if find_spec("accelerate") is None:
        return False
    try:
        from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES
    except ImportError:
        return False
    return f.architecture in GGUF_SUPPORTED_ARCHITECTURES and f.architecture not in (
        "general",
        "tokenizer",
    )


def convert_with_transformers(f: GGUFFile, folder: Path) -> dict:
    """An architecture the lab does not map, written into the folder by transformers' own
    GGUF loader (save_pretrained), so it runs there through transformers, named as such."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder_in, name = str(f.path.parent), f.path.name
    try:
        model = AutoModelForCausalLM.from_pretrained(
            folder_in,
            gguf_file=name,
            dtype=torch.float32,
            local_files_only=True,
            trust_remote_code=False,
        )
        # save_pretrained refuses a model loaded from a GGUF ("not serializable"): its
        # weights are plain float32 here, so they are written as they are, without the
        # GGUF quantisation note in the config.
        from safetensors.torch import save_model

        save_model(model, str(folder / "model.safetensors"), metadata={"format": "pt"})
        config = model.config.to_dict()
        config.pop("quantization_config", None)
        config["dtype"] = "float32"
        (folder / "config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
        AutoTokenizer.from_pretrained(
            folder_in, gguf_file=name, local_files_only=True, trust_remote_code=False
        ).save_pretrained(folder)
    except Exception as err:  # transformers raises many kinds; the reader needs one message
        raise GGUFProblem(
            "gguf_unreadable",
            f"{f.path.name}: transformers could not read this {f.architecture} GGUF "
            f"({type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''})",
            path=str(f.path),
        ) from err
    return json.loads((folder / "config.json").read_text(encoding="utf-8"))
