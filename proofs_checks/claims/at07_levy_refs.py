"""Independent references of claim AT7 (:mod:`posflow.proofs_checks.claims.at07_levy`): the
Lévy bound, the exact tail of one coordinate of a uniform unit vector and the cap lower bound by
elementary closed forms, evaluated at a few (d, ε) points with :mod:`math`."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["PTS_D", "PTS_EPS", "cap_closed", "levy_closed", "rel_errors", "tail_closed"]

PTS_D, PTS_EPS = (2, 3, 4, 5, 16, 64), (0.0, 0.1, 0.37, 0.6, 0.95)
"""The (d, ε) points of the closed-form comparisons."""


def levy_closed(d, e):
    return 2.0 * math.exp(-d * e * e / 2.0)


def tail_closed(d, e):
    """Pr(|u₁| > ε) by elementary closed forms: u₁ has density ∝ (1 − x²)^{(d−3)/2}."""
    if e >= 1.0:
        return 0.0
    return {2: 1 - 2 / math.pi * math.asin(e), 3: 1 - e,
            4: 1 - 2 / math.pi * (e * math.sqrt(1 - e * e) + math.asin(e)),
            5: 1 - 1.5 * e + 0.5 * e**3}[d]  # fmt: skip


def cap_closed(d, e):
    """x^a/(a B(a, ½)), x = 1 − ε², a = (d − 1)/2, B(a, ½) = Γ(a)Γ(½)/Γ(a + ½) by math.gamma."""
    a = (d - 1) / 2
    return (1 - e * e) ** a * math.gamma(a + 0.5) / (a * math.gamma(a) * math.sqrt(math.pi))


def rel_errors(routine, closed, dims, eps=PTS_EPS):
    """max |routine(d, ε)/closed(d, ε) − 1| (absolute where the closed form is 0)."""
    err = 0.0
    for d in dims:
        got = np.atleast_1d(routine(d, np.asarray(eps)))
        for g, e in zip(got, eps, strict=True):
            ref = closed(d, e)
            err = max(err, abs(g / ref - 1) if ref else abs(g))
    return float(err)
