"""PB15's tables and figures: the live models' evidence, and the stored SmolLM2 study beside it.

:func:`model_tables` and :func:`model_figure` assemble what PB15 shows of each measured model
(every profile against the measured influence with bootstrap intervals, W1(b) − W1(rival), λ_t);
:func:`study_evidence` reads the stored study (issue 13, items 2–4), reported, not judged.

``docs/smollm2_study.py`` measures SmolLM2-135M on English windows at n = 128 … 1024 (N = 64
sequences in G = 8 groups; :mod:`posflow.simulate.models.study`) and stores a summary as package
data. PB15 shows it beside what it measures live: one table of W1/(n − 1) and Spearman ρ with
delete-one-group jackknife intervals per n and profile, the per-layer sink table, the λ_t
schedule, and one figure panel per n of every profile against the measured influence. These are
numbers read from a file written by a documented command, not a measurement of this run, so
they are ``info`` and tables only; PB15's verdict comes from its own measurements.
"""

from __future__ import annotations

import numpy as np

from posflow.proofs_checks.claims.pb20_crossfit import off_axis, profile_floor, rival_panel, wrap
from posflow.proofs_checks.kit import Figure, Panel, Series, Table, info
from posflow.simulate.models.profiles import (
    LABELS,
    color,
    line_style,
    percentile_interval,
)

__all__ = [
    "KEYS",
    "NULLS",
    "PREDICTED",
    "RIVALS",
    "SINKS_AND_ROLLOUT",
    "model_figure",
    "model_tables",
    "reported",
    "study_evidence",
]

# PB15's evidence keys of the predicted profiles -> their wording in PB15's labels and tables
PREDICTED = {
    "b": "(b) residual-aware, measured kernels",
    "a": "(a) attention-only, measured kernels",
    "b_param": "(c) residual-aware, [A]'s ALiBi + content kernels",
    "a_param": "(a) attention-only, [A]'s ALiBi + content kernels",
    "d": "(d) residual-aware, value-norm kernels (Kobayashi et al. 2020)",
    "e": "(e) residual-aware, sink-aware kernels (ours: token 0's share kept in place)",
}
NULLS = {
    "geometric": "geometric recency fitted to the measured mean position",
    "linear": "linear ramp fitted to the measured mean position",
    "uniform": "rollout with measured λ_t through uniform kernels",
    "shuffled": "rollout with λ_t moved to other layers (derangement)",
}
RIVALS = ("a", *NULLS)  # what (b) must beat
# PB15's evidence key -> the profile key of posflow.simulate.models.profiles
KEYS = {"b": "b", "a": "a", "b_param": "c", "a_param": "a_c", "d": "d", "e": "e",
        **{k: k for k in NULLS}}  # fmt: skip

# item 4: how a sink bears on [A]'s rollout (printed in the evidence's setup and the README)
SINKS_AND_ROLLOUT = (
    "Attention sinks and [A]'s rollout: [A] reads attention weights as information flow, "
    "R_t = (1 − λ_t) I + λ_t A_t. A real model can park attention on token 0 whose value vectors "
    "are small (a sink): that mass then moves little information, and a rollout that counts it "
    "as flow piles influence onto token 0 through depth. The value-norm kernel (d) weights each "
    "attended token by ‖W_O v_j‖; the sink-aware kernel (e) returns the mass on token 0 to each "
    "token's own state, as the residual does. Whether this is what happens is read from three "
    "per-layer numbers: the attention on token 0, its value-norm share and token 0's gradient "
    "influence at the layer input."
)


def _sink_sentence(sink_rows, top: dict) -> str:
    """What the stored numbers say about the sink, generated from them."""
    att, val, grad = (np.array([r[c] for r in sink_rows]) for c in (4, 7, 10))
    st = top["stats"]
    w = {k: st[f"w1.{k}"][0] for k in "abde"}
    order = " < ".join(f"({k}) {w[k]:.3g}" for k in sorted(w, key=w.get))
    return (
        f"At n = {top['n']}, over layers the attention on token 0 has median {np.median(att):.3g} "
        f"(range {att.min():.3g}–{att.max():.3g}), its value-norm share median "
        f"{np.median(val):.3g} ({'below' if np.median(val) < np.median(att) else 'not below'} "
        f"the attention) and token 0's gradient influence median {np.median(grad):.3g}; "
        f"p(0) is {st['first.b'][0]:.3g} under (b), {st['first.e'][0]:.3g} under (e) and "
        f"{st['first.measured'][0]:.3g} measured; W1/(n−1): {order}."
    )


