"""AT20's judge: the comparisons of each sub-claim, decided by the kit's rule (claim AT20).

The named tolerances of AT20 (see :mod:`posflow.proofs_checks.claims.at20_trained` for the
claim and its statistics), the comparisons of each of its six sub-claims on a multi-seed store
(:mod:`posflow.simulate.models.seed_store`), what blocks a comparison, and :func:`judge`, which
decides every comparison from its Bonferroni t interval
(:func:`~posflow.proofs_checks.kit.decide` through :class:`~posflow.proofs_checks.kit.Decision`)
and every sub-claim by :func:`~posflow.proofs_checks.kit.combine`. Beside it, what AT20 shows of
the judge: one measurement per sub-claim, the table of comparisons and the sensitivity table.
"""

from __future__ import annotations

import math

import numpy as np

from posflow.proofs_checks.kit import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    Decision,
    Table,
    at_least,
    at_most,
    combine,
    family_level,
    fp_tol,
    holds,
    rejects,
    sensitivity_grid,
    undecided,
)
from posflow.simulate.models import seed_store as SS
from posflow.simulate.models.seed_store import SeedStore

__all__ = [
    "ALPHA",
    "FLAT_TOL",
    "MIN_SEEDS",
    "MUCH_LESS",
    "NEAR_FACTOR",
    "NEAR_TOL",
    "QKV_SLACK",
    "REGIME_TOL",
    "ROPE_COLLAPSE",
    "ROPE_SCHEMES",
    "ROTATION_SCHEMES",
    "ROT_ALIBI",
    "SUB_CLAIMS",
    "decision_controls",
    "interval_comparisons",
    "judge",
    "rope_scheme",
    "sensitivity_table",
    "sub_claim_measurement",
    "sub_claim_table",
]

FLAT_TOL = 1.10
QKV_SLACK = 1.02
MUCH_LESS = 2.0
NEAR_FACTOR = 8
NEAR_TOL = 1.20
REGIME_TOL = 1.10
ROPE_COLLAPSE = 2.0
ALPHA = 0.05
MIN_SEEDS = 3
ROTATION_SCHEMES = ("random_qk", "random_qkv", "learned_qk", "learned_qkv")
ROT_ALIBI = "random_qk_alibi"
ROPE_SCHEMES = ("rope_own", "rope")
"""The RoPE the judge compares with: the first of these in the store — RoPE at its own base 10⁴
(``rope_own``, issue 25) where trained, else RoPE at the shared mixing base."""
SUB_CLAIMS = (
    "alibi_flat",
    "random_qkv_le_qk",
    "rotations_much_below_rope",
    "learned_near_train",
    "rotation_only_degrades",
    "rotations_alibi_flat",
)
_SENS = {
    "FLAT_TOL": ("flat", (1.05, 1.10, 1.25, 1.5, 2.0)),
    "QKV_SLACK": ("qkv_slack", (1.0, 1.02, 1.1, 1.5)),
    "MUCH_LESS": ("much_less", (1.2, 1.5, 2.0, 3.0)),
    "NEAR_TOL": ("near_tol", (1.1, 1.2, 1.5, 2.0, 4.0)),
    "REGIME_TOL": ("regime_tol", (1.05, 1.10, 1.25, 1.5, 2.0)),
    "ROPE_COLLAPSE": ("rope_collapse", (1.0, 1.25, 1.5, 2.0, 4.0)),
    "ALPHA": ("alpha", (0.01, 0.05, 0.1, 0.2)),
}


# -- the judge: each sub-claim's comparisons, decided by the kit's rule -------------------------
def rope_scheme(st: SeedStore) -> str:
    """The RoPE scheme of ``st`` the judge compares with (:data:`ROPE_SCHEMES`)."""
    return next((s for s in ROPE_SCHEMES if s in st.schemes), "rope")


