"""The logit lens (nostalgebraist, 2020): read the next token from the stream after every layer.

The decoder's residual stream after the embedding and after each layer is sent through the
model's own way out (final LayerNorm for pre-LN models, then the output projection), as if
the network ended there. The last row is the model's own output distribution, exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from model.analysis.circuit import check_network, output_matrix, run, unembed
from model.analysis.tokens import token_names
from model.runtime.lab import LabModel

VOCAB_SLICE = 32_768  # output-matrix rows read at once: [rows, positions, 32k] logits


def read_out(
    network, stream: torch.Tensor, answer_ids: torch.Tensor, k: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """softmax(unembed(stream)) read without making it: stream [R, L, D] -> the top-``k``
    probabilities and ids [R, L, k], and the probability of ``answer_ids`` [L] at each
    position [R, L]. The vocabulary is taken VOCAB_SLICE rows of the output matrix at a
    time, keeping a running log-sum-exp and top-k: the whole [R, L, vocab] was 900 MiB for
    Gemma 3's 262k tokens, and a band of rows at a time re-read the matrix (slower)."""
    rows, length = stream.shape[:2]
    x = stream.reshape(rows * length, -1)  # one 2-D product a slice: a batched 3-D one was slower
    vocab = output_matrix(network).shape[0]
    lse = torch.full((rows, length), -torch.inf, device=x.device)
    top_v = torch.empty(rows, length, 0, device=x.device)
    top_i = torch.empty(rows, length, 0, dtype=torch.long, device=x.device)
    answer = torch.empty(rows, length, device=x.device)
    positions = torch.arange(length, device=x.device)
    for a in range(0, vocab, VOCAB_SLICE):
        logits = unembed(network, x, slice(a, a + VOCAB_SLICE)).float().view(rows, length, -1)
        lse = torch.logaddexp(lse, torch.logsumexp(logits, dim=-1))
        v, i = logits.topk(min(k, logits.shape[-1]), dim=-1)
        top_v, order = torch.cat([top_v, v], -1).topk(min(k, top_v.shape[-1] + v.shape[-1]), -1)
        top_i = torch.cat([top_i, i + a], -1).gather(-1, order)
        here = (answer_ids >= a) & (answer_ids < a + logits.shape[-1])
        answer[:, here] = logits[:, positions[here], answer_ids[here] - a]
    return (top_v - lse[..., None]).exp(), top_i, (answer - lse).exp()


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
    """Row 0 reads the embeddings, row i the stream after layer i, each as the top-``k`` of
    its next-token distribution at every position (no [layers, positions, vocab] array is
    kept: for Gemma 3's 262k-token vocabulary that was 900 MiB a sentence, in a page cache).

    ``answer[p]`` is the model's own prediction after position p (the last row's top token);
    ``answer_prob[layer, p]`` is the probability each layer already gives it.
    """

    tokens: list[str]  # the decoder positions (what each position reads)
    src_tokens: list[str]
    layers: list[str]  # "embeddings", "layer 1", ...
    top_ids: torch.Tensor  # [layers + 1, positions, k]
    top_tokens: list[list[list[str]]]
    top_probs: torch.Tensor  # [layers + 1, positions, k]
    answer: list[str]
    answer_prob: torch.Tensor  # [layers + 1, positions]


@torch.no_grad()
def logit_lens(lm: LabModel, text: str, k: int = 5, continuation: list[int] | None = None) -> Lens:
    """Top-``k`` next tokens read from the decoder's stream after each layer, per position.

    The stream is read out through ``read_out``, which never holds every probability."""
    inputs = decoder_inputs(lm, text, continuation)
    network = lm.network
    r = run(network, inputs.ids, inputs.src_ids)
    answer_ids = r.logits[0].argmax(-1)  # [Lt]: the model's own prediction at each position
    stream = torch.stack([x[0] for x in r.resid["decoder"]])  # [layers + 1, Lt, D]
    top_probs, top_ids, answer_prob = (
        t.cpu() for t in read_out(network, stream, answer_ids, max(1, k))
    )
    tok = lm.tgt_tokenizer
    names = iter(token_names(tok, top_ids.flatten().tolist()))  # each candidate read alone
    top_tokens = [[[next(names) for _ in row] for row in layer] for layer in top_ids.tolist()]
    n = len(stream) - 1
    return Lens(
        tokens=inputs.tokens,
        src_tokens=inputs.src_tokens,
        layers=["embeddings", *[f"layer {i + 1}" for i in range(n)]],
        top_ids=top_ids,
        top_tokens=top_tokens,
        top_probs=top_probs,
        answer=token_names(tok, answer_ids.tolist()),
        answer_prob=answer_prob,
    )
