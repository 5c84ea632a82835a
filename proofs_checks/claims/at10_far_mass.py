"""Claim AT10 of [B]: the far-mass lower bound ρ_D ≥ M/(M + K e^{2λ}) for logits in [-λ, λ].

The bound against sympy, its closed form and the digest's printed values, its attaining corner
and a numeric minimisation (L-BFGS-B and a random search over the box), and the relaxation
``bounded_logits`` (the logit bound dropped, with a Hypothesis search).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from hypothesis import strategies as st
from scipy.optimize import minimize

from posflow.proofs_checks.kit import (
    Context,
    Evidence,
    Figure,
    Panel,
    Relaxation,
    Series,
    Table,
    add_mutant,
    add_relaxation,
    at_least,
    at_most,
    cite,
    claim_rng,
    fp_tol,
    holds,
    info,
    register,
    rejects,
)
from posflow.proofs_checks.kit import examples as ex
from posflow.simulate import transport as sim
from posflow.theory import transport as th

__all__ = ["AT10_TOL", "bounded_logits_violation", "unbounded_logit_examples"]


def _far_mass_and_grad(x, K):
    """ρ_D and its gradient in the logits x = (near K, far M), in log space."""
    shift = x.max()
    e = np.exp(x - shift)
    near, far = e[:K].sum(), e[K:].sum()
    total = near + far
    rho = far / total
    grad = np.concatenate([-e[:K] * far, e[K:] * near]) / total**2
    return rho, grad


def _smallest_far_mass(rng, k, m, lm, starts, n_random):
    """(L-BFGS-B minimum from ``starts`` random starts, minimum of ``n_random`` random points)
    of ρ_D over the box [-λ, λ]^(K+M)."""
    box = [(-lm, lm)] * (k + m)
    found = min(
        minimize(
            _far_mass_and_grad,
            rng.uniform(-lm, lm, k + m),
            args=(k,),
            jac=True,
            method="L-BFGS-B",
            bounds=box,
        ).fun
        for _ in range(starts)
    )
    x = rng.uniform(-lm, lm, size=(n_random, k + m))
    return found, float(np.min(th.far_mass(x[:, :k], x[:, k:])))


# the digest's values at λ = 3, K = 4 (papers/B_transport.md §5.1 [CHK]) and their last digit
_DIGEST_M = np.array([10, 100, 1000, 10_000, 100_000])
_DIGEST = np.array([0.0062, 0.0584, 0.383, 0.861, 0.984])
_DIGEST_UNIT = np.array([1e-4, 1e-4, 1e-3, 1e-3, 1e-3])

_FP_MASS = (
    "ρ_D as expit(lse(far) − lse(near)) with |logits| ≤ 3 and ≤ 45 terms: lse rounding "
    "≤ 45·2.2e-16 = 1e-14, expit' ≤ 1/4; 1e-13 covers it"
)
_FP_DIGEST = (
    "the digest rounds to its last printed digit (the bound 0.5 is half a unit); "
    "1e-12 covers the division by that unit"
)
_FP_OPT = (
    "L-BFGS-B stops on the box corner (the projected gradient never vanishes inside); " + _FP_MASS
)


def _figure_at10(K, lam):
    Ms = np.logspace(0, 6, 61)
    panel = Panel(
        f"K = {K}, λ = {lam:g}",
        "M (far tokens)",
        "min ρ_D",
        [
            Series("M/(M + K e^(2λ))", Ms, th.far_mass_lower_bound(Ms, K, lam)),
            Series("digest [B]", _DIGEST_M, _DIGEST, "markers"),
        ],
        logx=True,
        hlines=[(1.0, "limit 1")],
    )
    return Figure("AT10_far_mass", f"AT10: far-mass lower bound, K = {K}, λ = {lam:g}", [panel])


def _formula_judge(key, bounds, lam, K):
    """The judge of the bound's values: max relative error against M/(M + K e^{2λ})."""
    direct = _DIGEST_M / (_DIGEST_M + K * np.exp(2 * lam))
    err = float(np.max(np.abs(np.asarray(bounds) / direct - 1)))
    return at_most(key, err, 0.0,
                   fp_tol(1e-13, "expit(ln M − ln K − 2λ) vs M/(M + K e^(2λ)): ≤ 10 roundings"),
                   label="max |far_mass_lower_bound/(M/(M + K e^(2λ))) − 1|")  # fmt: skip


