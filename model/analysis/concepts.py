"""Small numeric experiments behind the concept pages: why √d_k, softmax saturation, the cost
of attention, and what self-attention does to permuted words without positions.

Pure PyTorch, no plotting: the pages draw the numbers, tests check them.
"""

from __future__ import annotations

import math
import time
import weakref
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from model.attention import online_softmax, scaled_dot_product_attention, tiled_attention
from model.config import TransformerConfig
from model.layers import ACTIVATIONS
from model.positional import alibi_slopes, apply_rope, rope_frequencies, sinusoidal_encoding
from model.transformer import build_model


def cosine_matrix(m: np.ndarray) -> np.ndarray:
    """[n, d] rows -> [n, n] cosine similarity of every pair (a zero row is similar to nothing)."""
    unit = m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)
    return unit @ unit.T


# --- why √d_k ---------------------------------------------------------------------------------


def qk_products(d_k: int, n: int = 4000, seed: int = 0) -> torch.Tensor:
    """q·k for ``n`` pairs of vectors with independent N(0, 1) entries: variance d_k."""
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(n, d_k, generator=gen, dtype=torch.float64)
    k = torch.randn(n, d_k, generator=gen, dtype=torch.float64)
    return (q * k).sum(-1)


def qk_variance(d_ks: list[int], n: int = 4000, seed: int = 0) -> dict[str, list[float]]:
    """Per d_k: the sample variance of q·k and of q·k/√d_k (≈ d_k and ≈ 1)."""
    raw, scaled = [], []
    for d_k in d_ks:
        dots = qk_products(d_k, n, seed + d_k)
        raw.append(float(dots.var()))
        scaled.append(float((dots / math.sqrt(d_k)).var()))
    return {"d_k": list(d_ks), "raw": raw, "scaled": scaled}


def softmax_saturation(
    d_ks: list[int], n_keys: int = 10, trials: int = 200, seed: int = 0
) -> dict[str, list[float]]:
    """Random q against ``n_keys`` random keys, with and without the 1/√d_k scale.

    For each d_k: the mean largest softmax weight (1.0 = one-hot, saturated) and the mean
    Frobenius norm of the softmax Jacobian diag(p) - p pᵀ, the factor every gradient that
    flows back into the scores is multiplied by (it goes to 0 as the softmax saturates).
    """
    out: dict[str, list[float]] = {
        "d_k": list(d_ks),
        "max_weight_scaled": [],
        "max_weight_raw": [],
        "grad_scaled": [],
        "grad_raw": [],
    }
    for d_k in d_ks:
        gen = torch.Generator().manual_seed(seed + d_k)
        q = torch.randn(trials, 1, d_k, generator=gen, dtype=torch.float64)
        k = torch.randn(trials, n_keys, d_k, generator=gen, dtype=torch.float64)
        scores = (q @ k.transpose(-1, -2)).squeeze(1)  # [trials, n_keys]
        for name, s in (("scaled", scores / math.sqrt(d_k)), ("raw", scores)):
            p = torch.softmax(s, dim=-1)
            jac = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # [trials, n, n]
            out[f"max_weight_{name}"].append(float(p.max(-1).values.mean()))
            out[f"grad_{name}"].append(float(jac.flatten(1).norm(dim=-1).mean()))
    return out


def softmax_example(d_k: int, n_keys: int = 8, seed: int = 1) -> dict[str, list[float]]:
    """One random query over ``n_keys`` keys: its softmax with and without the scale."""
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(d_k, generator=gen, dtype=torch.float64)
    k = torch.randn(n_keys, d_k, generator=gen, dtype=torch.float64)
    s = k @ q
    return {
        "scores": s.tolist(),
        "raw": torch.softmax(s, -1).tolist(),
        "scaled": torch.softmax(s / math.sqrt(d_k), -1).tolist(),
    }


# --- cost of attention as n grows -------------------------------------------------------------


