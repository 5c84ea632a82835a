"""Claim PB15 of [A], as published (issue 41): residual-aware beats attention-only, at α = 1.

[A]: the residual-aware rollout, from the architecture (mask, residual, positional bias) and the
measured λ_t alone, predicts a pretrained LM's input-token influence with a smaller W1/(n − 1)
than the attention-only rollout; the profiles are broad, often U-shaped. Per model and per kernel
(:mod:`posflow.simulate.models.published`): [A]'s kernels without content (ALiBi slopes; the
uniform causal kernel for RoPE and NoPE models), [A]'s ALiBi + content kernels, and the measured
head-averaged kernels — each residual-aware profile against the attention-only rollout through
the same kernels, W1(x) − W1(rival) ≤ −r by the delete-one-group jackknife t interval
(``kit.crossfit_decision``; r the float64 rounding of a W1 difference), Bonferroni over the
model's own comparisons (:data:`ALPHA` family-wise; a model's family never depends on which
other models are installed). The U statement, read as [A]'s "predicted profiles closely match":
where [A]'s predicted profile is a U (``kit.is_u``), the measured one is too: its interior dip
(``kit.interior_depth``) at least ``kit.U_MIN_DEPTH`` deep by its jackknife interval, with the
full sample's minimum away from both ends.

Setting (:data:`SETTING`): [A] measured pretrained LMs at n = 256. The stored studies of SmolLM2
and Gemma 3 at n = 256 (``docs/smollm2_study.py``) are in it and decide; the live runs (the toy
LM, a model trained here; SmolLM2 at n = 64) are sub-verdicts with their scope, reported but
not deciding (``kit.scoped``); with no run in the setting the claim is INCONCLUSIVE. The
like-for-like comparison with fitted parameters is PB20, posflow's own claim.
"""

from __future__ import annotations

import numpy as np

from posflow.proofs_checks.claims import pb15_refs as R
from posflow.proofs_checks.kit import (
    DENSE_APPLY,
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    RESIDUAL_STEP,
    U_END_MARGIN,
    U_MIN_DEPTH,
    Context,
    Decision,
    Evidence,
    Scope,
    Setting,
    Table,
    add_mutant,
    at_least,
    at_most,
    cite,
    combine,
    crossfit_decision,
    family_level,
    fp_tol,
    info,
    interior_depth,
    is_u,
    jackknife_controls,
    not_in_setting,
    optional_torch,
    param_tol,
    register,
    rejects,
    scoped,
    transposed_dense_apply,
    undecided,
    valley,
)
from posflow.simulate.models.published import LABELS, PAIRS, Published, published_comparison
from posflow.simulate.models.subjects import installed, live_subjects, measured, scope_of

__all__ = ["PAPER_N", "SETTING", "judge_model", "pb15", "u_decision"]

ALPHA = 0.05  # family-wise level of each model's comparisons
PAPER_N = 256  # [A]'s comparison length
KERNEL_OF = {"b_A": "[A]'s kernels", "c": "[A]'s kernels + content", "b": "measured kernels"}
_EPS = float(np.finfo(np.float64).eps)


def _gaps(scope: Scope) -> list[str]:
    out = []
    if scope.steps != "pretrained":
        out.append("a model trained here, not a pretrained LM")
    if scope.n != PAPER_N:
        out.append(f"n = {scope.n}, not [A]'s {PAPER_N}")
    return out


SETTING = Setting("[A]", f"pretrained LMs measured at n = {PAPER_N}", _gaps)


def rounding(L: int, n: int) -> float:
    """Float64 rounding of a difference of two W1/(n − 1) (PB20's bound 4 (L n² + n) ε)."""
    return 4.0 * (L * n * n + n) * _EPS


def u_decision(profiles, level: float) -> Decision:
    """[A]'s U statement for a profile estimated with jackknife replicates ``profiles``
    (G + 1, n): its interior dip (``kit.interior_depth``) at least ``kit.U_MIN_DEPTH`` deep —
    the jackknife t interval at ``level`` against that depth (HOLDS: the lower end reaches it;
    FAILS: the upper end is below it) — and the full sample's argmin in the interior
    (``kit.is_u``; when the interval holds but the full sample's minimum is near an end the
    comparison is blocked: an end-side dip is not [A]'s U)."""
    from posflow.simulate.models.crossfit import jackknife_interval

    x = np.array([interior_depth(p) for p in np.asarray(profiles)])
    est, _, lo, hi = jackknife_interval(x, level)
    d = Decision("measured interior dip", est, lo, hi, U_MIN_DEPTH, "ge", level)
    if d.decision == HOLDS and not is_u(np.asarray(profiles)[0]):
        d.blocked.append("the full sample's minimum lies near an end")
    return d