def _comparisons(st: SeedStore, p: dict) -> dict:
    """{sub-claim: [(label, schemes, values {seed: x}, op, c)]}: "x ≤ c" (op "le") or "≥"."""
    L0, Lmax, rope = st.train_len, max(st.lengths), rope_scheme(st)
    Lnear = min(NEAR_FACTOR * L0, Lmax)

    def lr(s, L):
        return SS.log_ratios(st, s, L) if s in st.schemes else {}

    def diff(a, b, L):
        return SS.paired_log_ratios(st, a, b, L)

    f = Lmax // L0
    return {
        "alibi_flat": [
            (f"ℓ_alibi({f}×) ≤ ln {p['flat']}", ["alibi"], lr("alibi", Lmax), "le",
             math.log(p["flat"])),
        ],
        "random_qkv_le_qk": [
            (f"ℓ_random_qkv − ℓ_random_qk ({f}×) ≤ ln {p['qkv_slack']}",
             ["random_qkv", "random_qk"], diff("random_qkv", "random_qk", Lmax), "le",
             math.log(p["qkv_slack"])),
        ],
        "rotations_much_below_rope": [
            (f"ℓ_{rope} − ℓ_{s} ({f}×) ≥ ln {p['much_less']}", [rope, s], diff(rope, s, Lmax),
             "ge", math.log(p["much_less"]))
            for s in ROTATION_SCHEMES
        ],
        "learned_near_train": [
            (f"ℓ_{s}({Lnear // L0}×) ≤ ln {p['near_tol']}", [s], lr(s, Lnear), "le",
             math.log(p["near_tol"]))
            for s in ("learned_qk", "learned_qkv")
        ],
        "rotation_only_degrades": [
            (f"ℓ_{s}({f}×) ≥ ln {p['flat']}", [s], lr(s, Lmax), "ge", math.log(p["flat"]))
            for s in ROTATION_SCHEMES
        ],
        "rotations_alibi_flat": [
            (f"ℓ_{ROT_ALIBI}({f}×) ≤ ln {p['flat']}", [ROT_ALIBI], lr(ROT_ALIBI, Lmax), "le",
             math.log(p["flat"])),
            (f"ℓ_{ROT_ALIBI} − ℓ_random_qk ({f}×) ≤ 0", [ROT_ALIBI, "random_qk"],
             diff(ROT_ALIBI, "random_qk", Lmax), "le", 0.0),
        ],
    }  # fmt: skip


_NEEDS_COLLAPSE = ("rotations_much_below_rope", "rotation_only_degrades")


def _blocks(st: SeedStore, name, schemes, n, min_seeds, regime_tol, rope_collapse) -> list[str]:
    """Why a comparison of ``schemes`` (n paired seeds) in sub-claim ``name`` cannot count."""
    missing = [s for s in schemes if s not in st.schemes]
    if missing:
        return [f"missing schemes: {', '.join(missing)}"]
    out = [f"{n} paired seed(s), needs ≥ {min_seeds}"] if n < min_seeds else []
    rope = rope_scheme(st)
    if rope not in st.schemes:
        return [*out, "RoPE missing: the regime cannot be checked"]
    L0, Lmax = st.train_len, max(st.lengths)
    rope0 = SS.seed_mean_ppl(st, rope, L0)
    for s in schemes:
        ppl0 = SS.seed_mean_ppl(st, s, L0)
        if ppl0 > regime_tol * rope0:
            out.append(f"not in the regime: {s}'s PPL({L0}) = {ppl0:.4g} is "
                       f"{100 * (ppl0 / rope0 - 1):.0f} % above RoPE's {rope0:.4g} "
                       f"(REGIME_TOL {regime_tol})")  # fmt: skip
    rope_r = SS.seed_mean_ratio(st, rope, Lmax)
    if name in _NEEDS_COLLAPSE and not rope_r >= rope_collapse:
        out.append(f"RoPE has not collapsed: its ratio at {Lmax // L0}× is {rope_r:.3g} < "
                   f"ROPE_COLLAPSE {rope_collapse}")  # fmt: skip
    return out


