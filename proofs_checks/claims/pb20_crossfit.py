"""PB20 like for like (issues 24, 41): every predictor with one fitted parameter, cross-fitted.

:func:`crossfit_evidence` runs :func:`posflow.simulate.models.crossfit.crossfit` on a model's
per-window measurements and judges PB20's statement from it: some residual-aware rollout
(:data:`CANDIDATES`: (b), (c), (d), (e), each with λ_t → clip(α λ_t)) beats every rival
(:data:`CF_RIVALS`: the attention-only rollout (a) with one constant λ ≡ α, and the four nulls,
one parameter each) in cross-fitted W1/(n − 1). The split into halves is drawn :data:`SPLITS`
times: estimates are split averages and every interval adds the split variance to the
delete-one-window jackknife of the seeded split (:func:`~posflow.simulate.models.crossfit.
split_interval`). Each comparison W1(x) − W1(rival) is decided by ``kit.decide`` against the
rounding bound −r; a rollout's comparisons are joined by ``kit.combine``, and the model's
verdict is that of its best rollout (HOLDS when one rollout beats every rival, FAILS when every
rollout is beaten by some rival, else INCONCLUSIVE), with every rollout's own verdict, fitted α
and its interval beside it. Only the best rollout's comparisons are judged measurements; every
comparison is in the table (the Bonferroni family counts them all).
``kit.crossfit_library_reference`` recomputes both directions of the seeded split
independently; λ with the MLP update counted and influence normalised per window before pooling
are reported beside the judged comparison.
"""

from __future__ import annotations

import numpy as np

from posflow.proofs_checks.kit import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    Decision,
    Figure,
    Panel,
    Series,
    Table,
    at_most,
    combine,
    crossfit_decision,
    crossfit_library_reference,
    fp_tol,
    info,
    jackknife_controls,
    undecided,
)
from posflow.simulate.models.crossfit import crossfit
from posflow.simulate.models.profiles import LABELS, color, line_style

__all__ = ["CANDIDATES", "CF_RIVALS", "crossfit_decision", "crossfit_evidence",
           "jackknife_controls", "library_reference"]  # fmt: skip

# PB15's evidence keys -> the profile keys of posflow.simulate.models.profiles
CANDIDATES = {"b": "b", "b_param": "c", "d": "d", "e": "e"}
CF_RIVALS = {"a": "a", "geometric": "geometric", "linear": "linear", "uniform": "uniform",
             "shuffled": "shuffled"}  # fmt: skip
REPORTED = {**CANDIDATES, "a_param": "a_c", **CF_RIVALS}
PARAMETER = {"geometric": "r", "linear": "s"}  # the rollouts' parameter is α
_RANK = {HOLDS: 0, INCONCLUSIVE: 1, FAILS: 2}
_BEATS = {HOLDS: "beats", INCONCLUSIVE: "?", FAILS: "no"}
_EPS = float(np.finfo(np.float64).eps)
REPORT_LEVEL = 0.95  # the reported metrics' intervals (the judged differences: family level)
SPLITS = 20  # random splits into halves averaged, their variance in every interval (issue 41)


library_reference = crossfit_library_reference  # PB15's name for the kit's reference


# -- figure helpers (PB15's figures: names not keys, titles folded, log axes that show p̂) ------


# the figures' names of PB15's evidence keys (their colours: posflow.simulate.models.profiles)
SHORT = {"b": "(b)", "a": "(a)", "b_param": "(c)", "a_param": "(a) with [A]'s kernels", "d": "(d)",
         "e": "(e)", **{k: k for k in ("geometric", "linear", "uniform", "shuffled")}}  # fmt: skip


def wrap(text: str, width: int = 60) -> str:
    """``text`` folded into lines of at most ``width`` characters (panel and figure titles)."""
    import textwrap

    return "\n".join(textwrap.wrap(text, width))


