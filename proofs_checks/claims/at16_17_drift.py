"""Claims AT16, AT17 of [B]: RoPE's deterministic angles have no gap; positive-mean angles drift.

AT16 compares :mod:`posflow.theory.transport`'s characteristic functions and 40-digit trained-arc
test with float64 and with the route means of :func:`posflow.simulate.transport.
empirical_route_mean`; AT17 compares Monte Carlo phases Σθ drawn by
:class:`posflow.simulate.orthogonal.SO2BlockLaw` with the exact characteristic functions
(mean direction n·arg φ) and with Kolmogorov–Smirnov critical values. Registered when
:mod:`posflow.proofs_checks.claims.at14_15_values` is imported (catalog order AT14 … AT17).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import stats
from scipy.stats import norm

from posflow.proofs_checks.kit import (
    FAMILY_Z,
    Context,
    Evidence,
    Table,
    add_mutant,
    at_least,
    at_most,
    claim_rng,
    close,
    exact_tol,
    fp_tol,
    holds,
    info,
    register,
    stat_tol,
    z_limit,
)
from posflow.simulate.orthogonal import SO2BlockLaw
from posflow.simulate.transport import empirical_route_mean, wrap_angle
from posflow.theory import transport as th

_EPS = float(np.finfo(float).eps)
_LEVEL = 2 * norm.sf(FAMILY_Z)  # family-wise level of every Monte Carlo family (≈ 6.3e-5)


@register(
    "AT16",
    "[B]",
    "RoPE (deterministic angles) has no spectral gap: no decay, and phases at distances beyond "
    "the training length leave the trained range",
    assumptions=("θ_b ≡ f_b (deterministic)",),
)
def at16(ctx: Context) -> Evidence:
    """Claim AT16: deterministic (RoPE) angles have no spectral gap and leave the trained phases.

    |E e^{iLf_b}| = 1 (sympy and ``phase_moments``), γ = 1 and undecayed route means from
    simulate; blocks whose phase at distance D was never seen in 512 training tokens
    (``rope_blocks_outside_training``, against a float64 evaluation): none for D < 512 (control),
    some for D > 512. Control: zero-mean random angles of the fastest frequency do decay in the
    same route-mean routine.
    """
    rng = claim_rng(ctx, 16)
    ch = th.angle_characteristic("deterministic")
    f = th.rope_frequencies(96)
    dists = [1, 512, 8192, 65536]
    mod_err = max(
        float(np.max(np.abs(np.hypot(*th.phase_moments("deterministic", f, n)) - 1))) for n in dists
    )
    law = SO2BlockLaw(96, "rope")
    n_max = 4096 if ctx.full else 1024
    route = np.asarray(
        empirical_route_mean(law, n_max, n_routes=64, seed=rng, statistic="norm", per_block=True)
    )
    route_min = float(route.min())
    n_ctl = 256
    ctl = np.asarray(
        empirical_route_mean(
            SO2BlockLaw(2, "uniform", scale=float(f[0])),
            n_max,
            n_routes=n_ctl,
            seed=rng,
            per_block=True,
        )
    )
    rayleigh = math.sqrt(math.log(1 / _LEVEL) / n_ctl)
    L_train = 512
    probe = [256, 511, 1024, 8192, 65536]
    rows, ms, agree = [], [], True
    for D in probe:
        flags = th.rope_blocks_outside_training(f, L_train, D)
        numeric = (L_train * f < 2 * np.pi) & (np.mod(D * f, 2 * np.pi) > L_train * f)
        agree &= bool(np.array_equal(flags, numeric))
        count = int(flags.sum())
        rows.append([D, count, int(numeric.sum())])
        if D < L_train:
            ms.append(
                at_most(
                    f"outside_training_D{D}",
                    count,
                    0,
                    exact_tol("integer count; D·f_b < L_train·f_b, so no phase can leave the arc"),
                    role="control",
                    label=f"blocks outside the trained arc at D = {D} < 512",
                )
            )
        else:
            ms.append(
                at_least(
                    f"outside_training_D{D}",
                    count,
                    1,
                    exact_tol("integer count of blocks (40-digit arithmetic)"),
                    label=f"blocks outside the trained arc at D = {D} > 512",
                )
            )
    ms = [
        holds("sympy_unit_modulus", ch.unit_modulus, label="sympy: |E e^{iΣθ}| = |e^{iLf}|^L = 1"),
        at_most(
            "max_modulus_error",
            mod_err,
            0.0,
            fp_tol(1e-14, "cos, sin and hypot of one float phase, each ≤ 1 ulp: ≤ 3·ε = 6.7e-16"),
            label=f"max_(b, L ∈ {dists}) ||phase_moments| − 1|",
        ),
        close(
            "spectral_gap_rope",
            1.0 - law.gamma,
            0.0,
            fp_tol(1e-14, "|e^{is}| = hypot(cos s, sin s): ≤ 3·ε = 6.7e-16"),
            label="spectral gap 1 − γ, γ = max_b |E e^{iθ_b}| of the RoPE law",
        ),
        at_most(
            "route_mean_decay",
            1.0 - route_min,
            0.0,
            fp_tol(
                1e-12,
                "the mean of 64 equal unit phasors e^{iψ} (ψ a running sum of angles), |·| by "
                "√(cos² + sin²): ≤ (64 + 3)·ε = 1.5e-14; 1e-12 with margin",
            ),
            label=f"decay 1 − min_(b, n ≤ {n_max}) |Ê e^{{iψ_b(n)}}|, 64 RoPE routes (simulate)",
        ),
        at_most(
            "control_uniform_route_mean",
            float(ctl[-1, 0]),
            0.0,
            stat_tol(
                rayleigh,
                f"{n_ctl} routes of uniform phases: P(|mean| > t) ≈ e^{{−N t²}} (Rayleigh); t = "
                f"√(ln(1/{_LEVEL:.1e})/{n_ctl}) = {rayleigh:.3f} at level 2Φ(−{FAMILY_Z:g})",
            ),
            role="control",
            label=f"zero-mean Unif[−f_0, f_0], f_0 = 1: |Ê e^{{iψ(n)}}| at "
            f"n = {n_max} (decays; exact (sin 1)^n ≈ 0)",
        ),
        *ms,
        holds(
            "outside_training_float64_agrees",
            agree,
            label="40-digit flags equal a float64 evaluation at every D",
        ),
        info(
            "unwrapped_blocks",
            int(th.rope_unwrapped_blocks(f, L_train).sum()),
            label="blocks that never wrap in 512 training tokens",
        ),
    ]
    table = Table(
        "AT16_outside_training",
        "RoPE blocks (d_h = 96) whose phase D·f_b mod 2π lies outside the trained arc [0, 512·f_b]",
        ["distance D", "blocks (40 digits)", "blocks (float64)"],
        rows,
    )
    return Evidence(
        ms,
        tables=[table],
        setup=f"d_h = 96, base 10⁴ frequencies, training length {L_train}; RoPE route means up to "
        f"n = {n_max}; control: {n_ctl} seeded routes of Unif[−1, 1] angles.",
    )


def _phases(law: str, scales, N: int, ns, rng) -> dict[int, np.ndarray]:
    """Route phases Σ_{l≤n} θ_l of N routes at each n in ``ns``, shape (N, B): the angles are
    drawn by ``SO2BlockLaw.sample_angles`` in chunks of steps and summed (O(max n · N · B))."""
    sampler = SO2BlockLaw(2 * len(scales), law, scale=scales)
    s, step, out = np.zeros((N, len(scales))), 0, {}
    for target in sorted(ns):
        while step < target:
            k = min(256, target - step)
            s += sampler.sample_angles(k * N, rng).reshape(k, N, len(scales)).sum(axis=0)
            step += k
        out[target] = s.copy()
    return out


def _mean_direction(x) -> tuple[float, float, float]:
    """Circular mean direction μ̂ of the angles x, its standard error
    √(mean sin²(x − μ̂)) / (R̄ √N) and the mean resultant length R̄."""
    z = np.mean(np.exp(1j * x))
    mu, R = float(np.angle(z)), float(np.abs(z))
    se = float(np.sqrt(np.mean(np.sin(x - mu) ** 2)) / (R * np.sqrt(x.size)))
    return mu, se, R


@register(
    "AT17",
    "[B]",
    "zero-mean angles are essential: positive-mean angles (Unif[0, 2f]) drift like RoPE; "
    "zero-mean ones converge to uniform phases",
    assumptions=("θ i.i.d.",),
)
def at17(ctx: Context) -> Evidence:
    """Claim AT17: positive-mean angles drift like RoPE; zero-mean ones converge to uniform phases.

    Slow block f = 0.003: the mean direction of Unif[0, 2f] phases is n·f (against the exact
    arg φ^n of ``phase_moments``) and the law moves between n = 512 and 8192 (KS), while
    zero-mean phases stay centred at 0 (controls) and equal the positive-mean ones shifted by
    n·f (KS); fast block f = 1: zero-mean phases are uniform at n = 512 and 8192 (KS).
    """
    rng = claim_rng(ctx, 17)
    N = 10_000 if ctx.full else 1_000
    ns = (512, 8192)
    fast, slow = 1.0, 0.003  # a block mixed by n = 512, and one that never mixes
    pos = th.angle_characteristic("uniform_positive")
    zero = th.angle_characteristic("uniform")
    fast_phase = _phases("uniform", [fast], N, (512,), rng)[512][:, 0]
    ph = {law: _phases(law, [slow], N, ns, rng) for law in ("uniform", "positive_uniform")}
    family = 8  # 4 mean directions + 4 KS tests
    zlim, alpha = z_limit(family), _LEVEL / family
    crit1 = float(stats.kstwo.isf(alpha, N))
    crit2 = float(stats.kstwobign.isf(alpha) * math.sqrt(2 / N))
    level = f"level {_LEVEL:.1e}/{family} (Bonferroni over {family} comparisons)"
    ks1 = stat_tol(crit1, f"one-sample Kolmogorov–Smirnov critical value at N = {N}, {level}")
    ks2 = stat_tol(
        0.0,
        f"the reference is the two-sample KS critical value {crit2:.4f} "
        f"(asymptotic Kolmogorov law, N = M = {N}, {level})",
    )
    ks2_max = stat_tol(
        crit2,
        f"two-sample Kolmogorov–Smirnov critical value (asymptotic "
        f"Kolmogorov law, N = M = {N}, {level})",
    )
    ms = [
        holds(
            "sympy_positive_mean_phase",
            pos.matches_closed_form and not pos.symmetric,
            label="sympy: Unif[0, 2f] has φ = e^{if} sin f/f (phase f, not symmetric)",
        ),
        holds(
            "sympy_zero_mean_symmetric", zero.symmetric, label="sympy: Unif[−f, f] has E sin θ = 0"
        ),
    ]
    rows = []
    for law, key, role in (
        ("positive_uniform", "uniform_positive", "test"),
        ("uniform", "uniform", "control"),
    ):
        for n in ns:
            x = ph[law][n][:, 0]
            ec, es = th.phase_moments(key, slow, n)
            ref = float(np.arctan2(es, ec))
            mu, se, R = _mean_direction(x)
            rows.append([law, n, mu, se, ref, R, float(np.hypot(ec, es))])
            what = "drifts to n·f" if role == "test" else "stays at 0 (no drift)"
            ms.append(
                close(
                    f"{law}_direction_n{n}",
                    ref + float(wrap_angle(mu - ref)),
                    ref,
                    stat_tol(
                        zlim * se,
                        f"{N} routes, circular standard error {se:.2g} × z = {zlim:.2f} ({level})",
                    ),
                    role=role,
                    unit="rad",
                    label=f"{law} f = {slow:g}: mean direction of Σθ at n = {n} "
                    f"{what} (exact arg φ^n)",
                )
            )
    unif = stats.uniform(loc=-np.pi, scale=2 * np.pi).cdf
    pos_ph, zero_ph = ph["positive_uniform"], ph["uniform"]
    ks = {
        n: stats.ks_2samp(
            wrap_angle(pos_ph[n][:, 0] - n * slow), wrap_angle(zero_ph[n][:, 0])
        ).statistic
        for n in ns
    }
    moves = stats.ks_2samp(wrap_angle(pos_ph[512][:, 0]), wrap_angle(pos_ph[8192][:, 0]))
    ms += [
        at_most(
            "ks_zero_fast_uniform_512",
            stats.kstest(wrap_angle(fast_phase), unif).statistic,
            0.0,
            ks1,
            label=f"zero mean, f = {fast:g}: KS distance of Σθ mod 2π from "
            "uniform at n = 512 (mixed: |φ|^512 = (sin 1)^512)",
        ),
        at_least(
            "ks_positive_slow_512_vs_8192",
            moves.statistic,
            crit2,
            ks2,
            label=f"Unif[0, 2f], f = {slow:g}: KS distance between n = 512 and 8192 "
            "(the law moves)",
        ),
        *[
            at_most(
                f"ks_positive_minus_rope_vs_zero_n{n}",
                ks[n],
                0.0,
                ks2_max,
                label=f"Unif[0, 2f] phases − RoPE phase n·f vs zero-mean phases at n = {n} "
                "(KS distance)",
            )
            for n in ns
        ],
        info(
            "modulus_fast_n512",
            float(np.hypot(*th.phase_moments("uniform", fast, 512))),
            label="exact |φ|^512 of the fast block, (sin 1)^512",
        ),
        info("routes", N),
    ]
    table = Table(
        "AT17_mean_directions",
        f"mean direction of Σθ, slow block f = {slow:g}",
        ["law", "n", "measured (rad)", "SE", "exact arg φ^n", "measured R̄", "exact |φ|^n"],
        rows,
    )
    return Evidence(
        ms,
        tables=[table],
        setup=f"{N} seeded routes per law, blocks f = {fast:g} (mixes by n = 512) and "
        f"f = {slow:g} (never mixes), phases at n = 512 and 8192.",
    )


# -- mutants: small realistic breaks of the routines AT16/AT17 use --------------------------------
def _rope_without_mod(original):
    @functools.wraps(original)
    def rope_blocks_outside_training(frequencies, L_train, distance):
        f = np.asarray(frequencies, dtype=float)
        return (L_train * f < 2 * np.pi) & (distance * f > L_train * f)  # phase not reduced mod 2π

    return rope_blocks_outside_training


def _rope_drawn_positive(original):
    @functools.wraps(original)
    def _law_angles(src, law, shape):
        if law.law == "rope":  # RoPE branch falls through to the positive-uniform draw
            return src.uniform(0.0, 2.0 * law.scale, shape)
        return original(src, law, shape)

    return _law_angles


def _rope_characteristic_sinc(original):
    @functools.wraps(original)
    def characteristic(self):
        if self.law == "rope":
            return np.exp(1j * self.scale) * np.sinc(self.scale / np.pi)
        return original(self)

    return characteristic


def _positive_law(transform):
    def make(original):
        @functools.wraps(original)
        def sample_angles(self, size, seed=None):
            if self.law != "positive_uniform":
                return original(self, size, seed)
            u = np.random.default_rng(seed).uniform(0.0, 2.0 * self.scale, (size, self.d // 2))
            return transform(u, self.scale)

        return sample_angles

    return make


def _mean_phase_dropped(original):
    @functools.wraps(original)
    def phase_moments(law, param, L):
        c, s = original(law, param, L)
        return np.hypot(c, s), 0.0 * s  # |φ|^L only: every law treated as symmetric

    return phase_moments


add_mutant(
    "AT16",
    "outside-training-without-mod-2pi",
    "posflow.theory.transport:rope_blocks_outside_training",
    _rope_without_mod,
    "the RoPE phase D·f_b compared with the trained arc without reduction mod 2π",
)
add_mutant(
    "AT16",
    "rope-route-angles-random",
    "posflow.simulate._mixing:_law_angles",
    _rope_drawn_positive,
    "route means draw RoPE angles as Unif[0, 2f_b] (the positive-uniform branch)",
)
add_mutant(
    "AT16",
    "rope-characteristic-sinc",
    "posflow.simulate.orthogonal:SO2BlockLaw.characteristic",
    _rope_characteristic_sinc,
    "the RoPE law's E e^{iθ} computed as e^{if} sin f/f (a spread law's)",
)
add_mutant(
    "AT17",
    "drift-mean-zero",
    "posflow.simulate.orthogonal:SO2BlockLaw.sample_angles",
    _positive_law(lambda u, s: u - s),
    "positive-mean angles drawn centred: Unif[−f, f] instead of Unif[0, 2f]",
)
add_mutant(
    "AT17",
    "drift-rate-halved",
    "posflow.simulate.orthogonal:SO2BlockLaw.sample_angles",
    _positive_law(lambda u, s: u / 2),
    "positive-mean angles drawn as Unif[0, f] (mean f/2) instead of Unif[0, 2f]",
)
add_mutant(
    "AT17",
    "mean-phase-dropped",
    "posflow.theory.transport:phase_moments",
    _mean_phase_dropped,
    "phase_moments returns (|φ|^L, 0): the mean phase L·arg φ dropped",
)
