"""Stylized single-layer attention of paper [B] with a planted near target (claims AT12, AT19).

Re-exported by :mod:`posflow.simulate.transport`. One query at the last position i = L − 1 of a
length-L context attends over all j ≤ i. Only this query is needed, so route angles are suffix sums
to i and every quantity costs O(L·d); no d×d products. The same array-API code runs on every
backend (``backend=``, ``device=``; random inputs from
:func:`posflow.simulate.backend.random_source`, ``host=True`` for the NumPy numbers).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

from posflow.conventions import rope_frequencies
from posflow.simulate._arrays import check_int
from posflow.simulate._routes import check_route
from posflow.simulate.backend import RandomSource, random_source
from posflow.simulate.orthogonal import _rng, rotate_blocks

__all__ = ["SCHEMES", "StylizedResult", "stylized_attention", "stylized_sweep"]

SCHEMES = ("rope", "random_qk", "random_qkv", "learned", "learned_qkv", "alibi", "accum_alibi")
_RANDOM_QK = {"random_qk", "random_qkv", "accum_alibi"}
_ROTATE_V = {"random_qkv", "learned_qkv"}
_ALIBI = {"alibi", "accum_alibi"}


@dataclass(frozen=True, eq=False)
class StylizedResult:
    """Per-trial measurements of :func:`stylized_attention`, each an array of shape (n_trials,).

    far_mass      ρ_D = Σ_{i−j ≥ W} a_ij
    near_weight   a_{i,j*}, the attention on the planted key (≤ 1 − ρ_D)
    signal_coef   ⟨o, t⟩ / ‖t‖², the near-signal coefficient of the output
    output_error  ‖o − t‖ / ‖t‖
    far_residual  ‖Σ_{i−j ≥ W} a_ij P^V_{j→i} v_j‖ / ‖t‖
    """

    scheme: str
    length: int
    far_mass: np.ndarray
    near_weight: np.ndarray
    signal_coef: np.ndarray
    output_error: np.ndarray
    far_residual: np.ndarray

    def summary(self) -> dict[str, float]:
        """Mean and standard error (suffix ``_se``; 0 for one trial) of every measurement."""
        out: dict[str, float] = {}
        for name in ("far_mass", "near_weight", "signal_coef", "output_error", "far_residual"):
            x = getattr(self, name)
            out[name] = float(x.mean())
            out[name + "_se"] = float(x.std(ddof=1) / np.sqrt(x.size)) if x.size > 1 else 0.0
        return out


def _unit(xp, g):
    return g / xp.sqrt(xp.sum(g * g, axis=-1, keepdims=True))


def _suffix_route(xp, theta, shift: int):
    """ψ_j = Σ_{s∈route(j→L−1)} θ_s for every j, shape (L, d/2); ψ_{L−1} = 0."""
    length = theta.shape[0]
    seg = xp.flip(theta[shift : length - 1 + shift, ...], axis=0)
    psi = xp.flip(xp.cumulative_sum(seg, axis=0), axis=0)
    return xp.concat([psi, xp.zeros_like(theta[:1, ...])], axis=0)


def _draw_inputs(src, length, d, near_distance, kappa, kappa_v, f, vocab, embed_scale) -> dict:
    """All random inputs of one trial, drawn in a fixed order (common random numbers).

    ``src`` is a :class:`posflow.simulate.backend.RandomSource` or a seed / NumPy Generator (NumPy
    arrays then). Keys: q (d,), keys and values (L, d), theta_qk and theta_v (L, d/2), table
    (vocab, d/2), tokens (L,).
    """
    src = src if isinstance(src, RandomSource) else random_source(src)
    xp = src.xp
    j_star = length - 1 - near_distance
    q = _unit(xp, src.standard_normal(d))
    g = _unit(xp, src.standard_normal((length, d)))
    keys = _unit(xp, kappa * q + math.sqrt(1.0 - kappa**2) * g)
    keys[j_star, ...] = q
    t0 = _unit(xp, src.standard_normal(d))
    u = src.standard_normal(d)
    u = _unit(xp, u - xp.sum(u * t0) * t0)
    h = _unit(xp, src.standard_normal((length, d)))
    values = _unit(xp, kappa_v * u + math.sqrt(1.0 - kappa_v**2) * h)
    values[j_star, ...] = t0
    return {
        "q": q,
        "keys": keys,
        "values": values,
        "theta_qk": src.uniform(-f, f, (length, d // 2)),
        "theta_v": src.uniform(-f, f, (length, d // 2)),
        "table": src.normal(0.0, embed_scale, (vocab, d // 2)),
        "tokens": src.integers(0, vocab, (length,)),
    }


def _check_real(x, name: str, hi: float) -> float:
    if not (isinstance(x, numbers.Real) and math.isfinite(x) and 0.0 <= x <= hi):
        rule = "lie in [0, 1]" if hi == 1.0 else "be finite and >= 0"
        raise ValueError(f"{name} must {rule}; got {x!r}")
    return float(x)


def stylized_attention(
    scheme: str,
    length: int,
    *,
    d: int = 96,
    base: float = 10_000.0,
    near_distance: int = 4,
    window: int = 64,
    logit_scale: float = 8.0,
    key_coherence: float = 0.0,
    value_coherence: float = 1.0,
    alibi_slope: float = 2.0**-4,
    vocab: int = 1024,
    embed_scale: float = 0.1,
    route: str = "from_source",
    n_trials: int = 1,
    seed=None,
    backend: str = "numpy",
    device=None,
    host: bool = False,
) -> StylizedResult:
    """Single-layer attention with a planted near target, [B]'s stylized model (AT12, AT19).

    Setting (defaults after the colon): head width d: 96 (d_h of [B]), frequencies
    f_b = base^(−2b/d), base: 10^4, half-split blocks. The query sits at i = L − 1 with a unit
    direction q̂; the planted key at j* = i − ``near_distance`` (4) equals q̂; every other key is
    k̂_j ∝ κ q̂ + √(1 − κ²) ĝ_j with κ = ``key_coherence`` (0) and ĝ_j uniform on the sphere.
    Scores s_j = λ q̂ᵀ P_{j→i} k̂_j − [ALiBi] m (i − j), λ = ``logit_scale`` (8, so |s_j| ≤ λ
    before the bias), m = ``alibi_slope`` (2^-4), softmax over j ≤ i.
    Values: the planted value is a unit vector t₀; the others are
    v_j ∝ κ_v u + √(1 − κ_v²) ĥ_j with a common unit direction u ⊥ t₀, κ_v = ``value_coherence``
    (1: identical far values, the coherent worst case). Output o = Σ_j a_j P^V_{j→i} v_j and the
    target t = P^V_{j*→i} t₀ (the planted value after its own near-route transport; t = t₀ when
    values are not rotated). Near set: i − j < W = ``window`` (64).

    Schemes (angles θ[s, b] per position s and block b; routes per ``route``):
    ``"rope"`` standard RoPE, q_i rotated by i·f_b and k_j by j·f_b, i.e. the deterministic
    step angle θ = −f_b (route angle −(i − j) f_b); ``"random_qk"`` θ ~ Unif[−f_b, f_b]
    i.i.d. on Q/K; ``"random_qkv"`` plus independent angles of the same law on values; ``"learned"``
    θ = π tanh(E[x_s, b]) − f_b with a fixed random table E ~ N(0, ``embed_scale``²) of ``vocab``
    (1024) rows and tokens x_s uniform, on Q/K; ``"learned_qkv"`` the same angles also on values;
    ``"alibi"`` no rotation, bias −m (i − j); ``"accum_alibi"`` random Q/K angles plus the bias.

    The draws (q̂, keys, values, random angles, table, tokens) come in the same order for every
    scheme, so one ``seed`` gives common random numbers across schemes. They come from
    :func:`posflow.simulate.backend.random_source` (``seed``, ``backend``, ``device``, ``host``):
    on NumPy, or with ``host=True``, the numbers of ``numpy.random.default_rng(seed)``, so every
    backend reproduces the NumPy results to rounding. Cost O(n_trials·L·d) on the device;
    L = 65536, d = 96 takes well under a second per trial on one core.

    Returns a :class:`StylizedResult` (per-trial NumPy arrays).
    """
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}; got {scheme!r}")
    shift = check_route(route)
    length = check_int(length, "length", 2)
    near_distance = check_int(near_distance, "near_distance", 1)
    window = check_int(window, "window", near_distance + 1)
    if near_distance >= length:
        raise ValueError(f"near_distance must be < length = {length}; got {near_distance}")
    n_trials = check_int(n_trials, "n_trials", 1)
    vocab = check_int(vocab, "vocab", 1)
    kappa = _check_real(key_coherence, "key_coherence", 1.0)
    kappa_v = _check_real(value_coherence, "value_coherence", 1.0)
    lam = _check_real(logit_scale, "logit_scale", math.inf)
    slope = _check_real(alibi_slope, "alibi_slope", math.inf)
    embed_scale = _check_real(embed_scale, "embed_scale", math.inf)
    f = rope_frequencies(d, base)
    src = random_source(seed, backend, device, host=host)
    xp, dev = src.xp, src.device
    fx = xp.asarray(f, dtype=xp.float64, device=dev)
    dist = xp.arange(length - 1, -1, -1, dtype=xp.float64, device=dev)  # i − j, j = 0 … L−1
    far = dist >= window
    j_star = length - 1 - near_distance
    res = {k: np.empty(n_trials) for k in ("far", "near", "coef", "err", "resid")}
    for trial in range(n_trials):
        x = _draw_inputs(src, length, d, near_distance, kappa, kappa_v, f, vocab, embed_scale)
        keys, values, psi = x["keys"], x["values"], None
        if scheme == "rope":
            psi = -dist[:, None] * fx[None, :]
        elif scheme.startswith("learned"):
            ang = math.pi * xp.tanh(xp.take(x["table"], x["tokens"], axis=0)) - fx
            psi = _suffix_route(xp, ang, shift)
        elif scheme in _RANDOM_QK:
            psi = _suffix_route(xp, x["theta_qk"], shift)
        if psi is not None:
            keys = rotate_blocks(keys, psi)
        scores = lam * (keys @ x["q"])
        if scheme in _ALIBI:
            scores = scores - slope * dist
        a = xp.exp(scores - xp.max(scores))
        a = a / xp.sum(a)
        if scheme in _ROTATE_V:
            pv = psi if scheme == "learned_qkv" else _suffix_route(xp, x["theta_v"], shift)
            values = rotate_blocks(values, pv)
        target = values[j_star, ...]
        out = a @ values
        far_out = xp.where(far, a, 0.0) @ values
        res["far"][trial] = float(xp.sum(xp.where(far, a, 0.0)))
        res["near"][trial] = float(a[j_star])
        res["coef"][trial] = float(xp.sum(out * target))
        res["err"][trial] = float(xp.sqrt(xp.sum((out - target) ** 2)))
        res["resid"][trial] = float(xp.sqrt(xp.sum(far_out * far_out)))
    return StylizedResult(
        scheme, length, res["far"], res["near"], res["coef"], res["err"], res["resid"]
    )


def stylized_sweep(
    schemes=SCHEMES, lengths=(512, 2048, 8192, 65536), *, n_trials: int = 4, seed=None, **kwargs
) -> list[StylizedResult]:
    """Run :func:`stylized_attention` for every (length, scheme) pair (claim AT19).

    One integer seed is drawn per length from ``seed`` and shared by all schemes at that length
    (common random numbers). ``kwargs`` go to :func:`stylized_attention`. Returns the results in
    length-major order (``backend=``, ``device=``, ``host=`` among them choose where it runs).
    Cost Σ_L n_trials·L·d per scheme.
    """
    rng = _rng(seed)
    out = []
    for length in lengths:
        s = int(rng.integers(2**63 - 1))
        for scheme in schemes:
            out.append(stylized_attention(scheme, length, n_trials=n_trials, seed=s, **kwargs))
    return out
