"""AT20's real-model anchor: a pretrained RoPE model (SmolLM2-135M) beyond its training context.

[B]'s orderings presuppose that position-indexed rotations degrade past the training length.
The stores of :mod:`posflow.simulate.models.context_length` (package data
``smollm2/context_x{F}``: disjoint English windows of F·L tokens, L = ``max_position_embeddings``
of the model's own config, one forward pass each) give per window w the paired contrast

.. math:: \\Delta_w(f) = \\bar\\ell_w[fL/2, fL) - \\bar\\ell_w[L/2, L),

the mean next-token loss on the last half of an f·L window minus that on the last half of the
training window. A model that extrapolates has Δ ≤ 0 (more context never hurts on average);
``rope_degrades`` says Δ(f) > 0 for each measured f ≥ 2: a t interval over the windows at level
1 − ALPHA/M (M factors, Bonferroni), decided by the kit's rule (HOLDS when every lower end is
> 0, FAILS when an upper end is < 0). Factor f reads the store with the fewest tokens per
window that covers it (the most windows): 2× from ``context_x2``, 4× from ``context_x4``.
Reported besides: PPL(f) = exp(mean loss of an f·L window) with t intervals over windows, and
the loss against position.
"""

from __future__ import annotations

import functools
import math
from importlib import resources

import numpy as np

from posflow.proofs_checks import kit
from posflow.proofs_checks.claims.at20_judge import ALPHA, fmt_iv
from posflow.simulate.models import seed_store as SS
from posflow.simulate.models.context_length import block_sums, read_context_store, window_statistics

__all__ = ["CONTEXT_STORES", "degradation", "hand_made_context_store", "real_evidence"]

_DATA = resources.files("posflow.simulate") / "data" / "smollm2"
CONTEXT_STORES = (_DATA / "context_x2", _DATA / "context_x4")
_NAME = "rope_degrades"


def _stores(stores) -> list[dict]:
    out = [read_context_store(s) for s in stores]
    return sorted((st for st in out if st is not None and st["windows"]),
                  key=lambda st: st["meta"]["factor"])  # fmt: skip


def degradation(stores, alpha: float = ALPHA) -> dict:
    """The sub-claim ``rope_degrades`` on the read stores (sorted by window factor):
    ``{"name", "status", "reason", "comparisons"}`` as ``at20_judge.judge`` returns them, and
    ``"ppl"``: {f: (windows, mean, lo, hi) of PPL(f), t interval of ln PPL at 95 %}, and
    ``"short"``: {f: Δ(f)} for factors measured on one window only (no interval: shown, not
    judged, and not counted in M)."""
    factors, ppl, by = [], {}, {}
    for st in stores:
        ws = window_statistics(st)
        for f, x in ws["ppl"].items():
            if f not in ppl:  # the store with the most windows comes first
                m, lo, hi = SS.t_interval(np.log(x), 0.05) if x.size >= 2 else (
                    float(np.log(x).mean()), math.nan, math.nan)  # fmt: skip
                ppl[f] = (x.size, math.exp(m), math.exp(lo), math.exp(hi))
        for f, d in ws["excess"].items():
            if f not in by:
                by[f] = dict(enumerate(d.tolist()))
                factors.append(f)
    short = {f: len(by[f]) for f in factors if len(by[f]) < 2}  # no interval: shown only
    factors = [f for f in factors if f not in short]
    a = kit.family_level(alpha, max(1, len(factors)))
    rows, decisions = [], []
    for f in factors:
        lab = f"Δ({f}×) = mean loss on [{f // 2 if f > 2 else ''}L, {f}L) − on [L/2, L) > 0"
        stats = SS.comparison_statistics(by[f], 0.0, a)
        d = kit.Decision(lab, stats["mean"], stats["lo"], stats["hi"], 0.0, "ge", a, [])
        decisions.append(d)
        rows.append({"label": lab, "op": "ge", "bound": 0.0, "alpha": a, "values": by[f],
                     **stats, "decision": d.decision, "blocked": []})  # fmt: skip
    status, reason = kit.combine(decisions) if decisions else (
        kit.INCONCLUSIVE, "no factor has ≥ 2 windows")  # fmt: skip
    return {"name": _NAME, "status": status, "reason": reason, "comparisons": rows, "ppl": ppl,
            "short": {f: by[f][0] for f in short}}


def hand_made_context_store(jump: float, *, windows=4, L=8, factor=4, block=4, seed=0) -> dict:
    """An in-memory store with a known answer: per-token loss 2 − 0.5·t/(factor·L) (falling with
    context) plus ``jump`` on every predicted position t ≥ L, with noise ±0.01."""
    rng = np.random.default_rng(seed)
    wins = []
    for k in range(windows):
        t = np.arange(1, factor * L)
        nll = 2 - 0.5 * t / (factor * L) + jump * (t >= L) + rng.uniform(-0.01, 0.01, t.size)
        wins.append({"start": k, "window_len": factor * L, "block": block,
                     "sums": block_sums(nll, block)})  # fmt: skip
    return {"meta": {"train_context": L, "factor": factor, "block": block}, "windows": wins}