def profile_floor(measured, lo) -> float:
    """The lower end of a log p(j) axis: a decade under the measured profile and its band."""
    low = np.concatenate([np.ravel(measured), np.ravel(lo)])
    low = low[np.isfinite(low) & (low > 0)]
    return float(10.0 ** (np.floor(np.log10(low.min())) - 1)) if low.size else 1e-6


def off_axis(profiles: dict, floor: float) -> str:
    """The caption's note of the profiles that leave a log axis below ``floor``."""
    low = {k: float(np.min(p)) for k, p in profiles.items() if np.min(p) < floor}
    out = [f"{SHORT[k]} ({'reaches 0' if v <= 0 else f'down to {v:.1g}'})"
           for k, v in low.items()]  # fmt: skip
    return "Below the log axis: " + ", ".join(out) + "." if out else ""


def rival_panel(title, rivals, d, colours) -> Panel:
    """W1(x) − W1(rival) with its interval, one point per rival in the rival's colour, each
    rival named under its point."""
    pts = [Series("", [i], [r[0]], "errorbar", yerr=[[r[0] - r[1]], [r[2] - r[0]]], color=c)
           for i, (r, c) in enumerate(zip(d, colours, strict=True))]  # fmt: skip
    ticks = [(i, SHORT.get(r, r)) for i, r in enumerate(rivals)]
    return Panel(wrap(title, 48), "rival", "W1 difference", pts, hlines=[(0.0, "")],
                 xticks=ticks)  # fmt: skip


# -- the evidence of one model ----------------------------------------------------------------


def _rows(cf, what) -> list:
    """The per-predictor table: parameters of both directions, then each metric's interval."""
    rows = []
    for ek, k in REPORTED.items():
        if k not in cf.keys:
            continue
        row = [ek, what(ek), PARAMETER.get(k, "α"), *map(float, cf.params[k])]
        for m in ("w1", "shape", "spearman", "first", "last"):
            est, _, lo, hi = cf.interval(m, k, REPORT_LEVEL)
            row += [est, lo, hi]
        rows.append(row)
    meas = [cf.interval(m, "measured", REPORT_LEVEL) for m in ("first", "last")]
    rows.append(["measured", "gradient influence (mean of the two halves)", "", float("nan"),
                 float("nan"), 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0,
                 *(x for e, _, lo, hi in meas for x in (e, lo, hi))])  # fmt: skip
    return rows


_COLUMNS = ["predictor", "what", "parameter", "fitted on H₁", "fitted on H₂", "W1/(n−1)", "lo",
            "hi", "shape (centred W1)", "lo", "hi", "Spearman ρ", "ρ lo", "ρ hi", "p(0)", "lo",
            "hi", "p(n−1)", "lo", "hi"]  # fmt: skip


def _ends(interval) -> tuple:
    est, _, lo, hi = interval
    return est, lo, hi


def _judged(cf, level: float, bound: float):
    """Every (rollout, rival) decision, the rollouts' statuses, and the best rollout."""
    w1 = cf.metrics["w1"]
    if cf.splits:  # S random splits: the split-averaged difference with the split variance
        dec = {x: [Decision(r, *_ends(cf.difference("w1", CANDIDATES[x], CF_RIVALS[r], level)),
                            bound, "le", level) for r in CF_RIVALS]
               for x in CANDIDATES if CANDIDATES[x] in cf.keys}  # fmt: skip
    else:
        dec = {x: [crossfit_decision(r, w1[CANDIDATES[x]] - w1[CF_RIVALS[r]], level, bound)
                   for r in CF_RIVALS]
               for x in CANDIDATES if CANDIDATES[x] in cf.keys}  # fmt: skip
    status = {x: combine(d)[0] for x, d in dec.items()}
    best = min(dec, key=lambda x: (_RANK[status[x]], float(cf.metrics["w1"][CANDIDATES[x]][0])))
    return dec, status, best


