"""What every transformers adapter needs: local files read safely, the tokenizer, the kind.

Nothing is downloaded (HF_HUB_OFFLINE is set before transformers is first imported) and
trust_remote_code is never on; pickle-only weights are refused before anything loads.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from model.hf.pieces import display_pieces, display_text, style_of, style_of_vocab
from model.runtime.types import (  # short_error: re-exported for the adapters
    Encoded,
    ModelLoadError,
    read_json_object,
    short_error,
)

# Read by huggingface_hub when transformers is first imported (lazily, below): no network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

WEIGHTS = "model.safetensors"
WEIGHTS_INDEX = "model.safetensors.index.json"
UNSAFE_WEIGHTS = ("pytorch_model.bin", "pytorch_model.bin.index.json", "tf_model.h5")
TOKENIZER_FILES = (
    "tokenizer.json",
    "vocab.txt",
    "vocab.json",
    "spiece.model",
    "sentencepiece.bpe.model",
    "tokenizer.model",
)


# --- tokenizer -------------------------------------------------------------------------------


def subword_style(vocab: dict[str, int]) -> str | None:
    """How words split into pieces: "wordpiece" (##), "byte-level" (Ġ), "sentencepiece" (▁)."""
    return style_of_vocab(vocab)


def tokenizer_style(tokenizer) -> str | None:
    """A transformers tokenizer's family, from its fast backend's parts when it has one (a
    vocabulary alone can mislead), else from the markers its vocabulary uses."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        return style_of(backend)
    return subword_style(tokenizer.get_vocab())


class HFTokenizer:
    """A transformers tokenizer (or model.hf.fast_tokenizer's PlainFastTokenizer, which answers
    the same calls) behind the runtime's Tokenizer protocol (model.runtime.types).

    ``special_tokens`` holds the tokens the tokenizer adds or reserves ([CLS], </s>, ...), not
    its unknown token: an [UNK] still stands for a word the reader typed.
    """

    def __init__(self, tokenizer):
        self.hf = tokenizer
        self.bos_id = tokenizer.bos_token_id
        self.eos_id = tokenizer.eos_token_id
        # GPT-2 has no pad token; its ids are never padded here, but the protocol wants an int.
        pad = tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else (self.eos_id if self.eos_id is not None else 0)
        framing = {
            getattr(tokenizer, f"{role}_token", None)
            for role in ("bos", "eos", "pad", "cls", "sep", "mask")
        } - {None}
        unk = tokenizer.unk_token
        # GPT-2 uses one token for unk, bos and eos: then it frames text and stays special.
        self.unk_id = tokenizer.unk_token_id if unk not in framing else None
        self.special_tokens = frozenset(tokenizer.all_special_tokens) - {unk} | framing
        self.subword_style = tokenizer_style(tokenizer)
        # Shown as they are, never read as text: the specials (an added token that is text,
        # such as Gemma's "\n" or two spaces, is shown as the text it holds).
        self.verbatim = self.special_tokens | ({unk} - {None})

    def encode(self, text: str, max_len: int) -> Encoded:
        """[CLS] text [SEP] (or the model's own template), cut to ``max_len`` and flagged."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, not {type(text).__name__}")
        # Counted without specials first; verbose=False keeps the over-length warning quiet.
        n_body = len(self.hf(text, add_special_tokens=False, verbose=False)["input_ids"])
        n_special = self.hf.num_special_tokens_to_add(pair=False)
        enc = self.hf(
            text,
            add_special_tokens=True,
            truncation=True,
            max_length=max_len,
            return_offsets_mapping=self.hf.is_fast,
        )
        ids = list(enc["input_ids"])
        unknown: list[str] = []
        if self.unk_id is not None and "offset_mapping" in enc:
            for i, (start, end) in zip(ids, enc["offset_mapping"]):
                word = text[start:end]
                if i == self.unk_id and word and word not in unknown:
                    unknown.append(word)
        return Encoded(ids, self.tokens(ids), unknown, n_body + n_special > max_len)

    def encode_target(self, text: str, max_len: int) -> Encoded:
        ids = list(self.hf(text, add_special_tokens=False, verbose=False)["input_ids"])
        return Encoded(ids[:max_len], self.tokens(ids[:max_len]), truncated=len(ids) > max_len)

    def pieces(self, ids: list[int]) -> list[str]:
        """Ids -> the vocabulary's own pieces ("Ġcat", "<0xEC>"), for code that needs them."""
        return [str(t) for t in self.hf.convert_ids_to_tokens(list(ids))]

    def tokens(self, ids: list[int]) -> list[str]:
        """Ids of one text -> its tokens as people read them (model.hf.pieces): "␣cat", not
        "Ġcat"; "학 · 2/3" for a byte of 학, not "í"."""
        return display_pieces(self.pieces(ids), self.subword_style, self.verbatim)

    def detokenize(self, ids: list[int]) -> str:
        return self.hf.decode(list(ids), skip_special_tokens=True).strip()

    @property
    def has_chat_template(self) -> bool:
        """Whether the tokenizer carries a chat template (read without rendering it: the
        rendering imports transformers, which a page should pay only when it is used)."""
        return bool(getattr(self.hf, "chat_template", None))

    def chat_prompt(self, question: str) -> str | None:
        """``question`` as the user's turn in the tokenizer's own chat template, ending where
        the assistant's answer begins; None when the tokenizer has no template (a base
        model, a toy). The template's special tokens stay in the text: the tokenizer reads
        them back as single special ids."""
        if not self.has_chat_template:
            return None
        try:
            return self.hf.apply_chat_template(
                [{"role": "user", "content": question}],
                tokenize=False,
                add_generation_prompt=True,
            )
        except Exception:  # a template that needs more than one user turn: not offered
            return None

    def written(self, tokens: list[str]) -> str:
        """Tokens (as ``tokens`` shows them) as the text they spell: "␣cat" reads " cat", a
        character's parts once (model.analysis.tokens.written_text uses this)."""
        if self.subword_style in ("byte-level", "sentencepiece"):
            return display_text(tokens, self.special_tokens).strip()
        try:
            return self.hf.convert_tokens_to_string(list(tokens)).strip()
        except Exception:  # a tokenizer without the conversion: pieces joined by spaces
            return " ".join(tokens)


def _refuse_custom_code(folder: Path) -> None:
    """Custom modelling code would only run with trust_remote_code, which stays off."""
    for name in ("config.json", "tokenizer_config.json"):
        path = folder / name
        if not path.is_file():
            continue
        data = read_json_object(path)
        if data.get("auto_map") or data.get("trust_remote_code"):
            raise ModelLoadError(
                f"{path} asks for custom code (auto_map / trust_remote_code); "
                "Attention Lab never runs code shipped inside a model folder"
            )


# tokenizer_config.json keys that PreTrainedTokenizerFast takes as they are (what a GGUF
# conversion, model.hf.gguf_tokenizer, writes); a folder with any other key goes to AutoTokenizer.
_PLAIN_CONFIG = frozenset(
    {
        "tokenizer_class",
        "bos_token",
        "eos_token",
        "unk_token",
        "pad_token",
        "add_bos_token",
        "add_eos_token",
        "clean_up_tokenization_spaces",
        "chat_template",
        "model_max_length",
    }
)
# Files AutoTokenizer would merge into the tokenizer besides those two.
_MORE_TOKENIZER_FILES = ("special_tokens_map.json", "added_tokens.json", "chat_template.jinja")


def _plain_fast_tokenizer(folder: Path):
    """A folder that holds only tokenizer.json and a plain PreTrainedTokenizerFast
    tokenizer_config.json, read by the tokenizers library alone
    (model.hf.fast_tokenizer.PlainFastTokenizer); None for any other folder.

    The same tokenizer AutoTokenizer builds (same ids, offsets, specials and template),
    without importing transformers (~0.8 s of a cached SmolLM2 load on the 2-core machine)
    or its extra passes over tokenizer.json in Python (about 3 s of a 5 s Gemma 3 load)."""
    config_path, file = folder / "tokenizer_config.json", folder / "tokenizer.json"
    if not (config_path.is_file() and file.is_file()):
        return None
    if any((folder / name).exists() for name in _MORE_TOKENIZER_FILES):
        return None
    config = read_json_object(config_path)
    if config.get("tokenizer_class") != "PreTrainedTokenizerFast" or not set(config) <= (
        _PLAIN_CONFIG
    ):
        return None
    if not all(isinstance(v, str | bool | int) for v in config.values()):
        return None
    if config.get("clean_up_tokenization_spaces"):  # transformers' own decoding rules
        return None
    from model.hf.fast_tokenizer import PlainFastTokenizer

    # add_bos/eos_token are already in tokenizer.json's post-processor; AutoTokenizer leaves
    # the attributes False, and so does this.
    return PlainFastTokenizer(file, config)


def load_tokenizer(folder: str | Path) -> HFTokenizer:
    """The folder's own tokenizer, read from local files only."""
    folder = Path(folder)
    _refuse_custom_code(folder)
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise ModelLoadError(
            f"{folder} has no tokenizer files ({', '.join(TOKENIZER_FILES[:3])}, ...); "
            "save the tokenizer beside the model with tokenizer.save_pretrained(folder)"
        )
    try:
        tok = _plain_fast_tokenizer(folder)
        if tok is None:
            from transformers import AutoTokenizer

            tok = AutoTokenizer.from_pretrained(
                str(folder), local_files_only=True, trust_remote_code=False
            )
    except Exception as err:  # transformers raises many kinds; the reader needs one message
        raise ModelLoadError(
            f"{folder}: the tokenizer could not be read ({short_error(err)})"
        ) from err
    # transformers may build a specials-only tokenizer from config alone: every word [UNK].
    if not hasattr(tok, "convert_ids_to_tokens") or len(tok) <= len(tok.all_special_tokens):
        raise ModelLoadError(f"{folder} has no usable tokenizer vocabulary")
    return HFTokenizer(tok)


# --- an empty network to load weights into ---------------------------------------------------


class _SkipInit(torch.overrides.TorchFunctionMode):
    """Random initialisation left out: the weights are replaced at once. On the meta device
    ``normal_`` runs a Python reference that imports torch._dynamo on first use (about 4 s of
    CPU, most of a cached load); a mode, unlike patching torch.nn.init, acts on this thread
    only, so a toy built elsewhere at the same time still gets its random init."""

    SKIPPED = frozenset(
        {
            torch.Tensor.normal_,
            torch.Tensor.uniform_,
            torch.nn.init.normal_,
            torch.nn.init.uniform_,
            torch.nn.init.trunc_normal_,
        }
    )

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in self.SKIPPED:
            return args[0] if args else kwargs.get("tensor")
        return func(*args, **(kwargs or {}))


def empty_network(build):
    """``build()`` on the meta device, without random initialisation: a network to receive
    its weights with ``load_state_dict(..., assign=True)``."""
    with torch.device("meta"), _SkipInit():
        return build()


# --- folder checks ---------------------------------------------------------------------------


def check_hf_folder(folder: Path) -> None:
    """A folder with a config.json that asks for no custom code; ModelLoadError otherwise."""
    if not folder.is_dir():
        raise ModelLoadError(f"{folder} is not a folder")
    if not (folder / "config.json").is_file():
        raise ModelLoadError(f"{folder} has no config.json, so it is not a model folder")
    _refuse_custom_code(folder)


def read_hf_config(folder: str | Path):
    """AutoConfig of a local folder, after refusing custom code; ModelLoadError otherwise."""
    folder = Path(folder)
    check_hf_folder(folder)
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(
            str(folder), local_files_only=True, trust_remote_code=False
        )
    except Exception as err:  # unknown model_type, bad values: one readable message
        raise ModelLoadError(f"{folder}/config.json is not usable: {short_error(err)}") from err


def weight_files(folder: str | Path) -> list[Path]:
    """The folder's safetensors files (one, or the shards its index names)."""
    folder = Path(folder)
    if (folder / WEIGHTS).is_file():
        return [folder / WEIGHTS]
    index = folder / WEIGHTS_INDEX
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
            shards = sorted({folder / name for name in weight_map.values()})
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as err:
            raise ModelLoadError(
                f"{index} is not a readable shard index: {short_error(err)}"
            ) from err
        missing = [p.name for p in shards if not p.is_file()]
        if missing:
            raise ModelLoadError(f"{folder} lacks weight shards: {', '.join(missing)}")
        return shards
    if any((folder / name).is_file() for name in UNSAFE_WEIGHTS):
        raise ModelLoadError(
            f"{folder} has only pickle/TF weights; Attention Lab reads safetensors only "
            "(save the model again with save_pretrained(..., safe_serialization=True))"
        )
    raise ModelLoadError(f"{folder} has a config.json but no weights ({WEIGHTS})")


def read_weights(files: list[Path]) -> dict[str, torch.Tensor]:
    """All tensors of the safetensors files, on CPU; a damaged file gives ModelLoadError."""
    from safetensors.torch import load_file

    weights: dict[str, torch.Tensor] = {}
    for path in files:
        try:
            weights.update(load_file(str(path), device="cpu"))
        except Exception as err:  # SafetensorError, OSError, ...: all mean "unreadable"
            raise ModelLoadError(
                f"{path} is not a readable safetensors file: {short_error(err)}"
            ) from err
    return weights


def hf_kind(config) -> str:
    """ "encoder-decoder" | "decoder" | "encoder" for a transformers config."""
    if getattr(config, "is_encoder_decoder", False):
        return "encoder-decoder"
    if getattr(config, "is_decoder", False):
        return "decoder"
    archs = getattr(config, "architectures", None) or []
    if any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in archs):
        return "decoder"
    encoder_heads = (
        "ForMaskedLM",
        "ForPreTraining",
        "ForSequenceClassification",
        "ForTokenClassification",
        "ForQuestionAnswering",
        "ForMultipleChoice",
    )
    if any(a.endswith(encoder_heads) for a in archs):
        return "encoder"
    # A bare "XxxModel": BERT-like families also have masked-LM heads, GPT-like ones do not.
    mt = config.model_type
    if mt == "bert":  # the rule below, known without importing transformers' tables
        return "encoder"
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    if mt in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and mt not in MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        return "decoder"
    return "encoder"


# --- BERT layout -> our EncoderModel ---------------------------------------------------------
