"""Independent references, judges and negative controls of claim AT12 (registered in
:mod:`posflow.proofs_checks.claims.at12_far_mass`).

* the worst-case near mass K e^{2λ}/(M + K e^{2λ}) written directly;
* E e^{λu} of a sphere coordinate by numerical quadrature of its density (1 − u²)^{(d−3)/2};
* a softmax over j ≤ i and near/far sums over i − j < W by explicit loops;
* the L-free odds M (1 − ρ_D)/ρ_D of a trial, whose mean the prediction fixes at every length;
* the judges (statistical, worst-trial bound, fall z-score, worst-entry rounding) and their
  negative controls.
"""

from __future__ import annotations

import math

import numpy as np
import sympy as sp
from scipy.integrate import quad

from posflow.proofs_checks.kit import (
    at_least,
    at_most,
    biased,
    close,
    fp_tol,
    holds,
    info,
    mean_se,
    rejects,
    stat_tol,
)
from posflow.simulate import transport as sim
from posflow.simulate.transport import PLANTED, far_sum_mgf, near_mass_reference
from posflow.theory import transport as th

D, LAM, W = PLANTED.d, PLANTED.logit_scale, PLANTED.window
L_LIMIT = 2**40  # the reference's M (1 − ρ_D)/ρ_D at this L is its L → ∞ limit to ~1e-7
_FP_ROW = "a softmax of ≤ 300 terms with |logits| ≤ 8 (max subtracted): ≤ 300·ε·(a few) ≈ 1e-13"
_BOUND_POINTS = ((448, 64, 8.0), (8128, 64, 8.0), (1e6, 4, 3.0), (10, 1, 0.5), (1e9, 64, 8.0))


def bound_closed(M, K, lam) -> np.ndarray:
    """K e^{2λ}/(M + K e^{2λ}), written directly."""
    a = np.asarray(K, float) * np.exp(2 * np.asarray(lam, float))
    return a / (np.asarray(M, float) + a)


def mgf_quadrature(lam: float, d: int = D) -> float:
    """E e^{λu}, u a coordinate of a uniform point of S^{d−1}: ∫ e^{λu} w(u) du / ∫ w(u) du with
    w(u) = (1 − u²)^{(d−3)/2}, by adaptive quadrature (no Bessel function)."""
    w = (d - 3) / 2
    num = quad(lambda u: math.exp(lam * u) * (1 - u * u) ** w, -1, 1, epsabs=0, epsrel=1e-13)[0]
    den = quad(lambda u: (1 - u * u) ** w, -1, 1, epsabs=0, epsrel=1e-13)[0]
    return num / den


def fp_judge(key, got, ref, tol: float, reason: str, label: str):
    """The judge of a deterministic routine: max |got − reference| ≤ a rounding bound."""
    err = float(np.max(np.abs(np.asarray(got, float) - np.asarray(ref, float))))
    return at_most(key, err, 0.0, fp_tol(tol, reason), label=label)


def rel_judge(key, got, ref, tol: float, reason: str, label: str):
    """The judge of a closed form at points: max |got/reference − 1| ≤ a rounding bound."""
    err = float(np.max(np.abs(np.asarray(got, float) / np.asarray(ref, float) - 1)))
    return at_most(key, err, 0.0, fp_tol(tol, reason), label=label)


def stat_judge(key, sample, ref: float, ref_se: float, bias: float, zlim: float, why: str,
               label: str):  # fmt: skip
    """The statistical judge: |mean − reference| ≤ t √(SE² + SE_ref²) + bias·reference, where t
    is Student's quantile with N − 1 degrees of freedom at the tail probability of z_n (the SE is
    estimated from N trials: with N = 8 the normal quantile would understate it badly)."""
    from scipy.stats import norm, t

    m, se = mean_se(sample)
    sd = math.hypot(se, ref_se)
    n = int(np.size(sample))
    q = float(t.isf(norm.sf(zlim), n - 1))
    tol = stat_tol(q * sd + bias * abs(ref), f"{n} trials (SE {se:.2g}), reference SE "
                   f"{ref_se:.2g}: Student t = {q:.2f} ({n - 1} d.f., the tail of z = {zlim:.2f}) "
                   f"× {sd:.2g} ({why}) + the delta-method error CV²/M = {bias:.2g} of the "
                   "prediction")  # fmt: skip
    return close(key, float(m), ref, tol, label=label)