def u_controls(level: float) -> list:
    """PB15's U judge (``pb15_published.u_decision``) on known-wrong inputs: a monotone profile
    (no interior dip) and a profile whose deepest point lies next to an end must not hold."""
    G, n = 8, 40
    flat = np.tile(np.linspace(1.0, 2.0, n), (G + 1, 1))
    edge = np.tile(np.r_[1.0, 0.2, np.full(n - 3, 0.85), 1.0], (G + 1, 1))
    d_edge = u_decision(edge, level)
    return [
        rejects("u_control_monotone", u_decision(flat, level).decision == HOLDS,
                "a monotone profile (no interior dip) must not be a U"),
        rejects("u_control_dip_at_an_end", d_edge.decision == HOLDS and not d_edge.blocked,
                "a profile whose deepest point lies next to an end must not count as [A]'s U"),
    ]  # fmt: skip


def judge_model(tag: str, name: str, pub: Published, L: int, scope: Scope):
    """(measurements, rows, per-kernel statuses, level) of one model's [A] comparison: one
    W1 comparison per kernel and the U statement of the measured profile (where some kernel
    predicts a U), Bonferroni over these comparisons of this model only."""
    keys = [x for x in PAIRS if x in pub.w1]
    predicted_u = {x: is_u(pub.profiles[x][0]) for x in keys}
    family = len(keys) + (1 if any(predicted_u.values()) else 0)
    level = 1.0 - family_level(ALPHA, family)
    n = pub.measured.shape[1]
    bound = -rounding(L, n)
    why = fp_tol(0.0, f"the bound −{-bound:.2g} = −4(L n² + n)ε is the float64 rounding of a W1 "
                 "difference: a smaller gap is no gap")  # fmt: skip
    ms, rows, status = [], [], {}
    u = u_decision(pub.measured, level)
    ukey = f"{tag}.u_measured_dip"
    ulabel = (f"{name}: lower end of the {100 * level:.4g}% jackknife interval of the measured "
              f"profile's interior dip, 1 − min p(j)/min(p(0), p(n−1)) (U_MIN_DEPTH "
              f"{U_MIN_DEPTH:g}, U_END_MARGIN {U_END_MARGIN:g})")  # fmt: skip
    if not any(predicted_u.values()):
        ms.append(info(ukey, u.lo, label=ulabel + ": vacuous, no kernel predicts a U here"))
    elif u.blocked or u.decision == INCONCLUSIVE:
        why_u = "; ".join(u.blocked) or f"[{u.lo:.3g}, {u.hi:.3g}] contains {U_MIN_DEPTH:g}"
        ms.append(undecided(ukey, u.lo, why_u, label=ulabel))
    else:
        ms.append(at_least(ukey, u.lo, U_MIN_DEPTH, param_tol(
            "U_MIN_DEPTH", 0.0, "a U needs this relative dip ([A] states none; PB11's "
            "sensitivity table varies it)"), label=ulabel))  # fmt: skip
    for x in keys:
        r = PAIRS[x]
        d = crossfit_decision(r, pub.w1[x] - pub.w1[r], level, bound)
        key = f"{tag}.w1_{x}_minus_{r}"
        label = (f"{name}, {KERNEL_OF[x]}: upper end of the {100 * level:.4g}% jackknife "
                 f"interval of W1({LABELS[x]}) − W1({LABELS[r]}), α = 1")  # fmt: skip
        if d.decision == INCONCLUSIVE:
            ms.append(undecided(key, d.hi, f"[{d.lo:.3g}, {d.hi:.3g}] contains the bound",
                                label=label))  # fmt: skip
        else:
            ms.append(at_most(key, d.hi, bound, why, label=label))
        status[x] = combine([d] + ([u] if predicted_u[x] else []))[0]
        est, _, lo, hi = pub.interval(x, 0.95)
        est_r, _, lo_r, hi_r = pub.interval(r, 0.95)
        k, depth, _ = valley(pub.profiles[x][0])
        rows.append([x, LABELS[x], est, lo, hi, est_r, lo_r, hi_r, d.estimate, d.lo, d.hi,
                     d.decision, "yes" if predicted_u[x] else "no", k, depth,
                     status[x]])  # fmt: skip
    k, depth, _ = valley(pub.measured[0])
    rows.append(["measured", "gradient influence", *[float("nan")] * 9, u.decision,
                 "yes" if is_u(pub.measured[0]) else "no", k, depth,
                 u.decision if any(predicted_u.values()) else "vacuous"])  # fmt: skip
    return ms, rows, status, level


