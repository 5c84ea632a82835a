"""Claim AT20 of [B]: trained small models extrapolate in the paper's order, judged by statistics.

The check reads the multi-seed run store (:mod:`posflow.simulate.models.seed_store`; default:
the committed CPU run, package data ``extrapolation_v2``, written by ``posflow extrapolate``
with :mod:`posflow.simulate.models.extrapolate_seeds`): every (scheme, seed) trained for the
same number of optimiser steps on BPE tokens, scored on nested prefixes of the same held-out
windows. For a run (scheme s, seed k) the statistic is the log-ratio

.. math:: \\ell_{s,k}(L) = \\ln \\mathrm{PPL}_{s,k}(L) - \\ln \\mathrm{PPL}_{s,k}(L_0),

L_0 the training length. Each sub-claim of [B]'s ordering is one or more comparisons, each a
one-sample statement about the seed mean of ℓ_s(L) or a *paired* statement about the mean of
d_k = ℓ_{A,k}(L) − ℓ_{B,k}(L) over the seeds both schemes have (the same seed ⇒ the same batch
order and the same evaluation windows):

1. ``alibi_flat``                — ℓ_alibi(L_max) ≤ ln FLAT_TOL;
2. ``random_qkv_le_qk``          — ℓ_random_qkv − ℓ_random_qk ≤ ln QKV_SLACK at L_max;
3. ``rotations_much_below_rope`` — ℓ_rope − ℓ_s ≥ ln MUCH_LESS at L_max, each rotation scheme s;
4. ``learned_near_train``        — ℓ_s(NEAR_FACTOR·L_0) ≤ ln NEAR_TOL, learned Q/K and Q/K/V;
5. ``rotation_only_degrades``    — ℓ_s(L_max) ≥ ln FLAT_TOL, each rotation scheme s;
6. ``rotations_alibi_flat``      — [B]'s argument, untrained in [B]: random Q/K rotations plus
   ALiBi stay flat, ℓ(L_max) ≤ ln FLAT_TOL, and ℓ_{rot+alibi} − ℓ_random_qk ≤ 0.

A comparison's interval is m ± t_{1−α'/2, n−1}·s/√n over n seeds with α' = ALPHA / M, M the
number of comparisons of all sub-claims (Bonferroni over the sub-claims and the comparisons in
each). "x ≤ c" HOLDS when the upper end is ≤ c, FAILS when the lower end is > c, and is
INCONCLUSIVE when the interval contains c (symmetrically for ≥). A comparison is *blocked* (it
cannot count, though its interval and decision are shown) when a compared scheme has fewer than
MIN_SEEDS seeds, or the proxy has not reached the regime: a compared scheme's seed-mean PPL(L_0)
more than REGIME_TOL × RoPE's (e.g. random Q/K near NoPE at the training length), or — for
sub-claims 3 and 5, about degradation at long lengths — RoPE itself has not collapsed (its
seed-mean ratio at L_max below ROPE_COLLAPSE; [B]'s is 38 at 128×). A sub-claim FAILS when an
unblocked comparison fails, HOLDS when every comparison holds and none is blocked, and is
INCONCLUSIVE otherwise. The exact two-sided sign-test p-value of each comparison is reported beside
its interval (with 3 seeds it is never below 0.25, so it cannot decide alone).

The tolerances are modelling cut-offs the claim does not imply (named parameters; sensitivity
tables give the verdicts at several values). Judged besides: the ratio table as the judge reads
it against exp(Δ mean nats) recomputed from the raw files, equal step budgets, shared windows,
and two controls — nested-prefix NLLs against direct prefix forward passes on a tiny LM (torch;
undecided without it) and the paired statistic on a hand-made store whose answer is known.
[B]'s 16-layer numbers (context 512, OpenWebText, 200K iterations; digest §3.4, §3.5b) are in
:data:`PAPER_B`.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

import numpy as np

from posflow.proofs_checks.kit import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    SCHEME_COLORS,
    SCHEME_LABELS,
    Context,
    Evidence,
    Figure,
    Panel,
    Series,
    Table,
    add_mutant,
    at_least,
    at_most,
    fp_tol,
    holds,
    info,
    register,
    undecided,
)
from posflow.simulate.models import seed_store as SS
from posflow.simulate.models.seed_store import COMMITTED_STORE, SeedStore, load_seed_store

__all__ = [
    "ALPHA",
    "COMMITTED_STORE",
    "FLAT_TOL",
    "MIN_SEEDS",
    "MUCH_LESS",
    "NEAR_FACTOR",
    "NEAR_TOL",
    "PAPER_B",
    "QKV_SLACK",
    "REGIME_TOL",
    "ROPE_COLLAPSE",
    "ROTATION_SCHEMES",
    "SUB_CLAIMS",
    "extrapolation_figure",
    "judge",
    "plot_extrapolation",
    "ratio_summary",
    "store_evidence",
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
    "path": "#444444",
    "learned_qk": SCHEME_COLORS["learned"],
    ROT_ALIBI: SCHEME_COLORS["accum_alibi"],
}
_EXTRA_LABELS = {
    "nope": "NoPE",
    "random_pos_qk": "random Q/K, mean > 0",
    "random_pos_qkv": "random Q/K/V, mean > 0",
    "path": "PaTH (Householder)",
    "learned_qk": SCHEME_LABELS["learned"],
    ROT_ALIBI: "random Q/K + ALiBi",
}


def _color(s):
    return _EXTRA_COLORS.get(s, SCHEME_COLORS.get(s, "#444444"))


def _label(s):
    return _EXTRA_LABELS.get(s, SCHEME_LABELS.get(s, s))


def _paper_ratios() -> dict:
    return {
        s: {L // PAPER_TRAIN_LEN: v / d[PAPER_TRAIN_LEN] for L, v in d.items()}
        for s, d in PAPER_B.items()
    }


# -- the statistics a sub-claim reads ------------------------------------------------------------
def ratio_summary(st: SeedStore, alpha: float = 0.05) -> dict:
    """{scheme: {L: {"ratio", "lo", "hi", "boot_lo", "boot_hi", "ppl", "seeds"}}} (claim AT20).

    ``ratio`` = exp(seed mean of ℓ_s(L)); (lo, hi) its t interval over seeds (level 1 − α, no
    multiplicity correction; NaN with one seed); (boot_lo, boot_hi) the percentile bootstrap over
    windows (:func:`posflow.simulate.models.seed_store.window_bootstrap`); ``ppl`` the seed mean
    of PPL(L).
    """
    out = {}
    for s in st.schemes:
        seeds = st.seeds(s)
        d = {}
        for L in st.lengths:
            lr = np.array(list(SS.log_ratios(st, s, L).values()))
            if lr.size >= 2:
                m, lo, hi = SS.t_interval(lr, alpha)
            else:
                m, lo, hi = float(lr.mean()), math.nan, math.nan
            blo, bhi = SS.window_bootstrap(st, s, L, alpha=alpha, reps=1000)
            ppl = float(np.mean([st.ppl(s, k)[st.lengths.index(L)] for k in seeds]))
            d[L] = {"ratio": math.exp(m), "lo": math.exp(lo), "hi": math.exp(hi),
                    "boot_lo": blo, "boot_hi": bhi, "ppl": ppl, "seeds": len(seeds)}  # fmt: skip
        out[s] = d
    return out


def _comparisons(st: SeedStore, p: dict) -> dict:
    """{sub-claim: [(label, schemes, values {seed: x}, op, c)]}: "x ≤ c" (op "le") or "≥"."""
    L0, Lmax = st.train_len, max(st.lengths)
    Lnear = min(NEAR_FACTOR * L0, Lmax)

    def lr(s, L):
        return SS.log_ratios(st, s, L) if s in st.schemes else {}

    def diff(a, b, L):
        x, y = lr(a, L), lr(b, L)
        ks = sorted(set(x) & set(y))
        return dict(zip(ks, SS.paired_differences(x, y).tolist(), strict=True))

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
            (f"ℓ_rope − ℓ_{s} ({f}×) ≥ ln {p['much_less']}", ["rope", s], diff("rope", s, Lmax),
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


def judge(
    st: SeedStore, *, flat=FLAT_TOL, qkv_slack=QKV_SLACK, much_less=MUCH_LESS, near_tol=NEAR_TOL,
    regime_tol=REGIME_TOL, rope_collapse=ROPE_COLLAPSE, alpha=ALPHA, min_seeds=MIN_SEEDS,
) -> list[dict]:  # fmt: skip
    """The six sub-claims of AT20 on ``st``, each ``{"name", "status", "reason", "comparisons"}``.

    Each comparison: ``{"label", "schemes", "n", "mean", "lo", "hi", "alpha", "p_sign", "op",
    "bound", "decision", "blocked", "values"}`` with the t interval at level 1 − alpha/M (M
    comparisons in all) and its decision HOLDS / FAILS / INCONCLUSIVE from the interval alone;
    ``blocked`` lists why the comparison cannot count (fewer than ``min_seeds`` paired seeds, a
    missing scheme, a scheme's PPL(L_0) above ``regime_tol`` × RoPE's, or — for the sub-claims
    about degradation at long lengths — RoPE's seed-mean ratio at L_max below
    ``rope_collapse``). A sub-claim FAILS when an unblocked comparison fails, HOLDS when every
    comparison holds and none is blocked, else is INCONCLUSIVE; ``reason`` says why.
    """
    p = {"flat": flat, "qkv_slack": qkv_slack, "much_less": much_less, "near_tol": near_tol}
    comps = _comparisons(st, p)
    M = sum(len(v) for v in comps.values())
    a = alpha / M
    L0, Lmax = st.train_len, max(st.lengths)
    j0 = st.lengths.index(L0)
    ppl0 = {s: float(np.mean([st.ppl(s, k)[j0] for k in st.seeds(s)])) for s in st.schemes}
    rope_r = (
        math.exp(float(np.mean(list(SS.log_ratios(st, "rope", Lmax).values()))))
        if "rope" in st.schemes
        else math.nan
    )
    out = []
    for name in SUB_CLAIMS:
        rows = []
        for label, schemes, vals, op, c in comps[name]:
            row = {"label": label, "schemes": schemes, "op": op, "bound": c, "alpha": a,
                   "n": len(vals), "values": vals, "mean": math.nan, "lo": math.nan,
                   "hi": math.nan, "p_sign": math.nan, "decision": INCONCLUSIVE,
                   "blocked": []}  # fmt: skip
            rows.append(row)
            missing = [s for s in schemes if s not in st.schemes]
            if missing:
                row["blocked"].append(f"missing schemes: {', '.join(missing)}")
                continue
            x = np.array([vals[k] for k in sorted(vals)])
            if x.size:
                row["mean"] = float(x.mean())
                row["p_sign"] = SS.sign_test(x - c)
            if x.size >= 2:
                row["mean"], row["lo"], row["hi"] = SS.t_interval(x, a)
                lo, hi = row["lo"], row["hi"]
                if op == "le":
                    row["decision"] = HOLDS if hi <= c else FAILS if lo > c else INCONCLUSIVE
                else:
                    row["decision"] = HOLDS if lo >= c else FAILS if hi < c else INCONCLUSIVE
            if x.size < min_seeds:
                row["blocked"].append(f"{x.size} paired seed(s), needs ≥ {min_seeds}")
            if "rope" not in st.schemes:
                row["blocked"].append("RoPE missing: the regime cannot be checked")
                continue
            for s in schemes:
                if ppl0[s] > regime_tol * ppl0["rope"]:
                    row["blocked"].append(
                        f"not in the regime: {s}'s PPL({L0}) = {ppl0[s]:.4g} is "
                        f"{100 * (ppl0[s] / ppl0['rope'] - 1):.0f} % above RoPE's "
                        f"{ppl0['rope']:.4g} (REGIME_TOL {regime_tol})"
                    )
            if name in _NEEDS_COLLAPSE and not rope_r >= rope_collapse:
                row["blocked"].append(
                    f"RoPE has not collapsed: its ratio at {Lmax // L0}× is {rope_r:.3g} < "
                    f"ROPE_COLLAPSE {rope_collapse}"
                )
        free = [r for r in rows if not r["blocked"]]
        if any(r["decision"] == FAILS for r in free):
            status = FAILS
        elif len(free) == len(rows) and all(r["decision"] == HOLDS for r in rows):
            status = HOLDS
        else:
            status = INCONCLUSIVE
        reasons = []
        if status == INCONCLUSIVE:
            for r in rows:
                why = list(r["blocked"])
                if r["decision"] == INCONCLUSIVE and math.isfinite(r["lo"]):
                    why.append(f"the interval [{r['lo']:.3g}, {r['hi']:.3g}] contains "
                               f"{r['bound']:.3g}")  # fmt: skip
                if why:
                    reasons.append(f"{r['label']}: " + "; ".join(why))
        out.append({"name": name, "status": status, "comparisons": rows,
                    "reason": " | ".join(reasons)})  # fmt: skip
    return out


# -- figure ----------------------------------------------------------------------------------
def extrapolation_figure(st: SeedStore, title: str | None = None) -> Figure:
    """Figure spec: every scheme's seed-mean ratio PPL(L)/PPL(L_0) against L/L_0 with its t band
    over seeds (95 %), [B]'s 16-layer ratios beside (AT20)."""
    if st is None or not st.runs:
        raise ValueError("the store holds no results to plot; run `posflow extrapolate` first")
    summ = ratio_summary(st)
    L0 = st.train_len
    series = []
    for s, d in summ.items():
        f = [L / L0 for L in sorted(d)]
        y = [d[L]["ratio"] for L in sorted(d)]
        lo = [d[L]["lo"] for L in sorted(d)]
        hi = [d[L]["hi"] for L in sorted(d)]
        if all(math.isfinite(v) for v in lo + hi):
            series.append(Series("", f, y, kind="band", lo=lo, hi=hi, color=_color(s)))
        series.append(Series(f"{_label(s)} ({d[L0]['seeds']} seeds)", f, y, color=_color(s)))
    cfg = st.meta["config"]
    head = title or (
        f"posflow: {cfg['n_layer']} layers, d_head {cfg['d_head']}, BPE "
        f"{st.meta['vocab_size']}, context {L0}, {cfg['steps']} steps (bands: 95 % over seeds)"
    )
    paper = [
        Series(_label(s), sorted(d), [d[x] for x in sorted(d)], color=_color(s))
        for s, d in _paper_ratios().items()
    ]
    panels = [
        Panel(head, "L / L_train", "PPL(L) / PPL(L_train)", series, logx=True, logy=True,
              hlines=[(1.0, ""), (FLAT_TOL, "FLAT_TOL")]),
        Panel("[B] 16 layers, context 512", "L / L_train", "PPL(L) / PPL(L_train)", paper,
              logx=True, logy=True, hlines=[(1.0, "")]),
    ]  # fmt: skip
    return Figure("at20_extrapolation", "AT20: perplexity ratio against the length factor", panels)


