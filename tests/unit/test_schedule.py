"""Learning-rate schedules against the paper's numbers."""

from itertools import pairwise

import pytest
import torch

from model.schedule import noam_lambda, noam_lr, warmup_cosine_lambda, warmup_cosine_lr


@pytest.mark.parametrize(("d_model", "warmup"), [(512, 4000), (512, 8000), (256, 4000)])
def test_noam_peaks_at_warmup_with_the_papers_value(d_model, warmup):
    peak = noam_lr(warmup, d_model, warmup)
    assert peak == pytest.approx(d_model**-0.5 * warmup**-0.5)
    assert noam_lr(warmup - 1, d_model, warmup) < peak > noam_lr(warmup + 1, d_model, warmup)


def test_noam_rises_linearly_then_decays_as_inverse_sqrt():
    assert noam_lr(200, 512, 4000) == pytest.approx(2 * noam_lr(100, 512, 4000))
    assert noam_lr(40000, 512, 4000) == pytest.approx(noam_lr(10000, 512, 4000) / 2)
    assert noam_lr(0, 512, 4000) == noam_lr(1, 512, 4000)  # step < 1 counts as 1
    assert noam_lr(4000, 512, 4000, factor=2.0) == pytest.approx(2 * noam_lr(4000, 512, 4000))


def test_noam_drives_torch_lambda_lr():
    opt = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, noam_lambda(512, 10))
    seen = []
    for _ in range(20):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert seen == pytest.approx([noam_lr(s, 512, 10) for s in range(20)])
    assert max(range(20), key=seen.__getitem__) == 10


def test_warmup_cosine_rises_to_the_peak_then_falls_to_the_floor():
    lrs = [warmup_cosine_lr(s, 10, 100, peak=1.0, final=0.1) for s in range(101)]
    assert lrs[9] == pytest.approx(1.0)
    assert all(a < b for a, b in pairwise(lrs[:10]))
    assert all(a >= b for a, b in pairwise(lrs[9:]))
    assert lrs[100] == pytest.approx(0.1)
    assert warmup_cosine_lambda(10, 100)(55) == pytest.approx(0.5)


def test_schedules_refuse_nonsense_settings():
    with pytest.raises(ValueError):
        noam_lr(1, 0, 4000)
    with pytest.raises(ValueError):
        warmup_cosine_lr(1, 10, 0)
