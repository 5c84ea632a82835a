"""Claim PB15 of [A], restated (issue 12): does the residual-aware rollout predict a measured model?

For each measured model (posflow's trained toy ALiBi LM, and SmolLM2-135M when
``posflow models install smollm2-135m`` has put it in the user cache) the check measures, one
held-out sequence at a time, the head-averaged attention A_t, λ_t, [A]'s content c_{t,h}, the
value-norm weights and the gradient influence ‖∂p*/∂e_j‖
(:func:`posflow.simulate.models.measure.measure`), and compares the measured influence profile
p̂ (normalised mean over sequences) with

* (a) the attention-only rollout (λ ≡ 1) and (b) the residual-aware rollout (measured λ_t), both
  through the measured kernels; reported, not judged: (c) the same two through [A]'s parametric
  ALiBi + content kernels, (d) the residual-aware rollout through value-norm kernels and (e)
  through the sink-aware kernels (:mod:`posflow.simulate.models.sinks`);
* four nulls (:mod:`posflow.simulate.nulls`): geometric recency and a linear ramp fitted to the
  measured mean position, the rollout with measured λ_t through *uniform* kernels, and the
  rollout with the measured λ_t moved to other layers (a seeded derangement).

Verdict: for every null X (and (a)), the bootstrap interval over sequences of W1(b) − W1(X)
(W1 normalised by n − 1) lies below 0, at family-wise level 5 % (Bonferroni over the
comparisons of every model). An interval that contains 0 cannot decide; one at or above 0 fails.
Everything is resampled together (kernels, λ, content, influence, the nulls' fits), replicate by
replicate (:mod:`posflow.simulate.models.profiles_bootstrap`; the profiles, their names and
colours are those of :mod:`posflow.simulate.models.profiles`, shared with ``posflow measure``
and the stored study). The comparisons are decided by ``kit.decide`` at the Bonferroni level
``kit.family_level``; the tables and figures are assembled in ``pb15_study``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np

from posflow.proofs_checks import kit
from posflow.proofs_checks.claims.pb15_study import (
    KEYS,
    NULLS,
    PREDICTED,
    RIVALS,
    model_figure,
    model_tables,
)
from posflow.proofs_checks.kit import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    Context,
    Decision,
    Evidence,
    add_mutant,
    at_most,
    combine,
    family_level,
    fp_tol,
    info,
    register,
    undecided,
)
from posflow.simulate.models.profiles import percentile_interval
from posflow.simulate.models.profiles_bootstrap import bootstrap, measure_per_sequence

__all__ = ["pb15"]

ALPHA = 0.05  # family-wise level of the verdict
_EPS = float(np.finfo(np.float64).eps)
_BEATS = {HOLDS: "beats", INCONCLUSIVE: "?", FAILS: "no"}


# ----------------------------------------------------------------------------------------------
# the measured models


@dataclass
class Subject:
    """A measured model: ``tag`` keys its measurements, ``load()`` gives (model, ids, setup)."""

    tag: str
    name: str
    load: object
    bootstrap: int


# Held-out windows by (max_bytes, corpus seed, valid_fraction, n, count, seed). A plain dict, not
# a functools cache, on purpose: the mutants clear functools caches so that no result of mutated
# code is reused, but these are bytes of the standard library, which no mutant touches, and
# listing its ~13 000 files is most of a quick PB15 run. (A mutant of the corpus reader would
# have to clear this dict.)
_WINDOWS: dict[tuple, np.ndarray] = {}


def _held_out(record: dict, n: int, count: int, seed: int) -> np.ndarray:
    from posflow.simulate.models.corpus import load_corpus, windows

    cfg = record["config"]
    key = (cfg["max_bytes"], cfg["seed"], cfg["valid_fraction"], n, count, seed)
    if key not in _WINDOWS:
        corpus = load_corpus(max_bytes=cfg["max_bytes"], seed=cfg["seed"])
        _WINDOWS[key] = windows(corpus.split(cfg["valid_fraction"])[1], n, count, seed=seed)
    return _WINDOWS[key].copy()


def _toy(preset: str, count: int, seed: int):
    from posflow.simulate.models.train import PRESETS, cached_model

    model, record, path = cached_model(preset)
    n = int(record["config"]["seq_len"])  # the length it was trained at
    ids = _held_out(record, n, count, seed)
    loss = record.get("valid_loss")
    note = (
        f"posflow '{preset}' ALiBi LM ({PRESETS[preset].note}; {path.name}"
        + (f", validation loss {loss:.3f} nats/byte" if loss is not None else "")
        + f"), n = {n} (its training length), N = {count} held-out standard-library windows"
    )
    return model, ids, note


def _smollm2(n: int, count: int, seed: int):
    from posflow.simulate.models.corpus import windows
    from posflow.simulate.models.english import english_text
    from posflow.simulate.models.hub import load_pretrained

    model, _, tok = load_pretrained("smollm2-135m")  # the stored study's text and windows
    ids = windows(np.asarray(tok(english_text())["input_ids"]), n, count, seed=seed)
    note = (
        f"SmolLM2-135M-Instruct (Llama, RoPE, 30 layers), n = {n} (its context is 8192: a "
        f"CPU-sized window, not its training length), N = {count} windows of pydoc_data.topics"
    )
    return model, ids, note


def _smollm2_installed() -> bool:
    try:
        from posflow.simulate.models.hub import installed_models
    except ImportError:  # pragma: no cover - transformers missing
        return False
    return installed_models().get("smollm2-135m") is not None


# SmolLM2 sizes: quick is a smoke test the suite runs once per mutant (~1 s per sequence at
# n = 64 on one loaded core); full measures the N = 64 at n = 128 (~3 s per sequence).
# Longer windows (n = 128 … 1024) are the stored grouped study (docs/smollm2_study.py).
SMOLLM2_QUICK = (64, 16)
SMOLLM2_FULL = (128, 64)


def subjects(ctx: Context) -> list[Subject]:
    """The models PB15 judges: the trained toy LM (quick: the 'quick' preset at n = 64, N = 48;
    full: the default preset at n = 128, N = 128) and SmolLM2-135M when installed (quick:
    n = 64, N = 16; full: n = 128, N = 64)."""
    if ctx.full:
        out = [Subject("toy", "toy LM", functools.partial(_toy, "default", 128, ctx.seed), 2000)]
    else:
        out = [Subject("toy", "toy LM", functools.partial(_toy, "quick", 48, ctx.seed), 1000)]
    if _smollm2_installed():
        n, N = SMOLLM2_FULL if ctx.full else SMOLLM2_QUICK
        B = 2000 if ctx.full else 1000
        out.append(Subject("smollm2", "SmolLM2", functools.partial(_smollm2, n, N, ctx.seed), B))
    return out


# ----------------------------------------------------------------------------------------------
# the verdict of one model


def _rounding(L: int, n: int) -> float:
    """Float64 rounding of a difference of two W1/(n − 1): 4 (L n² + n) ε (see _judge)."""
    return 4.0 * (L * n * n + n) * _EPS


def _by_evidence_key(bs):
    """The bootstrap with its profiles keyed by PB15's evidence keys (b_param for (c), …)."""
    return replace(bs, **{f: {k: getattr(bs, f)[v] for k, v in KEYS.items()}
                          for f in ("profiles", "w1", "spearman")})  # fmt: skip


