"""The logit lens's last row is the model's own output: held against its plain forward."""

from __future__ import annotations

import torch

from model.analysis.lens import Lens, decoder_inputs


def assert_lens_ends_in_the_models_output(
    lm, lens: Lens, text: str, continuation: list[int] | None = None, atol: float = 1e-6
) -> None:
    """The lens's last row (the stream after the last layer) gives, at every position, the
    top-k tokens and probabilities of the network's own forward pass, and its answers are
    that row's top tokens."""
    inputs = decoder_inputs(lm, text, continuation)
    with torch.inference_mode():
        if inputs.src_ids is None:
            logits = lm.network(inputs.ids).logits
        else:
            logits = lm.network(inputs.src_ids, inputs.ids).logits
    own = torch.softmax(logits[0].float(), dim=-1).topk(lens.top_ids.shape[-1], dim=-1)
    torch.testing.assert_close(lens.top_probs[-1], own.values.cpu(), atol=atol, rtol=0)
    assert torch.equal(lens.top_ids[-1], own.indices.cpu())
    torch.testing.assert_close(lens.answer_prob[-1], lens.top_probs[-1, :, 0], atol=0, rtol=0)
