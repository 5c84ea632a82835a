"""Judges and plain-loop references of claim AT2 (at02_product_mean).

The judges (a worst-entry z over a Bonferroni family, a rounding bound) are also run on inputs
that are wrong by construction; mean_operator_norm and route_product_moments are recomputed on
the same draws by plain loops, and mean_operator_norm's Monte Carlo γ̂ is compared with
sin(0.5)/0.5 within z_n exact standard errors.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from posflow.proofs_checks.kit import at_most, biased, fp_tol, info, rejects, z_at_most, z_limit
from posflow.simulate.orthogonal import mean_operator_norm
from posflow.simulate.transport import route_product_moments
from posflow.theory import transport as th

__all__ = [
    "fp_judge",
    "gamma_frobenius",
    "jackknife_without_factor",
    "routine_comparisons",
    "z_judge",
    "z_value",
]


def z_value(mc, exact, se):
    """max over entries with a positive SE of |mc − exact| / se."""
    live = se > 0
    return float(np.max(np.abs(mc - exact)[live] / se[live]))


def z_judge(key, z, n_cmp, samples, label):
    """The judge of Monte Carlo means: the worst z over a family ≤ z_n (Bonferroni)."""
    return z_at_most(key, z, n_cmp, samples, label)


def fp_judge(key, value, ref, tol, label):
    """The judge of a deterministic routine: max |value − reference| ≤ a rounding bound."""
    err = float(np.max(np.abs(np.asarray(value, float) - np.asarray(ref, float))))
    return at_most(key, err, 0.0, tol, label=label)


_SCALES = np.array([0.5, 1.0, 2.0])
_FP_ONE = fp_tol(1e-15, "one closed form evaluated twice in float64 (sin a/a, 1 − β/d, an SVD "
                 "of a diagonal 6×6): ≤ 4 roundings of 1.1e-16 on values ≤ 1")
_FP_SAME = fp_tol(1e-13, "the same draws multiplied in the same order; means, s/√N and SVDs of "
                  "≤ 20,000 matrices of norm ≤ 1 in another summation order: ≤ 1e-13")


def _explicit_gamma(law, n, batches, seed):
    """‖mean‖_op of the same draws as mean_operator_norm(exact=False) and its delete-one-batch
    jackknife SE, by a plain loop (the reference)."""
    g = np.random.default_rng(seed)
    counts = np.diff(np.linspace(0, n, batches + 1).astype(int))
    sums = [law.sample(int(c), seed=g).sum(axis=0) for c in counts]
    total = sum(sums)
    loo = [np.linalg.norm((total - sb) / (n - c), 2) for sb, c in zip(sums, counts, strict=True)]
    jack = math.sqrt((batches - 1) / batches * float(np.sum((np.array(loo) - np.mean(loo)) ** 2)))
    return float(np.linalg.norm(total / n, 2)), jack


def _explicit_products(law, n, L, seed):
    """Mean route products and s/√N by a plain loop over the same draws (the reference)."""
    g, P, out = np.random.default_rng(seed), np.broadcast_to(np.eye(law.d), (n, law.d, law.d)), []
    for _ in range(L):
        P = law.sample(n, seed=g) @ P
        out.append([P.mean(axis=0), P.std(axis=0, ddof=1) / math.sqrt(n)])
    return np.array(out)


def routine_comparisons(laws, N, rng, n_cmp, samples):
    """characteristic_value, householder_mean_factor, mean_operator_norm (exact and Monte Carlo)
    and route_product_moments against closed forms and plain loops; negative controls."""
    c = np.real(th.characteristic_value("uniform", _SCALES))
    closed = {"so2": float(np.max(np.abs(np.sin(_SCALES) / _SCALES))), "haar": 0.0,
              "householder": 1 - 1.0 / 4}  # fmt: skip
    g_exact = {k: mean_operator_norm(law)[0] for k, (_, law, _) in laws.items()}
    g_dense = {k: float(np.linalg.norm(m, 2)) for k, (_, _, m) in laws.items()}
    so2 = laws["so2"][1]
    seed = int(rng.integers(2**32))
    g_mc = mean_operator_norm(so2, N, np.random.default_rng(seed), n_batches=32, exact=False)
    g_ref = _explicit_gamma(so2, N, 32, seed)
    var0 = (1 + math.sin(2 * _SCALES[0]) / (2 * _SCALES[0])) / 2 - closed["so2"] ** 2
    se0 = math.sqrt(var0 / N)  # γ̂ = |Ê e^{iθ_0}| = Ê cos θ_0 + O(1/N): exact SE of Ê cos θ_0
    z_gamma = abs(g_mc[0] - closed["so2"]) / se0
    hh = laws["householder"][1]
    prod = route_product_moments(hh, 64, 3, np.random.default_rng(seed))
    ref = _explicit_products(hh, 64, 3, seed)
    wrong = dict(g_exact, householder=1 - 1.0 / 3)
    return [
        fp_judge("characteristic_value_vs_sinc", c, np.sin(_SCALES) / _SCALES, _FP_ONE,
                  "max |characteristic_value(uniform, a) − sin a/a|"),
        fp_judge("householder_factor_vs_closed_form", th.householder_mean_factor(1.0, 4), 0.75,
                  _FP_ONE, "|householder_mean_factor(1, 4) − (1 − 1/4)|"),
        fp_judge("gamma_exact_vs_closed_form", list(g_exact.values()), list(closed.values()),
                  _FP_ONE, "max |mean_operator_norm(law) − (max_b sin a_b/a_b, 0, 1 − β/d)|"),
        fp_judge("gamma_exact_vs_dense_norm", list(g_exact.values()), list(g_dense.values()),
                  _FP_ONE, "max |mean_operator_norm(law) − numpy.linalg.norm(E M, 2)|"),
        z_judge("gamma_monte_carlo_z", z_gamma, n_cmp, samples,
                 "|mean_operator_norm(SO(2), exact=False) − sin(0.5)/0.5| / SE of Ê cos θ_0"),
        fp_judge("gamma_monte_carlo_vs_explicit", g_mc, g_ref, _FP_SAME,
                  "max |(γ̂, jackknife SE) − a plain loop over the same draws|"),
        fp_judge("route_products_vs_explicit", np.stack(prod, axis=1), ref, _FP_SAME,
                  "max |route_product_moments (means, SEs) − a plain product loop| (N = 64)"),
        rejects("fp_judge_control_householder_d_minus_1",
                fp_judge("c", list(wrong.values()), list(closed.values()), _FP_ONE, "c"),
                "γ of the Householder law as 1 − β/(d − 1)"),
        rejects("z_judge_control_one_entry_biased",
                z_judge("c", z_value(*_one_biased(laws["so2"][2], n_cmp)), n_cmp, samples, "c"),
                "one entry of E M moved by 1.5 z_n SE, the others exact"),
        info("gamma_jackknife_se", g_mc[1], label="jackknife SE of γ̂ (exact SE of Ê cos θ_0: "
             f"{se0:.3g})"),
    ]  # fmt: skip


def _one_biased(mean, n_cmp):
    """(wrong, exact, se): E M with entry (0, 0) moved by 1.5 z_n standard errors of 1e-3."""
    se = np.full(mean.shape, 1e-3)
    wrong = mean.copy()
    wrong[0, 0] = biased(mean[0, 0], 1e-3, 1.5 * z_limit(n_cmp))
    return wrong, mean, se


# mutant makers of AT2 (registered in at02_product_mean)


def gamma_frobenius(original):
    @functools.wraps(original)
    def mean_operator_norm(law, n_samples=4096, seed=None, *, n_batches=32, exact=True):
        if exact and getattr(law, "has_closed_form", False):
            return float(np.linalg.norm(law.mean())), 0.0  # Frobenius, not the operator norm
        return original(law, n_samples, seed, n_batches=n_batches, exact=exact)

    return mean_operator_norm


def jackknife_without_factor(original):
    @functools.wraps(original)
    def mean_operator_norm(law, n_samples=4096, seed=None, *, n_batches=32, exact=True):
        g, se = original(law, n_samples, seed, n_batches=n_batches, exact=exact)
        return g, se * math.sqrt(n_batches / (n_batches - 1))  # (B − 1)/B dropped

    return mean_operator_norm
