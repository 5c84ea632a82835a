"""Claim AT20 of [B]: trained small models extrapolate in the paper's order (no torch needed).

The check reads the run store written by ``posflow extrapolate``
(:mod:`posflow.simulate.models.extrapolate`; default: the committed run shipped as package data)
and reports [B]'s ordering sub-claims on the ratios r_s(L) = PPL_s(L) / PPL_s(L_train):

1. ALiBi flat:            r_alibi(L_max) ≤ FLAT_TOL;
2. random Q/K/V ≤ Q/K:    r_random_qkv(L_max) ≤ QKV_SLACK · r_random_qk(L_max);
3. rotations ≪ RoPE:      r_rope(L_max) ≥ MUCH_LESS · r_s(L_max) for every rotation scheme s;
4. learned near train:    r_s(NEAR_FACTOR · L_train) ≤ NEAR_TOL for learned Q/K and Q/K/V;
5. rotation-only degrade: r_s(L_max) > FLAT_TOL for every rotation scheme s.

The tolerances are modelling cut-offs the claim does not imply (named parameters; the evidence
gives the rule's outcome at several values of each). A sub-claim is decided only when the store
can decide it: every compared scheme trained for the same number of steps, with at least
MIN_SEEDS seeds per scheme (an interval). The committed store has one seed and wall-time budgets
(steps 1232–4896 by scheme), so each sub-claim is *undecided* with the measured reason, and the
byte-unigram ceiling (the perplexity of a model that ignores context) is reported beside every
ratio. What the store does decide is judged: every stored perplexity equals exp(stored nats), and
the ratio table equals exp(nats(L) − nats(L_train)) read from the files. [B]'s 16-layer numbers
(context 512, OpenWebText, 200K iterations; digest §3.4, §3.5b) are quoted in :data:`PAPER_B`.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

from posflow.proofs_checks.evidence import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    Evidence,
    Figure,
    Panel,
    Series,
    Table,
    at_most,
    fp_tol,
    info,
    undecided,
)
from posflow.proofs_checks.extrapolation_common import SCHEME_COLORS, SCHEME_LABELS
from posflow.proofs_checks.mutants import add_mutant
from posflow.proofs_checks.registry import Context, register
from posflow.simulate.models.store import COMMITTED_STORE, load_results, user_store

__all__ = [
    "COMMITTED_STORE",
    "FLAT_TOL",
    "MUCH_LESS",
    "NEAR_FACTOR",
    "NEAR_TOL",
    "PAPER_B",
    "QKV_SLACK",
    "ROTATION_SCHEMES",
    "UNIGRAM_PPL",
    "extrapolation_figure",
    "judge",
    "plot_extrapolation",
    "ratio_table",
    "read_store",
]

FLAT_TOL = 1.10
QKV_SLACK = 1.02
MUCH_LESS = 2.0
NEAR_FACTOR = 8
NEAR_TOL = 1.20
ROTATION_SCHEMES = ("random_qk", "random_qkv", "learned_qk", "learned_qkv")
MIN_SEEDS = 2  # an interval needs at least two seeds per scheme
UNIGRAM_PPL = 24.487840047651424
"""Byte-unigram perplexity of the committed run's corpus (add-one frequencies of the training
split on the 5 % validation split of ``load_corpus(None, max_bytes=4_000_000, seed=0)``, Python
3.11.7 standard library, the corpus the store names): the level of a model that ignores context.
Recomputed and compared under ``--full`` when this machine's corpus is the store's."""
_TOLERANCES = {
    "FLAT_TOL": (1.10, (1.02, 1.05, 1.10, 1.25, 1.5)),
    "QKV_SLACK": (1.02, (1.0, 1.02, 1.1, 1.5)),
    "MUCH_LESS": (2.0, (1.2, 1.5, 2.0, 3.0)),
    "NEAR_TOL": (1.20, (1.1, 1.2, 1.5, 2.0, 4.0)),
}

_LB = (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536)


def _row(*ppl):
    return dict(zip(_LB[: len(ppl)], ppl, strict=True))


PAPER_B = {
    # [B] 16 layers, d 768, context 512, 200K-iteration schedule: PPL at each length (§3.4)
    "rope": _row(23.54, 42.75, 106.96, 223.88, 381.82, 600.53, 808.35, 905.18),
    "alibi": _row(23.87, 21.58, 21.38, 21.75, 22.46, 23.19, 21.06, 22.84),
    "random_qk": _row(24.19, 22.75, 22.41, 25.90, 38.81, 70.63, 107.51, 181.27),
    "random_qkv": _row(24.18, 22.70, 21.93, 22.58, 24.83, 27.54, 28.83, 38.54),
    "learned_qk": _row(23.56, 22.20, 21.47, 22.56, 27.62, 38.93, 67.13, 139.63),
    "learned_qkv": _row(23.60, 22.20, 21.49, 22.82, 27.89, 37.58, 57.57, 102.53),
    # 100K iterations at constant lr (§3.5b), up to 8K only
    "random_pos_qk": _row(31.58, 39.75, 78.55, 145.34, 223.32),
}
PAPER_TRAIN_LEN = 512

_EXTRA_COLORS = {
    "nope": "#999999",
    "random_pos_qk": "#882255",
    "random_pos_qkv": "#AA4499",
    "path": "#000000",
    "learned_qk": SCHEME_COLORS["learned"],
}
_EXTRA_LABELS = {
    "nope": "NoPE",
    "random_pos_qk": "random Q/K, mean > 0",
    "random_pos_qkv": "random Q/K/V, mean > 0",
    "path": "PaTH (Householder)",
    "learned_qk": SCHEME_LABELS["learned"],
}


def _color(s):
    return _EXTRA_COLORS.get(s, SCHEME_COLORS.get(s, "#444444"))


def _label(s):
    return _EXTRA_LABELS.get(s, SCHEME_LABELS.get(s, s))


read_store = load_results  # the torch-free reader of simulate.models.store


def ratio_table(rows) -> dict:
    """{scheme: {factor L/L_train: PPL(L)/PPL(L_train)}} from store rows (claim AT20).

    Raises ValueError when a scheme lacks its training-length row or mixes training lengths.
    """
    by: dict[str, dict[int, float]] = {}
    train: dict[str, int] = {}
    for r in rows:
        if train.setdefault(r["scheme"], r["train_len"]) != r["train_len"]:
            raise ValueError(f"rows of scheme {r['scheme']!r} mix training lengths")
        by.setdefault(r["scheme"], {})[r["eval_len"]] = r["ppl"]
    out = {}
    for s, d in by.items():
        t = train[s]
        if t not in d:
            raise ValueError(f"rows of scheme {s!r} lack the training length {t}")
        out[s] = {L // t: d[L] / d[t] for L in sorted(d)}
    return out


def _paper_ratios() -> dict:
    return {
        s: {L // PAPER_TRAIN_LEN: v / d[PAPER_TRAIN_LEN] for L, v in d.items()}
        for s, d in PAPER_B.items()
    }


def _sub_claims(r, pr, flat, qkv_slack, much_less, near_tol):
    """(name, schemes, factor chooser, rule(f) -> (ok, numbers), detail(f, numbers))."""
    rot = ROTATION_SCHEMES

    def near_factor(f):
        return min(NEAR_FACTOR, f)

    return [
        (
            "alibi_flat",
            ["alibi"],
            None,
            lambda f: (r["alibi"][f] <= flat, {"alibi": r["alibi"][f]}),
            lambda f, n: (
                f"ALiBi r({f}×) = {n['alibi']:.3f} vs tolerance {flat} "
                f"([B] 128×: {pr['alibi'][128]:.2f})"
            ),
        ),
        (
            "random_qkv_le_qk",
            ["random_qk", "random_qkv"],
            None,
            lambda f: (
                r["random_qkv"][f] <= qkv_slack * r["random_qk"][f],
                {"random_qkv": r["random_qkv"][f], "random_qk": r["random_qk"][f]},
            ),
            lambda f, n: (
                f"r({f}×): random Q/K/V {n['random_qkv']:.3f} vs Q/K {n['random_qk']:.3f} "
                f"(slack {qkv_slack}; [B] 128×: {pr['random_qkv'][128]:.2f} vs "
                f"{pr['random_qk'][128]:.2f})"
            ),
        ),
        (
            "rotations_much_below_rope",
            ["rope", *rot],
            None,
            lambda f: (
                all(r["rope"][f] >= much_less * r[s][f] for s in rot),
                {"rope": r["rope"][f], **{s: r[s][f] for s in rot}},
            ),
            lambda f, n: (
                f"r({f}×): RoPE {n['rope']:.3f} vs "
                + ", ".join(f"{s} {n[s]:.3f}" for s in rot)
                + f" (need RoPE ≥ {much_less}× each; [B] 128×: RoPE {pr['rope'][128]:.1f})"
            ),
        ),
        (
            "learned_near_train",
            ["learned_qk", "learned_qkv"],
            near_factor,
            lambda f: (
                all(r[s][f] <= near_tol for s in ("learned_qk", "learned_qkv")),
                {s: r[s][f] for s in ("learned_qk", "learned_qkv")},
            ),
            lambda f, n: (
                f"r({f}×): learned Q/K {n['learned_qk']:.3f}, Q/K/V "
                f"{n['learned_qkv']:.3f} vs tolerance {near_tol} ([B] 8×: "
                f"{pr['learned_qk'][8]:.2f}, {pr['learned_qkv'][8]:.2f})"
            ),
        ),
        (
            "rotation_only_degrades",
            list(rot),
            None,
            lambda f: (all(r[s][f] > flat for s in rot), {s: r[s][f] for s in rot}),
            lambda f, n: (
                f"r({f}×) > {flat}? "
                + ", ".join(f"{s} {n[s]:.3f}" for s in rot)
                + f" ([B] 128×: {', '.join(f'{pr[s][128]:.2f}' for s in rot)})"
            ),
        ),
    ]


def _undecidable(schemes, budget) -> str:
    """Why the store cannot decide a comparison of ``schemes`` ('' when it can)."""
    if budget is None:
        return "the rows carry no record of training steps or seeds"
    why = []
    seeds = {s: budget.get(s, {}).get("seeds", 0) for s in schemes}
    if min(seeds.values()) < MIN_SEEDS:
        why.append(
            f"{min(seeds.values())} seed(s) per scheme, so no interval (needs ≥ {MIN_SEEDS})"
        )
    steps = {s: budget.get(s, {}).get("steps") for s in schemes}
    if None in steps.values():
        why.append("training steps not recorded")
    elif len(schemes) > 1 and len(set(steps.values())) > 1:
        lo, hi = min(steps, key=steps.get), max(steps, key=steps.get)
        why.append(
            f"unequal step budgets ({lo} {steps[lo]} vs {hi} {steps[hi]} steps, "
            f"{steps[hi] / steps[lo]:.2f}×)"
        )
    return "; ".join(why)


def judge(
    rows, budget=None, *, flat=FLAT_TOL, qkv_slack=QKV_SLACK, much_less=MUCH_LESS, near_tol=NEAR_TOL
) -> list[dict]:
    """The five sub-claims of AT20, each ``{"name", "status", "rule", "reason", "detail",
    "numbers"}``.

    ``rule`` is what the tolerance rule says on the point estimates (HOLDS/FAILS; INCONCLUSIVE
    when a scheme is missing); ``status`` is that rule only when the store can decide the
    comparison (``budget`` = ``{scheme: {"steps", "seeds"}}`` shows equal steps and at least
    MIN_SEEDS seeds for every compared scheme), else INCONCLUSIVE with ``reason``.
    Tolerances default to the module constants; r = PPL(L)/PPL(L_train); L_max = the longest
    factor every needed scheme reached.
    """
    r = ratio_table(rows)
    pr = _paper_ratios()
    out = []
    for name, need, pick, test, detail in _sub_claims(r, pr, flat, qkv_slack, much_less, near_tol):
        missing = [s for s in need if s not in r]
        if missing:
            out.append(
                {
                    "name": name,
                    "status": INCONCLUSIVE,
                    "rule": INCONCLUSIVE,
                    "numbers": {},
                    "reason": f"missing schemes: {', '.join(missing)}",
                    "detail": f"missing schemes: {', '.join(missing)}",
                }
            )
            continue
        f = min(max(r[s]) for s in need)
        f = pick(f) if pick else f
        ok, nums = test(f)
        rule = HOLDS if ok else FAILS
        why = _undecidable(need, budget)
        out.append(
            {
                "name": name,
                "rule": rule,
                "status": INCONCLUSIVE if why else rule,
                "reason": why,
                "numbers": {"factor": f, **nums},
                "detail": detail(f, nums),
            }
        )
    return out


def extrapolation_figure(rows, title: str | None = None) -> Figure:
    """Figure spec of PPL(L)/PPL(L_train) against L/L_train per scheme, [B]'s 16-layer ratios
    beside (AT20)."""
    r = ratio_table(rows)
    if not r:
        raise ValueError("rows hold no results to plot; run `posflow extrapolate` first")
    panels = []
    for table, head in (
        (r, title or "posflow (CPU run, one seed)"),
        (_paper_ratios(), "[B] 16 layers, context 512"),
    ):
        series = []
        for s, d in table.items():
            f = sorted(d)
            series.append(Series(_label(s), f, [d[x] for x in f], color=_color(s)))
        panels.append(
            Panel(
                head,
                "L / L_train",
                "PPL(L) / PPL(L_train)",
                series,
                logx=True,
                logy=True,
                hlines=[(1.0, "")],
            )
        )
    return Figure("at20_extrapolation", "AT20: perplexity ratio against the length factor", panels)


def plot_extrapolation(rows, path, title: str | None = None) -> Path:
    """PNG of :func:`extrapolation_figure` (left: the store's schemes; right: [B]'s
    :data:`PAPER_B`, same colours). AT20, and ``posflow extrapolate --plot``."""
    from posflow.proofs_checks.figures import render

    return render(extrapolation_figure(rows, title), path)


def _statistic(name: str, n: dict) -> tuple[float, str]:
    """The one number a sub-claim turns on, and its name."""
    rot = ROTATION_SCHEMES
    if not n:
        return math.nan, "no numbers"
    return {
        "alibi_flat": lambda: (n["alibi"], "ALiBi's ratio"),
        "random_qkv_le_qk": lambda: (n["random_qkv"] / n["random_qk"], "r(Q/K/V) / r(Q/K)"),
        "rotations_much_below_rope": lambda: (
            min(n["rope"] / n[s] for s in rot),
            "min over rotation schemes of r(RoPE) / r(s)",
        ),
        "learned_near_train": lambda: (
            max(n["learned_qk"], n["learned_qkv"]),
            "max ratio of the learned schemes",
        ),
        "rotation_only_degrades": lambda: (min(n[s] for s in rot), "min rotation ratio"),
    }[name]()


def _read_raw(store) -> dict:
    """``{scheme: blob}`` of the store's files, read directly (nats, windows, training record)."""
    if isinstance(store, str):
        store = Path(store)
    if not store.is_dir():
        return {}
    out = {}
    for p in sorted(store.iterdir(), key=lambda q: q.name):
        if p.name.endswith(".json") and p.name != "meta.json":
            blob = json.loads(p.read_text(encoding="utf-8"))
            out[str(blob["scheme"])] = blob
    return out