def _decisions(bs, level: float) -> list[Decision]:
    """W1(b) − W1(x) ≤ −rounding for each rival x, from its percentile interval."""
    r = _rounding(bs.lambdas.shape[1], bs.measured.shape[1])
    out = []
    for x in RIVALS:
        d = bs.w1["b"] - bs.w1[x]
        lo, hi = percentile_interval(d, level)
        out.append(Decision(x, float(d[0]), lo, hi, -r, "le", 1.0 - level))
    return out


def _judge(tag, name, bs, level: float, N: int):
    """The measurements and the differences table of the comparisons of (b) with its rivals."""
    L = bs.lambdas.shape[1]
    n = bs.measured.shape[1]
    r = _rounding(L, n)
    why = fp_tol(
        0.0,
        f"the bound −{r:.2g} = −4(L n² + n)ε (L = {L}, n = {n}) is the float64 rounding of a "
        "W1 difference (each profile entry carries ≤ L n ε from L convex steps of n-term sums, "
        "a CDF value sums n of them, W1 averages CDF gaps): a smaller gap is no gap",
    )
    ms, rows = [], []
    for dec in _decisions(bs, level):
        x, lo, hi = dec.label, dec.lo, dec.hi
        key = f"{tag}.w1_b_minus_{x}"
        label = (
            f"{name}: upper end of the {100 * level:.3g}% interval of W1(b) − W1({x}: "
            f"{PREDICTED.get(x, NULLS.get(x))})"
        )
        if dec.decision == INCONCLUSIVE:
            ms.append(
                undecided(
                    key,
                    hi,
                    f"the interval [{lo:.3g}, {hi:.3g}] contains 0: {N} sequences cannot tell "
                    "(b) from this rival at the stated level",
                    label=label,
                )
            )
        else:
            ms.append(at_most(key, hi, -r, why, label=label))
        rows.append([x, dec.estimate, lo, hi, _BEATS[dec.decision]])
    return ms, rows