def _digest_judge(key, bounds):
    """The judge against the digest: max |bound − digest| in units of its last printed digit."""
    err = float(np.max(np.abs(np.asarray(bounds) - _DIGEST) / _DIGEST_UNIT))
    label = "max |bound − digest value| in units of the digest's last digit"
    return at_most(key, err, 0.5, fp_tol(1e-12, _FP_DIGEST), label=label)


def _mass_judge(key, rho, ref, label):
    """The judge of a far-mass routine: max |ρ − reference| over random logits."""
    return at_most(key, float(np.max(np.abs(np.asarray(rho) - ref))), 0.0,
                   fp_tol(1e-13, _FP_MASS), label=label)  # fmt: skip


def _routine_comparisons(rng, bounds, lam, K):
    """far_mass, attention_weights and near_far_mass against direct sums of exponentials on
    random logits, and negative controls of the bound's judges (known-wrong bounds)."""
    k, m, rows = 4, 11, 64
    near = rng.uniform(-3, 3, (rows, k))
    far = rng.uniform(-3, 3, (rows, m))
    ef, en = np.exp(far).sum(axis=1), np.exp(near).sum(axis=1)
    direct = ef / (ef + en)  # the direct ratio of sums (logits ≤ 3: no overflow)
    # one query at position k+m-1 whose k most recent keys are near: logits (far…, near…)
    logits = np.concatenate([far, near], axis=1)
    a = sim.attention_weights(logits, np.full(rows, k + m - 1))
    soft = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    _, rho_w = sim.near_far_mass(a, k, np.full(rows, k + m - 1))
    bad_bound = th.far_mass_lower_bound(_DIGEST_M, K, lam / 2)  # M/(M + K e^λ)
    return [
        _mass_judge("max_far_mass_error_vs_direct_sum", th.far_mass(near, far), direct,
                    "max |far_mass − Σe^f/(Σe^f + Σe^n)| over 64 random logit rows"),
        _mass_judge("max_attention_weights_error_vs_direct_softmax", a, soft,
                    "max |attention_weights − exp(s)/Σexp(s)| over 64 rows of 15 keys"),
        _mass_judge("max_near_far_mass_error_vs_direct_sum", rho_w, direct,
                    "max |near_far_mass far part − Σe^f/(Σe^f + Σe^n)| (window K = 4)"),
        rejects("formula_judge_control_e_lambda", _formula_judge("c", bad_bound, lam, K),
                "the bound M/(M + K e^λ): the factor 2 of the exponent lost"),
        rejects("digest_judge_control_one_digit_off",
                _digest_judge("c", np.asarray(bounds) + _DIGEST_UNIT),
                "every bound moved by one unit of the digest's last digit"),
        rejects("mass_judge_control_hard_max",
                _mass_judge("c", 1 / (1 + np.exp(near.max(1) - far.max(1))), direct, "c"),
                "ρ_D from the largest near and far logits instead of their sums"),
    ]  # fmt: skip


def _judge_at10(der, attain_err, rand_gap, opt_err, bounds, lam, K):
    return [
        holds(
            "sympy_proven",
            der.proven,
            label="sympy: ∂ρ/∂far > 0, ∂ρ/∂near < 0, corner = bound, ↑ in M, ↓ in λ, → 1",
        ),
        _formula_judge("max_relative_error_vs_direct_formula", bounds, lam, K),
        _digest_judge("max_digest_error_in_last_digit", bounds),
        at_most(
            "max_attainment_error",
            attain_err,
            0.0,
            fp_tol(1e-13, _FP_MASS),
            label="max |far_mass(far_mass_minimiser) − bound|",
        ),
        at_least(
            "min_random_search_minus_bound",
            rand_gap,
            0.0,
            fp_tol(1e-13, _FP_MASS),
            label="min over random logits of ρ_D − bound",
        ),
        at_most(
            "max_optimiser_minus_bound",
            opt_err,
            0.0,
            fp_tol(1e-13, _FP_OPT),
            label="max |L-BFGS-B minimum − bound|",
        ),
        holds(
            "increasing_in_M",
            bool(np.all(np.diff(bounds) > 0)),
            label="bound increasing in M at λ = 3, K = 4",
        ),
        info("bound_at_M_1e5", float(bounds[-1])),
    ]


