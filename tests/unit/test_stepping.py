"""The decoding page's growing mask: each generated token's row, under the causal rule,
read from the run's steps without Streamlit (model.analysis.stepping)."""

import torch

from model import load
from model.analysis.stepping import distribution_before, growing_mask, top_candidates
from model.masks import future_mask


def test_growing_mask_holds_one_row_per_generated_token_under_the_causal_rule():
    lm = load("sort", device="cpu")
    text = "3 1 2"
    steps = list(lm.decode(text, max_new_tokens=4))
    for step in range(1, len(steps) + 1):
        ids = [s.token_id for s in steps[:step]]
        grown = growing_mask(steps, step, 0, lm.decoder_tokens(text, ids))
        # the newest query is the last position the decoder read; its keys are all it saw
        assert len(grown.keys) == steps[step - 1].attention["decoder"].shape[-1]
        assert grown.queries == grown.keys[len(grown.keys) - step :]
        assert len(grown.rows) == step
        # each row is that step's query over the keys of its time, heads averaged
        for i, row in enumerate(grown.rows):
            torch.testing.assert_close(row, steps[i].attention["decoder"][0].mean(0))
            assert row.shape[-1] == len(grown.keys) - step + i + 1
        # the model's causal rule: query i reads keys up to its own position
        assert torch.equal(grown.mask, future_mask(step, len(grown.keys), len(grown.keys) - step))
        assert grown.mask[-1].all()  # the newest token reads every key
        if step > 1:
            assert not grown.mask[0, -1]  # the first one never read what came after it


def test_the_raw_distribution_is_the_softmax_of_the_logits_before_sampling_changed_it():
    lm = load("sort", device="cpu")
    steps = lm.decode("3 1 2", max_new_tokens=1, strategy="sample", temperature=2.0, top_k=2)
    step = next(iter(steps))
    before = distribution_before(step)
    torch.testing.assert_close(before, step.logits.softmax(-1))
    assert (step.probs > 0).sum() <= 2 < (before > 0).sum()  # top-k cut what the model said


def test_the_chart_shows_the_ten_most_likely_ties_lowest_id_first_then_the_chosen():
    """The next-token chart's bars, in order: the same as a stable sort of the whole
    vocabulary, ties included (top-k leaves most ids at exactly 0), chosen one last."""
    torch.manual_seed(0)
    probs = torch.softmax(torch.randn(5000) * 3, -1)
    filtered = torch.zeros(5000).index_fill_(0, torch.tensor([4000, 7]), 0.5)  # top-k = 2
    tied = torch.zeros(5000).index_fill_(0, torch.arange(30, 4030, 400), 0.1)  # ten equal
    tied[4999] = 0.1  # an eleventh: the lower ids win
    for after in (probs, filtered, tied):
        whole = [int(i) for i in torch.argsort(after, descending=True, stable=True)[:10]]
        assert top_candidates(after, whole[0]) == whole
        assert top_candidates(after, 4998) == [*whole, 4998]  # the chosen one, drawn last
    assert top_candidates(filtered, 4000)[:3] == [7, 4000, 0]
    assert top_candidates(tied, 30)[-1] == 3630 and 4999 not in top_candidates(tied, 30)