_KEYS = ("a", "b", "c", "d", "e", "geometric", "linear", "uniform", "shuffled")


def study_evidence(store: dict, tag: str = "smollm2_study",
                   name: str = "SmolLM2") -> tuple[list, list, list, str]:  # fmt: skip
    """(measurements, tables, figures, setup text) of a stored study of model ``name``, keyed
    by ``tag`` (see the module docstring)."""
    from posflow.simulate.models.study import best_profile

    PROFILES = LABELS

    runs = {int(k): v for k, v in store["runs"].items()}
    ns = sorted(runs)
    best, mean_w1 = best_profile(store)
    ms = [
        info(f"{tag}.lengths", ", ".join(map(str, ns)), label="stored study: lengths n"),
        info(
            f"{tag}.best",
            f"{best}: {PROFILES[best]} (mean W1/(n−1) {mean_w1[best]:.3g})",
            label="stored study: the profile among (a)–(e) of least W1 averaged over n",
        ),
    ]
    rows, panels = [], []
    for n in ns:
        r = runs[n]
        st = r["stats"]
        ms.append(
            info(
                f"{tag}.best_n{n}",
                r["best"],
                label=f"stored study, n = {n}: best of (a)–(e) by W1",
            )
        )
        for k in _KEYS:
            rows.append(
                [
                    n,
                    k,
                    PROFILES[k],
                    *st[f"w1.{k}"][::1],
                    *st[f"spearman.{k}"][:1],
                    *st[f"spearman.{k}"][2:],
                    *r["differences"][k][2:],
                    st[f"first.{k}"][0],
                ]
            )
        j = np.arange(n)
        series = [Series("measured influence", j, r["profiles"]["measured"], color="measured")]
        series += [
            Series(PROFILES[k], j, r["profiles"][k], color=color(k), style=line_style(k))
            for k in _KEYS
        ]
        panels.append(
            Panel(
                f"n = {n} (least W1: {_short(r['best'])})",
                "token position j",
                "p(j)",
                series,
                logy=True,
                ylim=(1e-2 / n, 1.0),
                legend="shared",
            )
        )
    top = runs[ns[-1]]
    L = top["layers"]
    st = top["stats"]

    def eli(x):  # estimate, lo, hi of a [estimate, se, lo, hi] record
        return [x[0], x[2], x[3]]

    sink_rows = [
        [
            t,
            *eli(st[f"lambda.{t}"]),
            *eli(st[f"sink.attention_on_0.{t}"]),
            *eli(st[f"sink.value_share_of_0.{t}"]),
            *eli(st[f"sink.gradient_influence_of_0.{t}"]),
        ]
        for t in range(L)
    ]
    conf = f"{100 * top['confidence']:.3g}%"
    tables = [
        Table(
            f"{tag}.profiles",
            f"stored {name} study: every profile against the measured influence, per n "
            f"(jackknife {conf} t intervals over {top['groups']} groups)",
            [
                "n",
                "profile",
                "what",
                "W1/(n−1)",
                "se",
                "lo",
                "hi",
                "Spearman ρ",
                "lo",
                "hi",
                "W1 − W1(best) lo",
                "hi",
                "p(0)",
            ],
            rows,
        ),
        Table(
            f"{tag}.sinks",
            f"stored {name} study, n = {ns[-1]}: per layer λ_t, attention on token 0, its "
            f"value-norm share and token 0's gradient influence at the layer input "
            f"(estimate, {conf} jackknife interval)",
            [
                "layer",
                "λ_t",
                "lo",
                "hi",
                "attention on 0",
                "lo",
                "hi",
                "value share of 0",
                "lo",
                "hi",
                "gradient influence of 0",
                "lo",
                "hi",
            ],
            sink_rows,
        ),
    ]
    sink_panel = Panel(
        f"sinks per layer, n = {ns[-1]}",
        "layer t",
        "share of token 0",
        [
            Series(
                label,
                np.arange(L),
                [r[c] for r in sink_rows],
                "errorbar",
                yerr=[[r[c] - r[c + 1] for r in sink_rows], [r[c + 2] - r[c] for r in sink_rows]],
                color=color,
            )
            for label, c, color in (
                ("attention on token 0", 4, "attention_only"),
                ("value-norm share", 7, "#009E73"),
                ("gradient influence", 10, "measured"),
            )
        ],
        ylim=(0.0, 1.0),
    )
    figures = [
        Figure(
            f"pb15_{tag}",
            f"PB20 (stored study): {name} on English text, every profile against the "
            "measured gradient influence per n, and the sinks per layer",
            [*panels, sink_panel],
        )
    ]
    setup = (
        f"Stored {name} study ({store['setup']['command']}; {store['setup']['text']}): "
        f"n = {', '.join(map(str, ns))}, N = {top['sequences']} windows per n in "
        f"{top['groups']} groups, delete-one-group jackknife {conf} t intervals (kernels, λ, "
        f"content and influence resampled together); reported, not judged. {SINKS_AND_ROLLOUT} "
        + _sink_sentence(sink_rows, top)
    )
    return ms, tables, figures, setup


