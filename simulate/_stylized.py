"""Stylized single-layer attention of paper [B] with a planted near target (claims AT12, AT19).

Re-exported by :mod:`posflow.simulate.transport`. One query at the last position i = L − 1 of a
length-L context attends over all j ≤ i. Only this query is needed, so route angles are suffix sums
to i and every quantity costs O(L·d); no d×d products.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from posflow.simulate.orthogonal import _check_int, _rng, rope_frequencies, rotate_blocks

__all__ = ["SCHEMES", "StylizedResult", "stylized_attention", "stylized_sweep"]

SCHEMES = ("rope", "random_qk", "random_qkv", "learned", "learned_qkv", "alibi", "accum_alibi")
_ROTATE_QK = {"rope", "random_qk", "random_qkv", "learned", "learned_qkv", "accum_alibi"}
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


def _unit_rows(g: np.ndarray) -> np.ndarray:
    return g / np.linalg.norm(g, axis=-1, keepdims=True)


def _suffix_route(theta: np.ndarray, shift: int) -> np.ndarray:
    """ψ_j = Σ_{s∈route(j→L−1)} θ_s for every j, shape (L, d/2); ψ_{L−1} = 0."""
    length = theta.shape[0]
    psi = np.zeros_like(theta)
    seg = theta[shift : length - 1 + shift]
    psi[: length - 1] = np.cumsum(seg[::-1], axis=0)[::-1]
    return psi


def _draw_inputs(rng, length, d, near_distance, kappa, kappa_v, f, vocab, embed_scale) -> dict:
    """All random inputs of one trial, drawn in a fixed order (common random numbers)."""
    j_star = length - 1 - near_distance
    q = _unit_rows(rng.standard_normal(d))
    g = _unit_rows(rng.standard_normal((length, d)))
    keys = _unit_rows(kappa * q + np.sqrt(1.0 - kappa**2) * g)
    keys[j_star] = q
    t0 = _unit_rows(rng.standard_normal(d))
    u = rng.standard_normal(d)
    u = _unit_rows(u - (u @ t0) * t0)
    h = _unit_rows(rng.standard_normal((length, d)))
    values = _unit_rows(kappa_v * u + np.sqrt(1.0 - kappa_v**2) * h)
    values[j_star] = t0
    return {
        "q": q,
        "keys": keys,
        "values": values,
        "theta_qk": rng.uniform(-f, f, size=(length, d // 2)),
        "theta_v": rng.uniform(-f, f, size=(length, d // 2)),
        "table": rng.normal(0.0, embed_scale, size=(vocab, d // 2)),
        "tokens": rng.integers(0, vocab, size=length),
    }


def _check_fraction(x: float, name: str) -> float:
    x = float(x)
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1]; got {x}")
    return x


def _check_nonneg(x: float, name: str) -> float:
    x = float(x)
    if not (np.isfinite(x) and x >= 0.0):
        raise ValueError(f"{name} must be finite and >= 0; got {x}")
    return x


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
    scheme, so one ``seed`` gives common random numbers across schemes. Cost O(n_trials·L·d);
    L = 65536, d = 96 takes well under a second per trial on one core.

    Returns a :class:`StylizedResult`.
    """
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}; got {scheme!r}")
    if route not in ("from_source", "path"):
        raise ValueError(f"route must be 'from_source' or 'path'; got {route!r}")
    length = _check_int(length, "length", 2)
    near_distance = _check_int(near_distance, "near_distance", 1)
    window = _check_int(window, "window", near_distance + 1)
    if near_distance >= length:
        raise ValueError(f"near_distance must be < length = {length}; got {near_distance}")
    n_trials = _check_int(n_trials, "n_trials", 1)
    vocab = _check_int(vocab, "vocab", 1)
    kappa = _check_fraction(key_coherence, "key_coherence")
    kappa_v = _check_fraction(value_coherence, "value_coherence")
    lam = _check_nonneg(logit_scale, "logit_scale")
    slope = _check_nonneg(alibi_slope, "alibi_slope")
    embed_scale = _check_nonneg(embed_scale, "embed_scale")
    f = rope_frequencies(d, base)
    rng = _rng(seed)
    shift = 0 if route == "from_source" else 1
    dist = np.arange(length - 1, -1, -1)  # i − j for j = 0 … L−1
    j_star = length - 1 - near_distance
    far = dist >= window
    res = {k: np.empty(n_trials) for k in ("far", "near", "coef", "err", "resid")}
    for trial in range(n_trials):
        x = _draw_inputs(rng, length, d, near_distance, kappa, kappa_v, f, vocab, embed_scale)
        keys, values = x["keys"], x["values"]
        if scheme == "rope":
            psi = -dist[:, None] * f[None, :]
        elif scheme.startswith("learned"):
            psi = _suffix_route(np.pi * np.tanh(x["table"][x["tokens"]]) - f, shift)
        elif scheme in _ROTATE_QK:
            psi = _suffix_route(x["theta_qk"], shift)
        if scheme in _ROTATE_QK:
            keys = rotate_blocks(keys, psi)
        scores = lam * (keys @ x["q"])
        if scheme in _ALIBI:
            scores = scores - slope * dist
        a = np.exp(scores - scores.max())
        a /= a.sum()
        if scheme in _ROTATE_V:
            values = rotate_blocks(
                values, psi if scheme == "learned_qkv" else _suffix_route(x["theta_v"], shift)
            )
        target = values[j_star]
        out = a @ values
        res["far"][trial] = a[far].sum()
        res["near"][trial] = a[j_star]
        res["coef"][trial] = out @ target
        res["err"][trial] = np.linalg.norm(out - target)
        res["resid"][trial] = np.linalg.norm(a[far] @ values[far])
    return StylizedResult(
        scheme, length, res["far"], res["near"], res["coef"], res["err"], res["resid"]
    )


def stylized_sweep(
    schemes=SCHEMES, lengths=(512, 2048, 8192, 65536), *, n_trials: int = 4, seed=None, **kwargs
) -> list[StylizedResult]:
    """Run :func:`stylized_attention` for every (length, scheme) pair (claim AT19).

    One integer seed is drawn per length from ``seed`` and shared by all schemes at that length
    (common random numbers). ``kwargs`` go to :func:`stylized_attention`. Returns the results in
    length-major order. Cost Σ_L n_trials·L·d per scheme.
    """
    rng = _rng(seed)
    out = []
    for length in lengths:
        s = int(rng.integers(2**63 - 1))
        for scheme in schemes:
            out.append(stylized_attention(scheme, length, n_trials=n_trials, seed=s, **kwargs))
    return out
