"""The logit lens (nostalgebraist, 2020): read the next token from the stream after every layer.

The decoder's residual stream after the embedding and after each layer is sent through the
model's own way out (final LayerNorm for pre-LN models, then the output projection), as if
the network ended there. The last row is the model's own output distribution, exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from model.analysis.circuit import check_network, run, unembed
from model.analysis.tokens import token_names
from model.runtime.lab import LabModel


@dataclass
class Inputs:
    """What a decoder reads for one text: source ids (encoder-decoder) and decoder ids."""

    src_ids: torch.Tensor | None  # [1, Ls]
    ids: torch.Tensor  # [1, Lt]
    src_tokens: list[str]
    tokens: list[str]
    unknown: list[str]


def decoder_inputs(lm: LabModel, text: str, continuation: list[int] | None = None) -> Inputs:
    """The ids LabModel.trace would use: the prompt (decoder-only) or "<bos>" (encoder-
    decoder), followed by ``continuation`` or by the model's own greedy output."""
    check_network(lm.network)
    enc = lm.encode(text)
    tgt = lm.tgt_tokenizer
    if continuation is None:
        continuation = [s.token_id for s in lm.decode(text)]
    continuation = [i for i in continuation if i != tgt.eos_id]
    if lm.kind == "encoder-decoder":
        ids = [tgt.bos_id, *continuation][: lm.max_len]
        src = torch.tensor([enc.ids], device=lm.device)
        return Inputs(
            src, torch.tensor([ids], device=lm.device), enc.tokens, tgt.tokens(ids), enc.unknown
        )
    ids = (enc.ids + continuation)[: lm.max_len]
    return Inputs(None, torch.tensor([ids], device=lm.device), [], tgt.tokens(ids), enc.unknown)


@dataclass
class Lens:
    """probs[layer, position, vocab]: row 0 reads the embeddings, row i the stream after layer i.

    ``answer[p]`` is the model's own prediction after position p (the last row's top token);
    ``answer_prob[layer, p]`` is the probability each layer already gives it.
    """

    tokens: list[str]  # the decoder positions (what each position reads)
    src_tokens: list[str]
    layers: list[str]  # "embeddings", "layer 1", ...
    probs: torch.Tensor  # [layers + 1, positions, vocab]
    top_ids: torch.Tensor  # [layers + 1, positions, k]
    top_tokens: list[list[list[str]]]
    top_probs: torch.Tensor  # [layers + 1, positions, k]
    answer: list[str]
    answer_prob: torch.Tensor  # [layers + 1, positions]
    model_probs: torch.Tensor  # [positions, vocab]: softmax of the model's own logits


@torch.no_grad()
def logit_lens(lm: LabModel, text: str, k: int = 5, continuation: list[int] | None = None) -> Lens:
    """Top-``k`` next tokens read from the decoder's stream after each layer, per position."""
    inputs = decoder_inputs(lm, text, continuation)
    network = lm.network
    r = run(network, inputs.ids, inputs.src_ids)
    stream = torch.stack([x[0] for x in r.resid["decoder"]])  # [layers + 1, Lt, D]
    probs = torch.softmax(unembed(network, stream).float(), dim=-1).cpu()
    model_probs = torch.softmax(r.logits[0].float(), dim=-1).cpu()
    k = max(1, min(k, probs.shape[-1]))
    top_probs, top_ids = probs.topk(k, dim=-1)
    tok = lm.tgt_tokenizer
    names = iter(token_names(tok, top_ids.flatten().tolist()))  # each candidate read alone
    top_tokens = [[[next(names) for _ in row] for row in layer] for layer in top_ids.tolist()]
    answer_ids = model_probs.argmax(-1)  # [Lt]
    answer_prob = probs.gather(-1, answer_ids.view(1, -1, 1).expand(len(probs), -1, 1))[..., 0]
    n = len(probs) - 1
    return Lens(
        tokens=inputs.tokens,
        src_tokens=inputs.src_tokens,
        layers=["embeddings", *[f"layer {i + 1}" for i in range(n)]],
        probs=probs,
        top_ids=top_ids,
        top_tokens=top_tokens,
        top_probs=top_probs,
        answer=token_names(tok, answer_ids.tolist()),
        answer_prob=answer_prob,
        model_probs=model_probs,
    )
