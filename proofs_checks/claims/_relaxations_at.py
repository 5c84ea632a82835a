"""Relaxations of [B]'s claims: one assumption of an AT claim dropped, with a Hypothesis search.

Each relaxation draws plain-data examples (dicts of ints, floats, strings and lists) that satisfy
every assumption of its claim except the dropped one, and measures by how much an example breaks
the claim (``violation > 0`` exactly when it does, beyond a stated rounding tolerance). Importing
this module (done by :mod:`posflow.proofs_checks.extrapolation`) attaches them to their claims:

=====  ===============  =====================================================================
claim  relaxation       what is dropped
=====  ===============  =====================================================================
AT2    spectral_gap     γ = ‖E M‖_op < 1 (γ the law's own); e.g. RoPE-like angles, |φ| = 1
AT10   bounded_logits   every logit in [-λ, λ]
AT14   commuting        commuting SO(2) value steps; here lazy Haar O(d) steps (non-commuting)
AT17   zero_mean        zero-mean angles; here θ ~ Unif[0, 2f] (positive mean)
=====  ===============  =====================================================================

AT2, AT10 and AT17 are decided with exact formulas (characteristic functions, the softmax mass).
AT14 uses a Monte Carlo estimate with the example's own seed and sample count, so it is
deterministic given the example; it counts as a violation only beyond 4 standard errors. Because
lazy Haar steps still have E M = (1 - p) I, the bound is expected to survive (search: not found).
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

from posflow.proofs_checks.kit import Relaxation, add_relaxation
from posflow.proofs_checks.kit import examples as ex
from posflow.simulate.orthogonal import haar
from posflow.theory import transport as th

__all__ = [
    "AT2_TOL",
    "AT10_TOL",
    "AT14_Z",
    "AT17_TOL",
    "bounded_logits_violation",
    "commuting_expectation",
    "commuting_violation",
    "deterministic_angle_examples",
    "lazy_haar_value_examples",
    "positive_mean_examples",
    "spectral_gap_violation",
    "unbounded_logit_examples",
    "zero_mean_violation",
]

AT10_TOL = 1e-12  # far mass below the bound by at most this is rounding
AT2_TOL = 1e-12  # ‖E P_W‖ above ε by at most this is rounding
AT17_TOL = 1e-12  # |E sin Σθ| up to this counts as no drift
AT14_Z = 4.0  # Monte Carlo excess must exceed this many standard errors


_floats, _get, _int, _real = ex.floats, ex.get, ex.integer, ex.real


def _law(example) -> str:
    law = _get(example, "law")
    if law not in th.ANGLE_LAWS:
        raise ValueError(f"example['law'] must be one of {th.ANGLE_LAWS}; got {law!r}")
    return law


# ------------------------------------------------------------------------------------------
# AT10: ρ_D ≥ M/(M + K e^{2λ}) — drop the logit bound


def unbounded_logit_examples():
    """Examples for AT10 without the logit bound: ``{"near_logits", "far_logits", "lam"}``.

    K in [1, 4] near and M in [1, 20] far logits drawn from [-λ-5, λ+5] (they may leave the box
    [-λ, λ]), λ in [0, 5].
    """

    @st.composite
    def draw(draw):
        lam = draw(_floats(0.0, 5.0))
        logit = _floats(-lam - 5.0, lam + 5.0)
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
    near, far = _get(example, "near_logits"), _get(example, "far_logits")
    lam = _real(example, "lam", 0.0, math.inf)
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


# ------------------------------------------------------------------------------------------
# AT2: ‖E P_L‖ ≤ γ^L with γ < 1 — drop the spectral gap


def deterministic_angle_examples():
    """Examples for AT2 with the spectral gap dropped: ``{"law", "params", "L", "eps"}`` (AT2).

    ``law`` is "deterministic" (θ_b ≡ f_b, RoPE-like, |E e^{iθ}| = 1), "uniform" (Unif[-a_b, a_b])
    or "normal" (N(0, σ_b²)) with 1–4 block parameters (f_b in [-π, π]; a_b, σ_b in [0, π], so
    a_b = 0 is a degenerate law without a gap too); a route length L in [1, 65536]; a level ε in
    [1e-6, 0.5]. γ is not drawn: it is the law's own ‖E M‖_op = max_b |φ_b|
    (:func:`spectral_gap_violation`).
    """

    @st.composite
    def draw(draw):
        law = draw(st.sampled_from(("deterministic", "uniform", "normal")))
        lo = -math.pi if law == "deterministic" else 0.0
        params = draw(st.lists(_floats(lo, math.pi), min_size=1, max_size=4))
        return {
            "law": law,
            "params": params,
            "L": draw(st.integers(1, 65536)),
            "eps": draw(_floats(1e-6, 0.5)),
        }

    return draw()


def _gap_quantities(example) -> tuple[float, float, int, float]:
    """(γ, ε, L_eval, ‖E P_{L_eval}‖) of an AT2 example; L_eval = W(ε) when γ < 1, else L."""
    law = _law(example)
    params = _get(example, "params")
    if not isinstance(params, list) or not params:
        raise ValueError(f"example['params'] must be a nonempty list; got {params!r}")
    L = _int(example, "L", 1)
    eps = _real(example, "eps", 0.0, 1.0)
    if not 0.0 < eps < 1.0:
        raise ValueError(f"example['eps'] must lie in (0, 1); got {eps!r}")
    log_mod = np.asarray(th.log_characteristic_modulus(law, params), dtype=float)
    top = float(log_mod.max())
    gamma = math.exp(top)  # γ = ‖E M‖_op = max_b |φ_b|, the law's own
    if gamma < 1.0:
        steps = int(th.mixing_window(gamma, eps))
    elif top < 0.0:  # γ within rounding of 1 but a gap: the window from ln γ itself
        steps = max(1, math.ceil(math.log(1.0 / eps) / -top))
    else:
        steps = L
    # ‖E P_n‖_op = max_b |φ_b|^n = exp(n · max_b ln|φ_b|) for SO(2) blocks, exactly
    return gamma, eps, steps, math.exp(steps * top)


def spectral_gap_violation(example) -> float:
    """Amount by which the mean route product is still above ε after the mixing window (AT2).

    γ is the law's own ‖E M‖_op = max_b |φ_b| (φ_b the characteristic value of block b), never an
    independent number. With the gap (γ < 1) the claim gives ‖E P_L‖ ≤ γ^L, so the mean
    transport is below ε after W(ε) = ⌈ln(1/ε)/ln(1/γ)⌉ steps (the window of claim AT5); for
    SO(2) blocks E P_L = blockdiag_b E R(Σθ) and ‖E P_L‖ = max_b |φ_b|^L exactly, so

    .. math:: v = \\|\\mathbb E P_{L^*}\\|_{op} - \\varepsilon - 10^{-12},\\qquad
              L^* = W(\\varepsilon) \\text{ if } \\gamma < 1, \\text{ else } L,

    from the exact :func:`posflow.theory.transport.log_characteristic_modulus` (no cancellation
    when γ ≈ 1) and :func:`posflow.theory.transport.mixing_window`. Every law with a gap gives
    v ≤ 0; without it (γ = 1: deterministic angles, or a = σ = 0) there is no finite window and
    ‖E P_L‖ = 1 > ε at every L. Cost O(B).
    """
    _, eps, _, norm = _gap_quantities(example)
    return norm - eps - AT2_TOL


def _describe_gap(example) -> str:
    gamma, eps, steps, norm = _gap_quantities(example)
    if norm <= eps + AT2_TOL:
        return (
            f"{example['law']} angles {example['params']}: γ = {gamma:.15g} < 1 (a gap), "
            f"‖E P_W‖ = {norm:.6g} ≤ ε = {eps:g} after the window W = {steps}"
        )
    return (
        f"{example['law']} angles {example['params']}: the law's own γ = ‖E M‖_op = "
        f"{gamma:.15g}, so there is no finite mixing window; ‖E P_L‖ = {norm:.15g} at L = "
        f"{steps}, not below ε = {eps:g}: without a spectral gap the mean transport never decays"
    )


# ------------------------------------------------------------------------------------------
# AT17: zero-mean angles converge to uniform phases without drift — drop zero mean


def positive_mean_examples():
    """Examples for AT17 with positive-mean angles: ``{"law", "f", "n"}`` (claim AT17).

    ``law`` = "uniform_positive" (θ ~ Unif[0, 2f], mean f), f in [1e-4, 1] (RoPE's frequency
    range), route length n in [1, 65536].
    """

    @st.composite
    def draw(draw):
        return {
            "law": "uniform_positive",
            "f": draw(_floats(1e-4, 1.0)),
            "n": draw(st.integers(1, 65536)),
        }

    return draw()


def zero_mean_violation(example) -> float:
    """Drift of the phase Σθ off 0 after n steps, from the exact characteristic (claim AT17).

    .. math:: v = |\\mathbb E \\sin \\Sigma_{l\\le n} \\theta_l| - 10^{-12}
              = |\\varphi|^n\\,|\\sin(n \\arg\\varphi)| - 10^{-12}

    Symmetric (zero-mean) laws have E sin Σθ = 0 at every n; Unif[0, 2f] has φ = e^{if} sin f/f,
    so its mean direction turns like RoPE's phase n·f while the concentration |φ|^n is that of
    the zero-mean law. v ≤ 0 once the block has mixed (|φ|^n ≈ 0). Cost O(1).
    """
    law = _law(example)
    f = _real(example, "f", -math.inf, math.inf)
    n = _int(example, "n", 0)
    _, s = th.phase_moments(law, f, n)
    return abs(float(s)) - AT17_TOL


def _describe_zero_mean(example) -> str:
    c, s = th.phase_moments(example["law"], example["f"], example["n"])
    return (
        f"{example['law']} angles, f = {example['f']:g}, n = {example['n']}: E e^(iΣθ) has "
        f"modulus {math.hypot(c, s):.6g} and direction {math.atan2(s, c):.6g} rad "
        f"(RoPE phase n·f mod 2π = {math.remainder(example['n'] * example['f'], 2 * math.pi):.6g});"
        f" E sin Σθ = {s:.6g} ≠ 0: the phases drift"
    )


# ------------------------------------------------------------------------------------------
# AT14: value-side bound — drop commuting (SO(2)) steps; use lazy Haar O(d) steps


def lazy_haar_value_examples():
    """Examples for AT14 with non-commuting value steps (claim AT14).

    Keys: ``d`` in [2, 4]; ``p`` in [0.05, 1], the chance that a step is Haar on O(d) (else the
    identity), so E M = (1 - p) I and c = 1 - p < 1; 1–6 far tokens with ``weights`` in [-1, 1],
    ``values`` (lists of d numbers in [-2, 2]) and distinct route lengths ``distances`` in
    [1, 24]; the Monte Carlo ``seed`` and ``samples`` (64–256) of the estimate.
    """

    @st.composite
    def draw(draw):
        d = draw(st.integers(2, 4))
        M = draw(st.integers(1, 6))
        vec = st.lists(_floats(-2.0, 2.0), min_size=d, max_size=d)
        return {
            "d": d,
            "p": draw(_floats(0.05, 1.0)),
            "weights": draw(st.lists(_floats(-1.0, 1.0), min_size=M, max_size=M)),
            "values": draw(st.lists(vec, min_size=M, max_size=M)),
            "distances": draw(st.lists(st.integers(1, 24), min_size=M, max_size=M, unique=True)),
            "seed": draw(st.integers(0, 2**32 - 1)),
            "samples": draw(st.integers(64, 256)),
        }

    return draw()


def _value_example(example):
    d = _int(example, "d", 1)
    p = _real(example, "p", 0.0, 1.0)
    if p == 0.0:
        raise ValueError("example['p'] must be > 0 (c = 1 - p < 1); got 0")
    a = np.asarray(_get(example, "weights"), dtype=float)
    v = np.asarray(_get(example, "values"), dtype=float)
    n = np.asarray(_get(example, "distances"))
    M = a.size
    if a.ndim != 1 or M < 1 or v.shape != (M, d) or n.shape != (M,):
        raise ValueError(
            f"example needs weights (M,), values (M, d = {d}) and distances (M,); got "
            f"{a.shape}, {v.shape}, {n.shape}"
        )
    if n.dtype.kind not in "iu" or n.min() < 1 or np.unique(n).size != M:
        raise ValueError(f"example['distances'] must be distinct integers >= 1; got {n.tolist()}")
    if not (np.isfinite(a).all() and np.isfinite(v).all()):
        raise ValueError("example['weights'] and example['values'] must be finite")
    return d, p, a, v, n.astype(int)


def commuting_expectation(example) -> tuple[float, float]:
    """Exact E‖Σ_j a_j P_j v_j‖² for lazy Haar steps, and the AT14 bound (claim AT14).

    With P_j the product of the n_j steps nearest the query and E M = c I (c = 1 - p), the
    longer route is an independent product Q (E Q = c^{|n_j - n_k|} I) times the shorter one,
    which is orthogonal, so

    .. math:: \\mathbb E\\Big\\|\\sum_j a_j P_j v_j\\Big\\|^2
              = \\sum_{j,k} a_j a_k c^{|n_j - n_k|}\\langle v_j, v_k\\rangle
              \\le \\frac{1 + c}{1 - c}\\sum_j a_j^2 \\|v_j\\|^2 .

    Returns ``(expectation, bound)``. Cost O(M²·d).
    """
    _, p, a, v, n = _value_example(example)
    c = 1.0 - p
    gram = v @ v.T
    expo = np.abs(n[:, None] - n[None, :])
    expectation = float(a @ (np.power(c, expo) * gram) @ a)
    bound = (1 + c) / (1 - c) * float(np.sum(a * a * np.sum(v * v, axis=1)))
    return expectation, bound


def commuting_violation(example) -> float:
    """Monte Carlo excess of E‖Σ_j a_j P_j v_j‖² over the AT14 bound for lazy Haar steps.

    Draws ``samples`` routes with the example's ``seed``: each step is Haar on O(d)
    (:func:`posflow.simulate.orthogonal.haar`) with probability p, else the identity; P_j is the
    product of the n_j steps nearest the query (the new step on the right). With X̄ and SE the
    sample mean and standard error of X = ‖Σ_j a_j P_j v_j‖²,

    .. math:: v = \\bar X - \\frac{1+c}{1-c}\\sum_j a_j^2\\|v_j\\|^2 - 4\\,\\mathrm{SE}
              - 10^{-12}(1 + \\text{bound}),\\qquad c = 1 - p .

    Deterministic given the example. Cost O(samples·max n_j·d³).
    """
    d, p, a, v, n = _value_example(example)
    samples = _int(example, "samples", 2)
    seed = _int(example, "seed", 0)
    rng = np.random.default_rng(seed)
    steps = haar(d, samples * int(n.max()), seed=rng).reshape(samples, int(n.max()), d, d)
    lazy = rng.random((samples, int(n.max()))) >= p
    steps[lazy] = np.eye(d)
    P = np.broadcast_to(np.eye(d), (samples, d, d)).copy()
    total = np.zeros((samples, d))
    for dist in range(1, int(n.max()) + 1):
        P = P @ steps[:, dist - 1]
        for j in np.flatnonzero(n == dist):
            total += a[j] * (P @ v[j])
    x = np.sum(total * total, axis=1)
    se = float(x.std(ddof=1) / np.sqrt(samples))
    _, bound = commuting_expectation(example)
    return float(x.mean() - bound) - AT14_Z * se - 1e-12 * (1 + bound)


def _describe_commuting(example) -> str:
    exact, bound = commuting_expectation(example)
    v = commuting_violation(example)
    mc = v + bound + 1e-12 * (1 + bound)  # mean − 4 SE
    return (
        f"lazy Haar O({example['d']}) value steps (p = {example['p']:g}, c = "
        f"{1 - example['p']:g}): exact E‖Σ a_j P_j v_j‖² = {exact:.6g}, bound = {bound:.6g}, "
        f"Monte Carlo mean − 4 SE = {mc:.6g}; "
        + ("above the bound" if v > 0 else "the bound survives non-commuting steps")
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
add_relaxation(
    "AT2",
    Relaxation(
        "spectral_gap",
        "the spectral gap γ = ‖E M‖_op < 1, γ the law's own (e.g. RoPE-like angles)",
        deterministic_angle_examples,
        spectral_gap_violation,
        _describe_gap,
    ),
)
add_relaxation(
    "AT17",
    Relaxation(
        "zero_mean",
        "zero-mean angles (here θ ~ Unif[0, 2f], mean f > 0)",
        positive_mean_examples,
        zero_mean_violation,
        _describe_zero_mean,
    ),
)
add_relaxation(
    "AT14",
    Relaxation(
        "commuting",
        "commuting SO(2)-block value steps (here lazy Haar O(d) steps)",
        lazy_haar_value_examples,
        commuting_violation,
        _describe_commuting,
    ),
)