@functools.lru_cache(maxsize=1)
def _unigram_here() -> tuple[float, str]:
    """(byte-unigram PPL, corpus description) of this machine's default corpus (slow: reads
    the standard library; ``--full`` only)."""
    import numpy as np

    from posflow.simulate.models.corpus import load_corpus

    c = load_corpus(None, max_bytes=4_000_000, seed=0)
    train, valid = c.split(0.05)
    p = np.bincount(train, minlength=256) + 1.0
    p /= p.sum()
    return float(np.exp(-np.log(p[valid]).mean())), c.description


@register(
    "AT20",
    "[B]",
    "trained small models extrapolate in the paper's order: ALiBi flat; random accumulated "
    "Q/K/V ≤ random Q/K ≪ RoPE at long lengths; learned token rotations near training "
    "perplexity well beyond the training length; rotation-only eventually degrades",
    assumptions=(
        "posflow's CPU-sized byte-level runs (posflow extrapolate)",
        "tolerances FLAT_TOL, QKV_SLACK, MUCH_LESS, NEAR_TOL (named parameters)",
    ),
)
def at20(ctx: Context) -> Evidence:
    """Claim AT20: [B]'s orderings on the saved train-short/test-long results.

    Reads the committed run :data:`COMMITTED_STORE` (read-only package data). Only when
    ``ctx.full`` and the committed run is missing, the default run is trained (resuming) into the
    per-user store :func:`~posflow.simulate.models.store.user_store`. Judged: the stored
    perplexities against exp(stored nats) and the ratio table against exp(Δ nats) read from the
    files (floating point); each sub-claim is undecided with the reason the store cannot decide
    it (one seed, unequal step budgets), its numbers, the unigram ceiling and the rule's outcome
    at several tolerances reported.
    """
    store = COMMITTED_STORE
    rows = read_store(store)
    if ctx.full and not rows:
        from posflow.simulate.models.extrapolate import ExtrapolationConfig, run_extrapolation

        store = user_store()
        rows = run_extrapolation(ExtrapolationConfig(), store)
    if not rows:
        return Evidence(
            [
                undecided(
                    "store_rows",
                    0,
                    f"no saved results in {store}; produce them "
                    "with `posflow extrapolate` or `posflow verify AT20 --full`",
                )
            ],
            setup=f"store {store}",
        )
    raw = _read_raw(store)
    budget = {s: {"steps": b.get("train", {}).get("steps"), "seeds": 1} for s, b in raw.items()}
    # decidable: the stored numbers are consistent with themselves
    fp = fp_tol(
        8 * 2.220446049250313e-16,
        "exp of a float64 and a JSON round trip: ≤ 4 ulp each, 8ε relative",
    )
    worst_ppl = worst_ratio = 0.0
    have_nats = False
    for r in rows:
        row = next(
            (x for x in raw.get(r["scheme"], {}).get("rows", []) if x["eval_len"] == r["eval_len"]),
            None,
        )
        if row is None or "nats" not in row:
            continue
        have_nats = True
        worst_ppl = max(worst_ppl, abs(r["ppl"] / math.exp(row["nats"]) - 1))
    ratios = ratio_table(rows)
    for s, d in ratios.items():
        by = {x["eval_len"]: x.get("nats") for x in raw.get(s, {}).get("rows", [])}
        t = raw.get(s, {}).get("rows", [{}])[0].get("train_len")
        if t is None or by.get(t) is None:
            continue
        for f, v in d.items():
            if by.get(f * t) is not None:
                worst_ratio = max(worst_ratio, abs(v / math.exp(by[f * t] - by[t]) - 1))
    ms = []
    if have_nats:
        ms += [
            at_most(
                "stored_ppl_vs_exp_nats",
                worst_ppl,
                0.0,
                fp,
                label="max over rows |stored PPL / exp(stored nats) − 1|",
            ),
            at_most(
                "ratio_table_vs_exp_delta_nats",
                worst_ratio,
                0.0,
                fp,
                label="max |r_s(L) / exp(nats(L) − nats(L_train)) − 1| (ratio table as "
                "the judge reads it)",
            ),
        ]
    subs = judge(rows, budget)
    steps = {s: b["steps"] for s, b in budget.items() if b["steps"] is not None}
    ceiling = {
        s: UNIGRAM_PPL / d_ppl
        for s in ratios
        for d_ppl in [
            next(r["ppl"] for r in rows if r["scheme"] == s and r["eval_len"] == r["train_len"])
        ]
    }
    for sub in subs:
        n = sub["numbers"]
        f = n.get("factor")
        nums = ", ".join(
            f"{k} {v:.3g} (ceiling {ceiling.get(k, math.nan):.3g})"
            for k, v in n.items()
            if k != "factor"
        )
        note = (
            f"rule at the default tolerance: {sub['rule']} — {sub['detail']}; "
            f"{sub['reason'] or 'decidable'}; ratios at {f}×: {nums}"
        )
        value, what = _statistic(sub["name"], n)
        if sub["status"] == INCONCLUSIVE:
            ms.append(
                undecided(
                    f"sub_claim_{sub['name']}",
                    value,
                    note,
                    label=f"sub-claim {sub['name']}: {what}",
                )
            )
        else:
            ms.append(
                at_most(
                    f"sub_claim_{sub['name']}",
                    0.0 if sub["rule"] == HOLDS else 1.0,
                    0.0,
                    label=f"sub-claim {sub['name']} ({note})",
                )
            )
    if steps:
        lo, hi = min(steps.values()), max(steps.values())
        ms += [
            info("steps_min", lo, label="fewest training steps of a scheme"),
            info("steps_max", hi, label="most training steps of a scheme"),
            info("steps_ratio", hi / lo, label="step-budget inequality max/min"),
        ]
    ms += [
        info("seeds_per_scheme", 1, label="seeds per scheme"),
        info("unigram_ppl", UNIGRAM_PPL, label="byte-unigram perplexity (ceiling)"),
    ]
    if ctx.full:
        u, desc = _unigram_here()
        corpus = next(iter(raw.values()), {}).get("corpus")
        if desc == corpus:
            ms.append(
                at_most(
                    "unigram_ppl_recomputed",
                    abs(u / UNIGRAM_PPL - 1),
                    0.0,
                    fp_tol(
                        1e-12,
                        "the same computation on the same bytes; pairwise summation of 2e5 "
                        "logs ≈ log2(2e5)·ε·|mean log| ≈ 1.3e-14 relative after exp",
                    ),
                    label="UNIGRAM_PPL vs this machine's corpus",
                )
            )
    # tables
    facs = sorted({f for d in ratios.values() for f in d})
    ratio_rows = []
    for s, d in ratios.items():
        ratio_rows.append(
            [_label(s), steps.get(s, -1), 1, ceiling[s], *[d.get(f, math.nan) for f in facs]]
        )
    windows = {x["eval_len"]: x.get("windows", -1) for b in raw.values() for x in b["rows"]}
    tables = [
        Table(
            "ratios",
            "PPL(L)/PPL(L_train) by scheme (one seed each)",
            ["scheme", "steps", "seeds", "unigram ceiling", *[f"{f}×" for f in facs]],
            ratio_rows,
            note="unigram ceiling = UNIGRAM_PPL / PPL(L_train): the ratio of a model that "
            "falls back to byte frequencies; evaluation windows per length: "
            + ", ".join(f"{L}: {k}" for L, k in sorted(windows.items())),
        ),
    ]
    sens = []
    defaults = {
        "flat": FLAT_TOL,
        "qkv_slack": QKV_SLACK,
        "much_less": MUCH_LESS,
        "near_tol": NEAR_TOL,
    }
    uses = {
        "flat": ("alibi_flat", "rotation_only_degrades"),
        "qkv_slack": ("random_qkv_le_qk",),
        "much_less": ("rotations_much_below_rope",),
        "near_tol": ("learned_near_train",),
    }
    for key, const in (
        ("flat", "FLAT_TOL"),
        ("qkv_slack", "QKV_SLACK"),
        ("much_less", "MUCH_LESS"),
        ("near_tol", "NEAR_TOL"),
    ):
        for v in _TOLERANCES[const][1]:
            res = {x["name"]: x["rule"] for x in judge(rows, budget, **{**defaults, key: v})}
            for name in uses[key]:
                sens.append([const, v, name, res[name]])
    tables.append(
        Table(
            "tolerance_sensitivity",
            "the rule's outcome on the point estimates at "
            "several tolerances (undecided either way: one seed)",
            ["parameter", "value", "sub-claim", "rule"],
            sens,
        )
    )
    return Evidence(
        ms,
        figures=[extrapolation_figure(rows)],
        tables=tables,
        setup=f"store {store}: {len(ratios)} schemes, one seed each, wall-time budgets "
        + (f"({min(steps.values())}–{max(steps.values())} steps)" if steps else "")
        + f"; decided only with ≥ {MIN_SEEDS} seeds and equal steps for the compared schemes.",
    )


