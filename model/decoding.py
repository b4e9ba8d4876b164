"""Greedy decoding, with or without the key/value cache (they must agree)."""

from __future__ import annotations

import torch

from model.transformer import DecoderModel, EncoderDecoderModel


@torch.no_grad()
def greedy_decode(
    model: EncoderDecoderModel | DecoderModel,
    ids: torch.Tensor,
    bos_id: int,
    eos_id: int,
    max_new_tokens: int,
    use_cache: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pick the most likely next token until <eos> or ``max_new_tokens``.

    Encoder-decoder: ``ids`` is the source [B, Ls]; the decoder starts from <bos>.
    Decoder-only: ``ids`` is the prompt [B, Lp] (no padding), continued in place.
    Returns (generated ids [B, T], the logits that chose each one [B, T, vocab]).
    Without the cache the whole prefix is recomputed each step: slower, same answer.
    """
    was_training = model.training
    model.eval()
    b = ids.shape[0]
    if isinstance(model, EncoderDecoderModel):
        memory, src_valid = model.encode(ids)
        prefix = torch.full((b, 1), bos_id, dtype=torch.long, device=ids.device)

        def step(new: torch.Tensor, full: torch.Tensor, cache: dict | None) -> torch.Tensor:
            return model.decode(full if cache is None else new, memory, src_valid, cache=cache)[
                :, -1
            ]
    else:
        prefix = ids

        def step(new: torch.Tensor, full: torch.Tensor, cache: dict | None) -> torch.Tensor:
            return model.decode(full if cache is None else new, cache=cache)[:, -1]

    cache = model.new_cache() if use_cache else None
    new = prefix
    generated, chosen_logits = [], []
    done = torch.zeros(b, dtype=torch.bool, device=ids.device)
    for _ in range(max_new_tokens):
        logits = step(new, prefix, cache)  # [B, vocab]
        token = logits.argmax(dim=-1)
        token = torch.where(done, torch.full_like(token, model.config.pad_id), token)
        generated.append(token)
        chosen_logits.append(logits)
        done |= token == eos_id
        new = token[:, None]
        prefix = torch.cat([prefix, new], dim=1)
        if bool(done.all()):
            break
    model.train(was_training)
    return torch.stack(generated, dim=1), torch.stack(chosen_logits, dim=1)
