"""Induction heads, measured: previous-token and prefix-matching scores, repeat accuracy.

Both scores are read on sequences "<bos> t1 .. tn t1 .. tn" of different random tokens
(Olsson et al., 2022): a previous-token head puts its weight on the position just before the
query; an induction (prefix-matching) head, at a token of the second copy, puts it on the
token that followed the same token in the first copy. Plain functions of a network and a
tokenizer, so the trainer logs them while training and the page reads them afterwards.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import torch

from model.runtime.types import Network, Tokenizer
from model.tasks import induction

SNAPSHOTS = "snapshots.json"  # written beside curve.csv by the trainer for the induction task
SNAPSHOT_N, SNAPSHOT_SEED, SNAPSHOT_LENGTH = 64, 4242, 11  # a held-out block length


def repeated_ids(tokenizer: Tokenizer, sequences: list[list[str]]) -> torch.Tensor:
    """Sequences of letters (all the same length) as ids [B, 1 + L], "<bos>" first."""
    rows = [tokenizer.encode(" ".join(s), 10_000).ids for s in sequences]
    if len({len(r) for r in rows}) != 1:
        raise ValueError("the sequences must all have the same length")
    return torch.tensor(rows, dtype=torch.long)


@torch.no_grad()
def head_scores(network: Network, ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per head, on repeated sequences ids [B, 1 + 2n]: {"previous_token", "prefix_matching"},
    each [layers, heads], the mean attention weight on the position that score is about."""
    was_training = network.training
    network.eval()
    try:
        record = network(ids.to(network.device), trace=True).record
    finally:
        network.train(was_training)
    attention = torch.stack(record.attention["decoder"]).cpu()  # [Ly, B, H, L, L]
    n = (ids.shape[1] - 1) // 2
    q = torch.arange(2, 2 * n + 1)  # every token after the first: key = the one before it
    previous = attention[..., q, q - 1].mean(dim=(1, 3))
    j = torch.arange(1, n)  # second-copy t_j (position n + j) -> first-copy t_{j+1} (j + 1)
    prefix = attention[..., n + j, j + 1].mean(dim=(1, 3))
    return {"previous_token": previous, "prefix_matching": prefix}


@torch.no_grad()
def repeat_accuracy(network: Network, ids: torch.Tensor) -> dict[str, float]:
    """Teacher-forced next-token accuracy on ids [B, 1 + 2n]: in the repeated half (the
    predictions of t2 .. tn from the second copy) and in the first half (t2 .. tn from the
    first copy, which nothing before can tell: chance is about 1 / vocabulary)."""
    was_training = network.training
    network.eval()
    try:
        logits = network(ids.to(network.device)).logits.float().cpu()  # [B, L, V]
    finally:
        network.train(was_training)
    n = (ids.shape[1] - 1) // 2
    predicted = logits.argmax(-1)  # position p predicts the token at p + 1
    first = predicted[:, 1:n] == ids[:, 2 : n + 1]
    second = predicted[:, n + 1 : 2 * n] == ids[:, n + 2 :]
    return {"repeat": second.float().mean().item(), "first_half": first.float().mean().item()}


def measure(
    network: Network, tokenizer: Tokenizer, n: int = 500, length: int = 11, seed: int = 0
) -> dict:
    """Accuracy and head scores on ``n`` fresh repeated sequences of block ``length``."""
    ids = repeated_ids(tokenizer, induction.repeated(n, seed, length))
    scores = head_scores(network, ids)
    best = scores["prefix_matching"].flatten().argmax().item()
    n_heads = scores["prefix_matching"].shape[1]
    return {
        **{f"{name}_accuracy": share for name, share in repeat_accuracy(network, ids).items()},
        "chance": 1 / len(induction.SYMBOLS),
        "previous_token": scores["previous_token"].tolist(),
        "prefix_matching": scores["prefix_matching"].tolist(),
        "best_head": [best // n_heads, best % n_heads],
        "best_prefix_matching": scores["prefix_matching"].max().item(),
        "n": n,
        "block_length": length,
        "seed": seed,
    }


@dataclass
class SnapshotLog:
    """Head scores and repeat accuracy every ``every`` steps while training (snapshots.json)."""

    tokenizer: Tokenizer
    every: int = 20
    ids: torch.Tensor = field(init=False)
    rows: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        sequences = induction.repeated(SNAPSHOT_N, SNAPSHOT_SEED, SNAPSHOT_LENGTH)
        self.ids = repeated_ids(self.tokenizer, sequences)

    def __call__(self, step: int, network: Network, force: bool = False) -> None:
        if step % self.every and not force:
            return
        scores = head_scores(network, self.ids)
        acc = repeat_accuracy(network, self.ids)
        self.rows.append(
            {
                "step": step,
                "repeat_accuracy": round(acc["repeat"], 4),
                "first_half_accuracy": round(acc["first_half"], 4),
                "previous_token": [
                    [round(x, 4) for x in r] for r in scores["previous_token"].tolist()
                ],
                "prefix_matching": [
                    [round(x, 4) for x in r] for r in scores["prefix_matching"].tolist()
                ],
            }
        )

    def write(self, folder: str | Path) -> None:
        data = {
            "probe": {"n": SNAPSHOT_N, "seed": SNAPSHOT_SEED, "block_length": SNAPSHOT_LENGTH},
            "snapshots": self.rows,
        }
        (Path(folder) / SNAPSHOTS).write_text(json.dumps(data) + "\n", encoding="utf-8")


def load_snapshots(folder: str | Path) -> dict | None:
    """snapshots.json of a checkpoint folder, or None when it has none (or it is damaged)."""
    path = Path(folder) / SNAPSHOTS
    if not path.is_file() or path.stat().st_size > 4 * 2**20:
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("snapshots"), list) else None


