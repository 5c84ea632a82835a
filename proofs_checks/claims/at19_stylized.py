"""Claims AT12, AT13 and AT19 of [B]: the stylized single-layer model with a planted near target.

The three checks read one sweep of :func:`posflow.simulate.transport.stylized_attention` at its
default parameters (d = 96, base 10⁴, λ = 8, planted key at distance 4, near window W = 64, ALiBi
slope 2⁻⁴, identical far values), cached per (scheme, L, trials, seed) so the three share it; all
schemes at one L share one seed (common random numbers). Each simulated mean is judged against a
reference computed here independently of ``simulate``:

* AT12 — the near mass 1 − ρ_D and the planted weight against the quantitative prediction
  1 − ρ_D ≈ K e^Δ / (K e^Δ + M E e^s): the near sum K e^Δ is drawn at the level of logits (the
  planted logit from each rotation law, the other near logits from the sphere law) and the far sum
  is replaced by M E e^s with E e^{λu} in closed form (a Bessel function);
* AT13 — ALiBi's far mass: the closed-form supremum, the corner that attains it, random rows, and
  the simulated far mass against an exact L-free logit-level reference;
* AT19 — the far-residual ratio Q/K/V : Q/K against the exact ``value_side_expectation``
  prediction, and [B]'s "extends the extrapolation range" as "the length at which the output
  error exceeds τ is larger with value rotation" (τ a named parameter with a sensitivity table).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy.special import gammaln, ive

from posflow.proofs_checks.kit import (
    SCHEME_COLORS,
    SCHEME_LABELS,
    Context,
    Evidence,
    Figure,
    Panel,
    Series,
    Table,
    add_mutant,
    at_least,
    at_most,
    close,
    exact_tol,
    fp_tol,
    info,
    mean_se,
    param_tol,
    register,
    stat_tol,
    undecided,
    z_limit,
)
from posflow.simulate.transport import stylized_attention
from posflow.theory import transport as th

__all__ = [
    "TAU",
    "TAU_GRID",
    "far_sum_mgf",
    "near_mass_reference",
    "value_ratio_reference",
]

# the stylized defaults of simulate.transport.stylized_attention (restated, not imported: the
# references below must not move when a mutant changes the simulator)
D, BASE, LAM, W, NEAR, SLOPE, VOCAB, EMBED = 96, 10_000.0, 8.0, 64, 4, 2.0**-4, 1024, 0.1
TAU = 0.5
"""AT19: output-error level ‖o − t‖/‖t‖ at which a scheme counts as degraded (half the target)."""
TAU_GRID = (0.25, 0.5, 0.75, 1.0, 1.25)
_QUICK = {512: 32, 2048: 8, 8192: 4}
_FULL = {512: 64, 2048: 32, 8192: 16, 32768: 8, 65536: 8}
_N_REF = 4000  # logit-level reference draws per (scheme, L)
_EPS = 2.220446049250313e-16


def _lengths(ctx: Context) -> dict[int, int]:
    return dict(_FULL if ctx.full else _QUICK)


def _freqs() -> np.ndarray:
    """f_b = base^(−2b/d), b = 0 … d/2 − 1 (restated for the references)."""
    return BASE ** (-2.0 * np.arange(D // 2) / D)


@functools.lru_cache(maxsize=64)
def _run(scheme: str, length: int, trials: int, seed: int):
    return stylized_attention(scheme, length, n_trials=trials, seed=seed)


def _seed(ctx: Context, length: int) -> int:
    return int(np.random.default_rng([abs(int(ctx.seed)), 1019, length]).integers(2**63 - 1))


def _sweep(ctx: Context, scheme: str, only=None) -> dict:
    """``{L: StylizedResult}`` of ``scheme`` at the sweep lengths (or those in ``only``), one
    seed per L shared by every scheme (common random numbers)."""
    return {
        L: _run(scheme, L, n, _seed(ctx, L))
        for L, n in _lengths(ctx).items()
        if only is None or L in only
    }


# ---------------------------------------------------------------------------------------------
# references (independent of simulate)
# ---------------------------------------------------------------------------------------------


def far_sum_mgf(lam: float, d: int = D) -> float:
    """E e^{λu} for u a coordinate of a uniform point of S^{d−1} (the law of every far logit/λ
    when the keys are isotropic, whatever the rotation): Γ(d/2) (2/λ)^{d/2−1} I_{d/2−1}(λ)."""
    nu = d / 2 - 1
    return float(np.exp(gammaln(d / 2) + nu * np.log(2 / lam) + np.log(ive(nu, lam)) + lam))


def _cv2(lam: float = LAM) -> float:
    """Squared coefficient of variation of e^{λu}: E e^{2λu}/(E e^{λu})² − 1."""
    return far_sum_mgf(2 * lam) / far_sum_mgf(lam) ** 2 - 1


def _sphere_coordinate(rng, shape):
    return 2.0 * rng.beta((D - 1) / 2, (D - 1) / 2, size=shape) - 1.0


def _planted_angles(scheme: str, rng, n: int) -> np.ndarray:
    """Route angles ψ_b of the planted key (distance NEAR) under ``scheme``, shape (n, d/2)."""
    f = _freqs()
    if scheme == "rope":
        return np.broadcast_to(NEAR * f, (n, f.size))
    if scheme in ("random_qk", "random_qkv"):
        return rng.uniform(-f, f, (n, NEAR, f.size)).sum(axis=1)
    if scheme in ("learned", "learned_qkv"):
        tokens = rng.integers(0, VOCAB, (n, NEAR))
        z = rng.normal(0.0, EMBED, (n, NEAR, f.size))
        for a in range(1, NEAR):  # a repeated token reuses its table row
            for b in range(a):
                same = tokens[:, a] == tokens[:, b]
                z[same, a] = z[same, b]
        return (np.pi * np.tanh(z) - f).sum(axis=1)
    raise ValueError(f"no planted-angle law for scheme {scheme!r}")


@functools.lru_cache(maxsize=16)
def _near_draws(scheme: str, seed: int):
    """Logit-level draws of the planted logit and of the other near logits' sum (AT12)."""
    rng = np.random.default_rng([seed, 12, sum(map(ord, scheme))])
    w = rng.dirichlet(np.ones(D // 2), _N_REF)  # block energies of a uniform unit query
    planted = LAM * np.sum(w * np.cos(_planted_angles(scheme, rng, _N_REF)), axis=1)
    others = np.exp(LAM * _sphere_coordinate(rng, (_N_REF, W - 1))).sum(axis=1)
    return np.exp(planted), others


def near_mass_reference(scheme: str, length: int, seed: int = 0) -> dict:
    """Prediction of the mean near mass 1 − ρ_D and planted weight a_{j*} (claim AT12).

    1 − ρ_D ≈ K e^Δ/(K e^Δ + M E e^s), K e^Δ = e^{s*} + Σ_{other near} e^{s_k} drawn at the
    logit level (s* = λ Σ_b ‖q_b‖² cos ψ_b, ‖q_b‖² ~ Dirichlet(1, …, 1), ψ_b the scheme's route
    angle over NEAR steps; s_k = λu), M = L − W, E e^s = :func:`far_sum_mgf`. Returns means,
    their standard errors over the draws and ``bias`` = CV²/M, the relative second-order
    delta-method error of replacing the far sum by its mean.
    """
    ep, others = _near_draws(scheme, seed)
    far = (length - W) * far_sum_mgf(LAM)
    near, planted = (ep + others) / (ep + others + far), ep / (ep + others + far)
    n = near.size
    return {
        "near_mass": float(near.mean()),
        "near_mass_se": float(near.std(ddof=1) / math.sqrt(n)),
        "planted": float(planted.mean()),
        "planted_se": float(planted.std(ddof=1) / math.sqrt(n)),
        "bias": _cv2() / (length - W),
        "n": n,
    }


@functools.lru_cache(maxsize=16)
def _coherence_per_block(M: int) -> np.ndarray:
    """S_b(M)/M² = Σ_{j,k} c_b^{|n_j − n_k|}/M² over M consecutive far distances, c_b = sin f_b/f_b
    (the squared far residual of uniform weights and a unit value with all its energy in block b,
    relative to the coherent one), by direct summation."""
    f = _freqs()
    c = np.sin(f) / f
    k = np.arange(1, M, dtype=float)
    pw = np.exp(k[:, None] * np.log(c)[None, :])
    return (M + 2.0 * ((M - k)[:, None] * pw).sum(axis=0)) / M**2


def value_ratio_reference(length: int, energy=None) -> float:
    """Predicted mean of (far residual Q/K/V ÷ Q/K)² at context ``length`` (claim AT19).

    Σ_b w_b S_b(M)/M² + CV²/M with M = L − W far tokens, w_b the value's block energies (default
    uniform 2/d, the mean for a random unit value) and the CV² term from the spread of the far
    weights e^{s_j}/Σ e^{s}.
    """
    M = length - W
    w = np.full(D // 2, 2.0 / D) if energy is None else np.asarray(energy, dtype=float)
    return float(np.sum(w * _coherence_per_block(M)) + _cv2() / M)


def _mean_se(x):
    m, s = mean_se(np.asarray(x, dtype=float))
    return float(m), float(s)


@functools.lru_cache(maxsize=4)
def _alibi_reference(seed: int) -> tuple[float, float, int]:
    """Mean far mass of the stylized ALiBi row and its SE, drawn at the logit level (AT13).

    Planted logit λ − 4m (the key equals the query, no rotation); every other logit λu − mn with
    u the sphere law; distances n < n_cut = W + ⌈48/m⌉, beyond which e^{λ − mn} sums to under
    e^{−40} of the near sum: the reference is the same for every L ≥ n_cut (and for L = ∞).
    """
    rng = np.random.default_rng([seed, 13])
    n_cut = W + math.ceil(48 / SLOPE)
    z = LAM * _sphere_coordinate(rng, (_N_REF, n_cut)) - SLOPE * np.arange(n_cut)
    z[:, NEAR] = LAM - SLOPE * NEAR
    e = np.exp(z - LAM)
    far = e[:, W:].sum(axis=1) / e.sum(axis=1)
    return float(far.mean()), float(far.std(ddof=1) / math.sqrt(far.size)), n_cut


# -- mutant factories (also used by extrapolation_far_mass) --------------------------------
_STYLIZED = "posflow.simulate._stylized:stylized_attention"
_DRAW = "posflow.simulate._stylized:_draw_inputs"


def _with_default(name: str, factor: float, default: float):
    def make(original):
        @functools.wraps(original)
        def changed(*args, **kwargs):
            kwargs[name] = kwargs.get(name, default) * factor
            return original(*args, **kwargs)

        return changed

    return make


def _keys_leak(kappa: float):
    def make(original):
        @functools.wraps(original)
        def draw(src, length, d, near_distance, k, *rest):
            return original(src, length, d, near_distance, max(k, kappa), *rest)

        return draw

    return make


def _v_angles_narrow(original):
    @functools.wraps(original)
    def draw(*args, **kwargs):
        x = original(*args, **kwargs)
        x["theta_v"] = x["theta_v"] / 2
        return x

    return draw


def _cross_term_halved(original):
    @functools.wraps(original)
    def vse(weights, values, distances, chi):
        diag = original(weights, values, distances, np.zeros_like(np.asarray(chi)))
        return 0.5 * (original(weights, values, distances, chi) + diag)

    return vse


# ---------------------------------------------------------------------------------------------
# AT19
# ---------------------------------------------------------------------------------------------


def _crossing(Ls, err, tau):
    """L at which the (log-L interpolated) error curve first exceeds τ, and the bracketing pair
    of grid indices; (nan, None) when it stays below τ, (L_0, (0, 0)) when it starts above."""
    err = np.asarray(err)
    above = np.nonzero(err > tau)[0]
    if above.size == 0:
        return math.nan, None
    k = int(above[0])
    if k == 0:
        return float(Ls[0]), (0, 0)
    x0, x1 = math.log(Ls[k - 1]), math.log(Ls[k])
    t = (tau - err[k - 1]) / (err[k] - err[k - 1])
    return float(math.exp(x0 + t * (x1 - x0))), (k - 1, k)


def _tau_decision(Ls, qk, qkv, tau, zlim):
    """Is L_τ(Q/K/V) > L_τ(Q/K)? Both curves are interpolated linearly in log L, so it holds when
    Q/K/V's error is below Q/K's at the two grid lengths that bracket Q/K's crossing (paired
    z-scores over trials). Returns (L_qk, L_qkv, z, decision) with decision in
    holds / fails / undecided / "not reached"."""
    m_qk = [float(np.mean(x)) for x in qk]
    m_qkv = [float(np.mean(x)) for x in qkv]
    L_qk, br = _crossing(Ls, m_qk, tau)
    L_qkv, _ = _crossing(Ls, m_qkv, tau)
    if br is None:
        return L_qk, L_qkv, math.nan, "not reached"
    if br == (0, 0):
        return L_qk, L_qkv, math.nan, "above τ at the first L"
    zs = []
    for k in sorted(set(br)):
        d = np.asarray(qk[k]) - np.asarray(qkv[k])
        m, se = _mean_se(d)
        zs.append(m / se if se > 0 else math.copysign(math.inf, m))
    z = float(min(zs))
    decision = "holds" if z >= zlim else "fails" if z <= -zlim else "undecided"
    return L_qk, L_qkv, z, decision


@register(
    "AT19",
    "[B]",
    "stylized single-layer comparison at L from 512 to 65536: far mass → 1 for RoPE, random Q/K "
    "and Q/K/V rotations; bounded for ALiBi; value rotation shrinks the far residual by the exact "
    "value-side factor and the output error reaches τ at a larger L with Q/K/V than with Q/K",
    assumptions=(
        "the stylized model's default parameters (d = 96, λ = 8, W = 64, m = 2⁻⁴)",
        "τ = 0.5 (a named parameter; sensitivity table)",
    ),
)
def at19(ctx: Context) -> Evidence:
    """Claim AT19: the stylized comparison, with [B]'s "output error Q/K/V ≪ Q/K" restated.

    Far mass: RoPE's and random Q/K's near mass at the largest L against AT12's prediction;
    random Q/K/V's attention weights equal Q/K's (value rotation touches values only); ALiBi under
    its supremum. Value side: ``value_side_expectation`` against a direct sum; the mean squared
    far-residual ratio (Q/K/V ÷ Q/K)² against its exact prediction Σ_b w_b S_b/M² + CV²/M; Q/K's
    output error equals √2(1 − a_{j*}) (identical far values). [B]'s qualitative statement as
    L_τ(Q/K/V) > L_τ(Q/K), τ = :data:`TAU` with a sensitivity table. "≪" is reported, not
    judged: once ρ_D → 1 the output-error ratio tends to a floor ≥ 1/√2 (QK: √2(1 − a*) → √2;
    QKV: ≥ 1 − a* → 1).
    """
    Ls = list(_lengths(ctx))
    Lmax = Ls[-1]
    sw = {s: _sweep(ctx, s) for s in ("random_qk", "random_qkv")}
    sw |= {s: _sweep(ctx, s, (Lmax,)) for s in ("rope", "alibi")}  # AT12, AT13 have their L
    comps = 3 + len(Ls) + 2
    zlim = z_limit(comps)
    ms, rows = [], []
    for s in ("rope", "random_qk"):
        r = sw[s][Lmax]
        ref = near_mass_reference(s, Lmax, int(ctx.seed))
        m, se = _mean_se(1 - r.far_mass)
        sd = math.hypot(se, ref["near_mass_se"])
        ms.append(
            close(
                f"{s}_near_mass_at_Lmax",
                m,
                ref["near_mass"],
                stat_tol(
                    zlim * sd + ref["bias"] * ref["near_mass"],
                    f"{r.far_mass.size} trials (SE {se:.2g}), {ref['n']} reference draws: "
                    f"z = {zlim:.2f} (Bonferroni over {comps}, family-wise 6e-5) × {sd:.2g} + "
                    f"CV²/M = {ref['bias']:.2g}",
                ),
                label=f"{SCHEME_LABELS[s]} L = {Lmax}: 1 − ρ_D vs K e^Δ/(K e^Δ + M E e^s) "
                "(→ 0, far mass → 1)",
            )
        )
    same = max(
        float(np.max(np.abs(sw["random_qkv"][L].far_mass - sw["random_qk"][L].far_mass)))
        for L in Ls
    )
    ms.append(
        at_most(
            "qkv_far_mass_equals_qk",
            same,
            0.0,
            exact_tol("the same keys, angles and softmax: bit-identical weights"),
            label="max |ρ_D(Q/K/V) − ρ_D(Q/K)| (common random numbers)",
        )
    )
    fp_soft = fp_tol(Lmax * 4 * _EPS, f"a softmax of L ≤ {Lmax} terms: 4·L·ε")
    ref, ref_se, _ = _alibi_reference(int(ctx.seed))
    m, se = _mean_se(sw["alibi"][Lmax].far_mass)
    sd = math.hypot(se, ref_se)
    ms.append(
        close(
            "alibi_far_mass_at_Lmax",
            m,
            ref,
            stat_tol(
                zlim * sd,
                f"{sw['alibi'][Lmax].far_mass.size} trials (SE {se:.2g}), {_N_REF} reference "
                f"draws (SE {ref_se:.2g}): z = {zlim:.2f} (Bonferroni over {comps}, family-wise "
                "6e-5)",
            ),
            label=f"stylized ALiBi L = {Lmax}: far mass vs its L-free value (AT13's reference)",
        )
    )
    qk_id = max(
        float(
            np.max(
                np.abs(
                    sw["random_qk"][L].output_error
                    - math.sqrt(2) * (1 - sw["random_qk"][L].near_weight)
                )
            )
        )
        for L in Ls
    )
    ms.append(
        at_most(
            "qk_output_error_identity",
            qk_id,
            0.0,
            fp_soft,
            label="Q/K: max |‖o − t‖ − √2(1 − a_{j*})| (identical far values ⊥ target)",
        )
    )
    # value side: the theory routine against a direct sum, then the simulator against both
    f = _freqs()
    chi = np.sin(f) / f
    r_pred, r_meas = {}, {}
    for L in Ls:
        M = L - W
        direct = float(np.sum((2.0 / D) * _coherence_per_block(M)))
        u = np.full((M, D // 2, 2), 1 / math.sqrt(D))
        vse = th.value_side_expectation(np.full(M, 1 / M), u, W + np.arange(M), chi)
        ms.append(
            close(
                f"value_side_expectation_L{L}",
                float(vse),
                direct,
                fp_tol(
                    1e-9,
                    f"both sides sum ≤ M² = {M}² positive-weight terms by "
                    f"recursions of M steps: ≤ 2·M·ε = {2 * M * _EPS:.1e} relative",
                ),
                rel=True,
                label=f"value_side_expectation (uniform weights, L = {L}) vs a "
                "direct Σ_b w_b S_b/M²",
            )
        )
        ratio2 = (sw["random_qkv"][L].far_residual / sw["random_qk"][L].far_residual) ** 2
        m, se = _mean_se(ratio2)
        pred = float(vse) + _cv2() / M
        bias = 4 * _cv2() / M * pred
        ms.append(
            close(
                f"far_residual_ratio2_L{L}",
                m,
                pred,
                stat_tol(
                    zlim * se + bias,
                    f"{ratio2.size} paired trials (SE {se:.2g}): z = {zlim:.2f} (Bonferroni over "
                    f"{comps}, family-wise 6e-5) × SE + the delta-method error 4·CV²/M·pred = "
                    f"{bias:.2g}",
                ),
                label=f"L = {L}: mean (far residual Q/K/V ÷ Q/K)² vs value_side_expectation + "
                "CV²/M",
            )
        )
        r_pred[L], r_meas[L] = pred, (m, se)
    # [B]'s qualitative statement: L_τ(Q/K/V) > L_τ(Q/K)
    qk = [sw["random_qk"][L].output_error for L in Ls]
    qkv = [sw["random_qkv"][L].output_error for L in Ls]
    sens = []
    for tau in TAU_GRID:
        L1, L2, z, dec = _tau_decision(Ls, qk, qkv, tau, zlim)
        sens.append([tau, L1, L2, L2 / L1 if L1 == L1 and L2 == L2 else math.nan, z, dec])
    L1, L2, z, dec = _tau_decision(Ls, qk, qkv, TAU, zlim)
    label = (
        f"τ = {TAU}: paired z-score of Q/K error − Q/K/V error at the lengths bracketing "
        f"L_τ(Q/K) (needs ≥ {zlim:.2f}: Bonferroni over {comps}, family-wise 6e-5)"
    )
    if dec in ("holds", "fails"):
        ms.append(
            at_least(
                "output_error_reaches_tau_later_z",
                z,
                zlim,
                param_tol(
                    "tau",
                    0.0,
                    f"τ = {TAU}: degraded once ‖o − t‖ > τ‖t‖; "
                    "table tau_sensitivity gives the verdict at other τ",
                ),
                label=label,
            )
        )
    else:
        why = {
            "not reached": f"Q/K's error stays below τ up to L = {Lmax}",
            "undecided": f"|z| < {zlim:.2f} at the bracketing lengths",
        }.get(dec, f"Q/K's error exceeds τ already at L = {Ls[0]}")
        ms.append(undecided("output_error_reaches_tau_later_z", z, why, label=label))
    ms += [
        info("L_tau_qk", L1, label=f"L_τ(Q/K), τ = {TAU} (log-L interpolation)"),
        info("L_tau_qkv", L2, label=f"L_τ(Q/K/V), τ = {TAU}"),
    ]
    # "≪": the output-error ratio against its floor
    e_qk, e_qkv = float(np.mean(qk[-1])), float(np.mean(qkv[-1]))
    far_max = float(np.mean(sw["random_qk"][Lmax].far_mass))
    er, er_se = _mean_se(qkv[-1] / qk[-1])
    ms += [
        at_least(
            "output_error_ratio_floor",
            er,
            1 / math.sqrt(2),
            stat_tol(
                zlim * er_se,
                f"{qk[-1].size} paired trials (SE {er_se:.2g}) × z = "
                f"{zlim:.2f} (Bonferroni over {comps}, family-wise 6e-5)",
            ),
            label=f"mean output-error ratio Q/K/V : Q/K at L = {Lmax} (far mass {far_max:.2f}) "
            "vs its floor 1/√2 as ρ_D → 1 (Q/K: √2(1 − a_{j*}) → √2, Q/K/V: ≥ 1 − a_{j*} → 1), "
            "so '≪' cannot hold at long L",
        ),
        info(
            "output_error_ratio_of_means_at_Lmax",
            e_qkv / e_qk,
            label=f"ratio of mean output errors Q/K/V : Q/K at L = {Lmax}",
        ),
        info("far_mass_qk_at_Lmax", far_max, label=f"random Q/K far mass at L = {Lmax}"),
        info(
            "far_residual_ratio_at_Lmax",
            math.sqrt(r_meas[Lmax][0]),
            label=f"far-residual ratio Q/K/V : Q/K at L = {Lmax} (√ of the mean square)",
        ),
    ]
    # where the value content lives: fast vs slow blocks (theory, uniform far weights)
    fast = np.zeros(D // 2)
    fast[:16] = 1 / 16
    slow = np.zeros(D // 2)
    slow[-16:] = 1 / 16
    blk = []
    for L in sorted({*Ls, 65536}):
        blk.append(
            [
                L,
                int(th.blocks_mixed(D, BASE, 0.1, (L - W) // 2)),
                math.sqrt(value_ratio_reference(L, fast)),
                math.sqrt(value_ratio_reference(L)),
                math.sqrt(value_ratio_reference(L, slow)),
            ]
        )
    for L in Ls:
        m, se = r_meas[L]
        rows.append(
            [
                L,
                math.sqrt(m),
                se / (2 * math.sqrt(m)),
                math.sqrt(r_pred[L]),
                float(np.mean(qk[Ls.index(L)])),
                float(np.mean(qkv[Ls.index(L)])),
                float(np.mean(sw["random_qk"][L].far_mass)),
            ]
        )
    far_series = []
    for s in ("rope", "random_qk", "alibi"):
        x = list(sw[s])
        y = [_mean_se(sw[s][L].far_mass) for L in x]
        far_series.append(
            Series(
                SCHEME_LABELS[s],
                x,
                [v[0] for v in y],
                kind="errorbar",
                yerr=[2 * v[1] for v in y],
                color=SCHEME_COLORS[s],
            )
        )
    Lg = np.geomspace(Ls[0], 65536, 30)
    for s in ("rope", "random_qk"):
        far_series.append(
            Series(
                f"{SCHEME_LABELS[s]}: 1 − K e^Δ/(K e^Δ + M E e^s)",
                Lg,
                [1 - near_mass_reference(s, int(L), int(ctx.seed))["near_mass"] for L in Lg],
                color=SCHEME_COLORS[s],
                style="--",
            )
        )
    bl = [b[0] for b in blk]
    fig = Figure(
        "AT19_stylized",
        f"AT19: stylized single layer, d = {D}, λ = {LAM:g}, W = {W}, planted key at {NEAR}",
        [
            Panel(
                "far mass (± 2 SE; Q/K/V's equals Q/K's)",
                "context length L",
                "far mass ρ_D",
                far_series,
                logx=True,
                logy=True,
            ),
            Panel(
                "far residual Q/K/V : Q/K",
                "context length L",
                "ratio",
                [
                    Series(
                        "simulated",
                        Ls,
                        [math.sqrt(r_meas[L][0]) for L in Ls],
                        kind="errorbar",
                        yerr=[r[2] * 2 for r in rows],
                        color="#009E73",
                    ),
                    Series(
                        "predicted (value in all blocks)",
                        bl,
                        [b[3] for b in blk],
                        color="#000000",
                        style="--",
                    ),
                    Series(
                        "value in the 16 fastest blocks",
                        bl,
                        [b[2] for b in blk],
                        color="#0072B2",
                        style=":",
                    ),
                    Series(
                        "value in the 16 slowest blocks",
                        bl,
                        [b[4] for b in blk],
                        color="#D55E00",
                        style=":",
                    ),
                ],
                logx=True,
                ylim=(0, 1.05),
            ),
            Panel(
                "output error ‖o − t‖/‖t‖",
                "context length L",
                "output error",
                [
                    Series(
                        "random Q/K",
                        Ls,
                        [r[4] for r in rows],
                        kind="markers",
                        color=SCHEME_COLORS["random_qk"],
                    ),
                    Series(
                        "random Q/K/V",
                        Ls,
                        [r[5] for r in rows],
                        kind="markers",
                        color=SCHEME_COLORS["random_qkv"],
                    ),
                ],
                logx=True,
                hlines=[(TAU, f"τ = {TAU}"), (math.sqrt(2), "√2 (Q/K as ρ_D → 1)")],
            ),
        ],
    )
    tables = [
        Table(
            "value_side",
            "Q/K vs Q/K/V by L",
            [
                "L",
                "far-residual ratio",
                "SE",
                "predicted",
                "output error Q/K",
                "output error Q/K/V",
                "far mass",
            ],
            rows,
        ),
        Table(
            "tau_sensitivity",
            "L_τ(Q/K/V) > L_τ(Q/K)? at several τ (parameter tau)",
            ["τ", "L_τ(Q/K)", "L_τ(Q/K/V)", "ratio", "paired z", "verdict"],
            sens,
            note=f"verdict: holds when z ≥ {zlim:.2f}, fails when z ≤ −{zlim:.2f}; 'not "
            f"reached' when Q/K's error stays below τ up to L = {Lmax}, 'above τ at the first "
            "L' when it exceeds τ already at the shortest length (neither decides)",
        ),
        Table(
            "value_blocks",
            "predicted far-residual ratio by where the value content lives",
            [
                "L",
                "blocks mixed at (L − W)/2 (ε = 0.1)",
                "16 fastest blocks",
                "all blocks",
                "16 slowest blocks",
            ],
            blk,
            note="uniform far weights; slow blocks never mix within L, so value rotation "
            "removes only the fast blocks' share of the coherent residual",
        ),
    ]
    return Evidence(
        ms,
        figures=[fig],
        tables=tables,
        setup="stylized_attention defaults; trials per L: "
        + ", ".join(f"{L}: {k}" for L, k in _lengths(ctx).items())
        + " (quick stops at 8192; --full runs to 65536); one seed per L shared by the schemes, so "
        "Q/K and Q/K/V see the same keys, weights and value directions.",
    )


# -- mutants --------------------------------------------------------------------------------------
add_mutant(
    "AT19",
    "value-rotation-dropped",
    "posflow.simulate._stylized:_ROTATE_V",
    lambda orig: frozenset({"learned_qkv"}),
    "random Q/K/V leaves the values unrotated",
)
add_mutant(
    "AT19",
    "value-angles-half-width",
    _DRAW,
    _v_angles_narrow,
    "value angles drawn from Unif[−f_b/2, f_b/2] instead of Unif[−f_b, f_b]",
)
add_mutant(
    "AT19",
    "value-side-cross-term-halved",
    "posflow.theory._transport_values:value_side_expectation",
    _cross_term_halved,
    "value_side_expectation with half the cross terms 2 Re Σ a_j a_k χ^{n_j−n_k} z_j z̄_k",
)