_COLUMNS = ["profile", "kernels", "W1/(n−1)", "lo", "hi", "attention-only W1/(n−1)", "lo", "hi",
            "difference", "lo (family)", "hi (family)", "decision", "U (kit.is_u)", "argmin",
            "dip depth", "verdict"]  # fmt: skip


# the stored studies (package data, docs/smollm2_study.py): tag -> (model, name, scope tag)
STUDIES = {"smollm2_study": ("smollm2-135m", "SmolLM2", "smollm2"),
           "gemma3_study": ("gemma3-270m", "Gemma 3", "gemma3")}  # fmt: skip


def _stored(tag: str):
    """(Published, scope, L, note) of the stored study of ``tag`` at n = 256, or the reason why
    there is none."""
    from posflow.simulate.models.study import stored_study

    model, name, _ = STUDIES[tag]
    store = stored_study(model)
    run = None if store is None else store.get("runs", {}).get(str(PAPER_N))
    if run is None or "published" not in run:
        return None, (
            f"{name}'s stored study has no [A] comparison at n = {PAPER_N} (python "
            f"docs/smollm2_study.py --model {model} --n {PAPER_N} --redo)"
        )
    pub = Published.from_summary(run["published"])
    G = pub.measured.shape[0] - 1
    short = STUDIES[tag][2]
    sc = Scope(**scope_of(short, PAPER_N, f"{run['sequences']} windows in {G} groups",
                          seeds=store["setup"]["command"].split("--seed ")[-1]))  # fmt: skip
    return (pub, sc, int(run["layers"]), run), name


def _smollm2_installed() -> bool:
    return installed("smollm2-135m")


def _live(ctx: Context):
    """The live models, PB20's windows (``live_subjects``: the toy LM, SmolLM2 when installed,
    Gemma 3 at full), read from their shared measurement."""
    for sub in live_subjects(ctx.full, ctx.seed, smollm2=_smollm2_installed(),
                             gemma3=installed("gemma3-270m")):  # fmt: skip
        _, _, _, data = measured(sub)
        pub = published_comparison(data)
        N, L = data.lambdas.shape
        n = data.influence.shape[1]
        sc = Scope(**scope_of(sub.tag, n, f"{N} windows", seeds=ctx.seed))
        yield sub.tag, sub.name, pub, L, sc, R.vs_dense(sub.tag, sub.name, pub, data)


_CITES = (
    cite("posflow.simulate.models.published:published_comparison",
         "a dense written-out reference (plain means, [A]'s kernels as dense banded softmaxes, "
         "the rollout as a vector chain, W1 by scipy.stats.wasserstein_distance) on every live "
         "model; on the stored studies, the study's own W1 of (a), (b), (c)",
         "toy.published_vs_dense"),
    cite("posflow.simulate.models.crossfit:jackknife_interval",
         "the jackknife t interval through scipy.stats (t.interval, scale (G − 1)·sem)",
         "jackknife_interval_vs_direct"),
)  # fmt: skip


