"""The predicted retrieval profile with its one parameter cross-fitted over contexts (claim PB17).

PB17 compares the position curve of the key–value retrieval task (the mean teacher-forced
log-prob of the value by the queried key's line k; :mod:`posflow.simulate.models.retrieval`) with
a rollout profile summed over each key line. The rollout has one parameter, the scale α of its
mixing coefficients, λ_t → clip(α λ_t, 0, 1) (:func:`~posflow.simulate.models.crossfit.
scaled_rollout`, as PB20's cross-fitting), and α is fitted so that the rollout's mean position
equals the measured gradient influence's (:func:`~posflow.simulate.models.crossfit.fit_scale`) —
on *other contexts than the ones scored* (issue 41).

Data. C contexts of K lines. Per context c: its row ``x[c]`` (K,) of the position curve (all K
prompts of the context) and the measurement of one prompt of it — head-mean attention, λ_t, raw
gradient influence ‖∂p*/∂e_j‖ (one row of a :class:`~posflow.simulate.models.crossfit.Windows`,
with value norms for (d) and content for (c)).

Cross-fitting. A split puts the contexts into halves H₁ (⌊C/2⌋ contexts) and H₂
(``default_rng([seed, 41, s])`` for split s). A direction F → S pools F's measurements as PB20
does (mean attention renormalised, mean λ, the normalised mean influence p̂_F with mean position
μ_F = Σ_j j p̂_F(j)), fits α_F = fit_scale(kernels_F, λ_F, μ_F), and scores on S: the rollout
through S's pooled kernels and λ (measured inputs, not parameters) at α_F, summed over each key
line, q_S = line_profile(p_S), against S's mean curve x̄_S:

    ρ_fitted = Spearman(x̄_S, q_S(α_F)).

On the same footing and the same contexts: ``unit`` — the rollout as defined, α = 1; and
``ceiling`` — S's own measured influence summed per line, Spearman(x̄_S, line_profile(p̂_S)): what
a rollout that reproduced the measured influence exactly would score, so no rollout through
these measurements can be expected to beat it. Each statistic is the mean of its two directions
H₁ → H₂ and H₂ → H₁; the estimate is the mean over ``splits`` random splits (α: the mean of the
2·splits fitted values).

Bootstrap. Replicate r takes split r mod ``splits`` and resamples each half's contexts with
replacement (stratified, so the fitting and the scored contexts stay disjoint) and redoes
everything — the pooled measurements, the fit of α, the profiles and the curves — so that the
percentile interval holds the sampling variation of the curve and of the fit, and that of the
split (one split per replicate: wider than the variation of the mean over ``splits``, so
conservative). Replicates in which a ρ is undefined (a constant curve or profile) are dropped from
that statistic's interval and counted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from posflow.simulate.models.crossfit import (
    Windows,
    _checked,
    _kernels,
    _pool,
    fit_scale,
    scaled_rollout,
)
from posflow.simulate.models.retrieval import RetrievalTask

__all__ = ["FIT_ROLLOUTS", "STATISTICS", "RetrievalFit", "crossfit_retrieval", "half_splits"]

FIT_ROLLOUTS = ("a", "b", "c", "d", "e")  # the profiles of the stored study (study.PREDICT_NAMES)
STATISTICS = ("fitted", "unit", "ceiling")  # ρ at the cross-fitted α, at α = 1, of p̂ itself


@dataclass
class RetrievalFit:
    """Cross-fitted α and rank correlations of one rollout with one position curve.

    Attributes
    ----------
    rollout : str
        The rollout (one of :data:`FIT_ROLLOUTS`).
    halves : list of (ndarray, ndarray)
        The ``splits`` random splits: context indices of H₁ and H₂.
    alpha : ndarray, shape (S, 2)
        α fitted on H₁ (scored on H₂) and on H₂ (scored on H₁), per split.
    matched : ndarray of bool, shape (S, 2)
        Whether the fitted rollout reaches the measured mean position.
    rho : dict of str to ndarray, shape (S, 2)
        Per statistic of :data:`STATISTICS`, Spearman ρ of each direction of each split.
    boot : dict of str to ndarray, shape (R,)
        Per replicate: ``"alpha"`` (mean of its two fits) and each statistic (mean of its two
        directions; NaN where a ρ is undefined).
    rows : ndarray of int, shape (R, C)
        The contexts of each replicate: its resampled H₁ (first ⌊C/2⌋ entries), then H₂.
    profile : ndarray, shape (K,)
        For display: the rollout through the pooled measurements of all contexts at the
        estimated α, summed per key line (not used by any statistic).
    """

    rollout: str
    halves: list
    alpha: np.ndarray
    matched: np.ndarray
    rho: dict
    boot: dict
    rows: np.ndarray
    profile: np.ndarray

    def estimate(self, name: str) -> float:
        """The estimate of ``"alpha"`` or a statistic: the mean over splits and directions."""
        return float(np.mean(self.alpha if name == "alpha" else self._stat(name)))

    def interval(self, name: str, confidence: float) -> tuple[float, float, float, int]:
        """(estimate, lo, hi, dropped): the percentile interval of ``name`` over the replicates
        whose value is defined, and how many were not (NaN ends when none is)."""
        if not (isinstance(confidence, float | int) and 0 < confidence < 1):
            raise ValueError(f"confidence must lie in (0, 1); got {confidence!r}")
        self._stat(name)
        b = self.boot[name]
        ok = np.isfinite(b)
        if not ok.any():
            return self.estimate(name), float("nan"), float("nan"), int(b.size)
        a = (1 - confidence) / 2
        lo, hi = np.quantile(b[ok], [a, 1 - a])
        return self.estimate(name), float(lo), float(hi), int((~ok).sum())

    def _stat(self, name):
        if name == "alpha":
            return self.alpha
        if name not in STATISTICS:
            raise ValueError(f"name must be 'alpha' or one of {STATISTICS}; got {name!r}")
        return self.rho[name]


def half_splits(C: int, splits: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Random splits of the contexts 0..C−1 into halves (claim PB17).

    Parameters
    ----------
    C : int, >= 4
        Contexts (each half keeps at least 2).
    splits : int, >= 1
        Splits drawn; split s from ``numpy.random.default_rng([seed, 41, s])``.
    seed : int, >= 0

    Returns
    -------
    list of ``splits`` pairs (H₁, H₂)
        Sorted int arrays of shapes (⌊C/2⌋,) and (⌈C/2⌉,), disjoint, together 0..C−1.

    Raises TypeError for non-integer arguments and ValueError for C < 4, splits < 1, seed < 0.
    """
    for name, v, low in (("C", C, 4), ("splits", splits, 1), ("seed", seed, 0)):
        if isinstance(v, bool) or not isinstance(v, int | np.integer):
            raise TypeError(f"{name} must be an integer; got {type(v).__name__}")
        if v < low:
            raise ValueError(f"{name} must be >= {low}; got {v}")
    out = []
    for s in range(int(splits)):
        order = np.random.default_rng([int(seed), 41, s]).permutation(int(C))
        out.append((np.sort(order[: C // 2]), np.sort(order[C // 2 :])))
    return out


def _sides(h1, h2):
    """The (fitting, scored) halves of the two directions, H₁ → H₂ and H₂ → H₁."""
    return ((h1, h2), (h2, h1))


def _rho(x: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Spearman ρ of x (K,) with each row of Y (P, K), average ranks for ties; NaN where a
    side is constant."""
    from scipy.stats import rankdata

    rx = rankdata(x)
    ry = rankdata(Y, axis=1)
    rx, ry = rx - rx.mean(), ry - ry.mean(axis=1, keepdims=True)
    den = np.sqrt((rx**2).sum() * (ry**2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (ry @ rx) / np.where(den > 0, den, 1.0), np.nan)


def _pool_rows(w: Windows, rows: np.ndarray) -> dict:
    """:func:`~posflow.simulate.models.crossfit._pool` of the contexts ``rows`` (repeats count
    as weights) without copying their (L, n, n) arrays: each distinct row is added once with its
    count (the pooling of a resample reads each context's arrays once)."""
    if w.weights is not None and not np.all(w.weights == 1):
        return _pool(w, rows)
    u, cnt = np.unique(rows, return_counts=True)
    wt = cnt / cnt.sum()

    def mean(x):
        out = wt[0] * x[u[0]]
        for r, c in zip(u[1:], wt[1:], strict=True):
            out += c * x[r]
        return out

    A = mean(w.attention)
    P = {"A": A / A.sum(axis=-1, keepdims=True),
         "lambdas": np.clip(wt @ w.lambdas[u], 0.0, 1.0)}  # fmt: skip
    g = wt @ w.influence[u]
    P["measured"] = g / g.sum()
    if w.values is not None:
        V = np.tril(mean(w.values))
        P["V"] = V / V.sum(axis=-1, keepdims=True)
    if w.content is not None:
        P["c"] = np.tensordot(wt, w.content[u], axes=1)
    return P


class _Fit:
    """One data set: pooled sides cached by their rows, the two directions of a split."""

    def __init__(self, w: Windows, x: np.ndarray, spans: np.ndarray, rollout: str):
        self.w, self.x, self.rollout = w, x, rollout
        self.j = np.arange(w.attention.shape[-1], dtype=np.float64)
        self.spans = spans
        self.ident = np.arange(w.lambdas.shape[1])
        self.cache = {}

    def side(self, rows):
        key = np.asarray(rows).tobytes()
        if key not in self.cache:
            P = _pool_rows(self.w, np.asarray(rows))
            K, lam = _kernels(P, self.w.slopes, self.ident, (self.rollout,),
                              self.w.windows)[self.rollout]  # fmt: skip
            mu = float(np.clip(P["measured"] @ self.j, 0.0, self.j[-1]))
            self.cache[key] = (K, lam, mu, P["measured"])
        return self.cache[key]

    def lines(self, P):
        c = np.concatenate([np.zeros((P.shape[0], 1)), np.cumsum(P, axis=1)], axis=1)
        return c[:, self.spans[:, 1]] - c[:, self.spans[:, 0]]

    def split(self, h1, h2):
        """(α (2,), matched (2,), ρ (3, 2): fitted, unit, ceiling per direction)."""
        self.cache = {}
        alpha, ok, rho = np.empty(2), np.empty(2, dtype=bool), np.empty((3, 2))
        for d, (fit, scored) in enumerate(_sides(h1, h2)):
            K, lam, mu, _ = self.side(fit)
            alpha[d], ok[d] = fit_scale(K, lam, mu)
            Ks, lams, _, p_hat = self.side(scored)
            prof = scaled_rollout(Ks, lams, np.array([alpha[d], 1.0]))
            rho[:, d] = _rho(self.x[np.asarray(scored)].mean(axis=0),
                             self.lines(np.vstack([prof, p_hat])))  # fmt: skip
        return alpha, ok, rho


def _positive_int(name, v, low):
    if isinstance(v, bool) or not isinstance(v, int | np.integer):
        raise TypeError(f"{name} must be an integer; got {type(v).__name__}")
    if v < low:
        raise ValueError(f"{name} must be >= {low}; got {v}")
    return int(v)


def crossfit_retrieval(
    per_context,
    data,
    task: RetrievalTask,
    *,
    rollout: str = "e",
    splits: int = 10,
    resamples: int = 1000,
    seed: int = 0,
) -> RetrievalFit:
    """Cross-fit α of ``rollout`` over contexts and score its Spearman ρ with the position curve,
    with α = 1 and the measured influence's own ρ beside it, bootstrapping curve and fit together
    (claim PB17; the procedure is the module docstring's).

    Parameters
    ----------
    per_context : array_like, shape (C, K)
        The per-context position curves (e.g. ``RetrievalScores.logprob``), C ≥ 4.
    data : Windows or an object with its fields (``PerSequence``)
        One measured prompt per context, row c of context c: ``attention`` (C, L, n, n),
        ``lambdas`` (C, L), ``influence`` (C, n) raw gradient norms; ``values`` for ``"d"``,
        ``content`` and ``slopes`` for ``"c"``; n = ``task.prompt_length``.
    task : RetrievalTask
        The task (its K and the key lines' token spans).
    rollout : {"a", "b", "c", "d", "e"}
        The rollout whose λ is scaled (PB20's families; "a" scales the constant λ ≡ 1).
    splits : int, >= 1
        Random half-splits averaged in the estimate (:func:`half_splits`).
    resamples : int, >= 10
        Bootstrap replicates (each refits α).
    seed : int, >= 0
        Seeds the splits and the resampling (``default_rng([seed, 41])``).

    Returns
    -------
    RetrievalFit
        Cost: (splits + resamples) × 2 fits of α (≈ 40 rollouts of O(L n²) each) and pools of
        O(C L n²).

    Raises TypeError for a task that is not a RetrievalTask or non-integer counts, and ValueError
    (naming the argument) for C < 4, shapes that disagree with the task, non-finite values, a
    rollout the data cannot build, or bad counts.
    """
    if not isinstance(task, RetrievalTask):
        raise TypeError(f"task must be a RetrievalTask; got {type(task).__name__}")
    x = np.asarray(per_context, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != task.K or x.shape[0] < 4:
        raise ValueError(f"per_context must have shape (C, K) with C >= 4 and K = {task.K}; "
                         f"got {x.shape}")  # fmt: skip
    if not np.isfinite(x).all():
        raise ValueError("per_context must be finite")
    if rollout not in FIT_ROLLOUTS:
        raise ValueError(f"rollout must be one of {FIT_ROLLOUTS}; got {rollout!r}")
    splits = _positive_int("splits", splits, 1)
    resamples = _positive_int("resamples", resamples, 10)
    seed = _positive_int("seed", seed, 0)
    w = data if isinstance(data, Windows) else Windows.of(data)
    w = _checked(Windows(w.attention, w.lambdas, w.influence,
                         w.values if rollout == "d" else None,
                         w.content if rollout == "c" else None,
                         w.slopes if rollout == "c" else None, None, w.windows))  # fmt: skip
    C = x.shape[0]
    if w.attention.shape[0] != C or w.attention.shape[-1] != task.prompt_length:
        raise ValueError(f"data must hold one measured prompt per context of n = "
                         f"{task.prompt_length} tokens: (C, L, n, n) with C = {C}; got "
                         f"{w.attention.shape}")  # fmt: skip
    if (rollout == "d" and w.values is None) or (rollout == "c" and w.content is None):
        raise ValueError(f"rollout {rollout!r} needs {'values' if rollout == 'd' else 'content'}"
                         " in data")  # fmt: skip
    f = _Fit(w, x, task.line_spans(), rollout)
    halves = half_splits(C, splits, seed)
    got = [f.split(h1, h2) for h1, h2 in halves]
    alpha = np.stack([g[0] for g in got])
    rho = {s: np.stack([g[2][i] for g in got]) for i, s in enumerate(STATISTICS)}
    rng = np.random.default_rng([seed, 41])
    rows = np.empty((resamples, C), dtype=np.int64)
    boot = {k: np.empty(resamples) for k in ("alpha", *STATISTICS)}
    for r in range(resamples):
        h1, h2 = halves[r % splits]
        b1, b2 = np.sort(rng.choice(h1, h1.size)), np.sort(rng.choice(h2, h2.size))
        rows[r] = np.concatenate([b1, b2])
        a, _, rr = f.split(b1, b2)
        boot["alpha"][r] = a.mean()
        for i, s in enumerate(STATISTICS):
            boot[s][r] = rr[i].mean()
    everything = np.arange(C)
    K, lam, _, _ = f.side(everything)
    profile = f.lines(scaled_rollout(K, lam, np.array([alpha.mean()])))[0]
    return RetrievalFit(rollout, halves, alpha, np.stack([g[1] for g in got]), rho, boot, rows,
                        profile)  # fmt: skip
