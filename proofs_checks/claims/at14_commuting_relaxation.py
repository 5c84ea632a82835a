"""Claim AT14 of [B], relaxed: the value-side bound without commuting (SO(2)) value steps.

The relaxation ``commuting`` of AT14 (whose check and mutants are in
:mod:`posflow.proofs_checks.claims.at14_value_incoherence`) draws lazy Haar O(d) value steps: each
step is Haar on O(d) with probability p, else the identity, so E M = (1 - p) I still holds. The
Monte Carlo estimate (:func:`posflow.simulate.values.lazy_haar_residual_sq`) uses the example's
own seed and sample count, so it is deterministic given the example; it counts as a violation
only beyond 4 standard errors. Because lazy Haar steps still have E M = (1 - p) I, the bound is
expected to survive (search: not found).
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from posflow.proofs_checks.kit import Relaxation, add_relaxation
from posflow.proofs_checks.kit import examples as ex
from posflow.simulate.values import lazy_haar_residual_sq

__all__ = [
    "AT14_Z",
    "commuting_expectation",
    "commuting_violation",
    "lazy_haar_value_examples",
]

AT14_Z = 4.0  # a Monte Carlo excess must exceed this many standard errors
_floats, _get, _int, _real = ex.floats, ex.get, ex.integer, ex.real


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

    Draws ``samples`` routes with the example's ``seed``
    (:func:`posflow.simulate.values.lazy_haar_residual_sq`: each step is Haar on O(d) with
    probability p, else the identity). With X̄ and SE the sample mean and standard error of
    X = ‖Σ_j a_j P_j v_j‖²,

    .. math:: v = \\bar X - \\frac{1+c}{1-c}\\sum_j a_j^2\\|v_j\\|^2 - 4\\,\\mathrm{SE}
              - 10^{-12}(1 + \\text{bound}),\\qquad c = 1 - p .

    Deterministic given the example. Cost O(samples·max n_j·d³).
    """
    d, p, a, v, n = _value_example(example)
    samples = _int(example, "samples", 2)
    seed = _int(example, "seed", 0)
    x = lazy_haar_residual_sq(d, p, a, v, n, samples, seed)
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
    "AT14",
    Relaxation(
        "commuting",
        "commuting SO(2)-block value steps (here lazy Haar O(d) steps)",
        lazy_haar_value_examples,
        commuting_violation,
        _describe_commuting,
    ),
)