def split_vs_scipy(tag, name, cf, x, rival, level: float):
    """``CrossFit.difference`` over the splits (``split_interval``) against the same interval
    written out through scipy: ``t.interval`` at the mean of the S split statistics with scale
    √((G − 1)² sem(replicates)² + s²_split/S)."""
    from scipy import stats

    k, r = CANDIDATES[x], CF_RIVALS[rival]
    d = cf.metrics["w1"][k] - cf.metrics["w1"][r]
    sp = cf.splits["w1"][k] - cf.splits["w1"][r]
    G = d.size - 1
    se = float(np.hypot((G - 1) * stats.sem(d[1:]), np.std(sp, ddof=1) / np.sqrt(sp.size)))
    lo, hi = stats.t.interval(level, G - 1, loc=float(sp.mean()), scale=se)
    _, _, glo, ghi = cf.difference("w1", k, r, level)
    err = max(abs(glo - lo), abs(ghi - hi))
    return at_most(f"{tag}.split_interval_vs_scipy", float(err), 0.0,
                   fp_tol(1e-12 * max(1.0, abs(hi) + abs(lo)), "the same float64 sums in "
                          "another order, scipy's t quantile: a few ε of the interval ends"),
                   label=f"{name}: |split-averaged interval of W1({x}) − W1({rival}) − the "
                   "same through scipy.stats (t.interval, jackknife se, split variance)|",
                   )  # fmt: skip