# --- free-running: does the continuation stop where the repeat ends? ------------------------

STOPS = ("exact", "kept_going", "stopped_early")


def classify_stop(generated: list[int], reference: list[int], eos_id: int) -> str:
    """ "exact" when <eos> comes right after as many tokens as the reference has,
    "stopped_early" when it comes before, "kept_going" when a token stands where it should.

    Only where the model stops is judged here; whether its letters are right is counted
    apart (``free_running``)."""
    stop = generated.index(eos_id) if eos_id in generated else len(generated)
    if stop == len(reference):
        return "exact"
    return "stopped_early" if stop < len(reference) else "kept_going"


@torch.no_grad()
def free_running(
    network: Network, tokenizer: Tokenizer, pairs: list[tuple[str, str]], extra: int = 4
) -> dict:
    """Greedy continuations of held-out (prompt, reference) pairs, counted by where they
    stop (STOPS) and by whether the letters before the stop copy the reference.

    ``extra``: tokens allowed past the reference's end, so "kept going" is seen."""
    from collections import defaultdict

    from model.runtime.decoding import greedy_decode

    was_training = network.training
    network.eval()
    counts = dict.fromkeys(STOPS, 0)
    letters_right = 0
    groups: dict[int, list[tuple[list[int], list[int]]]] = defaultdict(list)
    max_len = network.config.max_len
    for source, target in pairs:
        prompt = tokenizer.encode(source, max_len).ids
        groups[len(prompt)].append((prompt, tokenizer.encode_target(target, max_len).ids))
    device = next(network.parameters()).device
    try:
        for length, group in groups.items():
            prompts = torch.tensor([p for p, _ in group], device=device)
            budget = min(max(len(r) for _, r in group) + extra, max_len - length)
            out, _ = greedy_decode(network, prompts, tokenizer.bos_id, tokenizer.eos_id, budget)
            for row, (_, ref) in zip(out.tolist(), group):
                counts[classify_stop(row, ref, tokenizer.eos_id)] += 1
                letters_right += row[: len(ref)] == ref
    finally:
        network.train(was_training)
    return {"n": len(pairs), **counts, "letters_right": letters_right}


@dataclass
class Prediction:
    """One teacher-forced position: the token read, the reference next token, the model's
    choice and its probability, and the probability of <eos>."""

    position: int
    token: str
    reference: str | None  # None inside the prompt before the repeat starts
    predicted: str
    probability: float
    p_eos: float


@torch.no_grad()
def teacher_forced(network: Network, tokenizer: Tokenizer, text: str) -> list[Prediction]:
    """Every position of "<bos> prompt rest-of-repeat <eos>" read with the right prefix: what
    the model predicts next there and how sure it is. The reference next token is given
    from the repeat's first letter on (before it nothing can be predicted)."""
    block, k = induction.split_block(text)
    symbols = [c for c in text.lower() if c.isalnum()]
    start = len(symbols) - k  # index of the repeat's first letter among the symbols
    full = [*symbols, *block[k:]]
    ids = tokenizer.encode(" ".join(full), network.config.max_len).ids
    eos = tokenizer.eos_id
    tokens = tokenizer.tokens(ids)
    was_training = network.training
    network.eval()
    try:
        logits = network(torch.tensor([ids], device=next(network.parameters()).device)).logits
    finally:
        network.train(was_training)
    probs = logits[0].float().softmax(-1).cpu()
    offset = len(ids) - len(full)  # <bos> (and any other prefix) before the letters
    nexts = [*full[1:], tokenizer.tokens([eos])[0]]
    out = []
    for p in range(len(ids)):
        i = p - offset  # index among the letters; -1 for <bos>
        ref = nexts[i] if i >= start else None
        best = int(probs[p].argmax())
        out.append(
            Prediction(
                position=p,
                token=tokens[p],
                reference=ref,
                predicted=tokenizer.tokens([best])[0],
                probability=float(probs[p, best]),
                p_eos=float(probs[p, eos]),
            )
        )
    return out


