"""Find the bug: each bug really breaks the reverse model, the right way, and nothing leaks."""

from __future__ import annotations

import pytest
import torch

from practice import bugs
from practice.lab import reverse_model


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def snapshot(net) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in net.state_dict().items()}


def test_the_pure_forward_with_correct_pieces_is_the_models_own_forward():
    lm = reverse_model()
    tok = lm.src_tokenizer
    src = bugs._pad([tok.encode("a b c d", 32).ids, tok.encode("a b 3 d e f g", 32).ids], 0)
    dec = bugs._pad([[1, 5, 6, 7], [1, 5, 6, 7, 8, 9]], 0)
    with torch.inference_mode():
        expected = lm.network(src, dec).logits
    got = bugs.forward(lm.network, src, dec, **bugs.correct_masks(src, dec, 0)).logits
    valid = dec != 0
    assert torch.allclose(got[valid], expected[valid], atol=1e-4)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_bug_shows_in_its_own_symptom_and_the_model_is_untouched(seed):
    net = reverse_model().network
    before = snapshot(net)
    cases = {bug: bugs.case(bug, seed) for bug in bugs.BUGS}
    for c in cases.values():
        assert c.correct.accuracy >= 0.75  # the shipped model reverses these
        assert c.correct.row_sums["decoder"][0] == pytest.approx(1.0, abs=1e-5)
    # mask applied after softmax: some decoder rows no longer sum to 1
    assert cases["mask_after_softmax"].buggy.row_sums["decoder"][0] < 0.9
    # no √d_k: sharper attention than the model was trained with
    nb = cases["no_sqrt"]
    assert nb.buggy.sharpness["encoder"] > nb.correct.sharpness["encoder"]
    # padding mask on the query axis: the short sequence's real queries attend <pad> keys
    pw = cases["pad_wrong_axis"]
    pads = [i for i, t in enumerate(pw.buggy.src_tokens) if t == "<pad>"]
    n_real = len(pw.buggy.src_tokens) - len(pads)
    assert pads and pw.correct.attention["encoder"][:, :, :n_real, pads].abs().max() == 0
    assert pw.buggy.attention["encoder"][:, :, :n_real, pads].max() > 0.01
    # causal mask one step too far: each position sees the next one
    co = cases["causal_off_by_one"].buggy.attention["decoder"]
    assert co.diagonal(offset=1, dim1=-2, dim2=-1).max() > 0.01
    assert cases["causal_off_by_one"].correct.attention["decoder"].triu(1).abs().max() == 0
    # decoder input not shifted: it reads the labels, no <bos>
    ns = cases["not_shifted"]
    assert ns.buggy.dec_tokens == ns.correct.labels and ns.correct.dec_tokens[0] == "<bos>"
    for bug in ("mask_after_softmax", "pad_wrong_axis", "causal_off_by_one", "not_shifted"):
        assert cases[bug].buggy.loss > cases[bug].correct.loss + 0.3, bug
    after = snapshot(net)
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_a_case_is_deterministic_and_checks_the_choice():
    a, b = bugs.case("no_sqrt", 5), bugs.case("no_sqrt", 5)
    assert a.source == b.source and a.buggy.predictions == b.buggy.predictions
    assert torch.equal(a.buggy.attention["cross"], b.buggy.attention["cross"])
    assert a.check("no_sqrt").correct
    fb = a.check("pad_wrong_axis")
    assert not fb.correct and fb.key == "practice.bugs.not.pad_wrong_axis"
    assert not a.check("banana").correct
    assert [c.bug for c in bugs.gallery(9)] == [bug for bug, _ in bugs.draws(9)]
    with pytest.raises(ValueError, match="unknown bug"):
        bugs.case("typo", 1)
    assert set(bugs.FIXES) == set(bugs.BUGS)


def test_a_gallery_draws_its_bugs_so_the_last_never_follows_by_elimination():
    galleries = [bugs.draws(seed) for seed in range(300)]
    assert galleries == [bugs.draws(seed) for seed in range(300)]  # the same for a class
    assert all(len(g) == bugs.GALLERY_SIZE for g in galleries)
    names = [[bug for bug, _ in g] for g in galleries]
    assert all(set(n) <= set(bugs.BUGS) for n in names)
    # bugs repeat and go missing: "each once" would let the last case be deduced
    assert sum(len(set(n)) == len(bugs.BUGS) for n in names) < 0.2 * len(names)
    assert any(len(set(n)) < len(n) for n in names)
    # where the first four differ, the fifth is the missing one only by chance (1 in 5)
    four = [n for n in names if len(set(n[:4])) == 4]
    forced = sum(n[4] not in n[:4] for n in four)
    assert four and forced < 0.5 * len(four)
    # every bug can come last, and two cases of the same bug are different sentences
    assert {n[-1] for n in names} == set(bugs.BUGS)
    assert all(len({sub for _, sub in g}) == len(g) for g in galleries)