def plot_extrapolation(st: SeedStore, path, title: str | None = None) -> Path:
    """PNG of :func:`extrapolation_figure` (AT20, and ``posflow extrapolate --plot``)."""
    from posflow.proofs_checks.kit import render

    return render(extrapolation_figure(st, title), path)


# -- controls ------------------------------------------------------------------------------------
def _pairing_control() -> float:
    """Lower end of the paired interval on a hand-made store where only pairing reveals the
    effect: seed effects u_k = 0, 1, 2 shared by A and B, A = B + 0.2 + small noise, so
    d_k ∈ {0.19, 0.20, 0.21} (interval at α/M = 0.05/14 ≈ [0.07, 0.33] > 0); pairing the seeds
    wrongly gives d with spread ≈ 1 and an interval containing 0."""
    W, lengths = 2, [4, 8]
    meta = {"format": SS.FORMAT, "eval_lengths": lengths, "windows": W,
            "config": {"train_len": 4}}  # fmt: skip
    runs = {}
    for k, (u, e) in enumerate(zip((0.0, 1.0, 2.0), (-0.01, 0.0, 0.01), strict=True)):
        for s, extra in (("A", 0.2 + e), ("B", 0.0)):
            nats = np.array([[1.0, 1.0 + u + extra], [1.0, 1.0 + u + extra]])
            runs[s, k] = {"nats": nats}
    st = SeedStore(meta, runs)
    d = SS.paired_differences(SS.log_ratios(st, "A", 8), SS.log_ratios(st, "B", 8))
    return SS.t_interval(d, ALPHA / 14)[1]


