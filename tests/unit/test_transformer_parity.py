"""Our encoder-decoder stacks equal torch.nn.Transformer with copied weights, masks included."""

import pytest
import torch
from torch import nn

from model import EncoderDecoderModel, TransformerConfig
from model.attention import MultiHeadAttention
from model.layers import AddNorm, FeedForward
from model.masks import attention_mask


def copy_attention(ours: MultiHeadAttention, ref: nn.MultiheadAttention) -> None:
    ref.in_proj_weight.copy_(
        torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight])
    )
    ref.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
    ref.out_proj.weight.copy_(ours.out_proj.weight)
    ref.out_proj.bias.copy_(ours.out_proj.bias)


def copy_ffn(ours: FeedForward, ref_layer) -> None:
    ref_layer.linear1.load_state_dict(ours.linear1.state_dict())
    ref_layer.linear2.load_state_dict(ours.linear2.state_dict())


def copy_norm(ours: AddNorm, ref: nn.LayerNorm) -> None:
    ref.load_state_dict(ours.norm.state_dict())


def reference_for(model: EncoderDecoderModel) -> nn.Transformer:
    cfg = model.config
    ref = nn.Transformer(
        d_model=cfg.d_model,
        nhead=cfg.n_heads,
        num_encoder_layers=cfg.n_encoder_layers,
        num_decoder_layers=cfg.n_decoder_layers,
        dim_feedforward=cfg.d_ff,
        dropout=0.0,
        activation=cfg.activation,
        layer_norm_eps=cfg.layer_norm_eps,
        batch_first=True,
        norm_first=cfg.norm_placement == "pre",
    ).eval()
    with torch.no_grad():
        for ours, theirs in zip(model.encoder.layers, ref.encoder.layers, strict=True):
            copy_attention(ours.self_attn, theirs.self_attn)
            copy_ffn(ours.ffn, theirs)
            copy_norm(ours.attn_norm, theirs.norm1)
            copy_norm(ours.ffn_norm, theirs.norm2)
        for ours, theirs in zip(model.decoder.layers, ref.decoder.layers, strict=True):
            copy_attention(ours.self_attn, theirs.self_attn)
            copy_attention(ours.cross_attn, theirs.multihead_attn)
            copy_ffn(ours.ffn, theirs)
            copy_norm(ours.attn_norm, theirs.norm1)
            copy_norm(ours.cross_norm, theirs.norm2)
            copy_norm(ours.ffn_norm, theirs.norm3)
        if cfg.norm_placement == "pre":
            ref.encoder.norm.load_state_dict(model.encoder.final_norm.state_dict())
            ref.decoder.norm.load_state_dict(model.decoder.final_norm.state_dict())
        else:
            # nn.Transformer adds a final LayerNorm even in post-LN; the paper has none.
            ref.encoder.norm = nn.Identity()
            ref.decoder.norm = nn.Identity()
    return ref


@pytest.mark.filterwarnings("ignore:.*nested.tensor:UserWarning")
@pytest.mark.parametrize(
    ("placement", "activation"), [("post", "relu"), ("post", "gelu"), ("pre", "relu")]
)
def test_encoder_decoder_equals_torch_transformer_with_masks(placement, activation):
    torch.manual_seed(0)
    cfg = TransformerConfig(
        d_model=32,
        n_heads=4,
        n_encoder_layers=2,
        n_decoder_layers=2,
        d_ff=64,
        dropout=0.0,
        norm_placement=placement,
        activation=activation,
    )
    model = EncoderDecoderModel(cfg).eval()
    # Random LayerNorm parameters, so a swapped gamma/beta cannot pass by accident.
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.LayerNorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
    ref = reference_for(model)

    src_valid = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]], dtype=torch.bool)
    tgt_valid = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=torch.bool)
    src, tgt = torch.randn(2, 6, 32), torch.randn(2, 5, 32)

    with torch.no_grad():
        memory = model.encoder(src, attention_mask(src_valid, src_valid))
        out = model.decoder(
            tgt,
            attention_mask(tgt_valid, tgt_valid, causal=True),
            memory,
            attention_mask(tgt_valid, src_valid),
        )
        ref_out = ref(
            src,
            tgt,
            tgt_mask=nn.Transformer.generate_square_subsequent_mask(5, dtype=torch.bool),
            src_key_padding_mask=~src_valid,
            tgt_key_padding_mask=~tgt_valid,
            memory_key_padding_mask=~src_valid,
            tgt_is_causal=True,
        )
        ref_memory = ref.encoder(src, src_key_padding_mask=~src_valid)
    # Padded positions are undefined in torch (and zero-attention here); compare real tokens.
    torch.testing.assert_close(memory[src_valid], ref_memory[src_valid], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out[tgt_valid], ref_out[tgt_valid], atol=1e-5, rtol=1e-5)