# --- the circuit, measured by removing parts of it --------------------------------------------


@torch.no_grad()
def forward_editing(
    network: Network,
    ids: torch.Tensor,
    ablate: tuple[int, int] | None = None,
    keys_only_in: int | None = None,
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """(logits [B, L, V], attention per layer [B, H, L, L]) of an attention-only, pre-LN
    decoder, with head ``ablate`` = (layer, head) removed.

    Removed means its output before W_O set to zero (W_O's bias stays): everywhere after
    it, or, with ``keys_only_in`` = a later layer, only in the stream that layer's keys are
    computed from (its queries and values still see the head): K-composition, isolated."""
    from model.attention import scaled_dot_product_attention

    layers = network.decoder.layers
    if any(getattr(layer, "ffn", None) is not None for layer in layers) or not all(
        layer.attn_norm.pre_norm for layer in layers
    ):
        raise ValueError("needs an attention-only, pre-LN decoder (the induction models)")
    mask, _, _ = network._decoder_masks(ids, None, None)
    x = network.embed(ids)
    removed = None  # the ablated head's contribution to the stream [B, L, D]
    attention = []
    for i, layer in enumerate(layers):
        mha, norm = layer.self_attn, layer.attn_norm.norm
        h = norm(x)
        k_in = h if removed is None or keys_only_in != i else norm(x - removed)
        q = mha.split_heads(mha.q_proj(h))
        k = mha.split_heads(mha.k_proj(k_in))
        v = mha.split_heads(mha.v_proj(h))
        heads, weights = scaled_dot_product_attention(q, k, v, mask)
        attention.append(weights)
        if ablate is not None and ablate[0] == i:
            w = mha.out_proj.weight[:, ablate[1] * mha.d_k : (ablate[1] + 1) * mha.d_k]
            contribution = heads[:, ablate[1]] @ w.T
            if keys_only_in is None:
                heads = heads.clone()
                heads[:, ablate[1]] = 0
            else:
                removed = contribution
        x = x + mha.out_proj(mha.merge_heads(heads))
    final = network.decoder.final_norm
    return network.head(x if final is None else final(x)), attention


def _scores_and_accuracy(logits: torch.Tensor, attention, ids: torch.Tensor) -> dict:
    n = (ids.shape[1] - 1) // 2
    predicted = logits.argmax(-1)
    repeat = (predicted[:, n + 1 : 2 * n] == ids[:, n + 2 :]).float().mean().item()
    j = torch.arange(1, n)
    att = torch.stack(attention).float()  # [Ly, B, H, L, L]
    prefix = att[..., n + j, j + 1].mean(dim=(1, 3))  # [Ly, H]
    duplicate = att[..., n + j, j].mean(dim=(1, 3))  # second-copy t_j -> first-copy t_j
    return {"repeat": repeat, "prefix_matching": prefix, "duplicate_token": duplicate}


@torch.no_grad()
def circuit(
    network: Network, tokenizer: Tokenizer, n: int = 500, length: int = 11, seed: int = 0
) -> dict:
    """The heads of the circuit and what removing each does, on ``n`` fresh repeated
    sequences of a held-out block length (numbers the Mechanisms page states):

    - per head: prefix-matching, previous-token and duplicate-token scores, and the repeat
      accuracy with that head zero-ablated;
    - the previous-token head (best previous-token score in layer 1) removed from the
      stream the induction head's keys read, only: the induction head's prefix-matching
      score and the repeat accuracy before and after.
    """
    was_training = network.training
    network.eval()
    try:
        ids = repeated_ids(tokenizer, induction.repeated(n, seed, length)).to(
            next(network.parameters()).device
        )
        scores = head_scores(network, ids)
        logits, attention = forward_editing(network, ids)
        base = _scores_and_accuracy(logits, attention, ids)
        n_layers, n_heads = scores["prefix_matching"].shape
        ablated = [
            [
                _scores_and_accuracy(*forward_editing(network, ids, (layer, head)), ids)["repeat"]
                for head in range(n_heads)
            ]
            for layer in range(n_layers)
        ]
        last = n_layers - 1
        induction_head = int(scores["prefix_matching"][last].argmax())
        previous_head = int(scores["previous_token"][0].argmax())
        keyed = _scores_and_accuracy(
            *forward_editing(network, ids, (0, previous_head), keys_only_in=last), ids
        )
    finally:
        network.train(was_training)
    return {
        "n": n,
        "block_length": length,
        "seed": seed,
        "repeat_accuracy": base["repeat"],
        "previous_token": scores["previous_token"].tolist(),
        "prefix_matching": scores["prefix_matching"].tolist(),
        "duplicate_token": base["duplicate_token"].tolist(),
        "ablated_repeat_accuracy": ablated,
        "induction_head": [last, induction_head],
        "previous_head": [0, previous_head],
        "keys_only": {
            "prefix_matching_before": float(scores["prefix_matching"][last, induction_head]),
            "prefix_matching_after": float(keyed["prefix_matching"][last, induction_head]),
            "repeat_accuracy_after": keyed["repeat"],
        },
    }


def phase_change(
    steps: list[int],
    losses: list[float],
    window: int = 500,
    smooth: int = 5,
    plateau: float | None = None,
) -> dict[str, float]:
    """Where the loss curve drops fastest: the ``window`` steps with the largest fall of the
    loss (a running mean of ``smooth`` logged rows), and the slow descent before them.

    ``plateau``: look only from the first step the loss is at or below it (default
    ln(letters), a uniform guess among the letters: the first quick fall, learning which
    tokens exist, is not the phase change). Returns first / start / end loss and step:
    "slow descent first → start, then a sudden drop start → end in start_step .. end_step"."""
    import math

    if plateau is None:
        plateau = math.log(len(induction.SYMBOLS))
    if len(steps) != len(losses) or len(steps) < 2:
        raise ValueError("need a loss curve of at least two rows")
    half = smooth // 2
    mean = [
        sum(losses[max(0, i - half) : i + half + 1]) / len(losses[max(0, i - half) : i + half + 1])
        for i in range(len(losses))
    ]
    begin = next((i for i, loss in enumerate(mean) if loss <= plateau), 0)
    best, best_fall = (begin, min(begin + 1, len(steps) - 1)), float("-inf")
    j = begin
    for i in range(begin, len(steps)):
        while j + 1 < len(steps) and steps[j + 1] - steps[i] <= window:
            j += 1
        if j > i and mean[i] - mean[j] > best_fall:
            best, best_fall = (i, j), mean[i] - mean[j]
    i, j = best
    return {
        "first_step": steps[begin],
        "first_loss": mean[begin],
        "start_step": steps[i],
        "start_loss": mean[i],
        "end_step": steps[j],
        "end_loss": mean[j],
    }


def score_at(snapshots: list[dict], step: int, score: str, layer: int, head: int) -> float:
    """A head's logged score at the snapshot closest to ``step``."""
    row = min(snapshots, key=lambda r: abs(r["step"] - step))
    return row[score][layer][head]


@torch.no_grad()
def eos_by_head(network: Network, tokenizer: Tokenizer, n: int = 300, seed: int = 0) -> dict:
    """Which heads make the model say <eos> where the repeat ends: teacher-forced on ``n``
    held-out prompts with their continuation, the share of them whose most likely next
    token at the repeat's last letter is <eos>, with nothing removed and with each head
    zero-ablated in turn ([layers][heads])."""
    pairs = induction.sample(n, seed, split="test")
    rows = [
        tokenizer.encode(f"{source} {target}", network.config.max_len).ids
        for source, target in pairs
    ]
    width = max(len(r) for r in rows)
    ids = torch.tensor([r + [tokenizer.pad_id] * (width - len(r)) for r in rows])
    ids = ids.to(next(network.parameters()).device)
    last = torch.tensor([len(r) - 1 for r in rows])
    was_training = network.training
    network.eval()

    def share(ablate=None) -> float:
        logits, _ = forward_editing(network, ids, ablate)
        at_end = logits[torch.arange(len(rows)), last.to(logits.device)]
        return (at_end.argmax(-1) == tokenizer.eos_id).float().mean().item()

    try:
        layers = network.config.n_decoder_layers
        heads = network.config.n_heads
        base = share()
        ablated = [[share((layer, head)) for head in range(heads)] for layer in range(layers)]
    finally:
        network.train(was_training)
    return {"n": n, "seed": seed, "eos": base, "ablated": ablated}
