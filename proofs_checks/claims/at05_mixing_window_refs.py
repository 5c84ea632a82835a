"""Judges, closed forms and plain-loop references of claim AT5 (at05_mixing_window).

The global (not per-block) route mean of simulate's ``empirical_route_mean`` against a plain
loop over the same draws and against the closed form |(1/B) Σ_b c_b^n| within z_n exact standard
errors; the exact score moments against direct formulas; every judge also run on known-wrong
inputs (negative controls).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from posflow.proofs_checks.kit import (
    at_most,
    biased,
    close,
    exact_tol,
    fp_tol,
    info,
    rejects,
    z_at_most,
    z_limit,
)
from posflow.simulate.transport import (
    empirical_mixing_window,
    empirical_route_mean,
    so2_far_score_moments,
    so2_score_moments,
)
from posflow.theory import transport as th

M_GLOBAL, N_GLOBAL = 64, 2000  # distances 1…64 of the global route mean, routes


def _z_value(mean, exact, var, N):
    """max |mean − exact| / √(var/N), var the EXACT variance of one route's statistic."""
    return float(np.max(np.abs(np.asarray(mean) - exact) / np.sqrt(np.asarray(var) / N)))


def _fp_judge(key, value, ref, tol, label):
    """The judge of a deterministic routine: max |value − reference| ≤ a rounding bound."""
    err = float(np.max(np.abs(np.asarray(value, float) - np.asarray(ref, float))))
    return at_most(key, err, 0.0, tol, label=label)


