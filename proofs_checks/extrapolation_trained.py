"""Claim AT20 of [B]: trained small models extrapolate in the paper's order (no torch needed).

The check reads the run store written by ``posflow extrapolate``
(:mod:`posflow.simulate.models.extrapolate`; default: the committed run shipped as package data) and
judges [B]'s ordering claims one by one on the ratios r_s(L) = PPL_s(L) / PPL_s(L_train):

1. ALiBi flat:           r_alibi(L_max) ≤ FLAT_TOL;
2. random Q/K/V ≤ Q/K:   r_random_qkv(L_max) ≤ QKV_SLACK · r_random_qk(L_max);
3. rotations ≪ RoPE:     r_rope(L_max) ≥ MUCH_LESS · r_s(L_max) for every rotation scheme s;
4. learned near train:   r_s(NEAR_FACTOR · L_train) ≤ NEAR_TOL for learned Q/K and Q/K/V;
5. rotation-only degrade: r_s(L_max) > FLAT_TOL for every rotation scheme s.

The overall verdict HOLDS only when all five hold; a missing scheme makes it INCONCLUSIVE.
[B]'s 16-layer numbers (context 512, OpenWebText, 200K iterations; digest §3.4, §3.5b) are
quoted beside ours in :data:`PAPER_B` and in the figure.
"""

from __future__ import annotations

from pathlib import Path

