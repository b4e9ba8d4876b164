"""A trace keeps queries and keys, never maps: every map a view asks for is recomputed from
that record exactly as the model computed it (DESIGN: the cost of a picture follows what is
drawn). These hold the recomputed maps equal to transformers' eager attentions for every
decoder layout, to the explicit softmax path for our own models and MiniLM, and hold the
memory of a long trace to the size of its record."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from model import load
from model import trace as trace_module
from model.hf.decoder import transformers_causal_lm
from model.trace import KINDS, Recorder, StackBudgetError, block_edges, pool_map
from tests.hf_folders import DECODER_TYPES, build_decoder_folder

# Mistral's folder has a sliding window of 32: 48 tokens let the window hide keys.
N_TOKENS = 48


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    return {mt: build_decoder_folder(mt, tmp_path_factory.mktemp(mt)) for mt in DECODER_TYPES}


def trace_ids(lm, ids: list[int]):
    with torch.inference_mode():
        out = lm.network(torch.tensor([ids], device=lm.device), trace=True)
    return out.trace(0, [], [str(i) for i in ids], ids)


def random_ids(lm, n: int, seed: int = 0) -> list[int]:
    vocab = lm.config.tgt_vocab_size
    return torch.randint(3, vocab, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


@pytest.mark.parametrize("model_type", DECODER_TYPES)
def test_attention_map_equals_transformers_eager_for_every_layout_whole_and_windowed(
    folders, model_type
):
    lm = load(folders[model_type], device="cpu")
    ref = transformers_causal_lm(folders[model_type])
    ids = random_ids(lm, N_TOKENS)
    trace = trace_ids(lm, ids)
    with torch.inference_mode():
        theirs = torch.stack(ref(input_ids=torch.tensor([ids]), output_attentions=True).attentions)
    layers, heads = theirs.shape[0], theirs.shape[2]
    assert trace.shape("decoder") == (layers, heads, N_TOKENS, N_TOKENS)
    for layer in range(layers):
        for head in range(heads):
            full = trace.attention_map("decoder", layer, head)
            torch.testing.assert_close(full, theirs[layer, 0, head], atol=1e-4, rtol=0)
        rows, cols = slice(30, 45), [0, 5, 17, 40, 44]
        window = trace.attention_map("decoder", layer, 1, rows=rows, cols=cols)
        torch.testing.assert_close(window, theirs[layer, 0, 1, rows][:, cols], atol=1e-4, rtol=0)
    if model_type == "mistral":  # the window hides keys 32 and more behind the query
        assert trace.attention_map("decoder", 0, 0, rows=[40], cols=[0, 8])[0].eq(0).all()
        assert not trace.mask("decoder")[40, 8] and trace.mask("decoder")[40, 9]
    # The record is the queries and keys (shared key heads stored once), not the maps.
    q_bytes = layers * heads * N_TOKENS * lm.config.d_k * 4
    k_bytes = layers * lm.config.kv_heads * N_TOKENS * lm.config.d_k * 4
    assert trace.record_bytes == q_bytes + k_bytes


def attention_module(network, kind: str, layer: int):
    stack = network.encoder if kind == "encoder" else network.decoder
    return getattr(stack.layers[layer], "cross_attn" if kind == "cross" else "self_attn")


@pytest.mark.parametrize("name", ["en2ko", "reverse", "sort", "minilm"])
def test_attention_map_equals_the_explicit_softmax_path_for_our_models(name):
    lm = load(name, device="cpu")
    text = {"en2ko": "I study math at school", "minilm": "The cat sat on the mat."}
    text = text.get(name, "3 1 4 1 5 9 2 6")
    enc = lm.encode(text)
    src = torch.tensor([enc.ids])
    rec = Recorder(inputs=True)  # one pass keeps both the record and each layer's input
    net = lm.network
    with torch.inference_mode():
        if lm.kind == "encoder":
            net.encode(src, rec)
            dec = []
        elif lm.kind == "decoder":
            dec = enc.ids + [s.token_id for s in lm.decode(text)]
            net.decode(torch.tensor([dec]), rec)
            enc.tokens = []
        else:
            tgt = lm.tgt_tokenizer
            dec = [tgt.bos_id] + [s.token_id for s in lm.decode(text) if s.token_id != tgt.eos_id]
            memory, valid = net.encode(src, rec)
            net.decode(torch.tensor([dec]), memory, valid, rec)
    trace = rec.to_trace(0, enc.tokens, [str(i) for i in dec])
    kinds = {"encoder": ["encoder"], "decoder": ["decoder"]}.get(lm.kind, list(KINDS))
    assert trace.kinds() == kinds
    for kind in trace.kinds():
        for layer, seen in enumerate(rec.inputs[kind]):
            mha = attention_module(net, kind, layer)
            with torch.inference_mode():  # the explicit softmax, weights returned
                explicit = mha(seen["query"], seen["memory"], seen["memory"], seen["mask"]).weights
            for head in range(explicit.shape[1]):
                torch.testing.assert_close(
                    trace.attention_map(kind, layer, head), explicit[0, head], atol=1e-5, rtol=0
                )
            window = trace.attention_map(kind, layer, 0, rows=[0, 2], cols=slice(1, 3))
            torch.testing.assert_close(window, explicit[0, 0, [0, 2]][:, 1:3], atol=1e-5, rtol=0)


def test_overview_in_bands_of_several_blocks_equals_pooling_the_full_map(folders):
    lm = load(folders["qwen2"], device="cpu")
    trace = trace_ids(lm, random_ids(lm, 100))
    full = trace.attention_map("decoder", 1, 3)
    for reduce in ("max", "mean"):
        for size in (7, 30):
            rows, cols = block_edges(100, size), block_edges(100, size)
            one_by_one = pool_map(lambda r: full[r], rows, cols, reduce, max_cells=1)
            banded = trace.attention_overview("decoder", 1, 3, size=size, reduce=reduce)
            torch.testing.assert_close(banded.values, one_by_one.values, atol=1e-7, rtol=1e-6)
            a, b = rows[2], rows[3]
            c, d = cols[4], cols[5]
            block = full[a:b, c:d]
            want = block.max() if reduce == "max" else block.mean()
            assert banded.values[2, 4].item() == pytest.approx(want.item(), abs=1e-7)


def test_stacking_past_the_budget_names_attention_map_and_the_setting(folders, monkeypatch):
    lm = load(folders["llama"], device="cpu")
    trace = trace_ids(lm, random_ids(lm, 40))
    need = 2 * 8 * 40 * 40 * 4  # layers x heads x 40 x 40 float32
    monkeypatch.setattr(trace_module, "STACK_BUDGET", need - 1)
    with pytest.raises(StackBudgetError, match="attention_map") as err:
        trace.attention["decoder"]
    assert "ATTENTION_LAB_STACK_BUDGET" in str(err.value)
    with pytest.raises(StackBudgetError):
        trace.stages["decoder"]
    trace.attention_map("decoder", 1, 2)  # one head still reads
    monkeypatch.setattr(trace_module, "STACK_BUDGET", None)
    monkeypatch.setenv("ATTENTION_LAB_STACK_BUDGET", str(need))
    stacked = trace.attention["decoder"]
    assert torch.equal(stacked[1, 2], trace.attention_map("decoder", 1, 2))


def test_a_bfloat16_model_keeps_its_dtype_and_its_maps_match_transformers(folders):
    lm = load(folders["llama"], device="cpu", dtype="bfloat16")
    assert lm.dtype == torch.bfloat16
    assert load(folders["llama"], device="cpu").dtype == torch.float32  # auto on a CPU
    ref = transformers_causal_lm(folders["llama"]).to(torch.bfloat16)
    ids = random_ids(lm, 24)
    trace = trace_ids(lm, ids)
    record = trace.records["decoder"]
    assert record.q[0].dtype == torch.bfloat16  # stored compactly, maps in float32
    with torch.inference_mode():
        theirs = ref(input_ids=torch.tensor([ids]), output_attentions=True).attentions
    ours = trace.attention_map("decoder", 1, 5)
    assert ours.dtype == torch.float32
    # bfloat16 keeps 8 bits of mantissa: weights agree to about 2e-2.
    torch.testing.assert_close(ours, theirs[1][0, 5].float(), atol=2e-2, rtol=0)


MEMORY_SCRIPT = textwrap.dedent(
    """
    import json, resource, sys
    import torch
    torch.set_num_threads(1)
    from model import load
    lm = load(sys.argv[1], device="cpu")
    n = int(sys.argv[2])
    ids = torch.randint(3, lm.config.tgt_vocab_size, (n,), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        lm.network(ids[None, :64], trace=True)  # warm the allocator and kernels
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    with torch.inference_mode():
        out = lm.network(ids[None], trace=True)
        trace = out.trace(0, [], [str(i) for i in ids.tolist()], ids.tolist())
        del out
    ov = trace.attention_overview("decoder", 1, 3, size=256)
    one = trace.attention_map("decoder", 1, 3, rows=slice(n - 512, n))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"extra": peak - base, "record": trace.record_bytes,
                      "shape": list(ov.values.shape), "row_sum": float(one.sum(-1).mean())}))
    """
)


def test_a_4096_token_trace_costs_its_record_not_its_maps(tmp_path):
    folder = build_decoder_folder("llama", tmp_path / "llama", max_position_embeddings=4096)
    n = 4096
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    out = subprocess.run(
        [sys.executable, "-c", MEMORY_SCRIPT, str(folder), str(n)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=True,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    maps = 2 * 8 * n * n * 4  # what stacking every map would cost: 1 GiB
    assert result["shape"] == [256, 256] and result["row_sum"] == pytest.approx(1.0, abs=1e-4)
    assert result["record"] == 2 * (8 + 2) * n * 8 * 4  # q and k, 2 layers, d_k 8
    # Forward, record, an overview and a 512-row window: a small fraction of the maps.
    assert result["extra"] < maps / 8, result


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("dtype", "tolerance"), [(torch.float32, 1e-4), (torch.bfloat16, 2e-2)], ids=["fp32", "bf16"]
)
@pytest.mark.parametrize("model_type", ["llama", "mistral"])
def test_attention_map_on_cuda_equals_transformers_eager_in_each_dtype(
    folders, model_type, dtype, tolerance
):
    lm = load(folders[model_type], device="cuda", dtype=dtype)
    assert lm.dtype == dtype and lm.device.type == "cuda"
    ref = transformers_causal_lm(folders[model_type], device="cuda").to(dtype)
    ids = random_ids(lm, N_TOKENS)
    trace = trace_ids(lm, ids)
    assert trace.records["decoder"].q[0].device.type == "cuda"  # maps computed where q/k are
    with torch.inference_mode():
        theirs = ref(input_ids=torch.tensor([ids], device="cuda"), output_attentions=True)
    for layer, maps in enumerate(theirs.attentions):
        for head in range(maps.shape[1]):
            ours = trace.attention_map("decoder", layer, head)
            assert ours.dtype == torch.float32 and ours.device.type == "cpu"
            torch.testing.assert_close(ours, maps[0, head].float().cpu(), atol=tolerance, rtol=0)
    ov = trace.attention_overview("decoder", 1, 2, size=16)
    full = trace.attention_map("decoder", 1, 2)
    assert ov.values[-1, 0].item() == pytest.approx(full[-3:, :3].max().item(), abs=1e-6)


@pytest.mark.gpu
def test_head_statistics_of_a_gpu_record_are_reduced_on_the_gpu_and_equal_the_maps(folders):
    """No fused CPU kernel there: the maps in bands, reduced where they are made (never
    copied out), the same table as the stacked maps."""
    from model.analysis import summaries

    lm = load(folders["qwen2"], device="cuda")
    trace = trace_ids(lm, random_ids(lm, N_TOKENS))
    assert trace.row_statistics("decoder", 0) is None
    assert trace.attention_heads("decoder", 0, on_device=True).device.type == "cuda"
    stats = summaries.trace_head_statistics(trace, "decoder")
    stacked = trace.attention["decoder"]
    for name, want in (
        ("entropy", summaries.entropy(stacked)),
        ("mean_distance", summaries.mean_distance(stacked)),
        ("first_token", summaries.first_token_share(stacked)),
    ):
        assert stats[name].device.type == "cpu"
        torch.testing.assert_close(stats[name], want, atol=1e-4, rtol=1e-5)


def test_load_refuses_an_unknown_dtype_clearly(folders):
    with pytest.raises(ValueError, match="bfloat16"):
        load(folders["llama"], device="cpu", dtype="int8")


def test_streamed_summaries_equal_the_stacked_ones(folders, monkeypatch):
    from model.analysis import summaries

    lm = load(folders["qwen2"], device="cpu")
    trace = trace_ids(lm, random_ids(lm, 40))
    stacked = trace.attention["decoder"]
    monkeypatch.setattr(summaries, "BAND_CELLS", 8 * 40 * 7)  # bands of 7 rows
    monkeypatch.setattr(trace, "row_statistics", lambda kind, layer: None)  # maps, in bands
    stats = summaries.trace_head_statistics(trace, "decoder")
    torch.testing.assert_close(stats["entropy"], summaries.entropy(stacked))
    torch.testing.assert_close(stats["mean_distance"], summaries.mean_distance(stacked))
    torch.testing.assert_close(stats["first_token"], summaries.first_token_share(stacked))
    torch.testing.assert_close(
        summaries.trace_rollout(trace, "decoder"), summaries.rollout(stacked)
    )
    for how, want in (("mean", summaries.head_mean), ("max", summaries.head_max)):
        got = summaries.trace_layer_aggregate(trace, "decoder", 1, how)
        torch.testing.assert_close(got, want(stacked)[1])


@pytest.mark.parametrize("model_type", DECODER_TYPES)
def test_head_statistics_from_the_fused_kernel_equal_those_of_the_maps_for_every_layout(
    folders, model_type
):
    """The explorer's statistics table reads no map on a CPU (one fused pass a layer): the
    same entropy and mean distance as the stacked maps, GQA, Mistral's window and GPT-2's
    absolute positions included, with each layer's progress reported."""
    from model.analysis import summaries

    lm = load(folders[model_type], device="cpu")
    trace = trace_ids(lm, random_ids(lm, N_TOKENS))
    assert trace.row_statistics("decoder", 0) is not None  # the fused path, not the maps
    stacked = trace.attention["decoder"]
    seen = []
    stats = summaries.trace_head_statistics(trace, "decoder", lambda *done: seen.append(done))
    torch.testing.assert_close(stats["entropy"], summaries.entropy(stacked), atol=1e-4, rtol=0)
    torch.testing.assert_close(
        stats["mean_distance"], summaries.mean_distance(stacked), atol=1e-3, rtol=1e-5
    )
    first = summaries.first_token_share(stacked)
    torch.testing.assert_close(stats["first_token"], first, atol=1e-5, rtol=0)
    layers = stacked.shape[0]
    assert seen == [(n, layers) for n in range(1, layers + 1)]