def judge(
    st: SeedStore, *, flat=FLAT_TOL, qkv_slack=QKV_SLACK, much_less=MUCH_LESS, near_tol=NEAR_TOL,
    regime_tol=REGIME_TOL, rope_collapse=ROPE_COLLAPSE, alpha=ALPHA, min_seeds=MIN_SEEDS,
) -> list[dict]:  # fmt: skip
    """The six sub-claims of AT20 on ``st``, each ``{"name", "status", "reason", "comparisons"}``.

    Each comparison: ``{"label", "schemes", "n", "mean", "lo", "hi", "alpha", "p_sign", "op",
    "bound", "decision", "blocked", "values"}`` with the t interval at level 1 − alpha/M (M
    comparisons in all; :func:`~posflow.proofs_checks.kit.family_level`) and its decision
    HOLDS / FAILS / INCONCLUSIVE from the interval alone
    (:class:`~posflow.proofs_checks.kit.Decision`); ``blocked`` lists why the comparison cannot
    count (fewer than ``min_seeds`` paired seeds, a missing scheme, a scheme's PPL(L_0) above
    ``regime_tol`` × RoPE's, or — for the sub-claims about degradation at long lengths — RoPE's
    seed-mean ratio at L_max below ``rope_collapse``). A sub-claim FAILS when an unblocked
    comparison fails, HOLDS when every comparison holds and none is blocked, else is
    INCONCLUSIVE (:func:`~posflow.proofs_checks.kit.combine`); ``reason`` says why.
    """
    p = {"flat": flat, "qkv_slack": qkv_slack, "much_less": much_less, "near_tol": near_tol}
    comps = _comparisons(st, p)
    a = family_level(alpha, sum(len(v) for v in comps.values()))
    out = []
    for name in SUB_CLAIMS:
        rows, decisions = [], []
        for label, schemes, vals, op, c in comps[name]:
            stats = SS.comparison_statistics(vals, c, a)
            blocked = _blocks(st, name, schemes, stats["n"], min_seeds, regime_tol, rope_collapse)
            d = Decision(label, stats["mean"], stats["lo"], stats["hi"], c, op, a, blocked)
            decisions.append(d)
            rows.append({"label": label, "schemes": schemes, "op": op, "bound": c,
                         "alpha": a, "values": vals, **stats, "decision": d.decision,
                         "blocked": blocked})  # fmt: skip
        status, reason = combine(decisions)
        out.append({"name": name, "status": status, "comparisons": rows, "reason": reason})
    return out


def fmt_iv(lo, hi) -> str:
    """``[lo, hi]`` to 3 digits, or "—" when an end is not finite."""
    return f"[{lo:.3g}, {hi:.3g}]" if math.isfinite(lo) and math.isfinite(hi) else "—"


def _slack(r) -> float:
    return r["hi"] - r["bound"] if r["op"] == "le" else r["bound"] - r["lo"]


def sub_claim_measurement(sub: dict):
    """The measurement of one sub-claim of :func:`judge`: undecided with its reason when
    INCONCLUSIVE, else the deciding end of an interval against its bound (the weakest comparison
    when it HOLDS, the first failing one when it FAILS), every comparison in the label."""
    comps = sub["comparisons"]
    note = "; ".join(
        f"{c['label']}: mean {c['mean']:.3g}, {100 * (1 - c['alpha']):.2f} % t interval "
        f"{fmt_iv(c['lo'], c['hi'])} over n = {c['n']} seeds, sign-test p = "
        f"{c['p_sign']:.3g} → {c['decision']}"
        for c in comps
    )
    key = f"sub_claim_{sub['name']}"
    if sub["status"] == INCONCLUSIVE:
        worst = comps[0]
        lab = f"sub-claim {sub['name']}: {worst['label']}, seed mean"
        return undecided(key, worst["mean"], f"{sub['reason']} ({note})", label=lab)
    if sub["status"] == HOLDS:
        c = comps[0] if len(comps) == 1 else max(comps, key=_slack)  # the weakest comparison
    else:
        c = next(r for r in comps if r["decision"] == FAILS)
    end, what = (c["hi"], "upper") if c["op"] == "le" else (c["lo"], "lower")
    mk = at_most if c["op"] == "le" else at_least
    return mk(key, end, c["bound"], label=f"sub-claim {sub['name']}: {what} end of the "
              f"interval of {c['label']} ({note})")  # fmt: skip


