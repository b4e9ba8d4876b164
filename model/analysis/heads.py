"""Find the mechanisms in a decoder: every head scored on repeated random tokens.

Olsson et al. (2022) find induction heads in every model they study with one test: a block
of random tokens, then the same block again. Nothing in the first copy can be predicted;
everything in the second can, by finding where the current token was before and copying
what followed. Per head, on "prefix A A" (A: ``length`` distinct random tokens):

- prefix matching: attention from a token of the second copy to the token that followed the
  same token in the first copy (an induction head);
- copying: how much the head's own output raises the logit of the token it attends to
  (above the vocabulary's mean), read through the final norm as the linear map it is here;
- previous token: attention to the position just before the query;
- duplicate token: attention from the second copy to the same token in the first;
- first token: the share of attention on position 0 (an attention sink; Xiao et al., 2023).

The in-context-learning score is the loss in the second copy minus the loss in the first:
negative when the model uses the context. Plain PyTorch on a LabModel running our engine.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from model.analysis.circuit import check_network, output_matrix, run

# A head whose score is at or above this does that job (chance on 2 x 64 tokens is ~0.02).
THRESHOLD = 0.3
# Scores that name a role, in the order a head's role is looked for and the table ranks them.
ROLES = {
    "prefix_matching": "induction",
    "previous_token": "previous",
    "duplicate_token": "duplicate",
    "first_token": "sink",
}
SCORES = ("prefix_matching", "copying", "previous_token", "duplicate_token", "first_token")
MAX_LENGTH = 64  # the block length asked for when none is given (2 x 64 tokens)
CHECKPOINT_LENGTH = 11  # a project checkpoint's block: one it was trained near, never on


@dataclass
class HeadRow:
    layer: int  # 0-based; pages show layer + 1
    head: int  # 0-based; pages show head + 1
    role: str | None  # "induction" | "previous" | "duplicate" | "sink" | None
    scores: dict[str, float]


@dataclass
class HeadScan:
    """Every head's scores ([layers, heads] each), and the model's loss on the two copies."""

    scores: dict[str, torch.Tensor]
    loss_first: float  # mean next-token loss inside the first copy (nats)
    loss_second: float  # ... inside the second copy
    length: int  # tokens in one copy
    n: int  # sequences
    seed: int
    threshold: float = THRESHOLD

    @property
    def icl(self) -> float:
        """In-context learning: loss late (second copy) minus early (first); < 0 uses context."""
        return self.loss_second - self.loss_first

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.scores["prefix_matching"].shape)

    def role(self, layer: int, head: int) -> str | None:
        """The role whose score is highest among those at or above the threshold."""
        found = [
            (float(self.scores[s][layer, head]), r)
            for s, r in ROLES.items()
            if float(self.scores[s][layer, head]) >= self.threshold
        ]
        return max(found)[1] if found else None

    def found(self, score: str) -> list[tuple[int, int]]:
        """(layer, head) of every head at or above the threshold on ``score``, best first."""
        grid = self.scores[score]
        heads = [(int(i), int(j)) for i, j in (grid >= self.threshold).nonzero().tolist()]
        return sorted(heads, key=lambda lh: -float(grid[lh]))

    def ranked(self) -> list[HeadRow]:
        """Every head, those with a role first (induction, previous, duplicate, sink; each by
        its score), then the rest by prefix matching."""
        order = list(ROLES.values())
        rows = []
        layers, heads = self.shape
        for layer in range(layers):
            for head in range(heads):
                scores = {s: float(self.scores[s][layer, head]) for s in SCORES}
                rows.append(HeadRow(layer, head, self.role(layer, head), scores))

        def key(row: HeadRow):
            if row.role is None:
                return (len(order), -row.scores["prefix_matching"])
            score = next(s for s, r in ROLES.items() if r == row.role)
            return (order.index(row.role), -row.scores[score])

        return sorted(rows, key=key)


def default_length(lm) -> int:
    """A project checkpoint (learned positions, trained on short blocks) gets its held-out
    block length; a pretrained folder gets up to 2 x 64 tokens."""
    return CHECKPOINT_LENGTH if "task" in lm.info else MAX_LENGTH


def _start_ids(lm) -> list[int]:
    """What the tokenizer puts before any text (<s>, <bos>), or nothing (GPT-2, Qwen2)."""
    try:
        return list(lm.encode("").ids)
    except ValueError:
        return []


def _ordinary_ids(lm, vocab: int) -> torch.Tensor:
    """Ids that are not special tokens, to draw random blocks from."""
    tok = lm.tgt_tokenizer
    specials = set(getattr(tok, "special_tokens", ()))
    skip = {i for i in (tok.pad_id, tok.bos_id, tok.eos_id) if i is not None}
    # The vocabulary's own pieces: read as one text, unrelated entries would join bytes.
    names = getattr(tok, "pieces", tok.tokens)(list(range(vocab)))
    keep = [i for i, name in enumerate(names) if i not in skip and name not in specials]
    return torch.tensor(keep, dtype=torch.long)


def repeated_random(lm, length: int, n: int, seed: int) -> tuple[torch.Tensor, int]:
    """ids [n, p0 + 2 * length] "prefix A A" of distinct random ordinary tokens, and p0."""
    net = check_network(lm.network)
    pool = _ordinary_ids(lm, output_matrix(net).shape[0])
    start = _start_ids(lm)
    if len(pool) < 2:
        raise ValueError("the vocabulary has too few ordinary tokens to repeat")
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for _ in range(n):
        block = pool[torch.randperm(len(pool), generator=gen)[:length]]
        rows.append(torch.cat([torch.tensor(start, dtype=torch.long), block, block]))
    return torch.stack(rows), len(start)


@torch.no_grad()
def scan_heads(lm, length: int | None = None, n: int = 4, seed: int = 0) -> HeadScan:
    """Score every head of ``lm`` (a decoder-only LabModel on our engine) on ``n`` sequences
    of a random block of ``length`` tokens (clipped to the model's length and vocabulary)
    followed by the same block again."""
    net = check_network(lm.network)
    if lm.kind != "decoder":
        raise ValueError("the repeated-tokens test reads a decoder-only model")
    start = len(_start_ids(lm))
    room = (lm.max_len - start) // 2
    length = min(length or default_length(lm), room)
    ids, p0 = repeated_random(lm, length, n, seed)
    length = (ids.shape[1] - p0) // 2  # a small vocabulary gives fewer distinct tokens
    if length < 2:
        raise ValueError("the model's length limit leaves no room for a repeated block")
    device = next(net.parameters()).device
    out = run(net, ids.to(device), decompose=True)
    att = torch.stack([w.float() for w in out.attention["decoder"]]).cpu()  # [Ly, B, H, L, L]
    j = torch.arange(length)
    second = p0 + length + j  # queries in the second copy, token A[j]
    nxt = j[:-1]
    prefix = att[..., second[:-1], p0 + nxt + 1].mean(dim=(1, 3))
    duplicate = att[..., second, p0 + j].mean(dim=(1, 3))
    q = torch.arange(1, ids.shape[1])
    previous = att[..., q, q - 1].mean(dim=(1, 3))
    first = att[..., q, 0].mean(dim=(1, 3))

    # Copying: the head's output at a second-copy query, read as logits, for the token it
    # attends to most, above the vocabulary's mean logit.
    w_u = output_matrix(net).float()  # [V, D]
    mean_u = w_u.mean(0)
    ids_dev = ids.to(device)
    layers, heads = prefix.shape
    copying = torch.zeros(layers, heads)
    for layer in range(layers):
        weights = out.attention["decoder"][layer][:, :, second].float()  # [B, H, Q, L]
        attended = weights.argmax(-1)  # [B, H, Q]
        for head in range(heads):
            part = out.parts[f"decoder.{layer}.{head}"][:, second].float()  # [B, Q, D]
            token = torch.gather(ids_dev, 1, attended[:, head])  # [B, Q]
            raise_ = (part * (w_u[token] - mean_u)).sum(-1)
            copying[layer, head] = raise_.mean().cpu()

    logp = torch.log_softmax(out.logits.float(), -1).cpu()  # [B, L, V]
    loss = -logp[:, :-1].gather(-1, ids[:, 1:, None])[..., 0]  # position p predicts p + 1
    loss_first = loss[:, p0 : p0 + length - 1].mean().item()  # A[1..] from the first copy
    loss_second = loss[:, p0 + length : p0 + 2 * length - 1].mean().item()
    return HeadScan(
        scores={
            "prefix_matching": prefix,
            "copying": copying,
            "previous_token": previous,
            "duplicate_token": duplicate,
            "first_token": first,
        },
        loss_first=loss_first,
        loss_second=loss_second,
        length=length,
        n=n,
        seed=seed,
    )