def _statistics_error() -> float:
    """max |window_statistics − direct means of the per-token losses| on a hand-made store."""
    L, F, B = 16, 4, 4
    rng = np.random.default_rng(7)
    raw = [rng.gamma(2.0, 1.5, F * L - 1) for _ in range(3)]
    st = {"meta": {"train_context": L, "factor": F, "block": B}, "windows": [
        {"sums": block_sums(x, B)} for x in raw]}  # fmt: skip
    ws = window_statistics(st)
    err = 0.0
    for f in (1, 2, 4):
        direct = np.array([math.exp(x[: f * L - 1].mean()) for x in raw])
        err = max(err, float(np.max(np.abs(ws["ppl"][f] / direct - 1))))
        if f >= 2:  # loss index i predicts position t = i + 1
            d = np.array([x[f * L // 2 - 1 : f * L - 1].mean() - x[L // 2 - 1 : L - 1].mean()
                          for x in raw])  # fmt: skip
            err = max(err, float(np.max(np.abs(ws["excess"][f] - d))))
    return err


def _nll_error() -> float | None:
    """max |next_token_nll − cross-entropy of the full logits| of a tiny random Llama on a window
    2.5× its max_position_embeddings, lm head chunked by 7 rows (None without torch)."""
    if kit.optional_torch() is None:
        return None
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from posflow.simulate.models.context_length import next_token_nll

    cfg = LlamaConfig(vocab_size=50, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=8,
                      attn_implementation="sdpa")  # fmt: skip
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).eval()
    ids = torch.randint(0, 50, (20,))
    with torch.inference_mode():
        logits = model(ids[None]).logits[0, :-1].double()
        ref = torch.nn.functional.cross_entropy(logits, ids[1:], reduction="none").numpy()
    return float(np.max(np.abs(next_token_nll(model, ids, chunk=7) - ref)))


def _controls() -> list:
    nll = _nll_error()
    ms = [
        kit.at_most("context_statistics_vs_direct", _statistics_error(), 0.0, kit.fp_tol(
            1e-13, "means of ≤ 64 float64 losses of order 3 from correctly rounded block sums "
            "vs numpy means: ≤ 64·ε relative ≈ 1.4e-14, held to 1e-13"),
            label="max |PPL and Δ from block sums (window_statistics) − direct means of the "
                  "per-token losses| (hand-made store)"),
        kit.undecided("next_token_nll_vs_logits", math.nan, "torch is not importable",
                      role="control") if nll is None else kit.at_most(
            "next_token_nll_vs_logits", nll, 0.0, kit.fp_tol(
                1e-5, "float32 logits of one forward pass vs the same rows through the lm head "
                "in chunks: a few float32 ulps of logits of order 1 (≈ 1e-7), held to 1e-5"),
            role="control", label="max |next_token_nll − cross-entropy of the full logits| "
            "(tiny random Llama, 20 tokens, 2.5× its context, head in chunks of 7)"),
    ]  # fmt: skip
    for jump, want, what in ((1.0, kit.HOLDS, "a loss jump of 1 nat beyond L"),
                             (0.0, kit.FAILS, "loss falling with context, no jump")):
        got = degradation([hand_made_context_store(jump)])["status"]
        ms.append(kit.holds(f"context_control_{'jump' if jump else 'smooth'}", got == want,
                            role="control", label=f"the degradation judge on {what}: {got} "
                            f"(must be {want})"))  # fmt: skip
    return ms


def _figure(stores, sub) -> kit.Figure:
    panels_series = []
    for st in stores:
        meta = st["meta"]
        L, B = meta["train_context"], meta["block"]
        s = np.array([w["sums"] for w in st["windows"]]) / B
        s[:, 0] *= B / (B - 1)  # block 0 holds B − 1 predictions
        x = (np.arange(s.shape[1]) + 0.5) * B / L
        m = s.mean(0)
        se = s.std(0, ddof=1) / math.sqrt(len(s)) if len(s) > 1 else np.zeros_like(m)
        c = "#0072B2" if meta["factor"] == 2 else "#D55E00"
        panels_series += [kit.Series("", x.tolist(), m.tolist(), kind="band",
                                     lo=(m - 2 * se).tolist(), hi=(m + 2 * se).tolist(), color=c),
                          kit.Series(f"windows of {meta['factor']}L ({len(s)} windows)",
                                     x.tolist(), m.tolist(), color=c)]  # fmt: skip
    L = stores[0]["meta"]["train_context"]
    return kit.Figure("at20_real_rope", f"AT20 anchor: SmolLM2-135M (RoPE, L = {L} from its "
                      f"config) beyond its training context — {sub['status']}", [kit.Panel(
                          "next-token loss by position (mean over windows ± 2 s.e.)",
                          "position / training context L", "loss (nats), blocks of "
                          f"{stores[0]['meta']['block']} tokens", panels_series,
                          vlines=[(1.0, "training context")])],
                      caption="Loss rising past position L is degradation; a model that "
                      "extrapolates keeps falling (more context).")  # fmt: skip


