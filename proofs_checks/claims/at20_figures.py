"""AT20's figure and the tables of its store: ratios, perplexities, seeds, mixing, angle drift.

:func:`extrapolation_figure` draws every scheme's seed-mean ratio PPL(L)/PPL(L_train) against
L/L_train with its t band over seeds beside [B]'s 16-layer numbers (:data:`PAPER_B`; digest
§3.4, §3.5b); the table builders show a multi-seed store
(:mod:`posflow.simulate.models.seed_store`) as claim AT20 reports it.
"""

from __future__ import annotations

import json
import math
from importlib import resources
from pathlib import Path

import numpy as np

from posflow.proofs_checks.claims.at20_judge import FLAT_TOL, ROT_ALIBI, fmt_iv
from posflow.proofs_checks.kit import (
    SCHEME_COLORS,
    SCHEME_LABELS,
    Figure,
    Panel,
    Series,
    Table,
    at_most,
    fp_tol,
    info,
    render,
)
from posflow.simulate.models import seed_store as SS
from posflow.simulate.models.seed_store import SeedStore

__all__ = [
    "PAPER_B",
    "PAPER_TRAIN_LEN",
    "drift_rows",
    "drift_table",
    "extrapolation_figure",
    "label",
    "mixing_table",
    "plot_extrapolation",
    "ratio_tables",
    "reference_values",
    "regression",
    "write_reference",
]

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
    "rope_own": "#E69F00",
}
_EXTRA_LABELS = {
    "rope_own": "RoPE (base 10⁴)",
    "nope": "NoPE",
    "random_pos_qk": "random Q/K, mean > 0",
    "random_pos_qkv": "random Q/K/V, mean > 0",
    "path": "PaTH (Householder)",
    "learned_qk": SCHEME_LABELS["learned"],
    ROT_ALIBI: "random Q/K + ALiBi",
}


def _color(s):
    return _EXTRA_COLORS.get(s, SCHEME_COLORS.get(s, "#444444"))


def label(s):
    """The display name of scheme ``s`` in AT20's tables and figure."""
    return _EXTRA_LABELS.get(s, SCHEME_LABELS.get(s, s))