def _library_check(sub: Subject, bs, L: int, n: int):
    """The library rollout against the batched one on the full sample: measurement, decision."""
    tol = 8 * L * n * _EPS
    m = at_most(
        f"{sub.tag}.library_vs_batched_rollout",
        bs.library_gap,
        0.0,
        fp_tol(
            tol,
            f"both are float64 chains of L = {L} convex steps with n = {n}-term sums of "
            f"entries in [0, 1] (≤ n ε each) plus a row renormalisation: 8 L n ε = {tol:.2g}",
        ),
        label=f"{sub.name}: max |library rollout − independent batched rollout| on the "
        "full sample (every profile)",
    )
    gap = bs.library_gap
    return m, Decision("library", gap, gap, gap, tol)


def _reported(sub: Subject, bs, N: int) -> list:
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


def _model_evidence(sub: Subject, ctx: Context, family: int):
    """Measure one model, bootstrap every profile, judge (b) against its rivals."""
    model, ids, note = sub.load()
    data = measure_per_sequence(model, ids)
    N, L = data.lambdas.shape
    n = data.influence.shape[1]
    bs = _by_evidence_key(bootstrap(data, sub.bootstrap, ctx.seed))
    level = 1.0 - family_level(ALPHA, family)
    ms, diff_rows = _judge(sub.tag, sub.name, bs, level, N)
    lib, lib_decision = _library_check(sub, bs, L, n)
    ms.append(lib)
    sub_status, _ = combine([*_decisions(bs, level), lib_decision])
    ms.insert(0, info(f"{sub.tag}.verdict", sub_status, label=f"{sub.name}: sub-verdict"))
    ms += _reported(sub, bs, N)
    tables = model_tables(sub.tag, sub.name, bs, level, sub.bootstrap, family, ALPHA, diff_rows)
    return ms, tables, model_figure(sub.tag, bs, level, diff_rows, note), note


@register(
    "PB15",
    "[A, ours]",
    "on a measured causal LM within its training context, the residual-aware rollout (b) (measured "
    "λ_t through the measured head-averaged kernels) predicts the measured gradient influence "
    "better in W1/(n−1) than the attention-only rollout (a) and than four nulls: geometric "
    "recency and a linear ramp fitted to the measured mean position, the same rollout through "
    "uniform kernels, and the rollout with λ_t moved to other layers (bootstrap interval over "
    "sequences of W1(b) − W1(null) below 0, family-wise 5 %, Bonferroni)",
    assumptions=(
        "a causal LM trained locally (posflow's ALiBi LM on the standard library), and "
        "SmolLM2-135M when installed (each model gets its own sub-verdict)",
        "sequences independent (the bootstrap resamples them)",
    ),
)
def pb15(ctx: Context) -> Evidence:
    if kit.optional_torch() is None:
        return kit.no_torch()
    from posflow.proofs_checks.claims.pb15_study import study_evidence
    from posflow.simulate.models.study import stored_study

    subs = subjects(ctx)
    family = len(RIVALS) * len(subs)
    ms, tables, figs, notes = [], [], [], []
    for sub in subs:
        m, t, f, note = _model_evidence(sub, ctx, family)
        ms += m
        tables += t
        figs.append(f)
        notes.append(note)
    store = stored_study()
    extra = ""
    if store and store.get("runs"):
        m, t, f, extra = study_evidence(store)
        ms += m
        tables += t
        figs += f
        extra = " " + extra
    return Evidence(
        ms,
        tables=tables,
        figures=figs,
        setup="; ".join(notes)
        + f". Each sequence measured alone; percentile bootstrap over sequences (seed "
        f"[{ctx.seed}, 15]; replicate 0 is the full sample), {family} comparisons at "
        f"family-wise {100 * ALPHA:g}% (each interval "
        f"{100 * (1 - family_level(ALPHA, family)):.3g}%)." + extra,
    )


# -- mutants: breaks of the routines PB15 runs through ---------------------------------------------


def _residual_dropped(original):
    @functools.wraps(original)
    def step(self, p, lam):
        return self._apply(p)

    return step


def _influence_is_attention(original):
    @functools.wraps(original)
    def measure(model, input_ids, **kw):
        from posflow.simulate.rollout import influence

        m = original(model, input_ids, **kw)
        if m.influence is not None and m.attention is not None:
            p = influence(m.kernels(), np.ones(m.num_layers))
            m.influence_raw = p * m.influence_raw.sum()
            m.influence = p
        return m

    return measure


add_mutant(
    "PB15",
    "transposed-measured-kernel",
    kit.DENSE_APPLY,
    kit.transposed_dense_apply,
    "the rollout through a measured kernel applies Aᵀ instead of A (p Aᵀ)",
)
add_mutant(
    "PB15",
    "residual-dropped",
    kit.RESIDUAL_STEP,
    _residual_dropped,
    "the rollout step drops the residual mixing: p ↦ p A whatever λ_t",
)
add_mutant(
    "PB15",
    "influence-is-attention",
    "posflow.simulate.models.measure:measure",
    _influence_is_attention,
    "the gradient-influence measurement returns the attention-rollout profile",
)
