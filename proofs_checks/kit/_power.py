"""What N windows can see: the jackknife judge's power, and the break depth it allows.

:func:`~posflow.simulate.models.layerwise.detectable_difference` (the minimum detectable
difference, MDD) and :func:`~posflow.simulate.models.layerwise.detection_power` say how large a
difference the jackknife t judge (:func:`~posflow.proofs_checks.kit.crossfit_decision`) sees with
a given power. Here:

* :func:`judge_monte_carlo` — their independent reference: the judge itself run on estimates
  drawn from the shifted t the MDD assumes (:func:`mdd_vs_judge` makes the judged comparisons of
  a check, with the exact power of a t test of normal data, ``scipy.stats.nct``, beside them);
* :func:`powered_depth` — the rule of a *break depth* along ordered comparisons (PB19's layers):
  reported only where each comparison from the one below the break up had the power to see the
  stated effect, else undetermined below the held run;
* :func:`power_controls` — both judges on known-wrong inputs (negative controls).
"""

from __future__ import annotations

import numpy as np

from posflow.proofs_checks.kit._controls import rejects
from posflow.proofs_checks.kit._evidence import (
    HOLDS,
    INCONCLUSIVE,
    at_most,
    info,
    stat_tol,
)
from posflow.proofs_checks.kit._jackknife import crossfit_decision

__all__ = ["MC_DRAWS", "MC_Z", "judge_monte_carlo", "mdd_vs_judge", "power_controls",
           "powered_depth"]  # fmt: skip

MC_DRAWS = 2000  # Monte Carlo draws of the judge per difference
MC_Z = 4.0  # |HOLDS rate − π| ≤ 4 binomial standard errors √(π(1 − π)/K)


def powered_depth(statuses, powers, power: float = 0.8) -> tuple[int | None, int, int]:
    """(break depth or None, held_from, powered_from) of comparisons ordered from the bottom.

    ``held_from`` is the lowest index d from which every status is HOLDS (len(statuses) when
    the last is not); ``powered_from`` the lowest index u from which every power is ≥ ``power``.
    The break depth is d when d = 0 (nothing breaks) or u ≤ d − 1 (the comparison below the held
    run, and every one above it, had the power to see the stated effect); None — undetermined
    below d — otherwise.

    Parameters
    ----------
    statuses : sequence of L str
        HOLDS / FAILS / INCONCLUSIVE, the lowest first (PB19: layer 0 first), L ≥ 1.
    powers : array_like, shape (L,)
        Each comparison's power, in [0, 1], to see the stated effect.
    power : float in (0, 1)
        The power required.

    Raises ValueError for an empty ``statuses``, ``powers`` of another length or outside [0, 1],
    and ``power`` outside (0, 1).
    """
    statuses = list(statuses)
    pw = np.asarray(powers, dtype=np.float64)
    if not statuses or pw.shape != (len(statuses),):
        raise ValueError(f"powers must have shape ({len(statuses)},), one per status, and "
                         f"statuses at least one; got {pw.shape}")  # fmt: skip
    if not (np.isfinite(pw).all() and (pw >= 0).all() and (pw <= 1).all()):
        raise ValueError("powers must lie in [0, 1]")
    if isinstance(power, bool) or not isinstance(power, int | float | np.floating) or not (
        0 < power < 1
    ):  # fmt: skip
        raise ValueError(f"power must lie in (0, 1); got {power!r}")
    held = len(statuses)
    while held > 0 and statuses[held - 1] == HOLDS:
        held -= 1
    u = len(pw)
    while u > 0 and pw[u - 1] >= power:
        u -= 1
    return (held if held == 0 or u <= held - 1 else None), held, u


def judge_monte_carlo(
    deltas, se: float, df: int, level: float, bound: float, seed: int, draws: int = MC_DRAWS
) -> np.ndarray:
    """How often :func:`crossfit_decision` at ``level`` says "θ ≤ ``bound``" HOLDS when the true
    θ is ``bound − δ``, for each δ of ``deltas``.

    Each draw is an estimate θ̂ = bound − δ + ŝe·T, T ~ t_df (the shifted t the MDD assumes),
    followed by df + 1 left-out replicates whose jackknife standard error is exactly ``se``;
    the judge decides each. Cost: ``draws`` × len(deltas) calls of the judge.

    Parameters
    ----------
    deltas : array_like, shape (D,)
        True advantages δ beyond the bound.
    se : float > 0
    df : int ≥ 1
        Degrees of freedom (G − 1 for G left-out windows).
    level : float in (0, 1)
        The judge's coverage (1 − the per-comparison level).
    bound : float
    seed : int
    draws : int ≥ 1

    Returns
    -------
    ndarray, shape (D,)
        The HOLDS rates.
    """
    if not (np.isfinite(se) and se > 0):
        raise ValueError(f"se must be finite and > 0; got {se!r}")
    if isinstance(df, bool) or int(df) != df or df < 1:
        raise ValueError(f"df must be an integer >= 1; got {df!r}")
    if isinstance(draws, bool) or int(draws) != draws or draws < 1:
        raise ValueError(f"draws must be an integer >= 1; got {draws!r}")
    G = int(df) + 1
    z = np.linspace(-1.0, 1.0, G)
    z = (z - z.mean()) / np.sqrt(((z - z.mean()) ** 2).sum())  # mean 0, Σz² = 1
    spread = se * np.sqrt(G / (G - 1)) * z  # (G − 1)/G · Σ spread² = se²
    T = np.random.default_rng(seed).standard_t(int(df), size=int(draws))
    rates = []
    for d in np.atleast_1d(np.asarray(deltas, dtype=np.float64)):
        est = bound - d + se * T
        held = sum(crossfit_decision("mc", np.concatenate([[e], e + spread]), level,
                                     bound).decision == HOLDS for e in est)  # fmt: skip
        rates.append(held / draws)
    return np.array(rates)