def attention_cost(
    ns: list[int], d_model: int = 64, n_heads: int = 4, repeats: int = 3, seed: int = 0
) -> dict[str, list[float]]:
    """Measured time (median, ms) of one attention over n tokens on this machine's CPU,
    and the bytes of the [H, n, n] weight matrix it builds (grows like n²)."""
    gen = torch.Generator().manual_seed(seed)
    d_k = d_model // n_heads
    times, memory = [], []
    for n in ns:
        q, k, v = (torch.randn(1, n_heads, n, d_k, generator=gen) for _ in range(3))
        runs = []
        for _ in range(repeats):
            start = time.perf_counter()
            _, weights = scaled_dot_product_attention(q, k, v)
            runs.append(time.perf_counter() - start)
        times.append(sorted(runs)[len(runs) // 2] * 1000)
        memory.append(float(weights.numel() * weights.element_size()))
    return {"n": list(ns), "ms": times, "bytes": memory}


# --- since 2017: positions inside attention, the KV cache, tiled attention ------------------


def qk_by_distance(
    max_distance: int = 48,
    query_positions: tuple[int, ...] = (48, 96),
    d: int = 64,
    n_heads: int = 8,
    seed: int = 0,
    learned_table: torch.Tensor | None = None,
) -> list[dict]:
    """The same word at two places: its score with itself Δ = 0 .. max_distance tokens back.

    One random content vector x (N(0, 1) entries) is the query at position p and the key at
    p - Δ, for each p in ``query_positions``. Per scheme, the score q·k / √d is:
    sinusoidal (x + PE_p)·(x + PE_(p-Δ)); learned the same with ``learned_table`` rows (its
    own width; left out when None); rope (R_p x)·(R_(p-Δ) x); alibi x·x / √d - m_h·Δ for the
    steepest and the gentlest head; none x·x / √d. Rows: scheme, series (query position or
    head), distance, score. Curves for two query positions lie on each other exactly when
    the score depends on distance alone.
    """
    if max_distance < 0 or min(query_positions) < max_distance:
        raise ValueError("every query position must be at least max_distance")
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(d, generator=gen, dtype=torch.float64)
    top = max(query_positions) + 1
    pe = sinusoidal_encoding(top, d).double()
    rows: list[dict] = []

    def add(scheme: str, series: str, values: list[float]) -> None:
        rows.extend(
            {"scheme": scheme, "series": series, "distance": dist, "score": score}
            for dist, score in enumerate(values)
        )

    distances = range(max_distance + 1)
    for p in query_positions:
        keys = [p - dist for dist in distances]
        add("sinusoidal", f"p={p}", [float((x + pe[p]) @ (x + pe[s])) / math.sqrt(d) for s in keys])
        rq = apply_rope(x[None], torch.tensor([p]))[0]
        rk = apply_rope(x[None].expand(len(keys), d), torch.tensor(keys))
        add("rope", f"p={p}", (rk @ rq / math.sqrt(d)).tolist())
        add("none", f"p={p}", [float(x @ x) / math.sqrt(d)] * len(keys))
        if learned_table is not None and p < learned_table.shape[0]:
            table = learned_table.detach().double().cpu()
            xl = torch.randn(
                table.shape[1], generator=torch.Generator().manual_seed(seed), dtype=torch.float64
            )
            add(
                "learned",
                f"p={p}",
                [
                    float((xl + table[p]) @ (xl + table[s])) / math.sqrt(table.shape[1])
                    for s in keys
                ],
            )
    slopes = alibi_slopes(n_heads).double()
    for h in (0, n_heads - 1):
        add(
            "alibi",
            f"h={h}",
            [float(x @ x) / math.sqrt(d) - float(slopes[h]) * dist for dist in distances],
        )
    return rows


def rope_rotation(
    pair: int = 0, d_k: int = 64, positions: int = 12, vector: tuple[float, float] = (1.0, 0.0)
) -> list[dict]:
    """Where RoPE turns one pair of dimensions (2i, 2i+1) of a vector at positions 0 .. n-1:
    a rotation by p·θ_i, θ_i = 10000^(-2i/d_k). Rows: position, angle (radians), x, y."""
    if not 0 <= pair < d_k // 2:
        raise ValueError(f"pair must be in 0 .. {d_k // 2 - 1}, got {pair}")
    theta = float(rope_frequencies(d_k)[pair])
    x = torch.zeros(positions, d_k, dtype=torch.float64)
    x[:, 2 * pair], x[:, 2 * pair + 1] = vector
    out = apply_rope(x, torch.arange(positions))
    return [
        {
            "position": p,
            "angle": p * theta,
            "x": float(out[p, 2 * pair]),
            "y": float(out[p, 2 * pair + 1]),
        }
        for p in range(positions)
    ]


def kv_cache_bytes(
    layers: int,
    d_model: int,
    n_heads: int,
    n_kv_heads: int,
    tokens: int,
    bytes_per_value: int = 2,
    batch: int = 1,
    d_head: int | None = None,
) -> int:
    """Keys and values kept for ``tokens`` tokens: 2 · layers · n_kv_heads · d_k · tokens · bytes.

    d_k is ``d_head`` when given (some models choose it: Gemma-7B has 16 heads of 256 with
    d_model 3072), else d_model / n_heads. Grouped-query attention divides the total by
    n_heads / n_kv_heads; multi-query by n_heads.
    """
    if n_kv_heads < 1 or n_heads % n_kv_heads:
        raise ValueError("n_kv_heads must divide n_heads")
    if d_head is None:
        if d_model % n_heads:
            raise ValueError("n_heads must divide d_model (or give d_head)")
        d_head = d_model // n_heads
    if d_head < 1:
        raise ValueError("d_head must be at least 1")
    return 2 * layers * n_kv_heads * d_head * tokens * bytes_per_value * batch


MASSIVE_SPREAD = 20  # a token's peak this many times the median token's: an outlier


def residual_peak(residual) -> dict:
    """[layers + 1, tokens] lengths ‖x‖ of the residual stream -> the token that reaches the
    highest (its index, the layer after which it peaks, the peak) against the median of
    the tokens' own peaks, and whether it is ``massive``: MASSIVE_SPREAD times that median
    or more (SmolLM2's first token, a "massive activation" of Sun et al. 2024, at 24,101)."""
    lengths = torch.as_tensor(residual, dtype=torch.float64)
    peaks, layers = lengths.max(dim=0)  # per token
    token = int(peaks.argmax())
    median = float(peaks.quantile(0.5))  # the middle two's mean, as numpy's median
    ratio = float(peaks[token]) / median if median > 0 else float("inf")
    return {
        "token": token,
        "layer": int(layers[token]),
        "peak": float(peaks[token]),
        "median": median,
        "ratio": ratio,
        "massive": ratio >= MASSIVE_SPREAD,
    }


def attention_facts(cfg, bytes_per_value: int = 4) -> dict:
    """What a model's own config says about its attention (a TransformerConfig): where order
    comes from (with RoPE's base and pair layout), query and key/value heads, d_k, and the
    key/value cache its decoder keeps, per token and at its longest input (float32, as the
    lab runs it, unless ``bytes_per_value`` says otherwise).

    Where layers have sliding windows (Gemma 3, Mistral) the cache at the longest input is
    what they keep (window_cache_bytes: a sliding layer only its last ``window`` keys), and
    a local rotary base of their own is named beside the global one."""
    layers = cfg.n_decoder_layers if cfg.has_decoder else cfg.n_encoder_layers
    per_token = 2 * layers * cfg.kv_heads * cfg.d_k * bytes_per_value
    kv = cfg.kv_heads
    rope = cfg.positions == "rope"
    windows = window_pattern(cfg) if cfg.has_decoder else [None] * layers
    sliding = [w for w in windows if w is not None]
    if sliding:
        at_max = window_cache_bytes(cfg, cfg.max_len, bytes_per_value)["windowed"]
    else:
        at_max = per_token * cfg.max_len
    local_base = cfg.rope_local_base if rope and sliding else None
    return {
        "positions": cfg.positions,
        "rope_base": cfg.rope_base if rope else None,
        # the sliding layers' own base, where it differs (Gemma 3: 10,000 beside 1,000,000)
        "rope_local_base": local_base if local_base != cfg.rope_base else None,
        "rope_layout": cfg.rope_layout if rope else None,
        "layers": layers,
        "n_heads": cfg.n_heads,
        "kv_heads": kv,
        "attention": "mha" if kv == cfg.n_heads else "mqa" if kv == 1 else "gqa",
        "group": cfg.n_heads // kv,
        "d_k": cfg.d_k,
        "max_len": cfg.max_len,
        "sliding_layers": len(sliding),
        "window": max(sliding) if sliding else None,
        "cache_per_token": per_token,  # while every layer still keeps every token
        # past the windows, a new token adds a key and a value to the global layers only
        "cache_per_token_past_window": per_token // layers * (layers - len(sliding)),
        "cache_at_max_len": at_max,
        "cache_if_all_global": per_token * cfg.max_len,
        "cache_if_mha": at_max * cfg.n_heads // kv,
    }


def window_pattern(cfg) -> list[int | None]:
    """Each decoder layer's sliding window (None: a global layer that sees every earlier key),
    as the config's layer pattern sets them (Gemma 3: five local layers, then a global one)."""
    return [cfg.layer_window(layer) for layer in range(cfg.n_decoder_layers)]


def window_cache_bytes(cfg, n_tokens: int, bytes_per_value: int = 4) -> dict[str, int]:
    """The key/value cache after ``n_tokens`` tokens with the layers' own windows (a sliding
    layer keeps only its last ``window`` keys) and if every layer were global: float32, as the
    lab runs it, unless ``bytes_per_value`` says otherwise."""
    per_key = 2 * cfg.kv_heads * cfg.d_k * bytes_per_value  # a key and a value, every kv head
    kept = [n_tokens if w is None else min(n_tokens, w) for w in window_pattern(cfg)]
    return {
        "windowed": per_key * sum(kept),
        "all_global": per_key * n_tokens * cfg.n_decoder_layers,
    }


def farthest_reach(weights: torch.Tensor, eps: float = 0.0) -> int:
    """[Lq, Lk] causal weights (query i at key position i) -> the largest distance i - j of
    a key j that any query gives more than ``eps`` weight: a sliding layer's window less 1."""
    n_q, n_k = weights.shape
    q = torch.arange(n_k - n_q, n_k)[:, None]
    k = torch.arange(n_k)[None, :]
    reach = torch.where(weights > eps, q - k, torch.zeros_like(q - k))
    return int(reach.max())


def cache_nbytes(cache: dict) -> dict[str, int]:
    """Bytes actually held by a model's key/value cache (``model.new_cache()`` after decoding),
    by kind: "self" grows one row per step, "cross" (encoder keys) is computed once."""
    out = {"self": 0, "cross": 0}
    for layer in cache["layers"]:
        for kind, kv in layer.items():
            tensors = (t for t in kv.values() if isinstance(t, torch.Tensor))  # not "seen"
            out[kind] = out.get(kind, 0) + sum(t.nbytes for t in tensors)
    return out


def online_softmax_example(
    n_keys: int = 10, block_size: int = 4, d: int = 4, seed: int = 3
) -> tuple[list, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One query over ``n_keys`` keys, in tiles of ``block_size``: (steps, scores [n_keys],
    ordinary attention's output [d], its weights [n_keys]) for the step-by-step section."""
    if not 1 <= block_size <= n_keys:
        raise ValueError(f"block_size must be in 1 .. {n_keys}, got {block_size}")
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(1, d, generator=gen, dtype=torch.float64) * 1.5
    k = torch.randn(n_keys, d, generator=gen, dtype=torch.float64)
    v = torch.randn(n_keys, d, generator=gen, dtype=torch.float64)
    steps = list(online_softmax(q, k, v, block_size=block_size))
    out, weights = scaled_dot_product_attention(q, k, v)
    scores = (q @ k.T)[0] / math.sqrt(d)
    return steps, scores, out[0], weights[0]


class AllocationMeter(TorchDispatchMode):
    """Measures the bytes of tensor memory allocated inside a ``with`` block: every op's new
    storage counts from the moment it is made until it is freed; ``peak`` is the most alive
    at once. Inputs made before the block and views of them cost nothing, as in PyTorch.

    Watching the dispatcher works on any device; on CUDA ``torch.cuda.max_memory_allocated``
    would say the same, and CPU PyTorch has no such counter.
    """

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self._alive: dict[int, int] = {}  # storage address -> bytes

    def _freed(self, address: int, nbytes: int) -> None:
        if self._alive.pop(address, None) is not None:
            self.live -= nbytes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        inputs = {
            x.untyped_storage().data_ptr()
            for x in tree_leaves((args, kwargs))
            if isinstance(x, torch.Tensor)
        }
        out = func(*args, **kwargs)
        for x in tree_leaves(out):
            if not isinstance(x, torch.Tensor):
                continue
            storage = x.untyped_storage()
            address, nbytes = storage.data_ptr(), storage.nbytes()
            if nbytes == 0 or address in inputs or address in self._alive:
                continue  # a view, an in-place result, or already counted
            self._alive[address] = nbytes
            self.live += nbytes
            self.peak = max(self.peak, self.live)
            # PyTorch keeps one Python object per storage while it lives: its end is the free.
            weakref.finalize(storage, self._freed, address, nbytes)
        return out


def attention_memory(
    ns: list[int], block_size: int = 64, d: int = 64, seed: int = 0
) -> dict[str, list[float]]:
    """Peak bytes of tensor memory each method allocates for one head over n tokens, measured
    with ``AllocationMeter`` (float32 q, k, v made beforehand, not counted).

    Ordinary attention keeps its scores, scaled scores and weights ([n, n] each) beside the
    [n, d] output: the formula 3·n²·4 + n·d·4. Tiled attention allocates the output and then
    only one block's tiles and running max, sum and output at a time: the output n·d·4 plus a
    working set that depends on the block size, never on n. The outputs are checked equal
    (max |diff|).
    """
    gen = torch.Generator().manual_seed(seed)
    out: dict[str, list[float]] = {
        k: []
        for k in (
            "n",
            "full_measured",
            "full_formula",
            "tiled_measured",
            "output_bytes",
            "max_diff",
        )
    }
    for n in ns:
        q, k, v = (torch.randn(1, n, d, generator=gen) for _ in range(3))
        with torch.no_grad(), AllocationMeter() as full:
            ref, _ = scaled_dot_product_attention(q, k, v)
        with torch.no_grad(), AllocationMeter() as tiled:
            tiled_out = tiled_attention(q, k, v, block_size=block_size)
        out["n"].append(n)
        out["full_measured"].append(float(full.peak))
        out["full_formula"].append(float(3 * n * n * 4 + n * d * 4))
        out["tiled_measured"].append(float(tiled.peak))
        out["output_bytes"].append(float(n * d * 4))
        out["max_diff"].append(float((tiled_out - ref).abs().max()))
    return out


# --- why positions ----------------------------------------------------------------------------


@dataclass
class PermutationDemo:
    words_a: list[str]
    words_b: list[str]
    perm: list[int]  # words_b[i] == words_a[perm[i]]
    with_pe: tuple[torch.Tensor, torch.Tensor]  # ([L, D], [L, D]) outputs for a and b
    without_pe: tuple[torch.Tensor, torch.Tensor]

    def gap(self, which: str) -> float:
        """Largest |out_b[i] - out_a[perm[i]]|: 0 means b's outputs are a's, permuted."""
        a, b = self.with_pe if which == "with" else self.without_pe
        return float((b - a[self.perm]).abs().max())

    def invariance_gap(self) -> float:
        """Largest |out_b[i] - out_a[i]| without positions: > 0, so the block is not
        permutation-invariant (same outputs), only equivariant (outputs permuted)."""
        a, b = self.without_pe
        return float((b - a).abs().max())


@torch.inference_mode()
def permutation_demo(
    words_a: list[str], words_b: list[str], d_model: int = 16, seed: int = 0
) -> PermutationDemo:
    """A small random encoder run on two orderings of the same words, with and without
    positional encoding. Without it, self-attention and the FFN treat the tokens as a set:
    reordering the input only reorders the output vectors."""
    if sorted(words_a) != sorted(words_b):
        raise ValueError("the two inputs must hold the same words in another order")
    vocab = {w: i + 1 for i, w in enumerate(dict.fromkeys(words_a))}
    torch.manual_seed(seed)
    cfg = TransformerConfig(
        kind="encoder",
        src_vocab_size=len(vocab) + 1,
        d_model=d_model,
        n_heads=2,
        n_encoder_layers=2,
        d_ff=32,
        dropout=0.0,
        output_head=False,
        max_len=16,
    )
    net = build_model(cfg).eval()
    remaining = list(range(len(words_a)))
    perm = []
    for w in words_b:
        j = next(i for i in remaining if words_a[i] == w)
        remaining.remove(j)
        perm.append(j)

    def run(words: list[str], positions: bool) -> torch.Tensor:
        ids = torch.tensor([[vocab[w] for w in words]])
        if positions:
            return net.encode(ids)[0]
        x = net.embed.token(ids) * net.embed.scale  # the positional term left out (zero)
        return net.encoder(x, None)[0]

    return PermutationDemo(
        words_a,
        words_b,
        perm,
        (run(words_a, True), run(words_b, True)),
        (run(words_a, False), run(words_b, False)),
    )


# --- what a LayerNorm's γ and β do to its output's size -----------------------------------------


def layernorm_scale(gamma, beta=None) -> dict[str, float]:
    """The sizes a LayerNorm's affine step sets, from its learned γ (scale) and β (shift).

    The normalized vector n has mean 0 and ‖n‖ = √d, so the output γ⊙n + β has a standard
    deviation over features of about rms(γ) = √mean(γ²) (not std(γ): γ scales every feature,
    so its typical size matters, not its spread) and a length of about √(Σγᵢ² + Σβᵢ²),
    which is ≈ √d·rms(γ) when β is small.
    """
    g = np.asarray(gamma, dtype=np.float64).ravel()
    b = np.zeros_like(g) if beta is None else np.asarray(beta, dtype=np.float64).ravel()
    d = g.size
    rms = float(np.sqrt(np.mean(g**2)))
    return {
        "d": d,
        "rms_gamma": rms,
        "std_gamma": float(g.std()),
        "mean_beta": float(b.mean()),
        "length": float(np.sqrt(np.sum(g**2) + np.sum(b**2))),
        "sqrt_d_rms": float(np.sqrt(d) * rms),
        "sqrt_d_std": float(np.sqrt(d) * g.std()),
    }


# --- PE(p + k) = M_k · PE(p) ------------------------------------------------------------------


def pe_wavelengths(d_model: int) -> np.ndarray:
    """The wavelength 2π·10000^(2i/d) of each sin/cos pair i (interleaved table)."""
    return 2 * np.pi * 10000.0 ** (np.arange(0, d_model, 2, dtype=np.float64) / d_model)


def pe_shift_matrix(d_model: int, k: int) -> np.ndarray:
    """M_k, [d, d]: the matrix with PE(p + k) = M_k · PE(p) for every position p.

    Block diagonal, one 2 × 2 rotation by k·ω_i per (sin, cos) pair of the interleaved
    table: sin((p+k)ω) = cos(kω)·sin(pω) + sin(kω)·cos(pω), and cos((p+k)ω) =
    −sin(kω)·sin(pω) + cos(kω)·cos(pω). It depends on k only, never on p.
    """
    if d_model <= 0 or d_model % 2:
        raise ValueError("d_model must be a positive even number")
    omega = 2 * np.pi / pe_wavelengths(d_model)
    m = np.zeros((d_model, d_model))
    for i, w in enumerate(omega):
        c, s = np.cos(k * w), np.sin(k * w)
        m[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = [[c, s], [-s, c]]
    return m


def pe_shift_error(table: np.ndarray, k: int) -> float:
    """Largest |M_k · PE(p) − PE(p + k)| over every p of ``table`` (interleaved, [L, d])."""
    table = np.asarray(table, dtype=np.float64)
    if k >= table.shape[0]:
        raise ValueError("k must be smaller than the number of positions")
    m = pe_shift_matrix(table.shape[1], k)
    return float(np.abs(table[: -k or None] @ m.T - table[k:]).max()) if k else 0.0


def mask_fill_weights(scaled_row, allowed_row) -> dict[str, float]:
    """One query's softmax with its forbidden keys filled by 0 and by -inf.

    Some notes say masked scores are set to 0; exp(0) = 1, so the forbidden keys would still
    take weight. Returns the weight the forbidden keys get either way (the -inf one is 0).
    """
    s = torch.as_tensor(scaled_row, dtype=torch.float64)
    ok = torch.as_tensor(allowed_row, dtype=torch.bool)
    zero = torch.softmax(s.masked_fill(~ok, 0.0), dim=-1)
    inf = torch.softmax(s.masked_fill(~ok, float("-inf")), dim=-1)
    return {
        "zero": float(zero[~ok].sum()),
        "inf": float(inf[~ok].sum()),
        "n_masked": int((~ok).sum()),
    }


def feed_forward_check(ffn: torch.nn.Module, x: torch.Tensor) -> dict:
    """The position-wise FFN applied to the whole sequence and to each position alone.

    ``x``: [L, D]. Returns the hidden activations [L, d_ff], the largest difference between
    FFN(X) and the rows FFN(x_i) one at a time (the same MLP at every position, no mixing),
    and how much an output row moves when another position's input is changed.
    """
    with torch.inference_mode():
        x = x.float().cpu()
        whole = ffn(x.unsqueeze(0))[0]  # [L, D]
        alone = torch.stack([ffn(x[i : i + 1].unsqueeze(0))[0, 0] for i in range(len(x))])
        hidden = ffn.activation(ffn.linear1(x))  # [L, d_ff]
        changed = x.clone()
        changed[-1] = changed[-1] + 1.0  # move the last position's input only
        moved = (ffn(changed.unsqueeze(0))[0, :-1] - whole[:-1]).abs().max() if len(x) > 1 else 0.0
    return {
        "hidden": hidden,
        "position_error": float((whole - alone).abs().max()),
        "others_moved": float(moved),
    }


# The page's names of model.layers.ACTIVATIONS' functions (geglu's is gelu_tanh's), and of
# the gated form each makes with a third matrix (Shazeer 2020).
_ACTIVATION_NAMES = {"relu": "ReLU", "gelu": "GELU", "gelu_tanh": "GELU", "swiglu": "SiLU"}
_GATED_NAMES = {"relu": "ReGLU", "gelu": "GeGLU", "gelu_tanh": "GeGLU", "swiglu": "SwiGLU"}


def _activation_key(fn, activations: dict) -> str:
    """The first config name whose function ``fn`` is."""
    return next(name for name, f in activations.items() if f is fn)


@torch.inference_mode()
def feed_forward_walk(lm, text: str, layer: int, recorded=None) -> dict:
    """What the FFN of ``layer`` (the first stack) read and made, checked position by position.
    ``recorded``: ``record_inputs(lm, text)`` done before (its pass is not run again).

    Returns tokens, d_model, d_ff, the activation's name, ``gated`` (the gated form's
    name, "SwiGLU" for LLaMA and SmolLM2, "GeGLU" for Gemma, else None: a third matrix V
    multiplies the activation element-wise), its parameter count, and
    ``feed_forward_check``'s hidden activations and differences.
    """
    from model.analysis.walkthrough import record_inputs, walkthrough_kind

    kind = walkthrough_kind(lm.kind)
    tokens, rec = recorded if recorded is not None else record_inputs(lm, text)
    seen = rec.inputs[f"{kind}_ffn"]
    if not 0 <= layer < len(seen):
        raise ValueError(f"layer {layer} out of range 0..{len(seen) - 1}")
    stack = lm.network.decoder if kind == "decoder" else lm.network.encoder
    ffn = stack.layers[layer].ffn
    check = feed_forward_check(ffn, seen[layer]["query"][0])
    return {
        "tokens": tokens,
        "d_model": ffn.linear1.in_features,
        "d_ff": ffn.linear1.out_features,
        "activation": _ACTIVATION_NAMES[_activation_key(ffn.activation, ACTIVATIONS)],
        "gated": _GATED_NAMES[_activation_key(ffn.activation, ACTIVATIONS)]
        if ffn.up is not None
        else None,
        "bias": ffn.linear1.bias is not None,
        "params": sum(p.numel() for p in ffn.parameters()),
        **check,
    }
