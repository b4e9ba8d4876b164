"""What a head contributes, beside where it looks: ablation, direct logit attribution, attention.

For one prediction (the token the model writes after decoder position ``position``), each
head gets four numbers:

- ablation: how much the answer's logit and its loss (-log p) change when the head is
  switched off (its output zeroed, as the decoding page does);
- direct logit attribution: the part of the answer's logit the head writes straight into
  the stream the output projection reads (every LayerNorm after it taken as the linear map
  it is for this input), so all heads plus the rest add up to the logit exactly;
- attention: the weight it puts on the relevant token, and the same through rollout.

Attention is where a head reads; the first two say whether what it read mattered.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from model.analysis.circuit import output_matrix, run
from model.analysis.lens import Inputs, decoder_inputs
from model.analysis.summaries import rollout
from model.runtime.lab import LabModel


@dataclass
class HeadRow:
    kind: str  # "decoder" (masked self-attention) | "cross"
    layer: int
    head: int
    ablation_logit: float  # logit(answer) with the head off minus with it on
    ablation_loss: float  # -log p(answer) with the head off minus with it on
    direct: float  # direct logit attribution to the answer
    attention: float  # weight on the relevant token
    rollout: float  # rollout weight on the relevant token through this head


@dataclass
class Attribution:
    tokens: list[str]
    src_tokens: list[str]
    position: int
    answer: str
    answer_id: int
    logit: float
    relevant: int  # decoder position (self-attention heads) of the relevant token
    relevant_src: int | None  # source position for cross-attention heads
    heads: list[HeadRow]
    rest: float  # embeddings, W_O biases, feed-forward layers, LayerNorm betas
    parts: dict[str, float]  # every part of the stream's logit, heads included

    @property
    def most_indirect(self) -> HeadRow:
        """The head whose contribution goes most through later layers: its whole
        contribution is what switching it off takes away (−ablation), and the part of it
        not written directly (−ablation − direct) is indirect."""
        return max(self.heads, key=lambda h: abs(-h.ablation_logit - h.direct))


def default_relevant(tokens: list[str], position: int, answer: str) -> int:
    """The most recent earlier occurrence of the answer token (the one a copying head reads),
    else the position itself."""
    for p in range(position, -1, -1):
        if tokens[p] == answer:
            return p
    return position


ABLATION_TOKENS = 4_096  # prefix tokens in one batch of ablated passes


@torch.no_grad()
def ablations(
    lm: LabModel,
    inputs: Inputs,
    position: int,
    answer_id: int,
    switched: list[tuple[str, int, int]],
) -> tuple[list[float], list[float]]:
    """The answer's logit and log-probability after ``position`` with each (kind, layer,
    head) of ``switched`` off alone: one sentence of a batch per head, its own head mask.

    The prediction reads no later token (the decoder is causal), so each pass runs on the
    prefix up to the position and sends that one row through the output head; and a batch
    reads the weights once for all its sentences. One pass a head over the prompt and its
    continuation, every row through the head, took SmolLM2 84.5 s for its 270 heads. The
    encoder's memory is the same for every decoder or cross head switched off: computed
    once."""
    net = lm.network
    prefix = inputs.ids[:, : position + 1]
    memory = None if inputs.src_ids is None else net.encode(inputs.src_ids)
    base = lm.head_mask()
    per_batch = max(1, ABLATION_TOKENS // prefix.shape[1])
    logit, logp = [], []
    for a in range(0, len(switched), per_batch):
        batch = switched[a : a + per_batch]
        n = len(batch)
        mask = {kind: m[:, None, :].repeat(1, n, 1) for kind, m in base.items()}
        for j, (kind, layer, head) in enumerate(batch):
            mask[kind][layer, j, head] = 0.0
        ids = prefix.expand(n, -1)
        if memory is None:
            out = net.decode(ids, head_mask=mask, last_only=True)
        else:
            mem, valid = (t.expand(n, *t.shape[1:]) for t in memory)
            out = net.decode(ids, mem, valid, head_mask=mask, last_only=True)
        rows = out[:, -1].double()  # [n, vocab]
        logit += rows[:, answer_id].tolist()
        logp += torch.log_softmax(rows, dim=-1)[:, answer_id].tolist()
    return logit, logp


@torch.no_grad()
def attribute(
    lm: LabModel,
    text: str,
    position: int | None = None,
    relevant: int | None = None,
    relevant_src: int | None = None,
) -> Attribution:
    """Per head: ablation effect, direct logit attribution and attention, for the prediction
    after decoder ``position`` (default: the last prompt position, i.e. the first answer, or
    for an encoder-decoder the middle of its answer)."""
    inputs: Inputs = decoder_inputs(lm, text)
    net = lm.network
    n = inputs.ids.shape[1]
    if position is None:
        # Decoder-only: the first answer. Encoder-decoder: the middle of the answer, where
        # self-attention has several tokens to choose from (at 0 it sees only <bos>).
        position = len(lm.encode(text).ids) - 1 if lm.kind == "decoder" else max(0, (n - 1) // 2)
    if not 0 <= position < n:
        raise ValueError(f"position must be in 0..{n - 1}")
    base = run(net, inputs.ids, inputs.src_ids, decompose=True)
    logits = base.logits[0, position].double()
    answer_id = int(logits.argmax())
    answer = lm.tgt_tokenizer.tokens([answer_id])[0]
    w_u = output_matrix(net)[answer_id].double()  # [D]
    parts = {name: float(p[0, position].double() @ w_u) for name, p in base.parts.items()}
    logp = torch.log_softmax(logits, -1)[answer_id]

    if relevant is None:
        relevant = default_relevant(inputs.tokens, position, answer)
    if not 0 <= relevant <= position:
        raise ValueError("the relevant token must be at or before the position")
    attn = {
        kind: torch.stack([w[0] for w in ws]).float().cpu() for kind, ws in base.attention.items()
    }
    roll = rollout(attn["decoder"])  # [L, n, n], up to and including each layer
    cross = "cross" in attn
    if cross:
        enc_roll = rollout(attn["encoder"])[-1]  # [Ls, Ls]
        if relevant_src is None:
            relevant_src = int(attn["cross"][-1].mean(0)[position].argmax())
        if not 0 <= relevant_src < enc_roll.shape[0]:
            raise ValueError("the relevant source token is out of range")

    def head_rollout(kind: str, layer: int, head: int) -> float:
        a = attn[kind][layer, head]
        if kind == "cross":  # decoder query -> source key, then through the encoder
            return float((a @ enc_roll)[position, relevant_src])
        eye = torch.eye(a.shape[-1])
        before = roll[layer - 1] if layer > 0 else eye
        step = (a + eye) / (a + eye).sum(-1, keepdim=True)
        return float((step @ before)[position, relevant])

    switched = [
        (kind, layer, head)
        for kind in ("decoder", "cross")
        if kind in attn
        for layer in range(attn[kind].shape[0])
        for head in range(attn[kind].shape[1])
    ]
    ablated, ablated_logp = ablations(lm, inputs, position, answer_id, switched)
    rows = []
    for (kind, layer, head), logit, lp in zip(switched, ablated, ablated_logp):
        key = relevant_src if kind == "cross" else relevant
        rows.append(
            HeadRow(
                kind,
                layer,
                head,
                ablation_logit=logit - float(logits[answer_id]),
                ablation_loss=float(logp) - lp,
                direct=parts[f"{kind}.{layer}.{head}"],
                attention=float(attn[kind][layer, head, position, key]),
                rollout=head_rollout(kind, layer, head),
            )
        )
    head_names = {f"{r.kind}.{r.layer}.{r.head}" for r in rows}
    rest = sum(part for name, part in parts.items() if name not in head_names)
    return Attribution(
        tokens=inputs.tokens,
        src_tokens=inputs.src_tokens,
        position=position,
        answer=answer,
        answer_id=answer_id,
        logit=float(logits[answer_id]),
        relevant=relevant,
        relevant_src=relevant_src if cross else None,
        heads=rows,
        rest=rest,
        parts=parts,
    )