def _z(rates, powers, draws: int) -> np.ndarray:
    """|rate − π| in binomial standard errors √(π(1 − π)/draws)."""
    p = np.asarray(powers, dtype=np.float64)
    return np.abs(np.asarray(rates) - p) / np.sqrt(p * (1.0 - p) / draws)


def mdd_vs_judge(
    key: str, name: str, se: float, df: int, level: float, bound: float, power: float, seed: int
) -> list:
    """``detectable_difference`` and ``detection_power`` at one comparison's ŝe against
    :func:`judge_monte_carlo` at δ = MDD and MDD/2 (judged: ≤ :data:`MC_Z` binomial SE), and the
    exact power at the MDD of a t test of normal data (``scipy.stats.nct``, reported).

    Keys ``<key>.mdd_vs_judge_monte_carlo``, ``<key>.power_vs_judge_monte_carlo`` and
    ``<key>.exact_power_at_mdd``; ``name`` names the model in the labels.
    """
    from scipy import stats

    from posflow.simulate.models.layerwise import detectable_difference, detection_power

    alpha = 1.0 - level
    mdd = detectable_difference(se, df, alpha, power)
    deltas = np.array([mdd, mdd / 2])
    pi = detection_power(deltas, se, df, alpha)
    rates = judge_monte_carlo(deltas, se, df, level, bound, seed)
    why = stat_tol(MC_Z, f"{MC_Z:g} binomial standard errors √(π(1 − π)/K) of K = {MC_DRAWS} "
                   f"seeded draws (seed {seed})")  # fmt: skip
    nct = float(stats.nct.sf(stats.t.ppf(1.0 - alpha / 2.0, df), df, mdd / se))
    lvl = f"df = {df}, level {100 * level:.4g}%"
    return [
        at_most(f"{key}.mdd_vs_judge_monte_carlo", float(_z(rates[:1], [power], MC_DRAWS)[0]),
                0.0, why, label=f"{name}: |rate at which kit.crossfit_decision HOLDS at a true "
                f"advantage of the MDD − {power:g}| in binomial SE ({lvl}; estimates drawn from "
                f"the shifted t; HOLDS rate {rates[0]:.3f})"),
        at_most(f"{key}.power_vs_judge_monte_carlo", float(_z(rates, pi, MC_DRAWS).max()), 0.0,
                why, label=f"{name}: max |detection_power − the judge's Monte Carlo HOLDS rate| "
                f"in binomial SE at the MDD and MDD/2 ({lvl}; π = {pi[0]:.3f}, {pi[1]:.3f})"),
        info(f"{key}.exact_power_at_mdd", nct, label=f"{name}: the exact power at the MDD of a "
             f"t test of normal data (scipy.stats.nct; {lvl}): the shifted-t MDD is optimistic "
             f"by {power - nct:.3f}"),
    ]  # fmt: skip


def power_controls(se: float, df: int, level: float, bound: float, power: float, seed: int) -> list:
    """Both judges on known-wrong inputs: the MDD with its power term dropped (t_{0.5} = 0, a
    true power ≈ 0.5) must be rejected by the judge's Monte Carlo, and no break depth may be
    determined above a comparison whose power is below ``power``."""
    from posflow.simulate.models.layerwise import detectable_difference

    half = detectable_difference(se, df, 1.0 - level, 0.5)
    z = float(_z(judge_monte_carlo([half], se, df, level, bound, seed), [power], MC_DRAWS)[0])
    depth = powered_depth([INCONCLUSIVE, HOLDS], [power - 0.01, 1.0], power)[0]
    return [
        rejects("mdd_control_power_term_dropped", z <= MC_Z,
                f"the MDD with t_0.5 for t_{power:g} (true power ≈ 0.5) must lie more than "
                f"{MC_Z:g} SE from {power:g} in the judge's Monte Carlo"),
        rejects("break_depth_control_underpowered", depth is not None,
                f"comparison 0 undecided with power {power - 0.01:.2f} < {power:g} below a held "
                "comparison 1: the break depth must be undetermined"),
    ]  # fmt: skip
