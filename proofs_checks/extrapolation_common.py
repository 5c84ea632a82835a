"""Helpers shared by the claim checks of [B] (AT1–AT19): tolerances, colours, the stylized sweep.

* :func:`z_limit` — the standard-error multiple used for a family of Monte Carlo comparisons;
* :func:`mean_se`, :func:`loglog_slope` — sample means with standard errors, log-log fits;
* :data:`SCHEME_COLORS` — one colour-blind-safe colour per attention scheme, used by every
  figure of :mod:`posflow.proofs_checks.extrapolation`;
* :func:`stylized_table` — the stylized single-layer sweep of claims AT12, AT13 and AT19, run
  once per (size, seed) and shared by the three checks.
"""

from __future__ import annotations

import functools

import numpy as np
from scipy.stats import norm

from posflow.proofs_checks.registry import Context
from posflow.simulate.transport import stylized_attention

__all__ = [
    "FAMILY_Z",
    "SCHEME_COLORS",
    "SCHEME_LABELS",
    "STYLIZED_QUICK",
    "claim_rng",
    "loglog_slope",
    "mean_se",
    "phase_paths",
    "plain",
    "stylized_lengths",
    "stylized_table",
    "z_limit",
]

FAMILY_Z = 4.0
"""A Monte Carlo estimate agrees with its exact value when within this many standard errors."""

# Okabe–Ito colours; the same scheme has the same colour in every figure of [B]'s claims.
SCHEME_COLORS = {
    "rope": "#D55E00",
    "random_qk": "#0072B2",
    "random_qkv": "#009E73",
    "learned": "#E69F00",
    "learned_qkv": "#56B4E9",
    "alibi": "#CC79A7",
    "accum_alibi": "#000000",
}
SCHEME_LABELS = {
    "rope": "RoPE",
    "random_qk": "random Q/K",
    "random_qkv": "random Q/K/V",
    "learned": "learned Q/K",
    "learned_qkv": "learned Q/K/V",
    "alibi": "ALiBi",
    "accum_alibi": "random Q/K + ALiBi",
}

STYLIZED_QUICK = ("rope", "random_qk", "random_qkv", "learned", "alibi")
_QUICK_TRIALS = {512: 8, 2048: 8, 8192: 4, 65536: 2}
_FULL_LENGTHS = tuple(512 * 2**k for k in range(8))  # 512 … 65536
_FULL_TRIALS = 16


def claim_rng(ctx: Context, claim: int) -> np.random.Generator:
    """The random stream of claim AT<claim> under ``ctx.seed`` (independent streams per claim)."""
    return np.random.default_rng([abs(int(ctx.seed)), 1000 + int(claim)])


def z_limit(n_comparisons: int, z: float = FAMILY_Z) -> float:
    """Standard-error multiple for ``n`` Monte Carlo comparisons made together.

    .. math:: z_n = \\Phi^{-1}\\Big(1 - \\frac{2\\,(1 - \\Phi(z))}{2 n}\\Big)

    (Bonferroni): the chance that any of n correct estimates strays beyond z_n standard errors
    equals the chance that one strays beyond z = 4, about 6e-5. z_1 = 4, z_100 ≈ 5.0.
    """
    n = int(n_comparisons)
    if n < 1:
        raise ValueError(f"n_comparisons must be >= 1; got {n_comparisons}")
    return float(z) if n == 1 else float(max(z, norm.isf(norm.sf(z) / n)))