def _nested_control() -> tuple[float | None, str]:
    """max |ℓ̄ from nested prefixes − ℓ̄ from a direct forward pass on each prefix| over a tiny
    random-weight LM (RoPE and learned Q/K), 3 windows, lengths 4, 8, 16; None without torch."""
    try:
        import torch
        from torch.nn import functional as F
    except ImportError:
        return None, "torch is not importable"
    from posflow.simulate.models.extrapolate_seeds import (
        SeedRunConfig,
        build_model,
        evaluate_nested,
    )

    cfg = SeedRunConfig(n_layer=2, n_head=2, d_head=8, base=100.0, train_len=4, max_factor=4)
    rng = np.random.default_rng(7)
    wins = rng.integers(0, 40, size=(3, 17))
    worst = 0.0
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: more threads only spin
    try:
        worst = _nested_worst(torch, F, cfg, wins, build_model, evaluate_nested)
    finally:
        torch.set_num_threads(threads)
    return worst, ""


def _nested_worst(torch, F, cfg, wins, build_model, evaluate_nested) -> float:
    worst = 0.0
    for scheme in ("rope", "learned_qk"):
        model = build_model(scheme, cfg, 0, 40)
        if scheme == "learned_qk":
            with torch.no_grad():
                for b in model.blocks:
                    b.attn.scheme.angle_emb.normal_(
                        0, 0.5, generator=torch.Generator().manual_seed(1)
                    )
        model.eval()
        nested = evaluate_nested(model, wins, [4, 8, 16])[0]
        with torch.no_grad():
            for i, w in enumerate(wins):
                for j, L in enumerate((4, 8, 16)):
                    t = torch.from_numpy(w[: L + 1].astype(np.int64))[None]
                    nll = F.cross_entropy(model(t[:, :-1])[0].double(), t[0, 1:])
                    worst = max(worst, abs(float(nll) - nested[i, j]))
    return worst