# ----------------------------------------------------------------------------------------------
# the live models' tables and figure (bs: a Bootstrap keyed by PB15's evidence keys)


def _short(k: str) -> str:
    """A profile key of :mod:`posflow.simulate.models.profiles` as a figure names it: (e)."""
    return {"a_c": "(a) with [A]'s kernels"}.get(k, f"({k})" if len(k) == 1 else k)


def _what(k: str) -> str:
    return PREDICTED.get(k, NULLS.get(k))


def model_tables(tag, name, bs, level: float, B: int, family: int, alpha: float, diff_rows):
    """PB15's three tables of one model: profiles, differences, λ_t (bootstrap intervals)."""
    n = bs.measured.shape[1]
    L = bs.lambdas.shape[1]
    lam = bs.lambdas[0]
    j = np.arange(n)
    rows = [
        [k, _what(k), float(bs.w1[k][0]), *percentile_interval(bs.w1[k], level),
         float(bs.spearman[k][0]), *percentile_interval(bs.spearman[k], level),
         float(bs.profiles[k][0] @ j)]
        for k in (*PREDICTED, *NULLS)
    ]  # fmt: skip
    rows.append(["measured", "gradient influence", 0.0, 0.0, 0.0, 1.0, 1.0, 1.0,
                 float(bs.measured[0] @ j)])  # fmt: skip
    return [
        Table(
            f"{tag}.profiles",
            f"{name}: every profile against the measured influence (bootstrap "
            f"{100 * level:.3g}% intervals, B = {B})",
            ["profile", "what", "W1/(n−1)", "lo", "hi", "Spearman ρ", "ρ lo", "ρ hi",
             "mean position"],
            rows,
        ),
        Table(
            f"{tag}.differences",
            f"{name}: W1(b) − W1(rival), {100 * level:.3g}% intervals (Bonferroni over "
            f"{family} comparisons, family-wise {100 * alpha:g}%)",
            ["rival", "W1(b) − W1(rival)", "lo", "hi", "(b) beats it"],
            diff_rows,
        ),
        Table(
            f"{tag}.lambdas",
            f"{name}: measured λ_t (mean over sequences, bootstrap interval)",
            ["layer t", "λ_t", "lo", "hi"],
            [[t, float(lam[t]), *percentile_interval(bs.lambdas[:, t], level)] for t in range(L)],
        ),
    ]


