"""Claims AT14–AT17 of [B]: value-side incoherence and its M^{-1/2} scaling, RoPE, zero-mean angles.

Value transport is simulated with :func:`posflow.simulate.transport.so2_value_output` (rotate
values, average, rotate the output back) and compared with the exact second moments of
:mod:`posflow.theory.transport`; the transport itself is compared with a direct sum of explicit
route rotations. AT16 and AT17 (angle laws without a gap or with a drift) live in
:mod:`posflow.proofs_checks.claims.at16_17_drift`, AT18 in
:mod:`posflow.proofs_checks.claims.at18_identities`, AT19 in
:mod:`posflow.proofs_checks.claims.at19_stylized`.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
from scipy.stats import norm

from posflow.proofs_checks.kit import (
    FAMILY_Z,
    SCHEME_COLORS,
    Context,
    Evidence,
    Figure,
    Panel,
    Series,
    Table,
    add_mutant,
    at_most,
    claim_rng,
    close,
    fp_tol,
    holds,
    info,
    loglog_slope,
    mean_se,
    register,
    stat_tol,
    z_limit,
)
from posflow.simulate.orthogonal import SO2BlockLaw
from posflow.simulate.transport import so2_value_output
from posflow.theory import transport as th

_EPS = float(np.finfo(float).eps)
_LEVEL = 2 * norm.sf(FAMILY_Z)  # family-wise level of every Monte Carlo family (≈ 6.3e-5)


def _stat(se: float, z: float, draws: int, family: int, what: str = "") -> object:
    """z·SE as a statistical tolerance, with its sample count and family-wise level."""
    return stat_tol(
        z * se,
        f"{what}{draws} independent draws, standard error {se:.3g} × z = {z:.2f} (Bonferroni "
        f"over {family} Monte Carlo comparisons at family-wise level 2Φ(−{FAMILY_Z:g}) = "
        f"{_LEVEL:.1e})",
    )


def _planar(v: np.ndarray) -> np.ndarray:
    """Values (M, d) in half-split pairing → per-block planar vectors (M, d/2, 2) for theory."""
    h = v.shape[1] // 2
    return np.stack([v[:, :h], v[:, h:]], axis=-1)


def _far_residual_sq(scales, weights, values, gap, trials, rng) -> np.ndarray:
    """‖Σ_j a_j P_{j→i} v_j‖² for ``trials`` independent draws of θ ~ Unif[−s_b, s_b].

    The context has n = M + gap tokens, the query is the last one and the far tokens are the
    first M (token j at distance n − 1 − j). All draws go through one
    :func:`so2_value_output` call per chunk: trial t's block b is block t·B + b of a wide value
    vector (SO(2) blocks rotate independently), with angles from one wide
    :class:`SO2BlockLaw`. Cost O(trials·n·d).
    """
    M, d = values.shape
    B, n = d // 2, M + gap
    w = np.zeros((1, n))
    w[0, :M] = weights
    out = []
    chunk = max(1, int(4e6 // (n * d)))
    for t0 in range(0, trials, chunk):
        t = min(chunk, trials - t0)
        v = np.zeros((n, 2 * B * t))
        v[:M, : B * t] = np.tile(values[:, :B], t)
        v[:M, B * t :] = np.tile(values[:, B:], t)
        theta = SO2BlockLaw(2 * B * t, "uniform", scale=np.tile(scales, t)).sample_angles(n, rng)
        o = so2_value_output(w, v, theta)[0]
        x, y = o[: B * t].reshape(t, B), o[B * t :].reshape(t, B)
        out.append(np.sum(x * x + y * y, axis=1))
    return np.concatenate(out)


def _unrotated_residual_sq(weights, values, gap) -> float:
    """‖Σ_j a_j v_j‖² through :func:`so2_value_output` with zero angles (no value rotation)."""
    M, d = values.shape
    n = M + gap
    w = np.zeros((1, n))
    w[0, :M] = weights
    v = np.zeros((n, d))
    v[:M] = values
    return float(np.sum(so2_value_output(w, v, np.zeros((n, d // 2))) ** 2))


def _dense_transport(weights, values, theta) -> np.ndarray:
    """o = Σ_j a_j R(Σ_{s=j}^{n−2} θ_s) v_j for the query n − 1, every route angle summed
    directly (an independent reference for :func:`so2_value_output`; route "from_source")."""
    n, B = theta.shape
    o = np.zeros(2 * B)
    for j in range(n):
        psi = theta[j : n - 1].sum(axis=0)
        c, s = np.cos(psi), np.sin(psi)
        x1, x2 = values[j, :B], values[j, B:]
        o[:B] += weights[j] * (x1 * c - x2 * s)
        o[B:] += weights[j] * (x1 * s + x2 * c)
    return o


def _dense_moment(weights, planar, dist, chi) -> float:
    """Σ_b Σ_{j,k} Re(χ_b^{n_j − n_k} x_j x̄_k) (χ̄ for n_j < n_k), x = a z: the double sum behind
    :func:`theory.transport.value_side_expectation`, written out (O(M²·B))."""
    x = weights[:, None] * (planar[..., 0] + 1j * planar[..., 1])  # (M, B)
    D = dist[:, None] - dist[None, :]
    total = 0.0
    for b, c in enumerate(np.atleast_1d(chi)):
        G = np.where(D >= 0, np.power(c, np.abs(D)), np.power(np.conj(c), np.abs(D)))
        total += float(np.real(x[:, b] @ G @ np.conj(x[:, b])))
    return total


def _digest_closed_form(c: float, M: int) -> float:
    """E‖·‖² for a = 1/M on M consecutive distances, identical unit values:
    (1/M²) Σ_{j,k} c^{|j−k|} = (1+c)/((1−c)M) − 2c(1−c^M)/(M²(1−c)²)."""
    return (1 + c) / ((1 - c) * M) - 2 * c * (1 - c**M) / (M**2 * (1 - c) ** 2)


_FP_MOMENT = (
    "two accumulations of M ≤ 200 terms (running sum vs direct double sum) and χ^k by "
    "repeated squaring: relative error ≤ 4·M·ε = 4·200·2.2e-16 = 1.8e-13 of (Σ|a_j|‖v_j‖)²; "
    "1e-12 of that scale"
)


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
)
def at14(ctx: Context) -> Evidence:
    """Claim AT14: E‖Σ a_j P_j v_j‖² ≤ (1+|c|)/(1-|c|) Σ a_j²‖v_j‖² for random SO(2) value steps.

    Three cases (the digest's, Dirichlet weights, four blocks): Monte Carlo through
    ``so2_value_output`` against the exact ``value_side_expectation`` (itself against a direct
    double sum, and the digest case against its closed form), the exact moment under
    ``value_side_bound``; the transport against explicit route rotations; the unrotated
    residual equals the coherent one (control).
    """
    rng = claim_rng(ctx, 14)
    der = th.value_side_derivation()
    trials = 40_000 if ctx.full else 4_000
    gap = 8
    cases = []
    M = 200
    cases.append(
        (
            "digest",
            "a = 1, M = 200, uniform weights, identical v",
            np.array([1.0]),
            np.full(M, 1 / M),
            np.tile([1.0, 0.0], (M, 1)),
        )
    )
    M = 100
    cases.append(
        (
            "dirichlet",
            "a = 0.5, M = 100, Dirichlet weights (sum 0.6), Gaussian v",
            np.array([0.5]),
            0.6 * rng.dirichlet(np.ones(M)),
            rng.standard_normal((M, 2)),
        )
    )
    M = 150
    cases.append(
        (
            "blocks4",
            "4 blocks a = (1, 0.7, 2, 0.3), M = 150, uniform weights, Gaussian v",
            np.array([1.0, 0.7, 2.0, 0.3]),
            np.full(M, 1 / M),
            rng.standard_normal((M, 8)),
        )
    )
    family = 2 * len(cases)
    zlim = z_limit(family)
    ms = [
        holds("sympy_rotation_split", der.rotation_split, label="sympy: R(ψ) = cos ψ I + sin ψ J"),
        holds(
            "sympy_cross_term_is_power",
            der.cross_term_is_power,
            label="sympy: E cos(θ_1 + … + θ_m) = c^m",
        ),
        holds("sympy_factor", der.factor_matches, label="sympy: Σ_{m∈ℤ} r^{|m|} = (1+r)/(1−r)"),
    ]
    rows = []
    for key, name, scales, weights, values in cases:
        chi = np.real(th.characteristic_value("uniform", scales))
        dist = gap + np.arange(values.shape[0])[::-1]
        planar = _planar(values)
        exact = th.value_side_expectation(weights, planar, dist, chi)
        vb = th.value_side_bound(weights, planar, chi)
        scale = float(np.sum(np.abs(weights) * np.linalg.norm(values, axis=1))) ** 2
        dense = _dense_moment(weights, planar, dist, chi)
        mc, se = (
            float(x) for x in mean_se(_far_residual_sq(scales, weights, values, gap, trials, rng))
        )
        tol = _stat(se, zlim, trials, family)
        ms += [
            close(
                f"{key}_mc_vs_exact",
                mc,
                exact,
                tol,
                label=f"{key}: Monte Carlo E‖Σ a_j P_j v_j‖² vs exact value_side_expectation",
            ),
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
                fp_tol(1e-12 * scale, _FP_MOMENT),
                label=f"{key}: exact E‖·‖² ≤ bound",
            ),
            close(
                f"{key}_exact_vs_double_sum",
                exact,
                dense,
                fp_tol(1e-12 * scale, _FP_MOMENT),
                label=f"{key}: value_side_expectation vs the direct double sum",
            ),
        ]
        rows.append([name, mc, se, exact, vb.bound, vb.coherent, vb.bound / vb.coherent])
    # the digest case against its closed form (geometric sum of c^{|j−k|})
    c1, M1 = float(np.sin(1.0)), 200
    digest_exact = rows[0][3]
    ms.append(
        close(
            "digest_exact_vs_closed_form",
            digest_exact,
            _digest_closed_form(c1, M1),
            fp_tol(
                1e-13,
                "closed form and running sum of 200 terms of size ≤ 1/M: ≤ "
                "2·200·ε/M·(1+c)/(1−c) ≈ 5e-15; 1e-13 with margin",
            ),
            label="digest: exact moment vs (1+c)/((1−c)M) − 2c(1−c^M)/(M²(1−c)²)",
        )
    )
    # the transport itself: one draw of the four-block case against explicit route rotations
    key, _, scales, weights, values = cases[2]
    n = values.shape[0] + gap
    w, v = np.zeros(n), np.zeros((n, values.shape[1]))
    w[: values.shape[0]], v[: values.shape[0]] = weights, values
    theta = SO2BlockLaw(values.shape[1], "uniform", scale=scales).sample_angles(n, rng)
    err = float(
        np.max(np.abs(so2_value_output(w[None], v, theta)[0] - _dense_transport(w, v, theta)))
    )
    mass = float(np.sum(np.abs(weights) * np.linalg.norm(values, axis=1)))
    ms.append(
        at_most(
            "transport_vs_route_rotations",
            err,
            0.0,
            fp_tol(
                1e-9,
                f"|route angles| ≤ n·max a_b = {n}·2 rad, each summed with error ≤ n·ε·2n, so "
                f"the two angle evaluations differ by ≤ 4n²ε = {4 * n * n * _EPS:.1e} rad; "
                f"times Σ|a_j|‖v_j‖ = {mass:.2f}: {4 * n * n * _EPS * mass:.1e}; 1e-9 leaves "
                "margin for the n-term sums",
            ),
            label="so2_value_output vs Σ_j a_j R(Σ_{s=j}^{i−1} θ_s) v_j (one draw, 4 blocks)",
        )
    )
    # control: without value rotation the residual is the coherent one
    _, _, _, weights, values = cases[0]
    plain = _unrotated_residual_sq(weights, values, gap)
    ms.append(
        close(
            "control_unrotated_is_coherent",
            plain,
            rows[0][5],
            fp_tol(1e-12, "sum of 200 terms of size 1/200: ≤ 200·ε = 4.4e-14"),
            role="control",
            label="digest without value rotation: ‖Σ a_j v_j‖² vs coherent (Σ a_j)²‖v̄‖²",
        )
    )
    ms += [
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


def _slope_se(Ms, means, ses) -> float:
    """Standard error of the least-squares slope of ln √m_k on ln M_k (delta method:
    var ln √m̂ ≈ (se/(2m))²)."""
    lx = np.log(np.asarray(Ms, dtype=float))
    wts = (lx - lx.mean()) / np.sum((lx - lx.mean()) ** 2)
    var = (np.asarray(ses) / (2 * np.asarray(means))) ** 2
    return float(np.sqrt(np.sum(wts**2 * var)))


@register(
    "AT15",
    "[B]",
    "with value rotation the far residual shrinks like M^{-1/2}; without, it does not shrink",
    assumptions=("uniform far weights ρ/M", "mixed SO(2) value blocks (|c| < 1)"),
)
def at15(ctx: Context) -> Evidence:
    """Claim AT15: with value rotation the far residual shrinks like M^{-1/2}; without, not at all.

    Uniform far weights 1/M, identical values, one block θ ~ Unif[−1, 1]; mean squared residual
    over M = 64 … 4096 (full 16384) against the exact moment; the fitted log-log slope against
    the exact curve's; the exact approach M·E‖·‖² → (1+c)/(1−c) (slope −1/2); without rotation
    the residual is exactly 1 (control). A note: with d_h = 96 RoPE-spaced blocks the exact
    slope is nearly 0 (most blocks never mix).
    """
    rng = claim_rng(ctx, 15)
    Ms = [64 * 2**k for k in range(9 if ctx.full else 7)]  # 64 … 16384 (quick: … 4096)
    trials = 2000 if ctx.full else 400
    gap, a = 4, 1.0
    c = float(np.real(th.characteristic_value("uniform", a)))
    family = len(Ms) + 1
    zlim = z_limit(family)
    means, ses, exact, plain, ms = [], [], [], [], []
    for M in Ms:
        w, v = np.full(M, 1 / M), np.tile([1.0, 0.0], (M, 1))
        m, se = (float(x) for x in mean_se(_far_residual_sq(np.array([a]), w, v, gap, trials, rng)))
        ex = th.value_side_expectation(w, _planar(v), gap + np.arange(M)[::-1], c)
        means.append(m)
        ses.append(se)
        exact.append(ex)
        plain.append(np.sqrt(_unrotated_residual_sq(w, v, gap)))
        ms.append(
            close(
                f"mc_vs_exact_M{M}",
                m,
                ex,
                _stat(se, zlim, trials, family),
                label=f"M = {M}: Monte Carlo E‖·‖² vs exact",
            )
        )
    rms, rms_exact = np.sqrt(means), np.sqrt(exact)
    s_mc, _, _ = loglog_slope(Ms, rms)
    s_exact, _, _ = loglog_slope(Ms, rms_exact)
    se_s = _slope_se(Ms, means, ses)
    A, B = (1 + c) / (1 - c), 2 * c / (1 - c) ** 2
    gap_to_limit = A - Ms[-1] * exact[-1]  # = B (1 − c^M)/M ∈ [0, B/M]
    plain_err = float(np.max(np.abs(np.asarray(plain) - 1.0)))
    lim_tol = fp_tol(
        4 * Ms[-1] * _EPS * A,
        f"M·E‖·‖² from a running sum of M = {Ms[-1]} terms: relative rounding ≤ 2·M·ε, "
        f"twice that for margin: 4·M·ε·(1+c)/(1−c) = {4 * Ms[-1] * _EPS * A:.1e}",
    )
    ms += [
        close(
            "slope_mc_vs_exact",
            s_mc,
            s_exact,
            _stat(se_s, zlim, trials, family, f"slope over {len(Ms)} lengths; "),
            label="fitted log-log slope of the Monte Carlo RMS vs the exact curve's",
        ),
        at_most(
            "exact_limit_gap",
            gap_to_limit,
            B / Ms[-1],
            lim_tol,
            label=f"(1+c)/(1−c) − M·E‖·‖² at M = {Ms[-1]} (≤ 2c/((1−c)²M): slope → −1/2)",
        ),
        at_most(
            "exact_limit_gap_nonnegative",
            -gap_to_limit,
            0.0,
            lim_tol,
            label="M·E‖·‖² approaches (1+c)/(1−c) from below",
        ),
        at_most(
            "control_unrotated_residual_error",
            plain_err,
            0.0,
            fp_tol(1e-12, f"sum of M ≤ {Ms[-1]} terms 1/M: ≤ M·ε = {Ms[-1] * _EPS:.1e}"),
            role="control",
            label="without value rotation: max_M |‖Σ a_j v_j‖ − 1|",
        ),
        info("slope_exact", s_exact, label="exact curve's fitted slope"),
        info("slope_mc", s_mc, label="Monte Carlo fitted slope"),
        info("trials", trials),
    ]
    # a note, not part of the verdict: RoPE-spaced blocks (d_h = 96) mostly never mix
    f = th.rope_frequencies(96)
    chi96 = np.real(th.characteristic_value("uniform", f))
    u96 = np.full((48, 2), 1 / np.sqrt(96))
    M96 = [64, 512, 4096]
    rope = [
        np.sqrt(
            th.value_side_expectation(
                np.full(m, 1 / m), np.broadcast_to(u96, (m, 48, 2)), 64 + np.arange(m), chi96
            )
        )
        for m in M96
    ]
    ms.append(
        info(
            "note_d96_exact_slope",
            loglog_slope(M96, rope)[0],
            label="note: exact slope with d_h = 96 RoPE-spaced blocks (most never mix)",
        )
    )
    rows = [
        [M, float(np.sqrt(m)), float(se / (2 * np.sqrt(m))), float(e), float(p)]
        for M, m, se, e, p in zip(Ms, means, ses, rms_exact, plain, strict=True)
    ]
    x = np.asarray(Ms, dtype=float)
    fig = Figure(
        "AT15_value_scaling",
        f"AT15: uniform far weights 1/M, identical values, θ ~ Unif[−{a:g}, {a:g}], {trials} draws",
        [
            Panel(
                "far residual against the number of far tokens",
                "number of far tokens M",
                "far residual ‖Σ a_j P_j v_j‖ (RMS)",
                [
                    Series(
                        f"with value rotation (Monte Carlo, slope {s_mc:.3f})",
                        x,
                        rms,
                        "errorbar",
                        yerr=[r[2] for r in rows],
                        color=SCHEME_COLORS["random_qkv"],
                    ),
                    Series(f"exact √E‖·‖² (slope {s_exact:.3f})", x, rms_exact, color="exact"),
                    Series(
                        "√((1+c)/((1−c)M)) (M^{−1/2})", x, np.sqrt(A / x), color="bound", style="--"
                    ),
                    Series(
                        "without value rotation",
                        x,
                        plain,
                        "markers",
                        color=SCHEME_COLORS["random_qk"],
                    ),
                ],
                logx=True,
                logy=True,
            )
        ],
    )
    table = Table(
        "AT15_by_M",
        "RMS far residual by M",
        ["M", "Monte Carlo RMS", "SE", "exact RMS", "without rotation"],
        rows,
    )
    return Evidence(
        ms,
        figures=[fig],
        tables=[table],
        setup=f"M = {Ms[0]} … {Ms[-1]} far tokens at distances {gap} … {gap} + M − 1, weights "
        f"1/M, value (1, 0), {trials} seeded draws per M; c = sin 1 = {c:.6f}.",
    )


# -- mutants: small realistic breaks of the routines AT14/AT15 use --------------------------------
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


def _half_width_uniform(original):
    @functools.wraps(original)
    def sample_angles(self, size, seed=None):
        if self.law != "uniform":
            return original(self, size, seed)
        return np.random.default_rng(seed).uniform(
            -self.scale / 2, self.scale / 2, size=(size, self.d // 2)
        )

    return sample_angles


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
add_mutant(
    "AT15",
    "angle-width-halved",
    "posflow.simulate.orthogonal:SO2BlockLaw.sample_angles",
    _half_width_uniform,
    "Unif[−s, s] angles drawn as Unif[−s/2, s/2] (scale read as the full width)",
)
