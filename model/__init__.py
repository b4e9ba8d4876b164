"""Attention Lab's Transformer, written from scratch in PyTorch (no streamlit or plotly here)."""

from model.attention import (
    AttentionConfig,
    AttentionOutput,
    MultiHeadAttention,
    scaled_dot_product_attention,
)
from model.config import TransformerConfig
from model.runtime.device import configure_threads, resolve_device
from model.runtime.lab import LabModel
from model.runtime.loading import load
from model.runtime.types import DecodeStep, Encoded, ModelLoadError
from model.trace import Trace
from model.transformer import (
    DecoderModel,
    EncoderDecoderModel,
    EncoderModel,
    ModelOutput,
    build_model,
)

__all__ = [
    "AttentionConfig",
    "AttentionOutput",
    "DecodeStep",
    "Encoded",
    "LabModel",
    "ModelLoadError",
    "load",
    "DecoderModel",
    "EncoderDecoderModel",
    "EncoderModel",
    "ModelOutput",
    "MultiHeadAttention",
    "Trace",
    "TransformerConfig",
    "build_model",
    "configure_threads",
    "resolve_device",
    "scaled_dot_product_attention",
]