def crossfit_evidence(sub, data, perm, level: float, seed: int, what, rounding: float):
    """(measurements, tables, figure, decisions of the best rollout, control replicates) of the
    cross-fitted comparison of one model (see the module docstring)."""
    tag, name = sub.tag, sub.name
    cf = crossfit(data, seed=seed, perm=perm, splits=SPLITS)
    N, L = data.lambdas.shape
    n = data.influence.shape[1]
    dec, status, best = _judged(cf, level, -rounding)
    why = fp_tol(0.0, f"the bound −{rounding:.2g} = −4(L n² + n)ε is the float64 rounding of a "
                 "W1 difference: a smaller gap is no gap")  # fmt: skip
    every = ", ".join(f"{x} {st}" for x, st in status.items())
    ms = [info(f"{tag}.crossfit.best", f"{best}: {what(best)} ({status[best]}); every rollout: "
               f"{every}", label=f"{name}: the rollout judged (the best status, then the least "
               "W1; the family counts every rollout's comparisons)")]  # fmt: skip
    for d in dec[best]:
        key = f"{tag}.crossfit.w1_best_minus_{d.label}"
        label = (
            f"{name}: upper end of the {100 * level:.3g}% jackknife interval of the "
            f"cross-fitted W1({best}) − W1({d.label}: {what(d.label)}), one parameter each"
        )
        if d.decision == INCONCLUSIVE:
            ms.append(undecided(key, d.hi, f"the interval [{d.lo:.3g}, {d.hi:.3g}] contains 0: "
                                f"{N} windows cannot tell them apart", label=label))  # fmt: skip
        else:
            ms.append(at_most(key, d.hi, -rounding, why, label=label))
    for x, s in status.items():  # every candidate's verdict, with its fitted α and interval
        a, _, lo, hi = cf.interval("param", CANDIDATES[x], level)
        inside = lo <= 1.0 <= hi
        ms += [info(f"{tag}.crossfit.verdict_{x}", f"{s}; α = {a:.3g} [{lo:.3g}, {hi:.3g}]",
                    label=f"{name}: {x} against every rival; its fitted α (mean of the two "
                    f"directions, {100 * level:.4g}% jackknife interval)"),
               info(f"{tag}.crossfit.alpha_{x}", a, label=f"{name}: fitted α of {x}"),
               info(f"{tag}.crossfit.alpha_one_{x}",
                    "α = 1 inside: [A]'s measured λ is a consistent scale" if inside else
                    "α = 1 outside: [A]'s measured λ is not the scale that fits",
                    label=f"{name}: does the {100 * level:.4g}% interval of {x}'s α contain 1 "
                    f"([A]'s rollout as defined)?")]  # fmt: skip
    alphas = []
    for x in status:
        a, _, lo, hi = cf.interval("param", CANDIDATES[x], level)
        alphas.append([x, what(x), status[x], a, lo, hi, "yes" if lo <= 1.0 <= hi else "no"])
    ms.append(split_vs_scipy(tag, name, cf, best, dec[best][0].label, level))
    prof, metric, resid, missed = library_reference(data, cf)
    tol = 16 * L * n * n * _EPS
    ms += [
        at_most(f"{tag}.crossfit_vs_library", max(prof, metric), 0.0,
                fp_tol(tol, f"float64 chains of L = {L} convex steps of n = {n}-term sums and "
                       f"metrics summing n of them, in two implementations: 16 L n² ε = {tol:.2g}"),
                label=f"{name}: max |crossfit − the library's recomputation| over the profiles, "
                "fitted null parameters and metrics of both directions"),
        at_most(f"{tag}.crossfit_fit_residual", resid, 0.0,
                fp_tol(1e-9 * (n - 1) + tol * n,
                       "the fit's own stopping rule 1e-9 (n − 1) plus the two rollouts' rounding"),
                label=f"{name}: max |mean position of the library rollout at the fitted α on "
                "the fitting half − that half's measured mean| (the fit is cross-fitted)"),
        info(f"{tag}.crossfit.unmatched_fits", missed,
             label=f"{name}: rollout or geometric fits that could not reach the measured mean"),
    ]  # fmt: skip
    diff = [[x, r.label, r.estimate, r.lo, r.hi, _BEATS[r.decision]]
            for x, ds in dec.items() for r in ds]  # fmt: skip
    halves = " | ".join(" ".join(map(str, h.tolist())) for h in cf.halves)
    # fmt: off
    tables = [
        Table(f"{tag}.crossfit", f"{name}: every predictor with one fitted parameter, fitted on "
              f"one half of the N = {N} windows and scored on the other, both directions "
              f"averaged, over {SPLITS} random splits (split-averaged estimates; jackknife "
              f"{100 * REPORT_LEVEL:g}% t intervals with the split variance added; the seeded "
              f"split's windows H₁ | H₂: {halves})", _COLUMNS, _rows(cf, what)),
        Table(f"{tag}.crossfit_alpha", f"{name}: every rollout's verdict against every rival, "
              f"and its fitted α (mean of the two directions) with its {100 * level:.4g}% "
              "jackknife interval: is α = 1, [A]'s rollout as defined, inside it?",
              ["rollout", "what", "verdict", "α", "lo", "hi", "α = 1 inside"], alphas),
        Table(f"{tag}.crossfit_differences", f"{name}: cross-fitted W1(rollout) − W1(rival), "
              f"{100 * level:.3g}% intervals, {SPLITS} splits averaged with their variance "
              "(Bonferroni over this model's rollouts × rivals)",
              ["rollout", "rival", "W1 difference", "lo", "hi", "beats it"], diff),
    ]
    # fmt: on
    mlp = getattr(data, "lambdas_mlp", None)
    if mlp is not None:  # reported, not judged: λ with the MLP update in the denominator
        cm = crossfit(data, lambdas=mlp, seed=seed, perm=perm)
        dm, sm, bm = _judged(cm, level, -rounding)
        tables += [
            Table(f"{tag}.crossfit_mlp", f"{name}, λ with the MLP update counted: every "
                  "predictor cross-fitted as above (reported, not judged)", _COLUMNS,
                  _rows(cm, what)),
            Table(f"{tag}.crossfit_mlp_differences", f"{name}, λ with the MLP update counted: "
                  f"W1(rollout) − W1(rival), {100 * level:.3g}% intervals (best: {bm}, {sm[bm]})",
                  ["rollout", "rival", "W1 difference", "lo", "hi", "beats it"],
                  [[x, r.label, r.estimate, r.lo, r.hi, _BEATS[r.decision]]
                   for x, ds in dm.items() for r in ds]),
        ]  # fmt: skip
    tables.append(_normalised(tag, name, data, perm, seed, level, rounding, what))
    ctl = cf.metrics["w1"][CANDIDATES[best]] - cf.metrics["w1"]["a"]
    return ms, tables, _figure(tag, name, cf, dec[best], best, what), dec[best], ctl