@register(
    "PB15",
    "[A]",
    "on a pretrained causal LM, the residual-aware rollout with measured λ_t and no fitted "
    "parameter (α = 1), through [A]'s kernels (ALiBi slopes with and without the measured "
    "content; the uniform causal kernel where the model has no positional bias in its scores) "
    "and through the measured head-averaged kernels, predicts the measured gradient influence "
    "with a smaller W1/(n−1) than the attention-only rollout through the same kernels; where "
    "the predicted profile is U-shaped, so is the measured one",
    assumptions=(
        f"[A]'s setting: pretrained LMs measured at n = {PAPER_N} (the stored studies of "
        "SmolLM2-135M and Gemma 3 270M); a run outside it (the toy LM, n ≠ 256) is a "
        "sub-verdict with its scope, reported but not deciding; with no run in the setting the "
        "claim is INCONCLUSIVE",
        "windows independent (the delete-one-group jackknife)",
    ),
    compares=_CITES,
)
def pb15(ctx: Context) -> Evidence:
    """Claim PB15 ([A], as published): per model and kernel, W1(residual) − W1(attention-only)
    at α = 1 with jackknife intervals, and the U statement; stored studies at n = 256 decide,
    live runs are scoped sub-verdicts."""
    ms, rows, scopes, ctl = [], [], {}, None
    parts = []
    for tag in STUDIES:
        got, name = _stored(tag)
        if got is None:
            ms.append(undecided(f"{tag}.published", float("nan"), name,
                                label=f"[A]'s comparison at n = {PAPER_N}"))  # fmt: skip
            continue
        pub, sc, L, run = got
        parts.append((tag, name, pub, L, sc, R.vs_study(tag, name, pub, run)))
    torch = optional_torch()
    if torch is not None:
        parts += list(_live(ctx))
    for tag, name, pub, L, sc, ref in parts:
        m, r, status, level = judge_model(tag, name, pub, L, sc)
        m, gaps = scoped(m, sc, SETTING)
        where = "in [A]'s setting" if not gaps else "outside [A]'s setting: " + "; ".join(gaps)
        kernels = ", ".join(f"{KERNEL_OF[x]} {s}" for x, s in status.items())
        ms.append(info(f"{tag}.verdict", f"{_model_verdict(status)} ({kernels}); {where}",
                       label=f"{name}: sub-verdict at its scope ({sc.line()})"))  # fmt: skip
        ms += m
        scopes[tag] = sc
        rows += [[name, *row] for row in r]
        ms.append(ref)
        if ctl is None:
            ctl = (pub.w1["b"] - pub.w1["a"], level, -rounding(L, pub.measured.shape[1]))
    inside = sum(not SETTING.differences(sc) for sc in scopes.values())
    m = not_in_setting("in_setting", SETTING, inside)
    if ctl is None:  # no model at all: the judge's controls on fixed replicates
        ctl = (np.linspace(-1.0, 1.0, 9), 1.0 - family_level(ALPHA, 4), 0.0)
    ms += ([m] if m else []) + jackknife_controls(*ctl) + u_controls(ctl[1])
    ms.append(R.interior_depth_vs_direct([pub.measured[0] for _, _, pub, *_ in parts]))
    table = Table("published", "[A]'s comparison at α = 1, per model and kernel: W1/(n−1) with "
                  "95% jackknife intervals, the difference with the model's family-wise "
                  "interval, and the U statement", ["model", *_COLUMNS], rows)  # fmt: skip
    setup = (f"[A]'s comparison at α = 1 (no fitted parameter), delete-one-group jackknife t "
             f"intervals, Bonferroni over each model's own comparisons at family-wise "
             f"{100 * ALPHA:g}%. Scopes: " + " | ".join(f"{t}: {s.line()}"
                                                     for t, s in scopes.items()))  # fmt: skip
    return Evidence(
        ms,
        tables=[table],
        scopes=scopes,
        setup=setup,
        absent=() if torch is not None else ("torch",),
    )


def _model_verdict(status: dict) -> str:
    vals = list(status.values())
    if FAILS in vals:
        return FAILS
    return HOLDS if vals and all(v == HOLDS for v in vals) else INCONCLUSIVE


# -- mutants: breaks of the routines PB15 runs through ---------------------------------------------


# fmt: off
add_mutant("PB15", "residual-and-attention-swapped",
           "posflow.simulate.models.published:published_profiles", R.swapped_pairs,
           "each residual-aware profile exchanged with its attention-only rival")
add_mutant("PB15", "residual-dropped", RESIDUAL_STEP, R.residual_dropped,
           "the rollout step drops the residual mixing: p ↦ p A whatever λ_t")
add_mutant("PB15", "transposed-measured-kernel", DENSE_APPLY, transposed_dense_apply,
           "the rollout through a measured kernel applies Aᵀ instead of A (p Aᵀ)")
add_mutant("PB15", "decide-on-point-estimate",
           "posflow.proofs_checks.kit._jackknife:crossfit_decision", R.point_decision,
           "the jackknife interval collapsed onto its point estimate (a loosened judge)")
add_mutant("PB15", "interior-dip-from-the-higher-end",
           "posflow.proofs_checks.kit._u_test:interior_depth", R.dip_from_higher_end,
           "the interior dip measured from the higher end instead of the lower one")
# fmt: on