_CITES = (
    cite("posflow.theory.transport:far_mass_lower_bound",
         "the direct formula M/(M + K e^{2λ}) and the digest's printed values",
         "max_relative_error_vs_direct_formula", "max_digest_error_in_last_digit"),
    cite("posflow.theory.transport:far_mass",
         "the direct ratio of sums of exponentials on random logits",
         "max_far_mass_error_vs_direct_sum"),
    cite("posflow.theory.transport:far_mass_minimiser",
         "the bound (the corner's far mass must equal it)", "max_attainment_error"),
    cite("posflow.theory.transport:far_mass_derivation",
         "sympy's signs of the partial derivatives, the corner sum and the limit",
         "sympy_proven"),
    cite("posflow.simulate.transport:attention_weights",
         "a direct softmax exp(s)/Σ exp(s)", "max_attention_weights_error_vs_direct_softmax"),
    cite("posflow.simulate.transport:near_far_mass",
         "the direct ratio of sums of exponentials (window = the K near keys)",
         "max_near_far_mass_error_vs_direct_sum"),
)  # fmt: skip


@register(
    "AT10",
    "[B]",
    "far-mass lower bound: with K near and M far logits in [-λ, λ], ρ_D ≥ M/(M + K e^{2λ}), "
    "attained, → 1 as M → ∞",
    assumptions=("every logit in [-λ, λ]",),
    compares=_CITES,
)
def at10(ctx: Context) -> Evidence:
    """Claim AT10: ρ_D ≥ M/(M + K e^{2λ}) for logits in [-λ, λ], attained, → 1.

    sympy (``far_mass_derivation``); ``far_mass_lower_bound`` against the direct formula and the
    digest's printed values at λ = 3, K = 4; ``far_mass``, ``sim.attention_weights`` and
    ``sim.near_far_mass`` against direct sums of exponentials; ``far_mass`` at
    ``far_mass_minimiser`` equals the bound; L-BFGS-B from random starts and a random search over
    the box for three (K, M, λ) find nothing lower and reach the bound. Negative controls: each
    judge rejects a known-wrong bound or mass.
    """
    rng = claim_rng(ctx, 10)
    der = th.far_mass_derivation()
    lam, K = 3.0, 4
    bounds = np.asarray(th.far_mass_lower_bound(_DIGEST_M, K, lam))
    starts = 40 if ctx.full else 8
    n_random = 20_000 if ctx.full else 5_000
    rows, attain_err, opt_err, rand_gap = [], 0.0, 0.0, np.inf
    for k, m, lm in ((3, 12, 2.0), (1, 5, 0.5), (5, 40, 1.0), (K, 10, lam)):
        b = float(th.far_mass_lower_bound(m, k, lm))
        attain_err = max(attain_err, abs(float(th.far_mass(*th.far_mass_minimiser(m, k, lm))) - b))
        found, rand_min = _smallest_far_mass(rng, k, m, lm, starts, n_random)
        opt_err = max(opt_err, abs(float(found) - b))
        rand_gap = min(rand_gap, rand_min - b)
        rows.append([k, m, lm, b, float(found), rand_min])
    return Evidence(
        _judge_at10(der, attain_err, rand_gap, opt_err, bounds, lam, K)
        + _routine_comparisons(rng, bounds, lam, K),
        figures=[_figure_at10(K, lam)],
        tables=[
            Table(
                "numeric_minimisation",
                "smallest far mass found in the box [-λ, λ]^(K+M)",
                ["K", "M", "λ", "bound", "L-BFGS-B min", "random-search min"],
                rows,
            )
        ],
        setup=f"sympy derivation; λ = {lam:g}, K = {K}, M = 10…10⁵; L-BFGS-B from {starts} "
        f"random starts and {n_random:,} uniform random points per (K, M, λ).",
    )


# ------------------------------------------------------------------------------------------
# relaxation: drop the logit bound