def sub_claim_table(subs: list[dict]) -> Table:
    """Every comparison of :func:`judge`'s sub-claims ``subs``: statistic, interval, decision."""
    cols = ["sub-claim", "comparison", "n", "mean", "lower", "upper", "level", "sign p",
            "decision", "blocked by", "sub-claim verdict"]  # fmt: skip
    rows = [
        [sub["name"], c["label"], c["n"], c["mean"], c["lo"], c["hi"], 1 - c["alpha"],
         c["p_sign"], c["decision"], "; ".join(c["blocked"]), sub["status"]]
        for sub in subs
        for c in sub["comparisons"]
    ]  # fmt: skip
    return Table(
        "sub_claims",
        "each comparison: seed-mean statistic, Bonferroni t interval, sign test, decision",
        cols,
        rows,
        note=f"intervals m ± t·s/√n at α = {ALPHA}/M per comparison (M = "
        f"{sum(len(s['comparisons']) for s in subs)}); regime: every compared scheme's "
        f"PPL(L_train) ≤ REGIME_TOL = {REGIME_TOL} × RoPE's; sub-claims 3 and 5 need RoPE's "
        f"ratio at L_max ≥ ROPE_COLLAPSE = {ROPE_COLLAPSE}",
    )


def sensitivity_table(st: SeedStore) -> Table:
    """The sub-claim verdicts of :func:`judge` at the values ``_SENS`` of each named parameter
    (the others at their defaults)."""
    return sensitivity_grid(
        "sensitivity",
        "sub-claim verdicts at other values of each named parameter (the others at defaults)",
        {const: values for const, (_, values) in _SENS.items()},
        lambda const, v: [r["status"] for r in judge(st, **{_SENS[const][0]: v})],
        SUB_CLAIMS,
    )


# -- the judge's own checks: its intervals against scipy, its decision rule on wrong inputs ------
def _interval_judge(key, got, ref, label):
    """The judge of the t intervals: max |(mean, lo, hi) − reference| over the comparisons."""
    err = float(np.max(np.abs(np.asarray(got, float) - np.asarray(ref, float)))) if got else 0.0
    return at_most(key, err, 0.0,
                   fp_tol(1e-12, "means of ≤ 3 float64 log-ratios of order 1 and one t quantile "
                          "(two scipy routes): ≤ 1e-14, held to 1e-12"), label=label)  # fmt: skip


def _scipy_interval(values: dict, a: float):
    """(mean, lo, hi) by scipy.stats.t.interval with the standard error scipy.stats.sem."""
    from scipy import stats

    x = np.array([values[k] for k in sorted(values)], dtype=float)
    se = float(stats.sem(x))
    if se == 0:  # identical values: the interval is the point (scipy refuses scale 0)
        return [float(x.mean())] * 3
    lo, hi = stats.t.interval(1 - a, x.size - 1, loc=x.mean(), scale=se)
    return [float(x.mean()), float(lo), float(hi)]


def _log_ratio_reference(st: SeedStore, s: str, L: int) -> dict:
    """{seed: ln PPL_s,k(L) − ln PPL_s,k(L_0)} from the store's PPL (exp of mean nats)."""
    j, j0 = st.lengths.index(L), st.lengths.index(st.train_len)
    return {k: float(np.log(st.ppl(s, k)[j]) - np.log(st.ppl(s, k)[j0])) for k in st.seeds(s)}