def _plain_route_means(law, m, N, seed):
    """(global norm max_b |Ê e^{iψ_b}|, global cos |mean_b Ê cos ψ_b|) for n = 0…m by a plain
    loop over law.sample_angles draws (the reference of empirical_route_mean, same stream)."""
    g, psi, norm, cos = np.random.default_rng(seed), np.zeros((N, law.d // 2)), [], []
    for n in range(m + 1):
        if n:
            psi = psi + law.sample_angles(N, seed=g)
        c, s = np.cos(psi).mean(axis=0), np.sin(psi).mean(axis=0)
        norm.append(float(np.max(np.hypot(c, s))))
        cos.append(abs(float(c.mean())))
    return np.array(norm), np.array(cos)


def _first_below(values, eps):
    for n, v in enumerate(values):
        if v <= eps:
            return n
    return math.inf


_FP_SAME = fp_tol(1e-13, "the same draws summed in the same order; means of 2,000 values ≤ 1 "
                  "in another summation order: ≤ 2,000·1.1e-16 = 2.2e-13 worst, ≈ 1e-15 typical; "
                  "1e-13")  # fmt: skip
_FP_MOM = fp_tol(1e-13, "Σ_b of 48 terms ≤ 1 of exp(D ln c_b), D ≤ 65535, |ln c_b| ≤ 0.16: "
                 "≲ 48·1.1e-16 per sum plus exp's relative 1.1e-16·D·|ln c|·u; 1e-13")  # fmt: skip


def global_and_moments(law, f, log_c, log_c2, weights, rng, n_cmp, samples):
    """The global route mean (norm and cos) and the exact score moments, with the negative
    controls of the z and rounding judges. ``n_cmp`` counts the M_GLOBAL global z tests."""
    seed, m, N = int(rng.integers(2**32)), M_GLOBAL, N_GLOBAL
    g_norm = np.asarray(empirical_route_mean(law, m, N, np.random.default_rng(seed)))
    g_cos = np.asarray(empirical_route_mean(law, m, N, np.random.default_rng(seed),
                                            statistic="cos"))  # fmt: skip
    ref_norm, ref_cos = _plain_route_means(law, m, N, seed)
    n = np.arange(1, m + 1)[:, None]
    c1, c2 = (np.sin(f) / f) ** n, (np.sin(2 * f) / (2 * f)) ** n  # closed forms, written here
    exact = c1.mean(axis=1)  # > 0, so |·| of the mean is within the SE of the signed mean
    var = (((1 + c2) / 2 - c1**2).sum(axis=1)) / f.size**2  # blocks independent
    z = _z_value(g_cos[1:], exact, var, N)
    wrong = exact.copy()
    wrong[-1] = biased(exact[-1], math.sqrt(var[-1] / N), 1.5 * z_limit(n_cmp))
    D = np.array([1, 64, 512, 65535])
    direct_mean = (weights * (np.sin(f) / f) ** D[:, None]).sum(axis=1)
    direct_var = (weights**2 * ((1 + (np.sin(2 * f) / (2 * f)) ** D[:, None]) / 2
                                - (np.sin(f) / f) ** (2 * D[:, None]))).sum(axis=1)  # fmt: skip
    mean, v = so2_score_moments(log_c, log_c2, weights, D)
    W0, hi = int(th.block_mixing_windows(law.d, 0.01, 10_000.0).window[0]), 600
    Ds = np.arange(W0, hi + 1)[:, None]
    far_direct = float((weights * (np.sin(f) / f) ** Ds).sum(axis=1).mean())
    eps = 0.9
    return [
        _fp_judge("global_norm_vs_plain_loop", g_norm, ref_norm, _FP_SAME,
                  f"max_n |empirical_route_mean (norm, global) − max_b |Ê e^(iψ_b)|| (plain loop, "
                  f"N = {N:,}, n ≤ {m})"),
        _fp_judge("global_cos_vs_plain_loop", g_cos, ref_cos, _FP_SAME,
                  "max_n |empirical_route_mean (cos, global) − |mean_b Ê cos ψ_b|| (plain loop)"),
        z_at_most("global_cos_max_z", z, n_cmp, samples + f"; global route mean: N = {N:,} "
                  f"routes, n = 1…{m}", "max_n |global Ê cos route mean − (1/B) Σ_b c_b^n| / "
                  "exact SE"),
        close("global_window_vs_first_index", float(empirical_mixing_window(g_cos, eps)),
              float(_first_below(ref_cos, eps)), exact_tol("integer index"),
              label=f"empirical_mixing_window(global cos, {eps}) vs a direct first-index scan"),
        _fp_judge("score_moments_vs_direct", np.concatenate([mean, v]),
                  np.concatenate([direct_mean, direct_var]), _FP_MOM,
                  "max |so2_score_moments − Σ_b w_b (sin f/f)^D, Σ_b w_b² Var cos ψ_b| "
                  "(D = 1, 64, 512, 65535)"),
        _fp_judge("far_score_mean_vs_direct",
                  so2_far_score_moments(log_c, log_c2, weights, W0, hi)[0], far_direct, _FP_MOM,
                  f"|so2_far_score_moments mean − avg_(D = {W0}…{hi}) Σ_b w_b (sin f/f)^D|"),
        info("global_norm_at_64", float(g_norm[-1]),
             label="max_b |Ê e^(iψ_b(64))| (the slowest block: γ^64 ≈ 1, no global mixing)"),
        rejects("z_judge_control_one_distance_biased",
                z_at_most("c", _z_value(wrong, exact, var, N), n_cmp, "c", "c"),
                f"the exact global mean at n = {m} moved by 1.5 z_n SE"),
        rejects("fp_judge_control_one_step_more",
                _fp_judge("c", g_norm[1:], ref_norm[:-1], _FP_SAME, "c"),
                "the global route mean at n + 1 steps compared with the loop at n"),
        rejects("window_judge_control_one_step_late",
                close("c", float(empirical_mixing_window(g_cos, eps)) + 1,
                      float(_first_below(ref_cos, eps)), exact_tol("c")),
                "the window one step late"),
    ]  # fmt: skip


# mutant makers (registered in the claim module)


def z_without_sqrt_n(original):
    @functools.wraps(original)
    def _z_value(mean, exact, var, N):
        return original(mean, exact, var, 1)  # SE = √var: the √N dropped

    return _z_value


def fp_self(original):
    @functools.wraps(original)
    def _fp_judge(key, value, ref, tol, label):
        return original(key, value, value, tol, label)  # the value compared with itself

    return _fp_judge


def fixed_mean_without_sqrt_n(original):
    @functools.wraps(original)
    def _fixed_mean_judge(key, mean, n, m_exact, v_exact, n_cmp, reason, label):
        return original(key, mean, 1, m_exact, v_exact, n_cmp, reason, label)  # √n dropped

    return _fixed_mean_judge


def ks_self(original):
    @functools.wraps(original)
    def _ks_stat(a, b):
        return original(a, a)  # a sample compared with itself

    return _ks_stat


def global_mean_over_blocks(original):
    @functools.wraps(original)
    def empirical_route_mean(law, max_distance, n_routes=1000, seed=None, *, statistic="norm",
                             per_block=False, **kw):  # fmt: skip
        if per_block or statistic != "norm":
            return original(law, max_distance, n_routes, seed, statistic=statistic,
                            per_block=per_block, **kw)  # fmt: skip
        per = original(law, max_distance, n_routes, seed, statistic="norm", per_block=True, **kw)
        return per.mean(axis=1)  # the mean over blocks instead of the largest

    return empirical_route_mean
