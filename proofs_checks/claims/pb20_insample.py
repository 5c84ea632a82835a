"""PB15's in-sample comparison (issue 12), reported beside the cross-fitted verdict: (b) with no
fitted parameter against (a) and the nulls fitted to the measured mean, all scored on the same
windows (percentile bootstrap over windows), and the library rollout against the batched one.

The comparisons are no longer judged (they do not compare like with like: issue 24, see
:mod:`.pb20_crossfit`); their percentile intervals, decided by ``pb20_refs.rival_decision``, fill
the differences table. :func:`library_check` stays judged: the library rollout of every profile
against :func:`posflow.simulate.models.profiles_bootstrap.batched_rollouts` on the full sample.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from posflow.proofs_checks.claims import pb20_refs as R
from posflow.proofs_checks.claims.pb20_study import KEYS, NULLS, PREDICTED, RIVALS
from posflow.proofs_checks.kit import FAILS, HOLDS, INCONCLUSIVE, Decision, at_most, fp_tol, info

__all__ = ["by_evidence_key", "decisions", "judge", "library_check", "rounding", "what"]

_EPS = float(np.finfo(np.float64).eps)
_BEATS = {HOLDS: "beats", INCONCLUSIVE: "?", FAILS: "no"}


def rounding(L: int, n: int) -> float:
    """Float64 rounding of a difference of two W1/(n − 1): 4 (L n² + n) ε (each profile entry
    carries ≤ L n ε from L convex steps of n-term sums, a CDF value sums n of them, W1 averages
    the CDF gaps)."""
    return 4.0 * (L * n * n + n) * _EPS


def by_evidence_key(bs):
    """The bootstrap with its profiles keyed by PB15's evidence keys (b_param for (c), …)."""
    return replace(bs, **{f: {k: getattr(bs, f)[v] for k, v in KEYS.items()}
                          for f in ("profiles", "w1", "spearman")})  # fmt: skip


def decisions(bs, level: float) -> list[Decision]:
    """W1(b) − W1(x) ≤ −rounding for each rival x, from its percentile interval (the judge
    ``pb20_refs.rival_decision``)."""
    r = rounding(bs.lambdas.shape[1], bs.measured.shape[1])
    return [R.rival_decision(x, bs.w1["b"] - bs.w1[x], level, -r) for x in RIVALS]


def judge(tag, name, bs, level: float, N: int):
    """The in-sample comparisons of (b) with its rivals (issue 12's rule), reported: the upper
    ends of their percentile intervals and the differences table."""
    ms, rows = [], []
    for dec in decisions(bs, level):
        x, lo, hi = dec.label, dec.lo, dec.hi
        label = (f"{name} (in sample, (b) unfitted, nulls fitted; reported): upper end of the "
                 f"{100 * level:.3g}% interval of W1(b) − W1({x}: {what(x)})")  # fmt: skip
        ms.append(info(f"{tag}.w1_b_minus_{x}", hi, label=label))
        rows.append([x, dec.estimate, lo, hi, _BEATS[dec.decision]])
    return ms, rows


def what(k: str) -> str:
    return PREDICTED.get(k, NULLS.get(k))


def library_check(sub, bs, L: int, n: int):
    """The library rollout against the batched one on the full sample: measurement, decision."""
    tol = 8 * L * n * _EPS
    m = at_most(
        f"{sub.tag}.library_vs_batched_rollout",
        bs.library_gap,
        0.0,
        fp_tol(
            tol,
            f"both are float64 chains of L = {L} convex steps with n = {n}-term sums of "
            f"entries in [0, 1] (≤ n ε each) plus a row renormalisation: 8 L n ε = {tol:.2g}",
        ),
        label=f"{sub.name}: max |library rollout − independent batched rollout| on the "
        "full sample (every profile)",
    )
    gap = bs.library_gap
    return m, Decision("library", gap, gap, gap, tol)
