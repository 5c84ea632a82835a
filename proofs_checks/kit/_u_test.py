"""The U test shared by PB11, PB14 and the ``residual`` relaxation of PB11.

A *U* here is a dip of stated relative depth with its minimum away from both ends
(:func:`valley`): the argmin k of the profile lies at least ``margin·(n−1)`` positions from
either end and ``1 − p(k)/min(p(0), p(n−1)) ≥ depth``. The two numbers are modelling parameters
that [A] does not fix (:data:`U_MIN_DEPTH`, :data:`U_END_MARGIN`); every verdict that uses them
comes with a sensitivity table over :data:`U_DEPTHS` × :data:`U_MARGINS`.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["U_DEPTHS", "U_END_MARGIN", "U_MARGINS", "U_MIN_DEPTH", "interior_depth", "is_u",
           "valley"]  # fmt: skip

# A U needs a dip at least this deep relative to the lower end: p(argmin) ≤ (1 − 0.1)·min(p(0),
# p(n−1)). A modelling choice ([A] states no depth); sensitivity tables vary it 0.01 … 0.5.
U_MIN_DEPTH = 0.1
# … with the argmin at least this fraction of the positions from either end (13 tokens at
# n = 256), so that a minimum at j = 1…12 or 243…254 is not a U. Varied 0.01 … 0.2.
U_END_MARGIN = 0.05

U_DEPTHS = (0.01, 0.05, 0.1, 0.2, 0.5)  # the depths of the sensitivity tables
U_MARGINS = (0.01, 0.02, 0.05, 0.1, 0.2)  # the end margins of the sensitivity tables


def valley(p, margin: float = U_END_MARGIN) -> tuple[int, float, bool]:
    """The dip of a profile: ``(k, depth, away)``.

    ``k`` is the argmin of ``p``, ``depth = 1 − p(k)/min(p(0), p(n−1))`` (0 when an end is the
    minimum, NaN when both ends are 0) and ``away`` says whether ``k`` lies at least
    ``ceil(margin·(n−1))`` positions (at least 1) from both ends.
    """
    a = np.asarray(p, dtype=np.float64)
    n = a.size
    k = int(np.argmin(a))
    ends = min(a[0], a[-1])
    depth = float(1.0 - a[k] / ends) if ends > 0 else math.nan
    gap = max(1, math.ceil(margin * (n - 1)))
    return k, depth, bool(gap <= k <= n - 1 - gap)


def is_u(p, depth: float = U_MIN_DEPTH, margin: float = U_END_MARGIN) -> bool:
    """A U: the argmin away from both ends (``margin``) and a dip of relative ``depth``."""
    _, d, away = valley(p, margin)
    return away and d >= depth


def interior_depth(p, margin: float = U_END_MARGIN) -> float:
    """The depth of the lowest point away from both ends, relative to the lower end:
    ``1 − min_{g ≤ j ≤ n−1−g} p(j) / min(p(0), p(n−1))``, g = ``ceil(margin·(n−1))`` (at least 1).

    A continuous statistic for an estimated profile: :func:`is_u` holds exactly when the global
    argmin lies in that interior and this depth is at least ``depth``; an interval of it over
    resamples decides "the profile dips at least ``depth`` below its ends" (PB15). NaN when both
    ends are 0 or no interior position exists (n < 3).
    """
    a = np.asarray(p, dtype=np.float64)
    n = a.size
    gap = max(1, math.ceil(margin * (n - 1)))
    ends = min(a[0], a[-1]) if n else 0.0
    if n - 2 * gap < 1 or not ends > 0:
        return math.nan
    return float(1.0 - a[gap : n - gap].min() / ends)
