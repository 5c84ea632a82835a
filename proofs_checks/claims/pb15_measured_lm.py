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
replicate, through the library routines.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from posflow.proofs_checks.kit import (
    Context,
    Evidence,
    Figure,
    Panel,
    Series,
    Table,
    add_mutant,
    at_most,
    fp_tol,
    info,
    register,
    undecided,
)

__all__ = ["batched_spearman", "batched_w1", "pb15"]

ALPHA = 0.05  # family-wise level of the verdict
_EPS = float(np.finfo(np.float64).eps)

# the predicted profiles: key -> (label, judged against (b)?)
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
_COLORS = {
    "measured": "measured",
    "a": "attention_only",
    "b": "residual",
    "b_param": "residual_content",
    "a_param": "#CC79A7",
    "d": "#009E73",
    "e": "#D55E00",
    "geometric": "#E69F00",
    "linear": "#56B4E9",
    "uniform": "#999999",
    "shuffled": "#F0E442",
}


# ----------------------------------------------------------------------------------------------
# profile metrics over a batch of replicates (equal to posflow.simulate.compare's, row by row)


def batched_w1(p, q) -> np.ndarray:
    """W1(p, q)/(n − 1) row by row: Σ_k |F_p(k) − F_q(k)| / (n − 1), rows renormalised first.

    Equals :func:`posflow.simulate.compare.w1_normalised` on each row (scipy's
    ``wasserstein_distance`` on positions 0..n−1, divided by n − 1).
    """
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    p = p / p.sum(axis=-1, keepdims=True)
    q = q / q.sum(axis=-1, keepdims=True)
    d = np.cumsum(p - q, axis=-1)[..., :-1]
    return np.abs(d).sum(axis=-1) / (p.shape[-1] - 1)


