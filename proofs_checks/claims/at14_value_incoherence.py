"""Claim AT14 of [B]: value-side incoherence of random SO(2) value steps, and its mutants.

Value transport is simulated by :func:`posflow.simulate.values.far_residual_sq` (rotate values,
average, rotate the output back, many draws at once) and compared with the exact second moments
of :mod:`posflow.theory.transport`; the transport itself is compared with a direct sum of
explicit route rotations (:func:`posflow.simulate.values.route_sum_value_output`). The mutants
``moment-off-by-one`` and ``prefix-sum-dropped`` are registered here for AT14 and AT15 (claim
AT15, the M^{-1/2} scaling, lives in :mod:`posflow.proofs_checks.claims.at15_value_scaling`).
AT14's relaxation (non-commuting lazy Haar steps) is in
:mod:`posflow.proofs_checks.claims.at14_commuting_relaxation`.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from posflow.proofs_checks.claims.at14_value_refs import (
    FP_MOMENT,
    brute_route_output,
    dense_moment,
    digest_closed_form,
    direct_at14,
    fp_judge,
    mc_judge,
    transport_judge,
)
from posflow.proofs_checks.kit import (
    Context,
    Evidence,
    Table,
    add_mutant,
    at_most,
    cite,
    claim_rng,
    close,
    fp_tol,
    holds,
    info,
    mean_se,
    register,
    rejects,
    z_limit,
    z_se_tol,
)
from posflow.simulate.orthogonal import SO2BlockLaw
from posflow.simulate.transport import so2_value_output
from posflow.simulate.values import (
    far_residual_sq,
    planar_pairs,
    route_sum_value_output,
    unrotated_residual_sq,
)
from posflow.theory import transport as th

_EPS = float(np.finfo(float).eps)

def _cases_at14(rng) -> list[tuple]:
    """(key, name, scales, weights, values) of the three cases (draws in this order)."""
    M1, M2, M3 = 200, 100, 150
    return [
        (
            "digest",
            "a = 1, M = 200, uniform weights, identical v",
            np.array([1.0]),
            np.full(M1, 1 / M1),
            np.tile([1.0, 0.0], (M1, 1)),
        ),
        (
            "dirichlet",
            "a = 0.5, M = 100, Dirichlet weights (sum 0.6), Gaussian v",
            np.array([0.5]),
            0.6 * rng.dirichlet(np.ones(M2)),
            rng.standard_normal((M2, 2)),
        ),
        (
            "blocks4",
            "4 blocks a = (1, 0.7, 2, 0.3), M = 150, uniform weights, Gaussian v",
            np.array([1.0, 0.7, 2.0, 0.3]),
            np.full(M3, 1 / M3),
            rng.standard_normal((M3, 8)),
        ),
    ]


def _sympy_at14(der) -> list:
    return [
        holds("sympy_rotation_split", der.rotation_split, label="sympy: R(ψ) = cos ψ I + sin ψ J"),
        holds(
            "sympy_cross_term_is_power",
            der.cross_term_is_power,
            label="sympy: E cos(θ_1 + … + θ_m) = c^m",
        ),
        holds("sympy_factor", der.factor_matches, label="sympy: Σ_{m∈ℤ} r^{|m|} = (1+r)/(1−r)"),
    ]


def _case_at14(case, gap, trials, zlim, family, rng) -> tuple[list, list]:
    """The four comparisons of one case and its table row."""
    key, name, scales, weights, values = case
    chi = np.real(th.characteristic_value("uniform", scales))
    dist = gap + np.arange(values.shape[0])[::-1]
    planar = planar_pairs(values)
    exact = th.value_side_expectation(weights, planar, dist, chi)
    vb = th.value_side_bound(weights, planar, chi)
    scale = float(np.sum(np.abs(weights) * np.linalg.norm(values, axis=1))) ** 2
    dense = dense_moment(weights, planar, dist, chi)
    mc, se = (float(x) for x in mean_se(far_residual_sq(scales, weights, values, gap, trials, rng)))
    tol = z_se_tol(se, zlim, trials, family)
    ms = [
        mc_judge(f"{key}_mc_vs_exact", mc, exact, tol,
                  f"{key}: Monte Carlo E‖Σ a_j P_j v_j‖² vs exact value_side_expectation"),
        at_most(
            f"{key}_mc_under_bound",
            mc,
            vb.bound,
            tol,
            label=f"{key}: Monte Carlo E‖·‖² ≤ (1+|c|)/(1−|c|) Σ a_j²‖v_j‖²",
        ),
        at_most(
            f"{key}_exact_under_bound",
            exact,
            vb.bound,
            fp_tol(1e-12 * scale, FP_MOMENT),
            label=f"{key}: exact E‖·‖² ≤ bound",
        ),
        close(
            f"{key}_exact_vs_double_sum",
            exact,
            dense,
            fp_tol(1e-12 * scale, FP_MOMENT),
            label=f"{key}: value_side_expectation vs the direct double sum",
        ),
    ]
    bound_direct = sum((1 + abs(c)) / (1 - abs(c)) * float(np.sum(weights**2 * np.sum(
        planar[:, b] ** 2, axis=-1))) for b, c in enumerate(np.atleast_1d(chi)))  # fmt: skip
    ms.append(fp_judge(f"{key}_bound_vs_closed_form", vb.bound, bound_direct, scale,
                        f"{key}: value_side_bound vs Σ_b (1+|c_b|)/(1−|c_b|) Σ_j a_j²‖v_jb‖²"))
    ms.append(info(f"{key}_bound_slack", vb.bound - exact, label=f"{key}: bound − exact moment"))
    return ms, [name, mc, se, exact, vb.bound, vb.coherent, vb.bound / vb.coherent]


def _closed_form_at14(digest_exact: float):
    """The digest case against its closed form (geometric sum of c^{|j−k|})."""
    c1, M1 = float(np.sin(1.0)), 200
    return close(
        "digest_exact_vs_closed_form",
        digest_exact,
        digest_closed_form(c1, M1),
        fp_tol(
            1e-13,
            "closed form and running sum of 200 terms of size ≤ 1/M: ≤ "
            "2·200·ε/M·(1+c)/(1−c) ≈ 5e-15; 1e-13 with margin",
        ),
        label="digest: exact moment vs (1+c)/((1−c)M) − 2c(1−c^M)/(M²(1−c)²)",
    )


def _transport_at14(case, gap, rng):
    """The transport itself: one draw of the four-block case against a brute-force route sum."""
    _, _, scales, weights, values = case
    n = values.shape[0] + gap
    w, v = np.zeros(n), np.zeros((n, values.shape[1]))
    w[: values.shape[0]], v[: values.shape[0]] = weights, values
    theta = SO2BlockLaw(values.shape[1], "uniform", scale=scales).sample_angles(n, rng)
    brute = brute_route_output(w, v, theta)
    mass = float(np.sum(np.abs(weights) * np.linalg.norm(values, axis=1)))
    return [
        transport_judge("transport_vs_route_rotations", so2_value_output(w[None], v, theta)[0],
                         brute, mass, n),
        transport_judge("route_sum_vs_brute_force", route_sum_value_output(w, v, theta), brute,
                         mass, n),
        rejects("transport_judge_control_transposed",
                transport_judge("c", so2_value_output(w[None], v, -theta)[0], brute, mass, n),
                "the transposed transport (angles negated)"),
    ]  # fmt: skip


def _control_at14(case, gap, coherent):
    """Control: without value rotation the residual is the coherent one."""
    _, _, _, weights, values = case
    return close(
        "control_unrotated_is_coherent",
        unrotated_residual_sq(weights, values, gap),
        coherent,
        fp_tol(1e-12, "sum of 200 terms of size 1/200: ≤ 200·ε = 4.4e-14"),
        role="control",
        label="digest without value rotation: ‖Σ a_j v_j‖² vs coherent (Σ a_j)²‖v̄‖²",
    )


_CITES = (
    cite("posflow.theory.transport:value_side_expectation",
         "the double sum Σ_b Σ_jk Re(χ^(n_j−n_k) x_j x̄_k) written out, and the digest's geometric "
         "closed form", "digest_exact_vs_double_sum", "dirichlet_exact_vs_double_sum",
         "blocks4_exact_vs_double_sum", "digest_exact_vs_closed_form"),
    cite("posflow.theory.transport:value_side_bound",
         "Σ_b (1+|c_b|)/(1−|c_b|) Σ_j a_j²‖v_jb‖² written out", "digest_bound_vs_closed_form",
         "dirichlet_bound_vs_closed_form", "blocks4_bound_vs_closed_form"),
    cite("posflow.theory.transport:characteristic_value", "sin(a)/a by math.sin",
         "characteristic_value_vs_sin_over_a"),
    cite("posflow.theory.transport:value_side_derivation", "sympy identities",
         "sympy_rotation_split", "sympy_cross_term_is_power", "sympy_factor"),
    cite("posflow.simulate.transport:so2_value_output",
         "a brute-force route sum Σ_j a_j R(Σ_s θ_s) v_j by Python loops",
         "transport_vs_route_rotations"),
    cite("posflow.simulate.values:route_sum_value_output",
         "a brute-force route sum by Python loops", "route_sum_vs_brute_force"),
    cite("posflow.simulate.values:far_residual_sq",
         "the exact moment (itself against the double sum), within z·SE",
         "digest_mc_vs_exact", "dirichlet_mc_vs_exact", "blocks4_mc_vs_exact"),
    cite("posflow.simulate.values:planar_pairs", "(v_b, v_{b+d/2}) indexed by hand",
         "planar_pairs_vs_direct"),
    cite("posflow.simulate.values:unrotated_residual_sq", "the coherent (Σ a_j)²‖v̄‖²",
         "control_unrotated_is_coherent"),
)  # fmt: skip


@register(
    "AT14",
    "[B]",
    "value-side incoherence (SO(2)): E‖Σ_far a_j P_j v_j‖² ≤ (1+|c|)/(1-|c|) Σ a_j² ‖v_j‖² vs "
    "the coherent (Σ a_j)² ‖v̄‖²",
    assumptions=(
        "i.i.d. symmetric value angles with |c| = |E e^{iθ}| < 1",
        "weights independent of the value angles",
        "commuting (SO(2)-block) value steps",
    ),
    compares=_CITES,
)
def at14(ctx: Context) -> Evidence:
    """Claim AT14: E‖Σ a_j P_j v_j‖² ≤ (1+|c|)/(1-|c|) Σ a_j²‖v_j‖² for random SO(2) value steps.

    Three cases (the digest's, Dirichlet weights, four blocks): Monte Carlo through
    ``so2_value_output`` against the exact ``value_side_expectation`` (itself against a direct
    double sum, and the digest case against its closed form), the exact moment under
    ``value_side_bound``; the transport against explicit route rotations; the unrotated
    residual equals the coherent one (control); ``so2_value_output`` and
    ``route_sum_value_output`` against a brute-force route sum, ``value_side_bound``,
    ``th.characteristic_value`` and ``planar_pairs`` against direct formulas; negative controls.
    """
    rng = claim_rng(ctx, 14)
    der = th.value_side_derivation()
    trials = 40_000 if ctx.full else 4_000
    gap = 8
    cases = _cases_at14(rng)
    family = 2 * len(cases)
    zlim = z_limit(family)
    ms, rows = _sympy_at14(der), []
    for case in cases:
        case_ms, row = _case_at14(case, gap, trials, zlim, family, rng)
        ms += case_ms
        rows.append(row)
    ms += [
        _closed_form_at14(rows[0][3]),
        *_transport_at14(cases[2], gap, rng),
        *direct_at14(cases, trials, zlim, family, rows),
        _control_at14(cases[0], gap, rows[0][5]),
        info("trials", trials),
        info("z_limit", zlim),
        info(
            "digest_bound_over_coherent", rows[0][4] / rows[0][5], label="digest: bound / coherent"
        ),
    ]
    table = Table(
        "AT14_cases",
        "far residual E‖Σ a_j P_j v_j‖²: Monte Carlo, exact, bound, coherent",
        ["case", "Monte Carlo", "SE", "exact", "bound", "coherent", "bound / coherent"],
        rows,
    )
    return Evidence(
        ms,
        tables=[table],
        setup=f"{trials} draws per case of θ ~ Unif[−a_b, a_b] (seeded), far tokens at distances "
        f"{gap} … {gap} + M − 1 from the query, one so2_value_output call per chunk of draws; "
        "sympy: value_side_derivation.",
    )


# -- mutants: small realistic breaks of the routines AT14 (and AT15) use --------------------------
def _one_sided_bound(original):
    @functools.wraps(original)
    def value_side_bound(weights, values, c):
        vb = original(weights, values, c)
        v = np.asarray(values, dtype=float)
        v = v[:, None, :] if v.ndim == 2 else v
        r = np.abs(np.broadcast_to(np.asarray(c, dtype=complex), (v.shape[1],)))
        factor = 1.0 / (1.0 - r)  # Σ_{m≥0} r^m instead of Σ_{m∈ℤ} r^{|m|}
        a = np.asarray(weights, dtype=float)
        per_block = np.einsum("j,jb->b", a * a, np.sum(v * v, axis=-1))
        return dataclasses.replace(vb, bound=float(np.sum(factor * per_block)), factor=factor)

    return value_side_bound


def _moment_off_by_one(original):
    @functools.wraps(original)
    def value_side_expectation(weights, values, distances, chi):
        v = np.asarray(values, dtype=float)
        v = v[:, None, :] if v.ndim == 2 else v
        c = np.broadcast_to(np.asarray(chi, dtype=complex), (v.shape[1],))
        a = np.asarray(weights, dtype=float)
        total = 0.0
        for b in range(v.shape[1]):  # every cross term gets c^{|n_j − n_k| + 1}
            e = original(a, v[:, b], distances, c[b])
            diag = float(np.sum(a * a * np.sum(v[:, b] ** 2, axis=-1)))
            total += diag + float(np.real(c[b])) * (e - diag)
        return total

    return value_side_expectation


def _transposed_value_rotation(original):
    @functools.wraps(original)
    def so2_value_output(weights, v, theta, *args, **kwargs):
        return original(weights, v, -np.asarray(theta), *args, **kwargs)

    return so2_value_output


def _prefix_sum_dropped(original):
    from posflow.simulate.transport import wrap_angle

    @functools.wraps(original)
    def absolute_angles(theta, route="from_source"):
        return wrap_angle(theta)  # each token rotated by its own step angle, not the prefix sum

    return absolute_angles


def _route_sum_off_by_one(original):
    @functools.wraps(original)
    def route_sum_value_output(weights, values, theta):
        th_ = np.asarray(theta, dtype=float)
        return original(weights, values, np.concatenate([th_[1:], th_[:1] * 0]))  # steps j+1…

    return route_sum_value_output


def _mc_judge_doubled(original):
    @functools.wraps(original)
    def mc_judge(key, mc, exact, tol, label):
        loose = dataclasses.replace(tol, value=tol.value * 2.0)  # z = 2·z_limit ≈ 8.8
        return original(key, mc, exact, loose, label)

    return mc_judge


_REFS = "posflow.proofs_checks.claims.at14_value_refs"
add_mutant("AT14", "route-sum-off-by-one", "posflow.simulate.values:route_sum_value_output",
           _route_sum_off_by_one, "the route sum starts one step late (Σ_{s=j+1} θ_s)")
add_mutant("AT14", "mc-judge-doubled-z", f"{_REFS}:mc_judge", _mc_judge_doubled,
           "the Monte Carlo judge allows twice the Bonferroni z (≈ 8.8 SE)")
add_mutant(
    ("AT14", "AT15"),
    "moment-off-by-one",
    "posflow.theory.transport:value_side_expectation",
    _moment_off_by_one,
    "the exact moment's geometric sum off by one: cross terms c^{|n_j−n_k|+1}",
)
add_mutant(
    ("AT14", "AT15"),
    "prefix-sum-dropped",
    "posflow.simulate.transport:absolute_angles",
    _prefix_sum_dropped,
    "value rotation by each token's own step angle θ_j instead of the accumulated Σ_{s<j} θ_s",
)
add_mutant(
    "AT14",
    "one-sided-bound",
    "posflow.theory.transport:value_side_bound",
    _one_sided_bound,
    "the bound's geometric sum one-sided: 1/(1−|c|) instead of (1+|c|)/(1−|c|)",
)
add_mutant(
    "AT14",
    "transposed-value-rotation",
    "posflow.simulate.transport:so2_value_output",
    _transposed_value_rotation,
    "value rotation with the wrong sign: Σ a_j R(φ_i − φ_j) v_j (the transposed transport)",
)