def interval_comparisons(st: SeedStore, subs: list[dict]) -> list:
    """``comparison_statistics``/``t_interval`` against scipy.stats.t.interval, and
    ``log_ratios`` against ln PPL(L) − ln PPL(L_0) from the store, with negative controls."""
    got, ref, wrong = [], [], []
    for sub in subs:
        for c in sub["comparisons"]:
            if c["n"] >= 2:
                got.append([c["mean"], c["lo"], c["hi"]])
                ref.append(_scipy_interval(c["values"], c["alpha"]))
                wrong.append(_scipy_interval(c["values"], ALPHA))  # no Bonferroni correction
    lr_err = max(abs(SS.log_ratios(st, s, L)[k] - v)
                 for s in st.schemes for L in st.lengths
                 for k, v in _log_ratio_reference(st, s, L).items())  # fmt: skip
    Lmax = max(st.lengths)
    for sub in subs:  # the paired comparisons (all at L_max) against differences of the above
        for c in sub["comparisons"]:
            if len(c["schemes"]) == 2 and all(s in st.schemes for s in c["schemes"]):
                x, y = (_log_ratio_reference(st, s, Lmax) for s in c["schemes"])
                ref_d = {k: x[k] - y[k] for k in sorted(set(x) & set(y))}
                if set(ref_d) != set(c["values"]):
                    lr_err = math.inf
                else:
                    lr_err = max(lr_err, *(abs(c["values"][k] - v) for k, v in ref_d.items()))
    return [
        _interval_judge("t_intervals_vs_scipy", got, ref,
                        "max |(mean, lo, hi) of every comparison − scipy.stats.t.interval at "
                        "α/M with scipy.stats.sem|"),
        at_most("log_ratios_vs_ppl", float(lr_err), 0.0,
                fp_tol(1e-12, "ln exp(mean nats) vs mean nats (order 10): ≤ 4 ε·10, held to "
                       "1e-12"),
                label="max |log_ratios − (ln PPL(L) − ln PPL(L_0))| over schemes, seeds, L, and "
                "of each paired comparison's d_k against the difference of those"),
        rejects("interval_judge_control_unadjusted_level",
                _interval_judge("c", wrong, ref, "c") if got else True,
                "intervals at the unadjusted level α instead of α/M (Bonferroni dropped)"),
    ]  # fmt: skip


def decision_controls(subs: list[dict]) -> list:
    """Negative controls of the decision rule (kit.decide through Decision and kit.combine) on
    the first comparison with a finite interval, moved to known-wrong positions: k = 3
    half-widths past its bound must FAIL; straddling its bound must be INCONCLUSIVE, not HOLD;
    a blocked comparison whose interval holds must not make its sub-claim HOLD."""
    c = next((c for s in subs for c in s["comparisons"]
              if math.isfinite(c["lo"]) and c["hi"] > c["lo"]), None)  # fmt: skip
    if c is None:
        return []
    h, b, op = (c["hi"] - c["lo"]) / 2, c["bound"], c["op"]
    sign = 1.0 if op == "le" else -1.0  # the wrong side of the bound

    def at(centre, blocked=()):
        return Decision("control", centre, centre - h, centre + h, b, op, c["alpha"],
                        list(blocked))  # fmt: skip

    past, straddle, held = at(b + sign * 3 * h), at(b + sign * h / 2), at(b - sign * 3 * h)
    return [
        rejects("decision_control_past_bound", past.decision != FAILS,
                f"{c['label']}: interval moved 3 half-widths past its bound must FAIL"),
        rejects("decision_control_straddling", straddle.decision != INCONCLUSIVE,
                f"{c['label']}: interval straddling its bound must be INCONCLUSIVE"),
        rejects("decision_control_blocked", combine([at(b - sign * 3 * h, ["blocked"])])[0]
                == HOLDS, "a blocked comparison whose interval holds must not HOLD"),
        holds("decision_control_unblocked_holds", held.decision == HOLDS, role="control",
              label="the same interval on the claim's side, unblocked, HOLDS (rule not frozen)"),
    ]  # fmt: skip