def test_masks_are_built_on_the_device_of_the_queries_and_keys():
    """A record on a GPU rebuilds its mask there (the meta device stands in for one: mixing
    it with a CPU mask fails as a CUDA tensor would)."""
    from model.attention import _fast_attention, attention_weights
    from model.masks import MaskSpec

    q = torch.randn(4, 8, 16, device="meta")
    k = torch.randn(2, 8, 16, device="meta")
    causal = MaskSpec(8, 8, causal=True, window=3)
    padded = MaskSpec(8, 8, torch.ones(1, 8, dtype=torch.bool), torch.ones(1, 8, dtype=torch.bool))
    for spec in (causal, padded):
        assert attention_weights(q, k, spec, rows=slice(2, 5)).shape == (4, 3, 8)
        assert _fast_attention(q[None], k[None], k[None], spec, 0.0).device.type == "meta"


def test_one_layers_rollout_streamed_equals_the_stacked_rollout_and_can_go_on_from_a_kept_one(
    folders,
):
    """A long input's rollout holds two [n, n] matrices, never every layer's: the stacked
    rollout's entry for each layer, from scratch or from the entry below it, with causal
    products cut at the diagonal and a bidirectional map (no cut) alike."""
    from model.analysis import summaries

    lm = load(folders["llama"], device="cpu")
    trace = trace_ids(lm, random_ids(lm, N_TOKENS))
    stacked = summaries.rollout(trace.attention["decoder"])
    seen = []
    for layer in range(stacked.shape[0]):
        got = summaries.trace_rollout_layer(
            trace, "decoder", layer, progress=lambda *d: seen.append(d)
        )
        torch.testing.assert_close(got, stacked[layer], atol=1e-6, rtol=1e-5)
    on = summaries.trace_rollout_layer(trace, "decoder", 1, start=(0, stacked[0]))
    torch.testing.assert_close(on, stacked[1], atol=1e-6, rtol=1e-5)
    assert seen[-1] == (stacked.shape[0], stacked.shape[0])
    a, b = torch.rand(700, 700), torch.rand(700, 700)
    torch.testing.assert_close(summaries._product(a, b), a @ b)
    torch.testing.assert_close(
        summaries._product(a.tril(), b.tril()), a.tril() @ b.tril(), atol=1e-4, rtol=1e-5
    )