def mean_se(x, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Sample mean and its standard error s/√N along ``axis`` (N ≥ 2)."""
    x = np.asarray(x, dtype=float)
    n = x.shape[axis]
    if n < 2:
        raise ValueError(f"x must have at least 2 samples along axis {axis}; got {n}")
    return x.mean(axis=axis), x.std(axis=axis, ddof=1) / np.sqrt(n)


def loglog_slope(x, y) -> tuple[float, float, float]:
    """Least-squares fit ln y = p ln x + b: returns (p, b, standard error of p)."""
    lx, ly = np.log(np.asarray(x, dtype=float)), np.log(np.asarray(y, dtype=float))
    if lx.size < 3:
        raise ValueError(f"need at least 3 points for a slope with an error; got {lx.size}")
    (p, b), res, *_ = np.polyfit(lx, ly, 1, full=True)
    s2 = float(res[0]) / (lx.size - 2) if res.size else 0.0
    se = np.sqrt(s2 / np.sum((lx - lx.mean()) ** 2))
    return float(p), float(b), float(se)


def phase_paths(law, n_routes: int, checkpoints, rng) -> dict[int, np.ndarray]:
    """Cumulative route angles Σ_{l≤L} θ_l of ``n_routes`` routes at every L in ``checkpoints``.

    ``law`` is a :class:`posflow.simulate.orthogonal.SO2BlockLaw`; one draw of ``law.sample_angles``
    per step. Returns ``{L: array of shape (n_routes, d/2)}`` (claims AT1, AT17). Cost
    O(max L · n_routes · d).
    """
    marks = sorted({int(c) for c in checkpoints})
    if not marks or marks[0] < 1:
        raise ValueError(f"checkpoints must be integers >= 1; got {checkpoints!r}")
    s = np.zeros((n_routes, law.d // 2))
    out = {}
    for step in range(1, marks[-1] + 1):
        s += law.sample_angles(n_routes, seed=rng)
        if step in marks:
            out[step] = s.copy()
    return out


def plain(x):
    """Round-trip numpy scalars and arrays to Python floats, ints, bools and lists."""
    if isinstance(x, dict):
        return {str(k): plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [plain(v) for v in x]
    if isinstance(x, np.ndarray):
        return plain(x.tolist())
    if isinstance(x, bool | np.bool_):
        return bool(x)
    if isinstance(x, int | np.integer):
        return int(x)
    if isinstance(x, float | np.floating):
        return float(x)
    return x


def stylized_lengths(ctx: Context) -> dict[int, int]:
    """Context lengths L of the stylized sweep and the number of trials at each."""
    if ctx.full:
        return dict.fromkeys(_FULL_LENGTHS, _FULL_TRIALS)
    return dict(_QUICK_TRIALS)


@functools.lru_cache(maxsize=4)
def _table(full: bool, seed: int) -> dict:
    ctx = Context(size="full" if full else "quick", seed=seed)
    schemes = (
        ("rope", "random_qk", "random_qkv", "learned", "learned_qkv", "alibi", "accum_alibi")
        if full
        else STYLIZED_QUICK
    )
    rng = claim_rng(ctx, 19)
    table: dict = {}
    for length, trials in stylized_lengths(ctx).items():
        s = int(rng.integers(2**63 - 1))  # one seed per length: common random numbers
        for scheme in schemes:
            table[scheme, length] = stylized_attention(scheme, length, n_trials=trials, seed=s)
    return table


def stylized_table(ctx: Context) -> dict:
    """The stylized single-layer sweep of [B] (claims AT12, AT13, AT19), cached per size and seed.

    ``{(scheme, L): StylizedResult}`` from :func:`posflow.simulate.transport.stylized_attention`
    with its default parameters (d = 96, base 10⁴, planted key at distance 4, near window W = 64,
    logit scale 8, ALiBi slope 2⁻⁴, identical far values). Quick: schemes RoPE, random Q/K,
    random Q/K/V, learned Q/K and ALiBi at L = 512, 2048, 8192, 65536 with 8, 8, 4, 2 trials;
    full: all seven schemes at L = 512·2^k up to 65536 with 16 trials each. All schemes at one
    L share one seed (common random numbers). Cost O(Σ trials·L·d) per scheme, ≈ 8 s quick.
    """
    return _table(bool(ctx.full), int(ctx.seed))
