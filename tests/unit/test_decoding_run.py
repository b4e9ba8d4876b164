"""A decoding run decoded only as far as it is read (model.runtime.decoding.DecodingRun): the
decoding page draws step n after n steps, not after the whole continuation, and shows the
very numbers a whole run gives."""

from __future__ import annotations

import threading

import pytest
import torch

from model import load
from model.runtime.decoding import DecodingRun
from model.runtime.kept import ByteLRU, nbytes
from model.runtime.types import DecodeStep

EN2KO = "I study math at school"
RUNS = [  # (model, text, options): both toy kinds, every strategy
    ("en2ko", EN2KO, {}),
    ("en2ko", EN2KO, {"strategy": "sample", "seed": 7, "temperature": 1.5, "top_k": 20}),
    ("en2ko", EN2KO, {"strategy": "beam", "beam_width": 3}),
    ("sort", "5 3 8 1 9 2", {}),
]


def run_of(lm, text: str, options: dict, changed=None) -> DecodingRun:
    budget = lm.new_token_budget(text, options.get("max_new_tokens"))
    return DecodingRun(lm.decode(text, **options), budget, lm.tgt_tokenizer.eos_id, changed)


def assert_same_steps(got: list[DecodeStep], want: list[DecodeStep]) -> None:
    """The same tokens, distributions, raw scores, attention rows and beams, to the bit."""
    assert [s.token_id for s in got] == [s.token_id for s in want]
    for a, b in zip(got, want, strict=True):
        assert (a.index, a.token, a.tokens, a.beams) == (b.index, b.token, b.tokens, b.beams)
        assert torch.equal(a.probs, b.probs)
        assert (a.logits is None) == (b.logits is None)
        if a.logits is not None:
            assert torch.equal(a.logits, b.logits)
        assert a.attention.keys() == b.attention.keys()
        assert all(torch.equal(a.attention[k], b.attention[k]) for k in a.attention)


@pytest.fixture(autouse=True)
def one_thread():
    """Two decodes agree to the bit on one intra-op thread; on two, MKL may split a sum
    differently from one run to the next on a busy machine (a whole run then differs from
    another whole run in the last bits too). The worker's count comes back after the test
    (tests/conftest.py)."""
    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def models():
    return {name: load(name, device="cpu") for name in ("en2ko", "sort")}


@pytest.mark.parametrize(("name", "text", "options"), RUNS, ids=lambda x: str(x)[:20])
def test_reading_a_run_step_by_step_gives_the_whole_runs_steps_and_decodes_no_further(
    models, name, text, options
):
    lm = models[name]
    whole = list(lm.decode(text, **options))
    assert len(whole) > 2  # a run long enough to be read in parts
    run = run_of(lm, text, options)
    for n in range(1, len(whole) + 1):
        steps = run.upto(n)
        assert len(steps) == n and run.decoded == n  # step n costs n steps, no more
        assert (run.total is None) == (n < len(whole))  # the length only once it is known
    assert_same_steps(run.upto(len(whole) + 5), whole)
    assert run.done and run.total == len(whole) <= run.budget
    # it ended where a whole run ends: at <eos>, or at its budget
    assert whole[-1].token_id == lm.tgt_tokenizer.eos_id or len(whole) == run.budget


def test_back_and_forth_reads_the_steps_decoded_before_without_decoding_again(models):
    lm = models["en2ko"]
    run = run_of(lm, EN2KO, {})
    three = run.upto(3)
    assert run.upto(1) == three[:1] and run.upto(3) == three and run.decoded == 3
    assert all(a is b for a, b in zip(run.upto(2), three, strict=False))  # the same objects
    assert_same_steps(run.all(), list(lm.decode(EN2KO)))


def test_two_readers_at_once_share_one_run_and_both_see_the_whole_runs_steps(models):
    lm = models["en2ko"]
    whole = list(lm.decode(EN2KO))
    run = run_of(lm, EN2KO, {})
    seen: dict[int, list[DecodeStep]] = {}
    start = threading.Barrier(2)

    def read(reader: int) -> None:
        start.wait()
        for n in range(1, len(whole) + 2):
            seen[reader] = run.upto(n)

    threads = [threading.Thread(target=read, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert run.decoded == len(whole)  # each step decoded once, whoever asked first
    for reader in range(2):
        assert_same_steps(seen[reader], whole)


def test_a_run_that_fails_says_so_to_every_later_reader_and_to_its_keeper(models):
    lm = models["sort"]
    whole = list(lm.decode("3 1 2"))
    told = []

    def breaks():
        yield whole[0]
        raise RuntimeError("out of memory")

    run = DecodingRun(breaks(), 10, lm.tgt_tokenizer.eos_id, told.append)
    assert len(run.upto(1)) == 1
    for _ in range(2):  # it cannot resume, and never passes for a shorter run that ended
        with pytest.raises(RuntimeError, match="out of memory"):
            run.upto(2)
    assert not run.done and run.total is None
    assert told[-1] is run and isinstance(run.error, RuntimeError)


def test_a_kept_run_is_counted_again_as_it_grows_and_only_while_it_is_kept(models):
    lm = models["en2ko"]
    kept = ByteLRU(2**30)
    run = run_of(lm, EN2KO, {}, changed=lambda r: kept.recount("run", r))
    kept.put("run", run, nbytes(run))
    empty = kept.total
    run.upto(3)
    assert kept.total == nbytes(run) > empty  # its steps' tensors are counted
    kept.put("run", "another value", 10)  # replaced: the old run no longer counts
    run.upto(4)
    assert kept.total == 10 and kept.get("run") == "another value"
