"""The planted-target sweep of [B]'s stylized single-layer model and its logit-level references
(claims AT12, AT13 and AT19).

:func:`planted_sweep` runs :func:`posflow.simulate._stylized.stylized_attention` at its default
parameters (d = 96, base 10⁴, λ = 8, planted key at distance 4, near window W = 64, ALiBi slope
2⁻⁴, identical far values), cached per (scheme, L, trials, seed), one seed per L shared by every
scheme (common random numbers).

The references draw the logits directly from their laws: no keys, no rotations of vectors and no
softmax over positions, so they share no code with the simulator. The stylized defaults they use
are restated here (:data:`PLANTED`), not read from the simulator, so a change to the simulator
does not move them.

* :func:`near_mass_reference`: the near mass 1 − ρ_D and the planted weight predicted by
  K e^Δ / (K e^Δ + M E e^s), with E e^s = :func:`far_sum_mgf` in closed form (a Bessel function);
* :func:`alibi_far_mass_reference`: the L-free far mass of the stylized ALiBi row;
* :func:`value_ratio_reference`: the mean squared far-residual ratio Q/K/V ÷ Q/K, from the
  per-block coherence sums of :func:`coherence_per_block`;
* :func:`crossing_length`: where an error curve first exceeds a level τ (log-L interpolation).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln, ive

from posflow.simulate._stylized import stylized_attention

__all__ = [
    "PLANTED",
    "PlantedSetup",
    "alibi_far_mass_reference",
    "coherence_per_block",
    "crossing_length",
    "far_logit_cv2",
    "far_sum_mgf",
    "near_mass_reference",
    "planted_lengths",
    "planted_sweep",
    "value_ratio_reference",
]

# the stylized defaults of stylized_attention (restated, not imported: the references below must
# not move when the simulator changes)
_D, _BASE, _LAM, _W, _NEAR, _SLOPE, _VOCAB, _EMBED = 96, 10_000.0, 8.0, 64, 4, 2.0**-4, 1024, 0.1
_N_REF = 4000  # logit-level reference draws per (scheme, L)
_QUICK = {512: 32, 2048: 8, 8192: 4}
_FULL = {512: 64, 2048: 32, 8192: 16, 32768: 8, 65536: 8}


@dataclass(frozen=True)
class PlantedSetup:
    """The stylized model's default parameters, as the references restate them.

    d (head width), base (frequencies f_b = base^(−2b/d)), logit_scale λ, window W (near set
    i − j < W), near_distance (of the planted key), alibi_slope m, vocab and embed_scale (the
    learned angle table), reference_draws (logit-level draws per reference).
    """

    d: int = _D
    base: float = _BASE
    logit_scale: float = _LAM
    window: int = _W
    near_distance: int = _NEAR
    alibi_slope: float = _SLOPE
    vocab: int = _VOCAB
    embed_scale: float = _EMBED
    reference_draws: int = _N_REF


PLANTED = PlantedSetup()
"""The defaults of :func:`stylized_attention` used by :func:`planted_sweep` and the references."""


def planted_lengths(full: bool = False) -> dict[int, int]:
    """``{L: trials}`` of the planted sweep: quick 512, 2048, 8192 with 32, 8, 4 trials; full
    512 … 65536 (five lengths) with 64, 32, 16, 8, 8."""
    return dict(_FULL if full else _QUICK)


@functools.lru_cache(maxsize=64)
def _run(scheme: str, length: int, trials: int, seed: int):
    return stylized_attention(scheme, length, n_trials=trials, seed=seed)


def _seed(seed: int, length: int) -> int:
    return int(np.random.default_rng([abs(int(seed)), 1019, length]).integers(2**63 - 1))


def planted_sweep(scheme: str, seed: int = 0, full: bool = False, only=None) -> dict:
    """The stylized model under ``scheme`` at the lengths of :func:`planted_lengths`.

    Parameters
    ----------
    scheme : str
        One of :data:`posflow.simulate.transport.SCHEMES`.
    seed : int
        The claims' seed; the seed of length L is drawn from the stream ``[seed, 1019, L]`` and
        shared by every scheme (common random numbers).
    full : bool
        The full lengths instead of the quick ones.
    only : collection of int, optional
        Keep only these lengths.

    Returns
    -------
    dict
        ``{L: StylizedResult}`` (per-trial arrays of shape (trials,)), in increasing L. Results
        are cached per (scheme, L, trials, seed) and shared between callers: do not modify them.
        Cost O(trials·L·d) per length.
    """
    return {
        L: _run(scheme, L, n, _seed(seed, L))
        for L, n in planted_lengths(full).items()
        if only is None or L in only
    }


def _freqs() -> np.ndarray:
    """f_b = base^(−2b/d), b = 0 … d/2 − 1 (restated for the references)."""
    return _BASE ** (-2.0 * np.arange(_D // 2) / _D)


def far_sum_mgf(lam: float, d: int = _D) -> float:
    """E e^{λu} for u a coordinate of a uniform point of S^{d−1} (the law of every far logit/λ
    when the keys are isotropic, whatever the rotation): Γ(d/2) (2/λ)^{d/2−1} I_{d/2−1}(λ).

    ``lam`` > 0 and ``d`` ≥ 2 scalars; returns a float.
    """
    nu = d / 2 - 1
    return float(np.exp(gammaln(d / 2) + nu * np.log(2 / lam) + np.log(ive(nu, lam)) + lam))


def far_logit_cv2(lam: float = _LAM) -> float:
    """Squared coefficient of variation of e^{λu} (u as in :func:`far_sum_mgf`, d = 96):
    E e^{2λu}/(E e^{λu})² − 1."""
    return far_sum_mgf(2 * lam) / far_sum_mgf(lam) ** 2 - 1


def _sphere_coordinate(rng, shape):
    return 2.0 * rng.beta((_D - 1) / 2, (_D - 1) / 2, size=shape) - 1.0


def _planted_angles(scheme: str, rng, n: int) -> np.ndarray:
    """Route angles ψ_b of the planted key (distance NEAR) under ``scheme``, shape (n, d/2)."""
    f = _freqs()
    if scheme == "rope":
        return np.broadcast_to(_NEAR * f, (n, f.size))
    if scheme in ("random_qk", "random_qkv"):
        return rng.uniform(-f, f, (n, _NEAR, f.size)).sum(axis=1)
    if scheme in ("learned", "learned_qkv"):
        tokens = rng.integers(0, _VOCAB, (n, _NEAR))
        z = rng.normal(0.0, _EMBED, (n, _NEAR, f.size))
        for a in range(1, _NEAR):  # a repeated token reuses its table row
            for b in range(a):
                same = tokens[:, a] == tokens[:, b]
                z[same, a] = z[same, b]
        return (np.pi * np.tanh(z) - f).sum(axis=1)
    raise ValueError(f"no planted-angle law for scheme {scheme!r}")


@functools.lru_cache(maxsize=16)
def _near_draws(scheme: str, seed: int):
    """Logit-level draws of the planted logit and of the other near logits' sum (AT12)."""
    rng = np.random.default_rng([seed, 12, sum(map(ord, scheme))])
    w = rng.dirichlet(np.ones(_D // 2), _N_REF)  # block energies of a uniform unit query
    planted = _LAM * np.sum(w * np.cos(_planted_angles(scheme, rng, _N_REF)), axis=1)
    others = np.exp(_LAM * _sphere_coordinate(rng, (_N_REF, _W - 1))).sum(axis=1)
    return np.exp(planted), others


def near_mass_reference(scheme: str, length: int, seed: int = 0) -> dict:
    """Prediction of the mean near mass 1 − ρ_D and planted weight a_{j*} (claim AT12).

    1 − ρ_D ≈ K e^Δ/(K e^Δ + M E e^s), K e^Δ = e^{s*} + Σ_{other near} e^{s_k} drawn at the
    logit level (s* = λ Σ_b ‖q_b‖² cos ψ_b, ‖q_b‖² ~ Dirichlet(1, …, 1), ψ_b the scheme's route
    angle over NEAR steps; s_k = λu), M = L − W, E e^s = :func:`far_sum_mgf`. ``scheme`` is one
    of the rotation schemes (rope, random_qk, random_qkv, learned, learned_qkv); ``length`` > W.
    Returns a dict of floats: the means ``near_mass`` and ``planted``, their standard errors
    (suffix ``_se``) over the ``n`` = 4000 draws (drawn once per (scheme, seed) and cached) and
    ``bias`` = CV²/M, the relative second-order delta-method error of replacing the far sum by
    its mean.
    """
    ep, others = _near_draws(scheme, seed)
    far = (length - _W) * far_sum_mgf(_LAM)
    near, planted = (ep + others) / (ep + others + far), ep / (ep + others + far)
    n = near.size
    return {
        "near_mass": float(near.mean()),
        "near_mass_se": float(near.std(ddof=1) / math.sqrt(n)),
        "planted": float(planted.mean()),
        "planted_se": float(planted.std(ddof=1) / math.sqrt(n)),
        "bias": far_logit_cv2() / (length - _W),
        "n": n,
    }


@functools.lru_cache(maxsize=16)
def coherence_per_block(M: int) -> np.ndarray:
    """S_b(M)/M² = Σ_{j,k} c_b^{|n_j − n_k|}/M² over M consecutive far distances, c_b = sin f_b/f_b.

    The squared far residual of uniform weights and a unit value with all its energy in block b,
    relative to the coherent one, by direct summation over the M − 1 lags. ``M`` ≥ 1; returns
    shape (d/2,) = (48,), cached per M (do not modify).
    """
    f = _freqs()
    c = np.sin(f) / f
    k = np.arange(1, M, dtype=float)
    pw = np.exp(k[:, None] * np.log(c)[None, :])
    return (M + 2.0 * ((M - k)[:, None] * pw).sum(axis=0)) / M**2


def value_ratio_reference(length: int, energy=None) -> float:
    """Predicted mean of (far residual Q/K/V ÷ Q/K)² at context ``length`` (claim AT19).

    Σ_b w_b S_b(M)/M² + CV²/M with M = L − W far tokens, w_b the value's block energies
    (``energy``, shape (d/2,); default uniform 2/d, the mean for a random unit value) and the CV²
    term (:func:`far_logit_cv2`) from the spread of the far weights e^{s_j}/Σ e^{s}.
    """
    M = length - _W
    w = np.full(_D // 2, 2.0 / _D) if energy is None else np.asarray(energy, dtype=float)
    return float(np.sum(w * coherence_per_block(M)) + far_logit_cv2() / M)


@functools.lru_cache(maxsize=4)
def alibi_far_mass_reference(seed: int = 0) -> tuple[float, float, int]:
    """Mean far mass of the stylized ALiBi row and its SE, drawn at the logit level (AT13).

    Planted logit λ − 4m (the key equals the query, no rotation); every other logit λu − mn with
    u the sphere law; distances n < n_cut = W + ⌈48/m⌉, beyond which e^{λ − mn} sums to under
    e^{−40} of the near sum: the reference is the same for every L ≥ n_cut (and for L = ∞).
    Returns (mean, SE over the 4000 draws, n_cut); cached per seed.
    """
    rng = np.random.default_rng([seed, 13])
    n_cut = _W + math.ceil(48 / _SLOPE)
    z = _LAM * _sphere_coordinate(rng, (_N_REF, n_cut)) - _SLOPE * np.arange(n_cut)
    z[:, _NEAR] = _LAM - _SLOPE * _NEAR
    e = np.exp(z - _LAM)
    far = e[:, _W:].sum(axis=1) / e.sum(axis=1)
    return float(far.mean()), float(far.std(ddof=1) / math.sqrt(far.size)), n_cut


def crossing_length(lengths, err, tau: float):
    """L at which the (log-L interpolated) error curve first exceeds τ (claim AT19).

    ``lengths`` and ``err`` of shape (n,), increasing lengths. Returns (L_τ, bracket): the
    bracketing pair of grid indices (k − 1, k); (nan, None) when the curve stays below τ,
    (L_0, (0, 0)) when it starts above.
    """
    err = np.asarray(err)
    above = np.nonzero(err > tau)[0]
    if above.size == 0:
        return math.nan, None
    k = int(above[0])
    if k == 0:
        return float(lengths[0]), (0, 0)
    x0, x1 = math.log(lengths[k - 1]), math.log(lengths[k])
    t = (tau - err[k - 1]) / (err[k] - err[k - 1])
    return float(math.exp(x0 + t * (x1 - x0))), (k - 1, k)