def cap_judge(key, near, cap):
    """The worst-case judge: max over trials of near mass − K e^{2λ}/(M + K e^{2λ}) ≤ rounding."""
    return at_most(key, float(np.max(np.asarray(near) - np.asarray(cap))), 0.0,
                   fp_tol(1e-12, "a softmax of L ≤ 65536 terms: L·ε ≈ 1.5e-11 relative on sums "
                          "≤ 1, and the near mass is ≤ 0.5 at the swept lengths"),
                   label="max over trials of 1 − ρ_D − K e^{2λ}/(M + K e^{2λ}) (AT10, K = W)")


def fall_z(first, last) -> float:
    """z-score of the fall of the mean from the first to the last length."""
    (m0, s0), (m1, s1) = mean_se(first), mean_se(last)
    return float((m0 - m1) / math.hypot(s0, s1))


def fall_judge(key, first, last, zlim: float, label: str):
    """The fall judge: the z-score of the fall of 1 − ρ_D at least z_n (no slack)."""
    return at_least(key, fall_z(first, last), zlim, label=label)


def odds(r, length: int, q: str) -> np.ndarray:
    """The L-free odds of one trial: M·(1 − ρ_D)/ρ_D (q = near_mass) or M·a_{j*}/ρ_D (planted),
    M = L − W; under the prediction its mean is E[K e^Δ]/E e^s (resp. E e^{s*}/E e^s) at every L."""
    y = 1 - r.far_mass if q == "near_mass" else r.near_weight
    return (length - W) * y / r.far_mass


def odds_reference(s: str, q: str, seed: int) -> tuple[float, float]:
    """(mean, SE) of the prediction's L-free odds: M × near_mass_reference at L = 2^40."""
    ref = near_mass_reference(s, L_LIMIT, seed)
    return ref[q] * (L_LIMIT - W), ref[q + "_se"] * (L_LIMIT - W)