def batched_spearman(p, q) -> np.ndarray:
    """Spearman's ρ row by row (average ranks for ties), as ``scipy.stats.spearmanr``."""
    from scipy.stats import rankdata

    rp = rankdata(np.asarray(p, dtype=np.float64), axis=-1)
    rq = rankdata(np.asarray(q, dtype=np.float64), axis=-1)
    rp = rp - rp.mean(axis=-1, keepdims=True)
    rq = rq - rq.mean(axis=-1, keepdims=True)
    num = (rp * rq).sum(axis=-1)
    den = np.sqrt((rp * rp).sum(axis=-1) * (rq * rq).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return num / den


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
    import pydoc_data.topics

    from posflow.simulate.models.corpus import windows
    from posflow.simulate.models.hub import load_pretrained

    model, _, tok = load_pretrained("smollm2-135m")
    text = "\n\n".join(pydoc_data.topics.topics[k] for k in sorted(pydoc_data.topics.topics))
    ids = windows(np.asarray(tok(text)["input_ids"]), n, count, seed=seed)
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


@dataclass
class PerSequence:
    """What one pass per sequence measured (N sequences, L layers, H heads, n tokens)."""

    attention: np.ndarray  # (N, L, n, n), head-averaged
    lambdas: np.ndarray  # (N, L)
    content: np.ndarray  # (N, L, H), [A]'s c in logit units (divided by √d_head)
    influence: np.ndarray  # (N, n), ‖∂p*/∂e_j‖ of each sequence
    slopes: np.ndarray  # (H,) ALiBi slopes in logit units (zeros without ALiBi)
    values: np.ndarray  # (N, L, n, n), Σ_h α_ij^h ‖W_O^h v_j^h‖ (value-norm weights)


def measure_per_sequence(model, ids) -> PerSequence:
    """:func:`measure` on each sequence alone (the bootstrap resamples sequences)."""
    from posflow.simulate.models.measure import measure

    A, lam, c, g, V, slopes = [], [], [], [], [], None
    for s in range(ids.shape[0]):
        m = measure(model, ids[s : s + 1], value_norms=True, heads=False, qk="summary")
        A.append(m.attention.mean(axis=1).astype(np.float64))
        V.append(m.value_weights)
        lam.append(m.lambdas)
        c.append(m.content("sqrt_d")[1])
        g.append(m.influence_raw)
        slopes = np.zeros(m.num_heads) if m.slopes is None else np.asarray(m.slopes, float)
    return PerSequence(np.stack(A), np.stack(lam), np.stack(c), np.stack(g), slopes, np.stack(V))


def _profiles(data: PerSequence, w: np.ndarray, perm: np.ndarray) -> tuple[dict, np.ndarray]:
    """The predicted and rollout-null profiles for sequence weights ``w`` (sum 1), and p̂."""
    from posflow.simulate.kernels import alibi_kernel, uniform_kernel
    from posflow.simulate.models.measure import measured_kernels
    from posflow.simulate.models.sinks import sink_aware_kernels, value_norm_kernels
    from posflow.simulate.rollout import influence

    A = np.tensordot(w, data.attention, axes=1)
    V = np.tensordot(w, data.values, axes=1)
    lam = np.clip(w @ data.lambdas, 0.0, 1.0)
    c = np.tensordot(w, data.content, axes=1)
    g = w @ data.influence
    L, n = lam.size, g.size
    ks = measured_kernels(A)
    kc = [alibi_kernel(n, data.slopes, c[t]) for t in range(L)]
    ones = np.ones(L)
    out = {
        "b": influence(ks, lam),
        "a": influence(ks, ones),
        "b_param": influence(kc, lam),
        "a_param": influence(kc, ones),
        "uniform": influence(uniform_kernel(n), lam),
        "shuffled": influence(ks, lam[perm]),
        "d": influence(value_norm_kernels(V), lam),
        "e": influence(sink_aware_kernels(A), lam),
    }
    return out, g / g.sum()


def batched_rollouts(data: PerSequence, W: np.ndarray, perm: np.ndarray, chunk=None) -> dict:
    """Every rollout profile for each row of sequence weights ``W`` (B, N), vectorised.

    An implementation independent of :mod:`posflow.simulate.rollout` (checked against it on
    the full sample): p ← (1 − λ_t) p + λ_t p A_t for t = L−1, …, 0 from p = e_{n−1}, with

    * A_t = Σ_s w_s A_{t,s} (rows renormalised, as ``measured_kernels`` does) for (b), (a) and
      the shuffled-λ null; the uniform kernel A_ij = 1/(i+1) (j ≤ i) by a reverse cumulative sum;
    * [A]'s kernel A = (1/H) Σ_h diag(1/Z_h)(T_h + (e^{c_h} − 1) I), T_h[i, j] = e^{−m_h (i−j)}
      (j ≤ i), Z_h(i) = e^{c_h} + Σ_{k=1}^{i} e^{−m_h k}, c = Σ_s w_s c_s;
    * (d) the value-norm kernel Ṽ_t = Σ_s w_s V_{t,s} with rows renormalised; (e) the sink-aware
      kernel of A_t: for rows i ≥ 1 the entry A_t[i, 0] is moved onto the diagonal.

    Returns ``{name: (B, n)}`` for the eight rollouts, plus "measured" (B, n) and "lambdas" (B, L).
    Memory: ``chunk`` replicates × L n² floats at a time (default: about 2·10⁷ floats).
    """
    L = data.lambdas.shape[1]
    n = data.influence.shape[1]
    B = W.shape[0]
    lam = np.clip(W @ data.lambdas, 0.0, 1.0)
    g = W @ data.influence
    rows = np.tensordot(W, data.attention.sum(axis=-1), axes=1)  # (B, L, n) row sums
    cont = np.tensordot(W, data.content, axes=1)  # (B, L, H)
    i = np.arange(n)
    gap = (i[:, None] - i[None, :]).astype(np.float64)
    low = gap >= 0
    T = np.where(low, np.exp(-data.slopes[:, None, None] * np.where(low, gap, 0.0)), 0.0)
    S = T.sum(axis=-1) - 1.0  # (H, n): Σ_{k=1}^{i} e^{−m k}
    chunk = chunk or max(1, int(2e7 // (3 * L * n * n)))
    names = ("b", "a", "shuffled", "uniform", "b_param", "a_param", "d", "e")
    out = {k: np.empty((B, n)) for k in names}
    start = np.zeros(n)
    start[-1] = 1.0
    for b0 in range(0, B, chunk):
        b1 = min(B, b0 + chunk)
        A = np.tensordot(W[b0:b1], data.attention, axes=1)  # (b, L, n, n)
        A /= rows[b0:b1, :, :, None]
        V = np.tensordot(W[b0:b1], data.values, axes=1)  # (b, L, n, n)
        V /= V.sum(axis=-1, keepdims=True)
        S0 = A.copy()  # sink-aware: rows i ≥ 1 keep their token-0 share on the diagonal
        ii = np.arange(1, n)
        S0[..., ii, ii] += S0[..., ii, 0]
        S0[..., ii, 0] = 0.0
        lb = lam[b0:b1]
        c = cont[b0:b1]  # (b, L, H)
        shift = np.maximum(c, 0.0)
        Z = np.exp(c - shift)[..., None] + S[None, None] * np.exp(-shift)[..., None]  # (b,L,H,n)
        diag = ((np.exp(c - shift) - np.exp(-shift))[..., None] / Z).mean(axis=2)  # (b, L, n)
        scale = np.exp(-shift)[..., None] / Z  # (b, L, H, n): weight of T_h in row i

        def dense(p, t, A=A):
            return np.matmul(p[:, None, :], A[:, t])[:, 0]

        def values(p, t, V=V):
            return np.matmul(p[:, None, :], V[:, t])[:, 0]

        def sink(p, t, S0=S0):
            return np.matmul(p[:, None, :], S0[:, t])[:, 0]

        def uniform(p, t):
            q = p / (i + 1.0)
            return np.cumsum(q[:, ::-1], axis=1)[:, ::-1]

        def param(p, t, scale=scale, diag=diag):
            ph = np.swapaxes(p[:, None, :] * scale[:, t], 0, 1)  # (H, b, n)
            return np.matmul(ph, T).mean(axis=0) + p * diag[:, t]

        ones = np.ones_like(lb)
        for name, step, lm in (
            ("b", dense, lb),
            ("a", dense, ones),
            ("shuffled", dense, lb[:, perm]),
            ("uniform", uniform, lb),
            ("b_param", param, lb),
            ("a_param", param, ones),
            ("d", values, lb),
            ("e", sink, lb),
        ):
            p = np.tile(start, (b1 - b0, 1))
            for t in range(L - 1, -1, -1):
                p = (1.0 - lm[:, t, None]) * p + lm[:, t, None] * step(p, t)
            out[name][b0:b1] = p
    out["measured"] = g / g.sum(axis=1, keepdims=True)
    out["lambdas"] = lam
    return out


@dataclass
class Bootstrap:
    """Replicate 0 is the full sample; replicates 1..B resample the N sequences."""

    profiles: dict  # name -> (B + 1, n)
    measured: np.ndarray  # (B + 1, n)
    lambdas: np.ndarray  # (B + 1, L)
    w1: dict  # name -> (B + 1,)
    spearman: dict  # name -> (B + 1,)
    ratio: np.ndarray  # (B + 1,) geometric null's r
    slope: np.ndarray  # (B + 1,) linear null's s
    perm: np.ndarray
    library_gap: float  # max |library rollout − batched rollout| on the full sample


def bootstrap(data: PerSequence, B: int, seed: int) -> Bootstrap:
    """Percentile bootstrap over sequences of every profile and its W1/Spearman to p̂.

    The full sample (replicate 0) also runs through the library (:func:`_profiles`:
    ``measured_kernels``, ``alibi_kernel``, ``uniform_kernel``, ``rollout.influence``); the
    largest gap between the two implementations is returned as ``library_gap``.
    """
    from posflow.simulate.nulls import derangement, geometric_recency, linear_ramp, ramp_slope

    N, L = data.lambdas.shape
    n = data.influence.shape[1]
    rng = np.random.default_rng([seed, 15])
    perm = derangement(L, rng)
    W = np.vstack([np.full(N, 1.0 / N), rng.multinomial(N, np.full(N, 1.0 / N), size=B) / N])
    got = batched_rollouts(data, W, perm)
    measured, lambdas = got.pop("measured"), got.pop("lambdas")
    lib, lib_measured = _profiles(data, W[0], perm)
    gap = max(float(np.abs(lib[k] - got[k][0]).max()) for k in lib)
    gap = max(gap, float(np.abs(lib_measured - measured[0]).max()))
    profiles = dict(got)
    mu = np.clip(measured @ np.arange(n), 0.0, n - 1.0)
    profiles["geometric"], ratio = geometric_recency(n, mu)
    profiles["linear"] = linear_ramp(n, mu)
    w1 = {k: batched_w1(v, measured) for k, v in profiles.items()}
    rho = {k: batched_spearman(v, measured) for k, v in profiles.items()}
    return Bootstrap(profiles, measured, lambdas, w1, rho, ratio, ramp_slope(n, mu), perm, gap)


def _interval(x: np.ndarray, level: float) -> tuple[float, float]:
    """Two-sided percentile interval of the bootstrap replicates x[1:] at coverage ``level``."""
    a = (1.0 - level) / 2
    lo, hi = np.quantile(x[1:], [a, 1.0 - a])
    return float(lo), float(hi)


# ----------------------------------------------------------------------------------------------
# the verdict of one model


def _rounding(L: int, n: int) -> float:
    """Float64 rounding of a difference of two W1/(n − 1): 4 (L n² + n) ε (see _judge)."""
    return 4.0 * (L * n * n + n) * _EPS


def _judge(tag, name, bs: Bootstrap, level: float, N: int):
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
    for x in RIVALS:
        d = bs.w1["b"] - bs.w1[x]
        lo, hi = _interval(d, level)
        key = f"{tag}.w1_b_minus_{x}"
        label = (
            f"{name}: upper end of the {100 * level:.3g}% interval of W1(b) − W1({x}: "
            f"{PREDICTED.get(x, NULLS.get(x))})"
        )
        if lo < -r <= hi:
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
        rows.append([x, float(d[0]), lo, hi, "beats" if hi < -r else ("?" if lo < -r else "no")])
    return ms, rows


def _model_evidence(sub: Subject, ctx: Context, family: int):
    model, ids, note = sub.load()
    data = measure_per_sequence(model, ids)
    N, L = data.lambdas.shape
    n = data.influence.shape[1]
    bs = bootstrap(data, sub.bootstrap, ctx.seed)
    level = 1.0 - ALPHA / family
    ms, diff_rows = _judge(sub.tag, sub.name, bs, level, N)
    ms.append(
        at_most(
            f"{sub.tag}.library_vs_batched_rollout",
            bs.library_gap,
            0.0,
            fp_tol(
                8 * L * n * _EPS,
                f"both are float64 chains of L = {L} convex steps with n = {n}-term sums of "
                f"entries in [0, 1] (≤ n ε each) plus a row renormalisation: 8 L n ε = "
                f"{8 * L * n * _EPS:.2g}",
            ),
            label=f"{sub.name}: max |library rollout − independent batched rollout| on the "
            "full sample (every profile)",
        )
    )
    lam = bs.lambdas[0]
    s, keep = float(lam.sum()), float(np.prod(1.0 - lam))
    sub_status = Evidence(ms).status
    ms.insert(0, info(f"{sub.tag}.verdict", sub_status, label=f"{sub.name}: sub-verdict"))
    ms += [
        info(f"{sub.tag}.n", n, label=f"{sub.name}: sequence length n"),
        info(f"{sub.tag}.sequences", N, label=f"{sub.name}: sequences N"),
        info(f"{sub.tag}.layers", L, label=f"{sub.name}: layers L"),
        info(
            f"{sub.tag}.sum_lambda",
            s,
            label=f"{sub.name}: Σλ_t (expected number of attention hops)",
        ),
        info(
            f"{sub.tag}.no_hop_probability",
            keep,
            label=f"{sub.name}: ∏(1 − λ_t) (chance a token's state never attends)",
        ),
        info(
            f"{sub.tag}.depth",
            f"not a test of depth: Σλ_t = {s:.2f} over L = {L} layers (about {s:.1g} attention "
            f"hops per token, ∏(1 − λ_t) = {keep:.2g}); the collapse theory of PB4–PB6 is about "
            "Σλ_t → ∞, which one finite model does not reach",
            label=f"{sub.name}: depth",
        ),
        info(
            f"{sub.tag}.first_token_b",
            float(bs.profiles["b"][0][0]),
            label=f"{sub.name}: p_b(0), mass of (b) on token 0",
        ),
        info(
            f"{sub.tag}.first_token_measured",
            float(bs.measured[0][0]),
            label=f"{sub.name}: p̂(0), measured influence of token 0",
        ),
    ]
    for k in (*PREDICTED, *NULLS):
        ms.append(info(f"{sub.tag}.w1_{k}", float(bs.w1[k][0]), label=f"{sub.name}: W1({k})"))
        ms.append(
            info(f"{sub.tag}.spearman_{k}", float(bs.spearman[k][0]), label=f"{sub.name}: ρ({k})")
        )
    best = min(PREDICTED, key=lambda k: float(bs.w1[k][0]))
    ms.append(
        info(
            f"{sub.tag}.best_predicted",
            f"{best}: {PREDICTED[best]} (W1/(n−1) = {float(bs.w1[best][0]):.3g})",
            label=f"{sub.name}: the predicted profile of least W1 (reported, not judged)",
        )
    )
    ms += [
        info(f"{sub.tag}.geometric_ratio", float(bs.ratio[0]), label=f"{sub.name}: geometric r"),
        info(f"{sub.tag}.ramp_slope", float(bs.slope[0]), label=f"{sub.name}: ramp slope s"),
        info(
            f"{sub.tag}.shuffle",
            " ".join(map(str, bs.perm.tolist())),
            label=f"{sub.name}: layer t takes λ of layer perm[t]",
        ),
    ]
    tables = [
        Table(
            f"{sub.tag}.profiles",
            f"{sub.name}: every profile against the measured influence (bootstrap "
            f"{100 * level:.3g}% intervals, B = {sub.bootstrap})",
            ["profile", "what", "W1/(n−1)", "lo", "hi", "Spearman ρ", "lo", "hi", "mean position"],
            [
                [
                    k,
                    PREDICTED.get(k, NULLS.get(k)),
                    float(bs.w1[k][0]),
                    *_interval(bs.w1[k], level),
                    float(bs.spearman[k][0]),
                    *_interval(bs.spearman[k], level),
                    float(bs.profiles[k][0] @ np.arange(n)),
                ]
                for k in (*PREDICTED, *NULLS)
            ]
            + [
                [
                    "measured",
                    "gradient influence",
                    0.0,
                    0.0,
                    0.0,
                    1.0,
                    1.0,
                    1.0,
                    float(bs.measured[0] @ np.arange(n)),
                ]
            ],
        ),
        Table(
            f"{sub.tag}.differences",
            f"{sub.name}: W1(b) − W1(rival), {100 * level:.3g}% intervals (Bonferroni over "
            f"{family} comparisons, family-wise {100 * ALPHA:g}%)",
            ["rival", "W1(b) − W1(rival)", "lo", "hi", "(b) beats it"],
            diff_rows,
        ),
        Table(
            f"{sub.tag}.lambdas",
            f"{sub.name}: measured λ_t (mean over sequences, bootstrap interval)",
            ["layer t", "λ_t", "lo", "hi"],
            [[t, float(lam[t]), *_interval(bs.lambdas[:, t], level)] for t in range(L)],
        ),
    ]
    return ms, tables, _figure(sub, bs, level, diff_rows, note), note


def _figure(sub: Subject, bs: Bootstrap, level: float, diff_rows, note: str) -> Figure:
    n = bs.measured.shape[1]
    j = np.arange(n)
    lo, hi = np.quantile(bs.measured[1:], [(1 - level) / 2, (1 + level) / 2], axis=0)
    series = [
        Series(
            f"measured ({100 * level:.3g}% band)",
            j,
            bs.measured[0],
            "band",
            lo,
            hi,
            color="measured",
        ),
        Series("measured", j, bs.measured[0], color="measured"),
    ]
    series += [
        Series(k, j, bs.profiles[k][0], color=_COLORS[k], style="-" if k in PREDICTED else "--")
        for k in (*PREDICTED, *NULLS)
    ]
    d = np.array([[r[1], r[2], r[3]] for r in diff_rows])
    x = np.arange(len(diff_rows))
    L = bs.lambdas.shape[1]
    lam_lo, lam_hi = np.quantile(bs.lambdas[1:], [(1 - level) / 2, (1 + level) / 2], axis=0)
    return Figure(
        f"pb15_{sub.tag}",
        f"PB15, {note}",
        [
            Panel("influence profiles", "token position j", "p(j)", series, logy=True),
            Panel(
                "W1(b) − W1(rival): (b) beats a rival when the interval lies below 0; "
                + ", ".join(f"{i} = {r[0]}" for i, r in enumerate(diff_rows)),
                "rival",
                "W1 difference",
                [
                    Series(
                        "W1(b) − W1(rival)",
                        x,
                        d[:, 0],
                        "errorbar",
                        yerr=[d[:, 0] - d[:, 1], d[:, 2] - d[:, 0]],
                        color="residual",
                    )
                ],
                hlines=[(0.0, "")],
            ),
            Panel(
                "measured λ_t",
                "layer t",
                "λ_t",
                [
                    Series(
                        "λ_t",
                        np.arange(L),
                        bs.lambdas[0],
                        "errorbar",
                        yerr=[bs.lambdas[0] - lam_lo, lam_hi - bs.lambdas[0]],
                        color="residual",
                    )
                ],
                ylim=(0.0, 1.0),
            ),
        ],
    )


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
    from posflow.proofs_checks.kit import no_torch as _NO_TORCH
    from posflow.proofs_checks.kit import optional_torch as _torch

    if _torch() is None:
        return _NO_TORCH()
    subs = subjects(ctx)
    family = len(RIVALS) * len(subs)
    ms, tables, figs, notes = [], [], [], []
    for sub in subs:
        m, t, f, note = _model_evidence(sub, ctx, family)
        ms += m
        tables += t
        figs.append(f)
        notes.append(note)
    from posflow.proofs_checks.claims.pb15_study import study_evidence
    from posflow.simulate.models.study import stored_study

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
        f"family-wise {100 * ALPHA:g}% (each interval {100 * (1 - ALPHA / family):.3g}%)." + extra,
    )


# -- mutants: breaks of the routines PB15 runs through ---------------------------------------------


def _transposed_apply(original):
    @functools.wraps(original)
    def apply(self, p):
        return p @ self._A.T

    return apply


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
    "posflow.simulate.kernels:DenseKernel._apply",
    _transposed_apply,
    "the rollout through a measured kernel applies Aᵀ instead of A (p Aᵀ)",
)
add_mutant(
    "PB15",
    "residual-dropped",
    "posflow.simulate._kernel:Kernel._residual_step",
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