from posflow.proofs_checks.extrapolation_common import SCHEME_COLORS, SCHEME_LABELS, plain
from posflow.proofs_checks.registry import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    Context,
    LegacyEvidence,
    register,
)
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
    return {s: {L // PAPER_TRAIN_LEN: v / d[PAPER_TRAIN_LEN] for L, v in d.items()}
            for s, d in PAPER_B.items()}  # fmt: skip


def judge(rows) -> list[dict]:
    """The five sub-claims of AT20, each ``{"name", "status", "detail", "numbers"}``.

    Thresholds: FLAT_TOL, QKV_SLACK, MUCH_LESS, NEAR_FACTOR/NEAR_TOL (module constants);
    r = PPL(L)/PPL(L_train); L_max = the longest length every needed scheme reached.
    A sub-claim whose schemes are missing is INCONCLUSIVE.
    """
    r = ratio_table(rows)
    pr = _paper_ratios()
    out = []

    def fmax(names):
        if any(s not in r for s in names):
            return None
        return min(max(r[s]) for s in names)

    def add(name, need, test, detail_fn):
        f = fmax(need)
        if f is None:
            missing = [s for s in need if s not in r]
            out.append({"name": name, "status": INCONCLUSIVE, "numbers": {},
                        "detail": f"missing schemes: {', '.join(missing)}"})  # fmt: skip
            return
        ok, nums = test(f)
        out.append({"name": name, "status": HOLDS if ok else FAILS, "numbers": nums,
                    "detail": detail_fn(f, nums)})  # fmt: skip

    add(
        "alibi_flat", ["alibi"],
        lambda f: (r["alibi"][f] <= FLAT_TOL, {"factor": f, "alibi": r["alibi"][f]}),
        lambda f, n: f"ALiBi r({f}×) = {n['alibi']:.3f} vs tolerance {FLAT_TOL} "
        f"([B] 128×: {pr['alibi'][128]:.2f})",
    )  # fmt: skip
    add(
        "random_qkv_le_qk", ["random_qk", "random_qkv"],
        lambda f: (r["random_qkv"][f] <= QKV_SLACK * r["random_qk"][f],
                   {"factor": f, "random_qkv": r["random_qkv"][f], "random_qk": r["random_qk"][f]}),
        lambda f, n: f"r({f}×): random Q/K/V {n['random_qkv']:.3f} vs Q/K {n['random_qk']:.3f} "
        f"(slack {QKV_SLACK}; [B] 128×: {pr['random_qkv'][128]:.2f} vs {pr['random_qk'][128]:.2f})",
    )  # fmt: skip
    add(
        "rotations_much_below_rope", ["rope", *ROTATION_SCHEMES],
        lambda f: (all(r["rope"][f] >= MUCH_LESS * r[s][f] for s in ROTATION_SCHEMES),
                   {"factor": f, "rope": r["rope"][f], **{s: r[s][f] for s in ROTATION_SCHEMES}}),
        lambda f, n: f"r({f}×): RoPE {n['rope']:.3f} vs "
        + ", ".join(f"{s} {n[s]:.3f}" for s in ROTATION_SCHEMES)
        + f" (need RoPE ≥ {MUCH_LESS}× each; [B] 128×: RoPE {pr['rope'][128]:.1f})",
    )  # fmt: skip

    def near(f):
        g = min(NEAR_FACTOR, f)
        nums = {"factor": g, **{s: r[s][g] for s in ("learned_qk", "learned_qkv")}}
        return all(nums[s] <= NEAR_TOL for s in ("learned_qk", "learned_qkv")), nums

    add(
        "learned_near_train", ["learned_qk", "learned_qkv"], near,
        lambda f, n: f"r({n['factor']}×): learned Q/K {n['learned_qk']:.3f}, Q/K/V "
        f"{n['learned_qkv']:.3f} vs tolerance {NEAR_TOL} ([B] 8×: "
        f"{pr['learned_qk'][8]:.2f}, {pr['learned_qkv'][8]:.2f})",
    )  # fmt: skip
    add(
        "rotation_only_degrades", list(ROTATION_SCHEMES),
        lambda f: (all(r[s][f] > FLAT_TOL for s in ROTATION_SCHEMES),
                   {"factor": f, **{s: r[s][f] for s in ROTATION_SCHEMES}}),
        lambda f, n: f"r({f}×) > {FLAT_TOL}? "
        + ", ".join(f"{s} {n[s]:.3f}" for s in ROTATION_SCHEMES)
        + f" ([B] 128×: {', '.join(f'{pr[s][128]:.2f}' for s in ROTATION_SCHEMES)})",
    )  # fmt: skip
    return out


def plot_extrapolation(rows, path, title: str | None = None) -> Path:
    """PNG of PPL(L)/PPL(L_train) against L/L_train per scheme, [B]'s 16-layer ratios beside.

    Left: the store's schemes (log-log); right: [B]'s :data:`PAPER_B`, same colours. AT20.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from posflow.proofs_checks.figures import save

    r = ratio_table(rows)
    if not r:
        raise ValueError("rows hold no results to plot; run `posflow extrapolate` first")
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, table, head in ((a, r, title or "posflow (CPU run)"),
                            (b, _paper_ratios(), "[B] 16 layers, context 512")):  # fmt: skip
        for s, d in table.items():
            f = sorted(d)
            ax.plot(f, [d[x] for x in f], "o-", color=_color(s), label=_label(s), ms=3)
        ax.axhline(1.0, color="k", lw=0.6, ls=":")
        ax.set_xscale("log", base=2)
        ax.set(yscale="log", xlabel="L / L_train", title=head)
        ax.legend(fontsize=7)
    a.set_ylabel("PPL(L) / PPL(L_train)")
    return save(fig, path)


@register(
    "AT20",
    "[B]",
    "trained small models extrapolate in the paper's order: ALiBi flat; random accumulated "
    "Q/K/V ≤ random Q/K ≪ RoPE at long lengths; learned token rotations near training "
    "perplexity well beyond the training length; rotation-only eventually degrades",
    assumptions=("posflow's CPU-sized byte-level runs (posflow extrapolate)",),
)
def at20(ctx: Context) -> LegacyEvidence:
    """Claim AT20: judge [B]'s orderings on the saved train-short/test-long results.

    Reads the committed run :data:`COMMITTED_STORE` (read-only package data). Only when
    ``ctx.full`` and the committed run is missing, the default run is trained (resuming) into the
    per-user store :func:`~posflow.simulate.models.store.user_store`.
    """
    store = COMMITTED_STORE
    rows = read_store(store)
    if ctx.full and not rows:
        from posflow.simulate.models.extrapolate import ExtrapolationConfig, run_extrapolation

        store = user_store()
        rows = run_extrapolation(ExtrapolationConfig(), store)
    if not rows:
        return LegacyEvidence(
            INCONCLUSIVE,
            {"store": str(store)},
            summary=f"no saved results in {store}; produce them with `posflow extrapolate` "
            "(about 30 min on 2 cores) or `posflow verify AT20 --full`",
        )
    subs = judge(rows)
    figs = []
    fp = ctx.figure_path("at20_extrapolation.png")
    if fp is not None:
        figs.append(str(plot_extrapolation(rows, fp)))
    statuses = [s["status"] for s in subs]
    status = (
        INCONCLUSIVE if INCONCLUSIVE in statuses else HOLDS if all(
            s == HOLDS for s in statuses) else FAILS
    )  # fmt: skip
    measured = {
        "store": str(store),
        "sub_claims": subs,
        "ratios": ratio_table(rows),
        "paper_ratios": _paper_ratios(),
        "tolerances": {
            "flat": FLAT_TOL,
            "qkv_slack": QKV_SLACK,
            "much_less": MUCH_LESS,
            "near_factor": NEAR_FACTOR,
            "near": NEAR_TOL,
        },
    }
    summary = "; ".join(f"{s['name']} {s['status']}: {s['detail']}" for s in subs)
    return LegacyEvidence(status, plain(measured), figs, summary=summary)