AT10_TOL = 1e-12  # far mass below the bound by at most this is rounding


def unbounded_logit_examples():
    """Examples for AT10 without the logit bound: ``{"near_logits", "far_logits", "lam"}``.

    K in [1, 4] near and M in [1, 20] far logits drawn from [-λ-5, λ+5] (they may leave the box
    [-λ, λ]), λ in [0, 5].
    """

    @st.composite
    def draw(draw):
        lam = draw(ex.floats(0.0, 5.0))
        logit = ex.floats(-lam - 5.0, lam + 5.0)
        near = draw(st.lists(logit, min_size=1, max_size=4))
        far = draw(st.lists(logit, min_size=1, max_size=20))
        return {"near_logits": near, "far_logits": far, "lam": lam}

    return draw()


def bounded_logits_violation(example) -> float:
    """Amount by which the far mass falls below the AT10 bound (claim AT10).

    .. math::
        v = \\frac{M}{M + K e^{2\\lambda}} - \\rho_D - 10^{-12},\\qquad
        \\rho_D = \\frac{\\sum_{far} e^{f_j}}{\\sum_{far} e^{f_j} + \\sum_{near} e^{n_k}}

    (:func:`posflow.theory.transport.far_mass`,
    :func:`posflow.theory.transport.far_mass_lower_bound`). ``v > 0`` exactly when the far mass
    beats the bound, which needs a logit outside [-λ, λ]. Cost O(K + M).
    """
    near, far = ex.get(example, "near_logits"), ex.get(example, "far_logits")
    lam = ex.real(example, "lam", 0.0, math.inf)
    for key, val in (("near_logits", near), ("far_logits", far)):
        if not isinstance(val, list) or not val:
            raise ValueError(f"example[{key!r}] must be a nonempty list of logits; got {val!r}")
    bound = th.far_mass_lower_bound(len(far), len(near), lam)
    return float(bound - th.far_mass(near, far)) - AT10_TOL


def _describe_logits(example) -> str:
    near, far, lam = example["near_logits"], example["far_logits"], example["lam"]
    rho = th.far_mass(near, far)
    bound = th.far_mass_lower_bound(len(far), len(near), lam)
    out = [x for x in near + far if abs(x) > lam]
    return (
        f"K = {len(near)} near, M = {len(far)} far logits, λ = {lam:g}: far mass {rho:.6g} vs "
        f"bound M/(M + K e^(2λ)) = {bound:.6g}; logits outside [-λ, λ]: {out or 'none'}"
    )


add_relaxation(
    "AT10",
    Relaxation(
        "bounded_logits",
        "every logit in [-λ, λ]",
        unbounded_logit_examples,
        bounded_logits_violation,
        _describe_logits,
    ),
)


# ------------------------------------------------------------------------------------------
# mutants


def _bound_single_lambda(original):
    @functools.wraps(original)
    def far_mass_lower_bound(M, K, lam):
        return original(M, K, np.asarray(lam, dtype=float) / 2)

    return far_mass_lower_bound


def _corner_swapped(original):
    @functools.wraps(original)
    def far_mass_minimiser(M, K, lam):
        near, far = original(M, K, lam)
        return -near, -far

    return far_mass_minimiser


def _hard_max_far_mass(original):
    @functools.wraps(original)
    def far_mass(near_logits, far_logits):
        near, far = np.asarray(near_logits, float), np.asarray(far_logits, float)
        return 1.0 / (1.0 + np.exp(near.max(axis=-1) - far.max(axis=-1)))

    return far_mass


_MASS = "posflow.theory._transport_mass"
# fmt: off
add_mutant("AT10", "bound-with-e^lambda", f"{_MASS}:far_mass_lower_bound", _bound_single_lambda,
           "the bound written M/(M + K e^λ): the factor 2 of the exponent lost")
add_mutant("AT10", "corner-swapped", f"{_MASS}:far_mass_minimiser", _corner_swapped,
           "the minimiser returns near logits −λ and far logits +λ (the maximising corner)")
add_mutant("AT10", "hard-max-far-mass", f"{_MASS}:far_mass", _hard_max_far_mass,
           "ρ_D from the largest near and far logits instead of their log-sum-exp")
# fmt: on