def real_evidence(stores=CONTEXT_STORES) -> tuple[list, list, list]:
    """(measurements, tables, figures) of the anchor; one undecided measurement saying how to
    measure it when no store holds windows."""
    sts = _stores(stores)
    if not sts:
        why = ("no context-length store: measure it with `python -m posflow.simulate.models."
               "context_length --store DIR --factor 2` (and --factor 4), resumable")
        return [kit.undecided("real_rope_store", 0, why, label="real RoPE model windows")], [], []
    sub = degradation(sts)
    note = "; ".join(f"{c['label']}: mean {c['mean']:.3g} nats, {100 * (1 - c['alpha']):.2f} % "
                     f"t interval {fmt_iv(c['lo'], c['hi'])} over {c['n']} windows → "
                     f"{c['decision']}" for c in sub["comparisons"])  # fmt: skip
    key, c = f"sub_claim_{_NAME}", sub["comparisons"]
    if sub["status"] == kit.INCONCLUSIVE:
        m = kit.undecided(key, c[0]["mean"] if c else math.nan, f"{sub['reason']} ({note})",
                          label=f"sub-claim {_NAME} (SmolLM2-135M beyond its context)")
    else:
        worst = min(c, key=lambda r: r["lo"]) if sub["status"] == kit.HOLDS else next(
            r for r in c if r["decision"] == kit.FAILS)  # fmt: skip
        m = kit.at_least(key, worst["lo"], 0.0, label=f"sub-claim {_NAME}: lower end of the "
                         f"interval of {worst['label']} (SmolLM2-135M; {note})")
    meta = sts[0]["meta"]
    ms = [m, *_controls(), *(kit.info(f"real_rope_excess_{f}x_one_window", d, label=f"Δ({f}×) on "
          "one window (not judged: no interval; the store is partial)") for f, d in sorted(
          sub["short"].items())),
          kit.info("real_rope_train_context", meta["train_context"],
                   label=f"training context of {meta['model']} (max_position_embeddings)")]
    tables = [
        kit.Table("real_rope_ppl", f"{meta['model']}: perplexity of windows of f × its "
                  "training context, 95 % t interval of ln PPL over windows",
                  ["f", "tokens", "windows", "PPL", "lower", "upper"],
                  [[f, f * meta["train_context"], *v] for f, v in sorted(sub["ppl"].items())]),
        kit.Table("real_rope_degradation", "Δ(f) per factor: Bonferroni t interval over "
                  "windows, decision", ["comparison", "windows", "mean (nats)", "lower", "upper",
                  "level", "decision"], [[r["label"], r["n"], r["mean"], r["lo"], r["hi"],
                  1 - r["alpha"], r["decision"]] for r in c]),
    ]  # fmt: skip
    return ms, tables, [_figure(sts, sub)]


# -- mutants of the routines the anchor cites (claim AT20) ----------------------------------

_CL = "posflow.simulate.models.context_length"


def _excess_against_window_start(original):
    @functools.wraps(original)
    def window_statistics(st):
        out = original(st)
        L, B = out["train_context"], st["meta"]["block"]
        for f in out["excess"]:  # reference band [0, L) instead of [L/2, L)
            ref = np.array([sum(w["sums"][: L // B]) / (L - 1) for w in st["windows"]])
            half = np.array([sum(w["sums"][L // B // 2 : L // B]) / (L // 2)
                             for w in st["windows"]])  # fmt: skip
            out["excess"][f] = out["excess"][f] + half - ref
        return out

    return window_statistics


def _targets_unshifted(original):
    @functools.wraps(original)
    def next_token_nll(model, ids, **kw):
        return np.roll(original(model, ids, **kw), 1)  # loss i reported at position i + 1

    return next_token_nll


def _blocks_of_losses(original):
    @functools.wraps(original)
    def block_sums(nll, block):
        return original(np.asarray(nll)[1:], block)  # predicted positions shifted by one

    return block_sums


kit.add_mutant("AT20", "context-excess-against-window-start", f"{_CL}:window_statistics",
           _excess_against_window_start, "Δ(f) taken against the whole training window [0, L) "
           "instead of its last half")
kit.add_mutant("AT20", "context-targets-unshifted", f"{_CL}:next_token_nll", _targets_unshifted,
           "next-token losses reported one position late (rolled by one)")
kit.add_mutant("AT20", "context-blocks-shifted", f"{_CL}:block_sums", _blocks_of_losses,
           "block sums indexed by the loss index instead of the predicted position")