def routine_rows(rng):
    """attention_weights and near_far_mass on random logit rows (λ = 8, W = 64) against a softmax
    over j ≤ i and near/far sums written as loops; the worst-case bound against its closed form
    and far_sum_mgf against quadrature; sympy's limit recomputed; their negative controls."""
    n_q, n = 6, 300
    scores = rng.uniform(-LAM, LAM, (n_q, n))
    q_pos = np.arange(n - 3 * n_q, n, 3)  # queries at spread positions: the mask matters
    a = sim.attention_weights(scores, q_pos)
    near, far = sim.near_far_mass(a, W, q_pos)
    soft, soft_all = np.zeros_like(scores), np.zeros_like(scores)
    ref_near, ref_far, wide = np.zeros(n_q), np.zeros(n_q), np.zeros(n_q)
    for r, i in enumerate(q_pos):
        e = np.array([math.exp(scores[r, j]) for j in range(i + 1)])
        soft[r, : i + 1] = e / e.sum()
        soft_all[r] = np.exp(scores[r]) / np.exp(scores[r]).sum()
        for j in range(i + 1):
            (ref_near if i - j < W else ref_far)[r] += soft[r, j]
            wide[r] += soft[r, j] if i - j <= W else 0.0
    pts = np.array(_BOUND_POINTS).T
    bound = th.near_signal_upper_bound(*pts)
    mgf = far_sum_mgf(LAM)
    M_, K_, lam_ = sp.symbols("M K lambda", positive=True)
    lim = sp.limit(M_ / (M_ + K_ * sp.exp(2 * lam_)), M_, sp.oo)
    der = th.far_mass_derivation()
    rfp = "expit(ln K + 2λ − ln M) vs a/(M + a): ≤ 10 roundings, ≤ 1e-13 relative"
    mfp = "Bessel ive and gammaln vs quadrature at relative 1e-13 of a smooth integrand: 1e-11"
    return [
        holds("sympy_limit_is_one", bool(der.limit_is_one) and lim == 1,
              label="sympy: far_mass_derivation's limit and sp.limit(M/(M + K e^{2λ})) = 1"),
        fp_judge("attention_weights_vs_loop_softmax", a, soft, 1e-13, _FP_ROW,
                 "max |attention_weights − softmax over j ≤ i (loop)|, 6 queries, L = 300"),
        fp_judge("near_far_mass_vs_loop_sums", np.r_[near, far], np.r_[ref_near, ref_far], 1e-13,
                 _FP_ROW, "max |near_far_mass − Σ_{i−j<W}, Σ_{i−j≥W} of the loop softmax|"),
        rel_judge("near_signal_upper_bound_vs_closed_form", bound, bound_closed(*pts), 1e-13,
                  rfp, "max |near_signal_upper_bound/(K e^{2λ}/(M + K e^{2λ})) − 1|, 5 points"),
        rel_judge("far_sum_mgf_vs_quadrature", mgf, mgf_quadrature(LAM), 1e-11, mfp,
                  "|far_sum_mgf(8)/∫e^{8u}(1−u²)^{93/2}du·(norm.) − 1|, d = 96"),
        info("far_sum_mgf", mgf, label="E e^{s} of a far logit (closed form)"),
        rejects("fp_judge_control_causal_mask_dropped",
                fp_judge("c", soft_all, soft, 1e-13, _FP_ROW, "c"),
                "a softmax over every key, j > i included"),
        rejects("fp_judge_control_window_one_wider",
                fp_judge("c", np.r_[wide, far], np.r_[ref_near, ref_far], 1e-13, _FP_ROW, "c"),
                "the near sum over i − j ≤ W (one key too many)"),
        rejects("rel_judge_control_e_lambda",
                rel_judge("c", bound_closed(pts[0], pts[1], pts[2] / 2), bound_closed(*pts),
                          1e-13, rfp, "c"), "the bound K e^{λ}/(M + K e^{λ}): factor 2 lost"),
        rejects("rel_judge_control_mgf_d94", rel_judge("c", far_sum_mgf(LAM, D - 2),
                                                       mgf_quadrature(LAM), 1e-11, mfp, "c"),
                "E e^{λu} on S^{93} instead of S^{95}"),
    ]  # fmt: skip


def sweep_controls(near_by_L: dict, caps: dict, pooled: tuple, zlim: float) -> list:
    """Negative controls of the statistical, worst-case and fall judges on the sweep's own data
    made wrong: (first scheme's pooled odds sample, its reference, SE, bias)."""
    L0, L1 = min(near_by_L), max(near_by_L)
    worst = np.array(near_by_L[L1], float)
    worst[np.argmax(worst)] = caps[L1] + 1e-9
    sample, ref, ref_se, bias = pooled
    m, se = mean_se(sample)
    k = zlim + 2 + bias * abs(ref) / math.hypot(se, ref_se)
    moved = np.asarray(sample) - m + biased(ref, math.hypot(se, ref_se), k)
    return [
        rejects("stat_judge_control_biased_by_z_plus_2_se",
                stat_judge("c", moved, ref, ref_se, bias, zlim, "control", "c"),
                f"the pooled odds sample moved to reference + {k:.2f} SE (z_n = {zlim:.2f})"),
        rejects("cap_judge_control_worst_trial_over_bound",
                cap_judge("c", worst, caps[L1]),
                f"the largest near mass at L = {L1} set 1e-9 above the bound"),
        rejects("fall_judge_control_flat",
                fall_judge("c", near_by_L[L0], near_by_L[L0], zlim, "c"),
                f"no fall: the L = {L0} trials used at both ends"),
    ]  # fmt: skip