def _raw_ratio_check(store, st: SeedStore, summ: dict) -> float:
    """max |judge's seed-mean ratio / exp(mean over seeds of Δ mean nats) − 1|, the latter read
    directly from the JSON files."""
    if isinstance(store, str):
        store = Path(store)
    worst = 0.0
    for s, d in summ.items():
        raw = {}
        for k in st.seeds(s):
            blob = json.loads(store.joinpath(SS.run_file(s, k)).read_text(encoding="utf-8"))
            raw[k] = blob
        for L, cell in d.items():
            vals = []
            for blob in raw.values():
                ls = blob["eval_lengths"]
                col = [row[ls.index(L)] for row in blob["nats"]]
                col0 = [row[ls.index(blob["train_len"])] for row in blob["nats"]]
                vals.append(sum(col) / len(col) - sum(col0) / len(col0))
            worst = max(worst, abs(cell["ratio"] / math.exp(sum(vals) / len(vals)) - 1))
    return worst


def _fmt_iv(lo, hi):
    return f"[{lo:.3g}, {hi:.3g}]" if math.isfinite(lo) and math.isfinite(hi) else "—"


@register(
    "AT20",
    "[B]",
    "trained small models extrapolate in the paper's order: ALiBi flat; random accumulated "
    "Q/K/V ≤ random Q/K ≪ RoPE at long lengths; learned token rotations near training "
    "perplexity well beyond the training length; rotation-only eventually degrades; "
    "rotations plus ALiBi (far-mass control) stay flat",
    assumptions=(
        "posflow's CPU proxy (posflow extrapolate): equal step budgets, ≥ MIN_SEEDS seeds, BPE "
        "tokens, nested prefixes of shared windows, d_head and base in [B]'s mixing regime",
        "tolerances FLAT_TOL, QKV_SLACK, MUCH_LESS, NEAR_TOL and the regime criterion "
        "REGIME_TOL and ROPE_COLLAPSE (named parameters); family-wise level ALPHA (Bonferroni)",
    ),
)
def at20(ctx: Context) -> Evidence:
    """Claim AT20: [B]'s orderings judged by paired t intervals across seeds.

    Reads :data:`COMMITTED_STORE` (read-only package data) and returns
    :func:`store_evidence` of it.
    """
    return store_evidence(COMMITTED_STORE)