def _paper_ratios() -> dict:
    return {
        s: {L // PAPER_TRAIN_LEN: v / d[PAPER_TRAIN_LEN] for L, v in d.items()}
        for s, d in PAPER_B.items()
    }


# -- figure ----------------------------------------------------------------------------------
def extrapolation_figure(st: SeedStore, title: str | None = None) -> Figure:
    """Figure spec: every scheme's seed-mean ratio PPL(L)/PPL(L_0) against L/L_0 with its t band
    over seeds (95 %), [B]'s 16-layer ratios beside (AT20)."""
    if st is None or not st.runs:
        raise ValueError("the store holds no results to plot; run `posflow extrapolate` first")
    summ = SS.ratio_summary(st)
    L0 = st.train_len
    series = []
    for s, d in summ.items():
        f = [L / L0 for L in sorted(d)]
        y = [d[L]["ratio"] for L in sorted(d)]
        lo = [d[L]["lo"] for L in sorted(d)]
        hi = [d[L]["hi"] for L in sorted(d)]
        if all(math.isfinite(v) for v in lo + hi):
            series.append(Series("", f, y, kind="band", lo=lo, hi=hi, color=_color(s)))
        series.append(Series(f"{label(s)} ({d[L0]['seeds']} seeds)", f, y, color=_color(s)))
    cfg = st.meta["config"]
    head = title or (
        f"posflow: {cfg['n_layer']} layers, d_head {cfg['d_head']}, BPE "
        f"{st.meta['vocab_size']}, context {L0}, {cfg['steps']} steps (bands: 95 % over seeds)"
    )
    paper = [
        Series(label(s), sorted(d), [d[x] for x in sorted(d)], color=_color(s))
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
    return render(extrapolation_figure(st, title), path)


# -- tables ------------------------------------------------------------------------------------
def ratio_tables(st: SeedStore, summ: dict) -> list[Table]:
    """The ratio table (seed mean with both intervals, unigram ceiling), the PPL table and the
    per-run spread of ``st``; ``summ`` is :func:`~posflow.simulate.models.seed_store.ratio_summary`
    of it."""
    meta, L0, lengths = st.meta, st.train_len, st.lengths
    unigram = float(meta["unigram_ppl"])
    facs = [L // L0 for L in lengths]
    ratios = [
        [label(s), len(st.seeds(s)), d[L0]["ppl"], unigram / d[L0]["ppl"],
         *[f"{d[L]['ratio']:.3f} {fmt_iv(d[L]['lo'], d[L]['hi'])} "
           f"{{{d[L]['boot_lo']:.3f}, {d[L]['boot_hi']:.3f}}}" for L in lengths]]
        for s, d in summ.items()
    ]  # fmt: skip
    spread = [
        [label(s), k, float(st.ppl(s, k)[0]), float(st.ppl(s, k)[-1] / st.ppl(s, k)[0]),
         r["train"]["final_train_loss"], r["train"]["cpu_seconds"] + r["eval_cpu_seconds"]]
        for (s, k), r in sorted(st.runs.items())
    ]  # fmt: skip
    return [
        Table(
            "ratios",
            "PPL(L)/PPL(L_train): seed mean [95 % t interval over seeds] {95 % window bootstrap}",
            ["scheme", "seeds", "PPL(L_train)", "unigram ceiling", *[f"{f}×" for f in facs]],
            ratios,
            note="unigram ceiling = unigram PPL / PPL(L_train): the ratio of a model that falls "
            f"back to token frequencies ({unigram:.1f}); tokens scored per length: "
            + ", ".join(f"{L}: {meta['tokens_per_length'][str(L)]}" for L in lengths)
            + f" ({meta['windows']} windows, nested prefixes)",
        ),
        Table("perplexity", "PPL(L): seed mean", ["scheme", *[str(L) for L in lengths]],
              [[label(s), *[d[L]["ppl"] for L in lengths]] for s, d in summ.items()]),
        Table("seed_spread",
              "per run: PPL(L_train), ratio at the longest length, final training loss",
              ["scheme", "seed", "PPL(L_train)", f"ratio {facs[-1]}×", "train loss", "CPU s"],
              spread),
    ]  # fmt: skip


def mixing_table(st: SeedStore) -> Table:
    """The blocks mixed at each length in the proxy against [B]'s counts (from the store's meta)."""
    mix, L0 = st.meta["mixing"], st.train_len
    rows = [
        [int(n), int(c), mix["blocks"], int(c) / mix["blocks"],
         mix["paper"]["counts"].get(str(int(n) * 512 // L0), "")]
        for n, c in sorted(mix["counts"].items(), key=lambda x: int(x[0]))
    ]  # fmt: skip
    return Table(
        "mixing",
        "blocks with (sin f_b/f_b)^n < 0.1: the proxy (d_head, base) vs [B] (96, 10⁴)",
        ["n", "blocks mixed", "of", "fraction", "[B] at n·512/L_train"],
        rows,
        note=f"base {st.meta['config']['base']} chosen by extrapolate_seeds.mixing_base so that "
        "the fraction at the training length matches [B]'s 10/48 at 512",
    )


def drift_rows(st: SeedStore) -> list[list]:
    """[scheme label, seed, layer, mean, min, max of the per-block mean angle, mean std] of every
    learned run's stored angle means (AT17's drift diagnostic)."""
    rows = []
    for (s, k), r in sorted(st.runs.items()):
        for layer, a in enumerate(r.get("angle_means") or []):
            mean = np.asarray(a["mean"])
            rows.append([label(s), k, layer, float(mean.mean()), float(mean.min()),
                         float(mean.max()), float(np.mean(a["std"]))])  # fmt: skip
    return rows


def drift_table(rows: list[list]) -> Table:
    """The table of :func:`drift_rows`."""
    return Table(
        "learned_angle_drift",
        "learned angles θ/f_b per layer (mean over held-out tokens and heads; AT17 diagnostic)",
        ["scheme", "seed", "layer", "mean over blocks", "min block mean", "max block mean",
         "mean std"],
        rows,
    )  # fmt: skip


# -- regression against stored references (issue 23) --------------------------------------------
REFERENCE = "at20.json"  # package data: posflow.proofs_checks.claims / references / REFERENCE
REG_TOL = 1e-12
REG_REASON = (
    "the same float64 numbers of the committed store through the same arithmetic (means of ≤ 64 "
    "values, exp, scipy's t quantile): a numpy/scipy upgrade may reorder sums, ≤ 64 ε ≈ 1.4e-14 "
    "relative; 1e-12 relative (floor 1 for values near 0)"
)


def reference_values(st: SeedStore, summ: dict, subs: list[dict]) -> dict:
    """Every number AT20 reports of a store, flattened to ``{name: value}``: the ratio table
    (seed mean, t interval, window bootstrap, PPL, seeds per scheme and length) and every
    comparison of the judge (n, mean, interval, sign-test p, decision) with its sub-claim's
    verdict. Strings compare by equality."""
    out = {"store_key": str(st.meta.get("key")), "runs": len(st.runs)}
    for s, d in summ.items():
        for L, row in d.items():
            for f in ("ratio", "lo", "hi", "boot_lo", "boot_hi", "ppl", "seeds"):
                out[f"ratio.{s}.{L}.{f}"] = row[f]
    for sub in subs:
        out[f"sub.{sub['name']}.status"] = sub["status"]
        for c in sub["comparisons"]:
            for f in ("n", "mean", "lo", "hi", "p_sign", "decision"):
                out[f"cmp.{c['label']}.{f}"] = c[f]
    return {k: (float(v) if isinstance(v, int | float) and not isinstance(v, bool) else v)
            for k, v in out.items()}  # fmt: skip


def _deviation(v, r, floor: float) -> float:
    """|v − r| / max(|r|, floor) for numbers (NaN = NaN is 0), 0/inf for equal/unequal others."""
    if isinstance(r, float) and isinstance(v, float):
        if math.isnan(r) or math.isnan(v):
            return 0.0 if math.isnan(r) and math.isnan(v) else math.inf
        return abs(v - r) / max(abs(r), floor)
    return 0.0 if v == r else math.inf


def regression(key: str, values: dict, ref: dict, tol: float, reason: str, *, floor=1.0,
               what: str = "") -> list:
    """The judged comparison of ``values`` with the stored reference ``ref``: the largest
    relative deviation over every name of either (a name missing on one side deviates by inf)
    must be ≤ ``tol`` (``reason`` says where it comes from); and how many numbers it covers."""
    devs = {k: _deviation(values.get(k), ref.get(k), floor) for k in sorted({*values, *ref})}
    worst = max(devs, key=devs.get) if devs else ""
    dev = devs.get(worst, math.inf)
    shown = f"{worst}: {values.get(worst)!r} vs {ref.get(worst)!r}" if worst else "none"
    return [
        at_most(key, dev, 0.0, fp_tol(tol, reason),
                label=f"max relative deviation of {what or 'every reported number'} from the "
                f"stored reference (worst: {shown})"),
        info(f"{key}_count", len(devs), label=f"numbers compared by {key}"),
    ]  # fmt: skip


def load_reference(name: str = REFERENCE):
    """The stored reference ``name`` (package data), or None when it is absent."""
    p = resources.files("posflow.proofs_checks.claims").joinpath("references", name)
    return json.loads(p.read_text()) if p.is_file() else None


def write_reference(path=None) -> Path:
    """Write AT20's reference from the committed store (``python -m
    posflow.proofs_checks.claims.at20_figures``): :func:`reference_values` of the store as
    judged now. Regenerate only after checking that a change of these numbers is intended."""
    from posflow.proofs_checks.claims.at20_judge import judge
    from posflow.simulate.models.seed_store import COMMITTED_STORE, load_seed_store

    st = load_seed_store(COMMITTED_STORE)
    vals = reference_values(st, SS.ratio_summary(st), judge(st))
    path = Path(path or Path(__file__).parent / "references" / REFERENCE)
    path.write_text(json.dumps(vals, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    return path


if __name__ == "__main__":  # pragma: no cover - the documented command
    print(write_reference())
