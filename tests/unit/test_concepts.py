"""The numbers the concept pages show, checked against the paper and against the model."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from model.analysis.concepts import (
    attention_cost,
    layernorm_scale,
    permutation_demo,
    qk_variance,
    residual_peak,
    softmax_saturation,
)
from model.schedule import noam_lr
from model.training.warmup import WARMUP_SEEDS, WARMUP_VARIANTS, load_warmup, seed_band
from viz.concepts import (
    MAX_BAR_LABELS,
    compact_number,
    grouped_bars,
    lines_figure,
    mask_figure,
    matrix_heatmap,
    step_frame,
    token_lines,
)
from viz.summaries import figure_facts, figure_table


@pytest.fixture(scope="module")
def minilm():
    from model import load

    return load("minilm", device="cpu")


def test_layernorm_captions_hold_on_minilm(minilm):
    """The layer-norm page's claims, recomputed: after a post-LN norm the standard deviation
    over features is about rms(γ) (not std(γ)), and each layer's output length is about
    √(Σγ² + Σβ²) ≈ √d_model·rms(γ) (not √d_model·std(γ))."""
    from model.analysis.walkthrough import layer_norm_module

    trace = minilm.trace("I study math")
    lengths = trace.residual_norms["encoder"]  # [layers + 1, tokens]
    assert minilm.config.norm_placement == "post"
    for i in range(lengths.shape[0] - 1):
        module = layer_norm_module(minilm.network, f"encoder.{i}.ffn")
        scale = layernorm_scale(module.weight.detach().numpy(), module.bias.detach().numpy())
        assert scale["length"] == pytest.approx(scale["sqrt_d_rms"], rel=0.02)  # β is small
        after = lengths[i + 1].numpy()
        # within the caption's "about": never above, at most 45 % below (the [CLS] token,
        # whose one huge normalized feature meets a small γ)
        assert (after <= 1.05 * scale["length"]).all() and (after >= 0.55 * scale["length"]).all()
        assert scale["sqrt_d_std"] < 0.25 * after.min()  # the old caption's formula is far off
        out_std = trace.norms[f"encoder.{i}.ffn"]["out_std"].numpy()
        assert (out_std <= 1.05 * scale["rms_gamma"]).all()
        assert (out_std >= 0.55 * scale["rms_gamma"]).all()
        assert scale["std_gamma"] < 0.25 * out_std.min()


def test_layernorm_scale_at_initialisation_is_sqrt_d():
    scale = layernorm_scale(torch.ones(64).numpy(), torch.zeros(64).numpy())
    assert scale["length"] == pytest.approx(8.0)
    assert scale["rms_gamma"] == pytest.approx(1.0)
    assert scale["std_gamma"] == 0.0


def test_qk_variance_of_unit_random_vectors_is_d_k_and_one_after_scaling():
    d_ks = [1, 4, 16, 64, 256]
    var = qk_variance(d_ks, n=4000)
    for d_k, raw, scaled in zip(d_ks, var["raw"], var["scaled"]):
        # sample variance of n products: relative standard error about sqrt(2/n) ≈ 2.2 %
        assert raw == pytest.approx(d_k, rel=0.1)
        assert scaled == pytest.approx(1.0, rel=0.1)


def test_without_scaling_the_softmax_saturates_and_its_gradient_vanishes():
    sat = softmax_saturation([4, 64, 1024], trials=100)
    assert sat["max_weight_raw"][-1] > 0.9 > sat["max_weight_scaled"][-1]
    assert sat["grad_raw"][0] > sat["grad_raw"][1] > sat["grad_raw"][2]
    assert sat["grad_raw"][-1] < 0.3 * sat["grad_scaled"][-1]
    assert max(sat["grad_scaled"]) - min(sat["grad_scaled"]) < 0.05  # scaled: flat in d_k


def test_noam_peaks_at_warmup_exactly_as_the_page_prints_it():
    for d_model, warmup in ((512, 4000), (512, 8000), (256, 4000)):
        peak = noam_lr(warmup, d_model, warmup)
        assert peak == pytest.approx(d_model**-0.5 * warmup**-0.5)
        assert peak >= noam_lr(warmup - 1, d_model, warmup)
        assert peak >= noam_lr(warmup + 1, d_model, warmup)


@pytest.mark.parametrize(
    ("layer", "text"),
    [(0, "Thinking Machines"), (3, "I study math"), (5, "time flies like an arrow")],
)
def test_step_by_step_attention_equals_the_models_own(minilm, layer, text):
    from model.analysis.walkthrough import walkthrough

    wt = walkthrough(minilm, text, layer)
    assert wt.n_heads == 12 and wt.d_k == 32
    assert wt.tokens[0] == "[CLS]" and wt.tokens[-1] == "[SEP]"
    for head in (0, 5, 11):
        assert torch.allclose(wt.weights[head], wt.model_weights[head], atol=1e-5)
        # the scaled scores are the raw ones over sqrt(d_k), not over d_k
        assert torch.allclose(wt.scaled[head], wt.scores[head] / math.sqrt(32))
    assert torch.allclose(wt.weights.sum(-1), torch.ones(12, len(wt.tokens)), atol=1e-5)
    assert torch.allclose(wt.out, wt.model_out, atol=1e-4)
    assert wt.agrees()
    assert wt.bias  # BERT's projections add b_Q, b_K, b_V: the page writes q = xW_Q + b_Q


def test_the_output_check_follows_the_measured_difference(minilm):
    from model.analysis.walkthrough import walkthrough

    wt = walkthrough(minilm, "I study math", 0)
    assert wt.out_agrees()
    wt.out = wt.out + 0.01  # a hand-made output that is off: the page must not say "equals"
    assert not wt.out_agrees() and not wt.agrees()


def test_step_by_step_on_a_decoder_only_model_uses_the_causal_mask():
    from model import LabModel, TransformerConfig, build_model
    from model.analysis.walkthrough import walkthrough

    class Words:
        pad_id, bos_id, eos_id, special_tokens = 0, None, None, frozenset()

        def encode(self, text, max_len):
            from model.runtime.types import Encoded

            words = text.split()[:max_len]
            return Encoded([1 + (hash(w) % 20) for w in words], words)

        def tokens(self, ids):
            return [str(i) for i in ids]

    torch.manual_seed(0)
    cfg = TransformerConfig(kind="decoder", tgt_vocab_size=24, d_model=16, n_heads=2, dropout=0.0)
    lm = LabModel("toy", build_model(cfg), None, Words(), device="cpu")
    wt = walkthrough(lm, "a b c d", 1)
    assert wt.kind == "decoder"
    assert torch.equal(wt.allowed, torch.tril(torch.ones(4, 4, dtype=torch.bool)))
    assert (wt.weights[:, 0, 1:] == 0).all()
    assert wt.agrees()


def test_recorder_keeps_inputs_only_when_asked():
    from model import TransformerConfig, build_model

    torch.manual_seed(0)
    net = build_model(TransformerConfig(kind="encoder", dropout=0.0)).eval()
    out = net(torch.tensor([[1, 2, 3]]), trace=True)
    assert dict(out.record.inputs) == {}


def test_without_positions_a_reordered_sentence_gives_the_same_vectors_reordered():
    demo = permutation_demo(["I", "love", "you"], ["love", "I", "you"])
    assert demo.perm == [1, 0, 2]
    assert demo.gap("without") < 1e-5
    assert demo.gap("with") > 1e-2
    with pytest.raises(ValueError):
        permutation_demo(["I", "love"], ["you", "I"])


def test_attention_cost_memory_grows_like_n_squared():
    cost = attention_cost([16, 32, 64], repeats=1)
    assert cost["bytes"] == [4 * 4 * n * n for n in (16, 32, 64)]  # heads x n x n float32
    assert all(ms > 0 for ms in cost["ms"])


def test_the_shipped_warmup_experiment_has_every_curve_and_its_exact_command():
    meta, curves = load_warmup()
    assert set(curves) == set(WARMUP_VARIANTS)
    assert meta["seeds"] == list(WARMUP_SEEDS) and len(meta["seeds"]) >= 3
    # the rerun command names every setting that shapes the result, with the shipped values
    assert meta["rerun"] == (
        f"python -m model.training.warmup --out assets/experiments/warmup --steps {meta['steps']}"
        f" --d-model {meta['d_model']} --layers {meta['layers']} --lr-factor {meta['lr_factor']:g}"
        f" --seeds {','.join(str(s) for s in meta['seeds'])}"
    )
    args = warmup_main_parser_defaults()
    assert (args.steps, args.d_model, args.layers, args.lr_factor, args.seeds) == (
        meta["steps"],
        meta["d_model"],
        meta["layers"],
        meta["lr_factor"],
        tuple(meta["seeds"]),
    )
    assert set(args.variants) == set(meta["variants"]) == set(WARMUP_VARIANTS)
    for name, runs in curves.items():
        norm, warmup = WARMUP_VARIANTS[name]
        assert set(runs) == set(meta["seeds"])
        for seed, curve in runs.items():
            assert len(curve["step"]) == len(curve["loss"]) == len(curve["lr"]) > 10
            run = next(r for r in meta["variants"][name]["runs"] if r["seed"] == seed)
            for flag in (
                f"--norm {norm}",
                f"--warmup {warmup}",
                f"--seed {seed}",
                f"--d-model {meta['d_model']}",
                f"--lr-factor {meta['lr_factor']:g}",
                f"--layers {meta['layers']}",
                f"--steps {meta['steps']}",
            ):
                assert flag in run["command"]
            # the logged rate is the Noam formula with the experiment's own settings
            for step, lr in zip(curve["step"][:5], curve["lr"][:5]):
                expected = noam_lr(int(step), meta["d_model"], warmup, meta["lr_factor"])
                assert lr == pytest.approx(expected, rel=1e-4)


def test_the_shipped_warmup_result_is_what_the_page_says():
    """Pre-LN learns without warm-up, post-LN does not, in every seed (the page's claim)."""
    meta, _ = load_warmup()
    v = meta["variants"]
    assert v["post_no_warmup"]["exact_match_max"] == 0.0
    assert v["post_no_warmup"]["final_loss_min"] > 2.5
    for name in ("post_warmup", "pre_warmup", "pre_no_warmup"):
        assert v[name]["exact_match_min"] > 0.5 and v[name]["final_loss_max"] < 1.2


def test_a_misspelt_warmup_variant_is_refused_before_anything_trains(capsys):
    from model.training import warmup

    with pytest.raises(SystemExit):
        warmup.main(["--variants", "pre_no_warmup,pre_nowarmup", "--out", "unused"])
    assert "pre_nowarmup" in capsys.readouterr().err
    assert warmup.parse_variants("pre_no_warmup") == ("pre_no_warmup",)


def warmup_main_parser_defaults():
    """The defaults of ``python -m model.training.warmup`` (what a bare re-run trains)."""
    import argparse

    from model.training import warmup

    seen = {}

    def grab(out, steps, seeds, d_model, layers, factor, jobs, variants):
        seen.update(steps=steps, seeds=seeds, d_model=d_model, layers=layers, lr_factor=factor)
        seen.update(variants=variants)
        return {"variants": {}}

    original = warmup.run_warmup
    warmup.run_warmup = grab
    try:
        warmup.main([])
    finally:
        warmup.run_warmup = original
    return argparse.Namespace(**seen)


def test_seed_band_spans_the_seeds():
    runs = {0: {"step": [10, 20], "loss": [3.0, 2.0]}, 1: {"step": [10, 20], "loss": [1.0, 4.0]}}
    band = seed_band(runs)
    assert band == {"step": [10, 20], "mean": [2.0, 3.0], "min": [1.0, 2.0], "max": [3.0, 4.0]}


def test_a_wide_vector_matrix_has_no_overlapping_cell_numbers_or_dimension_ticks():
    """K and V of a 32-wide head, drawn at half width: numbers in 20 px cells ran together.
    Past 16 dimensions plotly spaces the ticks by the axis's width in pixels: 16 fixed ticks
    of an FFN's 1,536 hidden units ("0 96 192 ... 1440") ran into each other on a phone."""
    rng = np.random.default_rng(0)
    for n_cols in (32, 1536):
        wide = matrix_heatmap(rng.normal(size=(3, n_cols)), list("abc"), col_title="dimension")
        assert wide.data[-1].texttemplate is None
        assert wide.layout.xaxis.tickmode == "auto"
        assert wide.layout.xaxis.tickvals is None and wide.layout.xaxis.ticktext is None
    eight = matrix_heatmap(rng.normal(size=(3, 8)), list("abc"))
    assert eight.layout.xaxis.ticktext == tuple(str(i) for i in range(8))  # every feature
    small = matrix_heatmap(rng.normal(size=(5, 5)), list("abcde"), list("abcde"))
    assert small.data[-1].texttemplate == "%{z:.2f}"  # a score matrix keeps its numbers
    assert len(small.layout.xaxis.ticktext) == 5


def test_a_matrix_title_sits_at_the_top_edge_above_its_column_axis_title():
    """Centred in the top margin (plotly's default), a title that spans a phone's width sat
    on the column axis's title ("dimension") above the map."""
    fig = matrix_heatmap(np.ones((3, 1536)), list("abc"), title="Hidden", col_title="dimension")
    title = fig.layout.title
    assert (title.y, title.yref, title.yanchor) == (1, "container", "top")
    assert fig.layout.xaxis.side == "top" and fig.layout.xaxis.title.text == "dimension"


def test_concept_figures_escape_tokens_and_fix_ranges():
    fig = matrix_heatmap([[0.2, 0.8]], ["<b>x</b>"], ["a&b", "c"], probability=True)
    assert fig.layout.yaxis.ticktext == ("&lt;b&gt;x&lt;/b&gt;",)
    assert fig.layout.xaxis.ticktext == ("a&amp;b", "c")
    heat = fig.data[-1]
    assert (heat.zmin, heat.zmax) == (0.0, 1.0)
    signed = matrix_heatmap([[-2.0, 1.0]], ["q"])
    assert signed.data[-1].zmid == 0.0 and signed.data[-1].zmin == -2.0
    masks = mask_figure(
        torch.tril(torch.ones(2, 2)).bool().numpy(),
        ["<s>", "a"],
        ["<s>", "a"],
        name="t",
        allowed_label="ok",
        blocked_label="no",
    )
    assert masks.layout.xaxis.ticktext == ("&lt;s&gt;", "a")
    # the one blocked cell (row <s>, key a) is marked, not only grey
    assert [list(r) for r in masks.data[0].text] == [["", "×"], ["", ""]]
    assert masks.data[0].customdata[0][1] == "no"
    lines = lines_figure(
        [1, 2], {"a": [1, 2], "b": [2, 3]}, x_title="x", y_title="y", dashed=("b",)
    )
    assert lines.data[1].line.dash == "dash"
    frame = step_frame(
        ["a", "b"],
        [1.0, 2.0],
        [0.5, 1.0],
        [True, False],
        [1.0, 0.0],
        {k: k for k in ("key", "score", "scaled", "allowed", "masked", "weight")},
    )
    assert frame["masked"].tolist() == [0.5, -math.inf]


def test_cross_attention_by_hand_reads_queries_from_the_decoder_and_keys_from_the_encoder():
    from model import load
    from model.analysis.walkthrough import cross_walkthrough

    lm = load("en2ko", device="cpu")
    for layer in (0, 1):
        wt = cross_walkthrough(lm, "I study math", layer)
        assert wt.kind == "cross"
        assert wt.key_tokens == ["i", "study", "math"] and wt.tokens[0] == "<bos>"
        lt, ls = len(wt.tokens), len(wt.key_tokens)
        assert wt.q.shape == (4, lt, 32) and wt.k.shape == (4, ls, 32) == wt.v.shape
        assert wt.weights.shape == (4, lt, ls) and wt.allowed.all()  # nothing masked but padding
        assert torch.allclose(wt.weights, wt.model_weights, atol=1e-5)
        assert wt.agrees()
    with pytest.raises(ValueError):
        cross_walkthrough(lm, "I study math", 2)
    with pytest.raises(ValueError):
        cross_walkthrough(load("minilm", device="cpu"), "I study math", 0)


def test_the_feed_forward_network_is_the_same_mlp_at_every_position(minilm):
    from model.analysis.concepts import feed_forward_walk

    ffn = feed_forward_walk(minilm, "I study math", 2)
    assert (ffn["d_model"], ffn["d_ff"], ffn["activation"]) == (384, 1536, "GELU")
    assert ffn["params"] == 384 * 1536 + 1536 + 1536 * 384 + 384
    assert ffn["hidden"].shape == (5, 1536)
    assert ffn["position_error"] < 1e-3 and ffn["others_moved"] == 0.0


def test_the_feed_forward_check_notices_mixing_between_positions():
    from model.analysis.concepts import feed_forward_check

    class Mixing(torch.nn.Module):  # not position-wise: adds the mean over positions
        def __init__(self):
            super().__init__()
            self.linear1 = torch.nn.Linear(4, 8)
            self.activation = torch.relu

        def forward(self, x):
            return x + x.mean(1, keepdim=True)

    check = feed_forward_check(Mixing(), torch.randn(3, 4))
    assert check["position_error"] > 1e-3 and check["others_moved"] > 0.1


def test_masked_scores_filled_with_zero_still_take_weight():
    from model.analysis.concepts import mask_fill_weights

    fill = mask_fill_weights([0.0, 0.0, 0.0, 0.0], [True, True, False, False])
    assert fill["zero"] == pytest.approx(0.5) and fill["inf"] == 0.0 and fill["n_masked"] == 2


def _outlier_stream(n_tokens: int = 60, layers: int = 31) -> np.ndarray:
    """[layers + 1, tokens] lengths like SmolLM2's: every token grows slowly to about 700,
    the first jumps to 24,101 after layer 12 and falls back near the end."""
    rng = np.random.default_rng(0)
    stream = np.linspace(5, 700, layers)[:, None] * rng.uniform(0.8, 1.0, (1, n_tokens))
    stream[12:29, 0] = 24_101.5
    return stream


def test_residual_peak_names_the_massive_token_against_the_median():
    stream = _outlier_stream()
    peak = residual_peak(stream)
    assert (peak["token"], peak["layer"], peak["peak"]) == (0, 12, 24_101.5)
    assert peak["median"] == pytest.approx(float(np.median(stream.max(axis=0))))
    assert peak["ratio"] == pytest.approx(24_101.5 / peak["median"])
    assert peak["massive"]
    stream[12:29, 0] = 900.0  # a token only a little longer is no outlier
    assert not residual_peak(stream)["massive"]


def test_a_sentences_residual_curves_keep_one_named_outlier_and_a_short_legend():
    stream = _outlier_stream()
    series = {f"{i}: tok{i}": stream[:, i] for i in range(stream.shape[1])}
    fig = token_lines(range(stream.shape[0]), series, x_title="layer", y_title="‖x‖",
                      others_name="the other 59 tokens", log_y=True)  # fmt: skip
    legend = [d.name for d in fig.data if d.showlegend is not False]
    assert legend == ["0: tok0", "the other 59 tokens"]  # two entries, not sixty
    assert fig.layout.yaxis.type == "log"  # the others are not flattened onto zero
    label = fig.layout.annotations[0]
    # inside the plot: at the peak, hanging below it, leaning away from the right edge
    assert label.text == "0: tok0 · 24.1k" and label.yanchor == "top" and label.yshift < 0
    assert label.y == pytest.approx(np.log10(24_101.5)) and label.xanchor == "left"
    # the summary names the outlier first; the table still has every token's curve
    assert figure_facts(fig)[0]["name"] == "0: tok0" and figure_facts(fig)[0]["y"] == "24,101.5"
    assert figure_table(fig).iloc[:, 0].nunique() == 60
    few = token_lines(range(3), {"a": [1, 2, 3], "b": [3, 2, 1]}, x_title="l", y_title="n",
                      others_name="-")  # fmt: skip
    assert [d.name for d in few.data] == ["a", "b"] and few.layout.yaxis.type != "log"
    # a short sentence with a massive activation (SmolLM2 on "I study math"): each token
    # named, and the axis logarithmic all the same
    short = {f"{i}: tok{i}": stream[:, i] for i in range(3)}
    massive = token_lines(range(stream.shape[0]), short, x_title="layer", y_title="‖x‖",
                          others_name="-")  # fmt: skip
    assert [d.name for d in massive.data] == list(short) and massive.layout.yaxis.type == "log"
    assert massive.layout.yaxis.tickformat == "~s"  # its ticks read 20k, 5k, not "2", "5"


def test_compact_numbers_fit_a_label():
    assert [compact_number(v) for v in (24_101.5, 1_000_000, 698.7, 0.625)] == [
        "24.1k",
        "1M",
        "699",
        "0.625",
    ]


def test_many_bars_label_every_kth_token_but_the_summary_names_each_bar():
    tokens = [f"w{i}" for i in range(68)]
    values = [0.0] * 68
    values[37] = 1.0
    fig = grouped_bars(tokens, {"before": values}, y_title="mean")
    assert len(fig.layout.xaxis.ticktext) <= MAX_BAR_LABELS
    assert "w37" not in fig.layout.xaxis.ticktext  # not labelled on the axis ...
    assert figure_facts(fig)[0]["x"] == "w37"  # ... but named in the summary
    assert figure_table(fig).iloc[:, 0].tolist() == tokens