# -- mutants: break the judge (the numbers the sub-claims read) ----------------------------------
def _ratio_wrong_length(original):
    @functools.wraps(original)
    def ratio_table_off(rows):
        out = original(rows)
        return {s: {f: v / d.get(2, 1.0) for f, v in d.items()} for s, d in out.items()}

    return ratio_table_off


def _ppl_swapped(original):
    @functools.wraps(original)
    def load(store=COMMITTED_STORE):
        rows = original(store)
        names = sorted({r["scheme"] for r in rows})
        if len(names) < 2:
            return rows
        a, b = names[0], names[-1]
        ppl = {(r["scheme"], r["eval_len"]): r["ppl"] for r in rows}
        swap = {a: b, b: a}
        return [
            {**r, "ppl": ppl.get((swap.get(r["scheme"], r["scheme"]), r["eval_len"]), r["ppl"])}
            for r in rows
        ]

    return load


add_mutant(
    "AT20",
    "ratio-against-wrong-length",
    "posflow.proofs_checks.extrapolation_trained:ratio_table",
    _ratio_wrong_length,
    "ratios divided by PPL(2·L_train) instead of PPL(L_train)",
)
add_mutant(
    "AT20",
    "perplexities-swapped",
    "posflow.simulate.models.store:load_results",
    _ppl_swapped,
    "the store reader hands one scheme's perplexities to another",
)