def model_figure(tag: str, bs, level: float, diff_rows, note: str) -> Figure:
    """PB15's figure of one model: the profiles (one legend below, names not keys; the log axis
    from a decade under the measured band), W1(b) − W1(rival) per named rival, and λ_t, with
    bootstrap intervals."""
    n = bs.measured.shape[1]
    j = np.arange(n)
    lo, hi = np.quantile(bs.measured[1:], [(1 - level) / 2, (1 + level) / 2], axis=0)
    pct = f"{100 * level:.3g}%"
    series = [
        Series(f"measured p̂ ({pct} bootstrap band)", j, bs.measured[0], "band", lo, hi,
               color="measured"),
        Series("measured p̂", j, bs.measured[0], color="measured"),
    ]  # fmt: skip
    keys = (*PREDICTED, *NULLS)
    series += [Series(LABELS[KEYS[k]], j, bs.profiles[k][0], color=color(KEYS[k]),
                      style=line_style(KEYS[k])) for k in keys]  # fmt: skip
    floor = profile_floor(bs.measured[0], lo)
    L = bs.lambdas.shape[1]
    lam_lo, lam_hi = np.quantile(bs.lambdas[1:], [(1 - level) / 2, (1 + level) / 2], axis=0)
    d = np.array([[r[1], r[2], r[3]] for r in diff_rows])
    err = [bs.lambdas[0] - lam_lo, lam_hi - bs.lambdas[0]]
    lam = Series("", np.arange(L), bs.lambdas[0], "errorbar", yerr=err, color=color("b"))
    top = float(min(1.0, 1.2 * max(float(lam_hi.max()), float(bs.lambdas[0].max()))))
    return Figure(
        f"pb15_{tag}",
        wrap(f"PB20, {note}", 150),
        [
            Panel("influence profiles", "token position j", "p(j)", series, logy=True,
                  ylim=(floor, 1.0), legend="shared"),
            rival_panel(f"W1(b) − W1(rival), {pct} intervals: (b) beats a rival when its "
                        "interval lies below 0", [r[0] for r in diff_rows], d,
                        [color(KEYS[r[0]]) for r in diff_rows]),
            Panel(f"measured λ_t ({pct} bootstrap intervals)", "layer t", "λ_t", [lam],
                  ylim=(0.0, top)),
        ],
        caption=off_axis({k: bs.profiles[k][0] for k in keys}, floor),
    )  # fmt: skip


def reported(sub, bs, N: int) -> list:
    """What PB15 reports of one model beside its verdict (info only)."""
    tag, name = sub.tag, sub.name
    L, n = bs.lambdas.shape[1], bs.measured.shape[1]
    lam = bs.lambdas[0]
    s, keep = float(lam.sum()), float(np.prod(1.0 - lam))
    ms = [
        info(f"{tag}.n", n, label=f"{name}: sequence length n"),
        info(f"{tag}.sequences", N, label=f"{name}: sequences N"),
        info(f"{tag}.layers", L, label=f"{name}: layers L"),
        info(f"{tag}.sum_lambda", s, label=f"{name}: Σλ_t (expected number of attention hops)"),
        info(f"{tag}.no_hop_probability", keep,
             label=f"{name}: ∏(1 − λ_t) (chance a token's state never attends)"),
        info(
            f"{tag}.depth",
            f"not a test of depth: Σλ_t = {s:.2f} over L = {L} layers (about {s:.1g} attention "
            f"hops per token, ∏(1 − λ_t) = {keep:.2g}); the collapse theory of PB4–PB6 is about "
            "Σλ_t → ∞, which one finite model does not reach",
            label=f"{name}: depth",
        ),
        info(f"{tag}.first_token_b", float(bs.profiles["b"][0][0]),
             label=f"{name}: p_b(0), mass of (b) on token 0"),
        info(f"{tag}.first_token_measured", float(bs.measured[0][0]),
             label=f"{name}: p̂(0), measured influence of token 0"),
    ]  # fmt: skip
    for k in (*PREDICTED, *NULLS):
        ms.append(info(f"{tag}.w1_{k}", float(bs.w1[k][0]), label=f"{name}: W1({k})"))
        ms.append(info(f"{tag}.spearman_{k}", float(bs.spearman[k][0]), label=f"{name}: ρ({k})"))
    best = min(PREDICTED, key=lambda k: float(bs.w1[k][0]))
    ms += [
        info(f"{tag}.best_predicted",
             f"{best}: {PREDICTED[best]} (W1/(n−1) = {float(bs.w1[best][0]):.3g})",
             label=f"{name}: the predicted profile of least W1 (reported, not judged)"),
        info(f"{tag}.geometric_ratio", float(bs.ratio[0]), label=f"{name}: geometric r"),
        info(f"{tag}.ramp_slope", float(bs.slope[0]), label=f"{name}: ramp slope s"),
        info(f"{tag}.shuffle", " ".join(map(str, bs.perm.tolist())),
             label=f"{name}: layer t takes λ of layer perm[t]"),
    ]  # fmt: skip
    return ms