def store_evidence(store) -> Evidence:
    """AT20's evidence for the run store ``store`` (a folder path or traversable).

    Judged: the ratio table against the raw files, equal step budgets and shared windows, the
    nested-prefix and pairing controls, and each sub-claim (HOLDS / FAILS from its intervals;
    INCONCLUSIVE with the reason: an interval containing the bound, missing seeds, or the regime
    criterion). Reported: PPL and ratio tables with intervals (over seeds and a window bootstrap)
    and the unigram ceiling, per-seed spread, sensitivity to every named parameter, the learned
    angles' per-block mean (AT17's drift), [B]'s mixing counts against the proxy's, total CPU
    time. ``posflow extrapolate --results --judge --store DIR`` prints it for any store.
    """
    if isinstance(store, str):
        store = Path(store)
    st = load_seed_store(store)
    ms = []
    nested, why = _nested_control()
    if nested is None:
        ms.append(undecided("nested_prefix_control", math.nan, why, role="control"))
    else:
        ms.append(at_most(
            "nested_prefix_control", nested, 0.0,
            fp_tol(1e-4, "float32 forward passes (query-chunked vs plain softmax) of a 2-layer "
                   "LM, NLL of order ln 40 ≈ 3.7: a few 1e-6, held to 1e-4"),
            role="control",
            label="max |nested-prefix NLL − direct prefix NLL| (tiny LM, RoPE and learned Q/K)",
        ))  # fmt: skip
    ms.append(at_least(
        "pairing_control", _pairing_control(), 0.0, role="control",
        label="lower end of the paired interval on a hand-made store with effect 0.2 under "
              "seed effects 0, 1, 2 (> 0 only when seeds are paired)",
    ))  # fmt: skip
    if st is None or not st.runs:
        ms.append(undecided("store_runs", 0, f"no saved runs in {store}; produce them with "
                            "`posflow extrapolate`"))  # fmt: skip
        return Evidence(ms, setup=f"store {store}")
    cfg, meta = st.meta["config"], st.meta
    summ = ratio_summary(st)
    ms.append(at_most(
        "ratio_table_vs_raw_nats", _raw_ratio_check(store, st, summ), 0.0,
        fp_tol(1e-13, "means of ≤ 64 float64 numbers of order 10 and one exp: ≤ 64·ε·|x| "
               "≈ 1.4e-13 relative, held to 1e-13 in practice (pairwise sums)"),
        label="max |seed-mean ratio as the judge reads it / exp(Δ mean nats from the raw "
              "files) − 1|",
    ))  # fmt: skip
    steps = {key: r["train"]["steps"] for key, r in st.runs.items()}
    ms.append(holds(
        "equal_step_budgets", all(v == cfg["steps"] for v in steps.values()),
        label=f"every run trained exactly {cfg['steps']} optimiser steps",
    ))  # fmt: skip
    ms.append(holds(
        "shared_windows", all(r.get("key") == meta["key"] for r in st.runs.values()),
        label="every run scored on the store's windows (same configuration key)",
    ))  # fmt: skip
    subs = judge(st)
    for sub in subs:
        comps = sub["comparisons"]
        note = "; ".join(
            f"{c['label']}: mean {c['mean']:.3g}, {100 * (1 - c['alpha']):.2f} % t interval "
            f"{_fmt_iv(c['lo'], c['hi'])} over n = {c['n']} seeds, sign-test p = "
            f"{c['p_sign']:.3g} → {c['decision']}"
            for c in comps
        )
        key = f"sub_claim_{sub['name']}"
        if sub["status"] == INCONCLUSIVE:
            worst = comps[0]
            lab = f"sub-claim {sub['name']}: {worst['label']}, seed mean"
            ms.append(undecided(key, worst["mean"], f"{sub['reason']} ({note})", label=lab))
            continue
        # decided: the deciding end of each interval against its bound
        if sub["status"] == HOLDS:
            c = (
                comps[0]
                if len(comps) == 1
                else max(
                    comps,
                    key=lambda r: r["hi"] - r["bound"] if r["op"] == "le" else r["bound"] - r["lo"],
                )
            )  # the weakest comparison
        else:
            c = next(r for r in comps if r["decision"] == FAILS)
        end, what = (c["hi"], "upper") if c["op"] == "le" else (c["lo"], "lower")
        mk = at_most if c["op"] == "le" else at_least
        ms.append(mk(key, end, c["bound"], label=f"sub-claim {sub['name']}: {what} end of "
                     f"the interval of {c['label']} ({note})"))  # fmt: skip
    unigram = float(meta["unigram_ppl"])
    runs_cpu = sum(r["train"]["cpu_seconds"] + r["eval_cpu_seconds"] for r in st.runs.values())
    seeds = {s: len(st.seeds(s)) for s in st.schemes}
    ms += [
        info("schemes", len(st.schemes), label="schemes in the store"),
        info("seeds_min", min(seeds.values()), label="fewest seeds of a scheme"),
        info("steps", cfg["steps"], label="optimiser steps per run"),
        info("unigram_ppl", unigram, label="BPE unigram perplexity of the held-out text"),
        info("cpu_hours", runs_cpu / 3600, label="CPU time of the stored runs (h)"),
    ]
    # angle drift of the learned schemes (AT17 diagnostic)
    drift_rows = []
    for (s, k), r in sorted(st.runs.items()):
        for layer, a in enumerate(r.get("angle_means") or []):
            mean = np.asarray(a["mean"])
            drift_rows.append([_label(s), k, layer, float(mean.mean()), float(mean.min()),
                               float(mean.max()), float(np.mean(a["std"]))])  # fmt: skip
    for s in ("learned_qk", "learned_qkv"):
        rows = [r[3] for r in drift_rows if r[0] == _label(s)]
        if rows:
            ms.append(info(f"angle_mean_{s}", float(np.mean(rows)), label=f"{_label(s)}: mean "
                           "learned angle θ/f_b over layers, blocks, seeds (−1 = RoPE, 0 = "
                           "[B]'s zero-mean regime)"))  # fmt: skip
    # tables
    L0, lengths = st.train_len, st.lengths
    facs = [L // L0 for L in lengths]
    tables = [
        Table(
            "ratios",
            "PPL(L)/PPL(L_train): seed mean [95 % t interval over seeds] {95 % window bootstrap}",
            ["scheme", "seeds", "PPL(L_train)", "unigram ceiling", *[f"{f}×" for f in facs]],
            [
                [
                    _label(s),
                    seeds[s],
                    d[L0]["ppl"],
                    unigram / d[L0]["ppl"],
                    *[
                        f"{d[L]['ratio']:.3f} {_fmt_iv(d[L]['lo'], d[L]['hi'])} "
                        f"{{{d[L]['boot_lo']:.3f}, {d[L]['boot_hi']:.3f}}}"
                        for L in lengths
                    ],
                ]
                for s, d in summ.items()
            ],
            note="unigram ceiling = unigram PPL / PPL(L_train): the ratio of a model that falls "
            f"back to token frequencies ({unigram:.1f}); tokens scored per length: "
            + ", ".join(f"{L}: {meta['tokens_per_length'][str(L)]}" for L in lengths)
            + f" ({meta['windows']} windows, nested prefixes)",
        ),
        Table(
            "perplexity",
            "PPL(L): seed mean",
            ["scheme", *[str(L) for L in lengths]],
            [[_label(s), *[d[L]["ppl"] for L in lengths]] for s, d in summ.items()],
        ),
        Table(
            "seed_spread",
            "per run: PPL(L_train), ratio at the longest length, final training loss",
            ["scheme", "seed", "PPL(L_train)", f"ratio {facs[-1]}×", "train loss", "CPU s"],
            [
                [
                    _label(s),
                    k,
                    float(st.ppl(s, k)[0]),
                    float(st.ppl(s, k)[-1] / st.ppl(s, k)[0]),
                    r["train"]["final_train_loss"],
                    r["train"]["cpu_seconds"] + r["eval_cpu_seconds"],
                ]
                for (s, k), r in sorted(st.runs.items())
            ],
        ),
        Table(
            "sub_claims",
            "each comparison: seed-mean statistic, Bonferroni t interval, sign test, decision",
            [
                "sub-claim",
                "comparison",
                "n",
                "mean",
                "lower",
                "upper",
                "level",
                "sign p",
                "decision",
                "blocked by",
                "sub-claim verdict",
            ],
            [
                [
                    sub["name"],
                    c["label"],
                    c["n"],
                    c["mean"],
                    c["lo"],
                    c["hi"],
                    1 - c["alpha"],
                    c["p_sign"],
                    c["decision"],
                    "; ".join(c["blocked"]),
                    sub["status"],
                ]
                for sub in subs
                for c in sub["comparisons"]
            ],
            note=f"intervals m ± t·s/√n at α = {ALPHA}/M per comparison (M = "
            f"{sum(len(s['comparisons']) for s in subs)}); regime: every compared scheme's "
            f"PPL(L_train) ≤ REGIME_TOL = {REGIME_TOL} × RoPE's; sub-claims 3 and 5 need RoPE's "
            f"ratio at L_max ≥ ROPE_COLLAPSE = {ROPE_COLLAPSE}",
        ),
        Table(
            "mixing",
            "blocks with (sin f_b/f_b)^n < 0.1: the proxy (d_head, base) vs [B] (96, 10⁴)",
            ["n", "blocks mixed", "of", "fraction", "[B] at n·512/L_train"],
            [
                [
                    int(n),
                    int(c),
                    meta["mixing"]["blocks"],
                    int(c) / meta["mixing"]["blocks"],
                    meta["mixing"]["paper"]["counts"].get(str(int(n) * 512 // L0), ""),
                ]
                for n, c in sorted(meta["mixing"]["counts"].items(), key=lambda x: int(x[0]))
            ],
            note=f"base {cfg['base']} chosen by extrapolate_seeds.mixing_base so that the "
            "fraction at the training length matches [B]'s 10/48 at 512",
        ),
    ]
    if drift_rows:
        tables.append(Table(
            "learned_angle_drift",
            "learned angles θ/f_b per layer (mean over held-out tokens and heads; AT17 diagnostic)",
            ["scheme", "seed", "layer", "mean over blocks", "min block mean", "max block mean",
             "mean std"],
            drift_rows,
        ))  # fmt: skip
    sens = []
    for const, (kw, values) in _SENS.items():
        for v in values:
            res = judge(st, **{kw: v})
            sens.append([const, v, *[r["status"] for r in res]])
    tables.append(Table(
        "sensitivity",
        "sub-claim verdicts at other values of each named parameter (the others at defaults)",
        ["parameter", "value", *SUB_CLAIMS], sens,
    ))  # fmt: skip
    total = len(st.runs)
    return Evidence(
        ms,
        figures=[extrapolation_figure(st)],
        tables=tables,
        setup=f"store {store}: {len(st.schemes)} schemes × seeds {sorted(set(seeds.values()))} "
        f"({total} runs), {cfg['n_layer']} layers × {cfg['n_head']} heads × d_head "
        f"{cfg['d_head']}, base {cfg['base']}, BPE {meta['vocab_size']}, context {L0}, "
        f"{cfg['steps']} steps × batch {cfg['batch_size']}, evaluated to {max(lengths)} "
        f"({meta['windows']} windows); {runs_cpu / 3600:.2f} CPU h",
    )


# -- mutants -------------------------------------------------------------------------------------
def _ratio_wrong_length(original):
    @functools.wraps(original)
    def log_ratios(st, scheme, length):
        out = original(st, scheme, length)
        j2 = st.lengths.index(2 * st.train_len)
        j0 = st.lengths.index(st.train_len)
        return {k: v - float(st.nats(scheme, k)[:, j2].mean() - st.nats(scheme, k)[:, j0].mean())
                for k, v in out.items()}  # fmt: skip

    return log_ratios


def _seeds_shuffled(original):
    @functools.wraps(original)
    def paired_differences(a, b):
        common = sorted(set(a) & set(b))
        rolled = common[1:] + common[:1]
        return np.array([a[k] - b[j] for k, j in zip(common, rolled, strict=True)])

    return paired_differences


def _fresh_windows(original):
    @functools.wraps(original)
    def evaluate_nested(model, wins, lengths, **kw):
        w = np.asarray(wins)
        cols = [original(model, np.roll(w, j, axis=0), [L], **kw)[..., 0]
                for j, L in enumerate(lengths)]  # fmt: skip
        return np.stack(cols, axis=-1)

    return evaluate_nested


add_mutant(
    "AT20",
    "ratio-against-wrong-length",
    "posflow.simulate.models.seed_store:log_ratios",
    _ratio_wrong_length,
    "log-ratios taken against PPL(2·L_train) instead of PPL(L_train)",
)
add_mutant(
    "AT20",
    "seeds-unpaired",
    "posflow.simulate.models.seed_store:paired_differences",
    _seeds_shuffled,
    "paired differences take scheme B's next seed instead of the same seed",
)
add_mutant(
    "AT20",
    "fresh-windows-per-length",
    "posflow.simulate.models.extrapolate_seeds:evaluate_nested",
    _fresh_windows,
    "each length scored on other windows (a fresh window set per length, not nested prefixes)",
)