def _normalised(tag, name, data, perm, seed, level, rounding, what) -> Table:
    """Reported beside the pooled comparison ([A] pools raw gradient norms): every window's
    influence normalised to sum 1 before pooling, so each window weighs the same; one split."""
    from posflow.simulate.models.crossfit import Windows

    w = Windows.of(data)
    g = np.asarray(w.influence, dtype=np.float64)
    w.influence = g / g.sum(axis=1, keepdims=True)
    cn = crossfit(w, seed=seed, perm=perm)
    dn, sn, bn = _judged(cn, level, -rounding)
    totals = g.sum(axis=1) / g.sum(axis=1).mean()
    return Table(f"{tag}.crossfit_normalised", f"{name}, influence normalised per window before "
                 f"pooling (per-window totals {totals.min():.2g}–{totals.max():.2g}× their mean; "
                 f"[A] pools the raw norms): W1(rollout) − W1(rival), {100 * level:.4g}% "
                 f"jackknife intervals, one split (reported, not judged; best: {bn}, {sn[bn]})",
                 ["rollout", "rival", "W1 difference", "lo", "hi", "beats it"],
                 [[x, r.label, r.estimate, r.lo, r.hi, _BEATS[r.decision]]
                  for x, ds in dn.items() for r in ds])  # fmt: skip


def _figure(tag, name, cf, decs, best, what) -> Figure:
    """The cross-fitted W1 and shape metric per predictor, the best rollout's differences (both
    with the predictors in their colours, named on the axis), and the profiles of the direction
    H₁ → H₂ against p̂ of H₂ (the one legend, names not keys)."""
    keys = [ek for ek, k in REPORTED.items() if k in cf.keys]
    colours = [color(REPORTED[k]) for k in keys]
    ticks = [(i, SHORT[k]) for i, k in enumerate(keys)]  # the predictors named under their points
    panels = []
    for m, label in (("w1", "W1/(n−1)"), ("shape", "shape: centred W1/(n−1)")):
        iv = np.array([cf.interval(m, REPORTED[k], REPORT_LEVEL) for k in keys])
        pts = [Series("", [i], [r[0]], "errorbar", yerr=[[r[0] - r[2]], [r[3] - r[0]]], color=c)
               for i, (r, c) in enumerate(zip(iv, colours, strict=True))]  # fmt: skip
        panels.append(Panel(f"cross-fitted {label}, {100 * REPORT_LEVEL:g}% jackknife "
                            "intervals", "predictor", label, pts, xticks=ticks))  # fmt: skip
    d = np.array([[r.estimate, r.lo, r.hi] for r in decs])
    x = SHORT[best].strip("()")
    panels.append(rival_panel(f"W1({x}) − W1(rival), one parameter each; below 0: ({x}) "
                              "beats the rival", [r.label for r in decs], d,
                              [color(CF_RIVALS[r.label]) for r in decs]))  # fmt: skip
    n = cf.measured.shape[1]
    j = np.arange(n)
    series = [Series("measured p̂ of H₂", j, cf.measured[0], color="measured")]
    series += [Series(LABELS[REPORTED[k]], j, cf.profiles[REPORTED[k]][0],
                      color=color(REPORTED[k]), style=line_style(REPORTED[k]))
               for k in keys]  # fmt: skip
    floor = profile_floor(cf.measured[0], cf.measured[0])
    panels.append(Panel("fitted on H₁, scored on H₂", "token position j", "p(j)", series,
                        logy=True, ylim=(floor, 1.0), legend="shared"))  # fmt: skip
    below = off_axis({k: cf.profiles[REPORTED[k]][0] for k in keys}, floor)
    return Figure(f"pb15_{tag}_crossfit", wrap(f"PB20 like for like, {name}: one fitted "
                  "parameter per predictor, fitted on one half of the windows, scored on the "
                  "other", 150), panels, caption=below)  # fmt: skip
