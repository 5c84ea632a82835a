"""Like-for-like predictors of a measured influence profile: one fitted parameter each, fitted on
one half of the windows and scored on the other (claim PB15, issue 24).

Every predictor of :mod:`posflow.simulate.models.profiles` gets exactly one parameter:

* a rollout (``a``, ``b``, ``c``, ``a_c``, ``d``, ``e``, ``uniform``, ``shuffled``) replaces its
  mixing coefficients λ_t by clip(α λ_t, 0, 1), α ≥ 0 (for ``a`` and ``a_c``, λ ≡ 1, so the
  family is the constant-λ rollouts λ_t ≡ α of Abnar & Zuidema); α = 1 is the rollout as
  defined. α is the smallest value at which the mean position Σ_j j p_α(j) equals the measured
  one (:func:`fit_scale`);
* the ``geometric`` null fits its ratio r and the ``linear`` null its slope s to the measured
  mean position (:mod:`posflow.simulate.nulls`), as before.

Cross-fitting. The windows (or groups of windows) are split at random into halves H₁, H₂
(``default_rng([seed, 24])``). A direction F → S fits each parameter on the pooled measurements
of F (kernels, λ, content averaged over its windows, p̂_F the normalised mean influence) and
scores the predictor on S: the rollout runs through the kernels and λ measured on S (measured
inputs, not parameters) with the α of F, the nulls keep the r or s of F, and the profile is
compared with p̂_S. A statistic is the mean of its two directions.

Metrics of a profile p against p̂ (both probability vectors over positions 0..n−1):

* ``w1`` — W1(p, p̂)/(n − 1) (:func:`~posflow.simulate.models.profiles.batched_w1`);
* ``shape`` — the mean-free shape metric :func:`centred_w1`: W1 between the profiles each
  shifted to mean position 0, over n − 1 (0 iff one profile is a translate of the other);
* ``spearman`` — Spearman's ρ over positions (NaN for a constant profile, where it is undefined);
* ``first``, ``last`` — p(0) and p(n−1); the key ``"measured"`` holds p̂(0), p̂(n−1) and the
  measured mean position (``mean``);
* ``param`` — each predictor's fitted parameter (α, r or s), the mean of the two directions:
  its jackknife interval says, e.g., whether α = 1 ([A]'s rollout as defined) is consistent
  with the data.

Sliding windows: with ``Windows.windows`` (per layer the keys a query sees, as
``Measurement.windows``) the uniform and content kernels of a layer with w < n are banded to it
(:func:`posflow.simulate.models.bands.band`: rows 1/min(i + 1, w), each content head's softmax
over the band); the measured kernels (``a``, ``b``, ``d``, ``e``, ``shuffled``) are zero outside
the band already.

Splits (issue 41): one random split leaves the split's own variance out of the jackknife;
``splits=S`` scores S − 1 more random splits on the full sample and the intervals average the S
statistics and add their variance s²/S (:func:`split_interval`).

Intervals: the delete-one-group jackknife of the whole procedure (every fit redone without the
group), θ̂ ± t_{G−1} ŝe, ŝe² = (G−1)/G Σ_g (θ_(−g) − θ̄)² (as :mod:`posflow.simulate.models.study`;
with one window per group, the delete-one-window jackknife). Differences of two predictors are
jackknifed pairwise (:meth:`CrossFit.difference`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from posflow.simulate.models._crossfit_fit import (
    ROLLOUT_KEYS,
    centred_w1,
    fit_scale,
    geometric_profile,
    jackknife_interval,
    ramp_profile,
    scaled_rollout,
    split_interval,
)
from posflow.simulate.models.bands import band, check_windows

__all__ = [
    "KEYS",
    "METRICS",
    "ROLLOUT_KEYS",
    "CrossFit",
    "Windows",
    "centred_w1",
    "crossfit",
    "fit_scale",
    "jackknife_interval",
    "scaled_rollout",
    "split_interval",
]

KEYS = (*ROLLOUT_KEYS, "geometric", "linear")
METRICS = ("w1", "shape", "spearman", "first", "last")


@dataclass
class Windows:
    """Measurements per window (or per group of windows) that cross-fitting pools.

    Attributes
    ----------
    attention : ndarray, shape (N, L, n, n)
        Head-averaged attention of each window (rows summing to 1).
    lambdas : ndarray, shape (N, L)
        λ_t of each window (any definition: [A]'s, or with the MLP update counted).
    influence : ndarray, shape (N, n)
        Raw gradient influence ‖∂p*/∂e_j‖ (nonnegative; pooled by the mean, then normalised).
    values : ndarray, shape (N, L, n, n), optional
        Value-norm weights (profile ``d``).
    content : ndarray, shape (N, L, H), optional
        [A]'s diagonal content in logit units (profiles ``c``, ``a_c``).
    slopes : ndarray, shape (H,), optional
        ALiBi slopes in logit units (zeros without ALiBi).
    weights : ndarray, shape (N,), optional
        Windows per row (a group mean counts as its size); ones by default.
    windows : sequence of L (int or None), optional
        The sliding window of each layer (keys a query sees, itself included; None: every
        earlier key), as ``Measurement.windows``; the uniform and content kernels are banded
        to it. None: every layer global.
    """

    attention: np.ndarray
    lambdas: np.ndarray
    influence: np.ndarray
    values: np.ndarray | None = None
    content: np.ndarray | None = None
    slopes: np.ndarray | None = None
    weights: np.ndarray | None = None
    windows: tuple | None = None

    def checked(self) -> Windows:
        """These windows as float64 arrays, each field validated (shapes, finite values,
        nonnegative influence with positive sums): one ValueError naming the field otherwise."""
        return _checked(self)

    @classmethod
    def of(cls, data, lambdas=None) -> Windows:
        """The windows of a per-sequence measurement (``PerSequence``: its fields by name, the
        layers' sliding ``windows`` when it has them), with ``lambdas`` (N, L) in place of
        ``data.lambdas`` when given."""
        return cls(data.attention, data.lambdas if lambdas is None else lambdas, data.influence,
                   getattr(data, "values", None), getattr(data, "content", None),
                   getattr(data, "slopes", None),
                   windows=getattr(data, "windows", None))  # fmt: skip

    @classmethod
    def of_groups(cls, st, lambdas=None) -> Windows:
        """One row per group of a :class:`~posflow.simulate.models.study.GroupedStudy`: the
        group means, weighted by the group sizes, and the study's sliding ``windows``;
        ``lambdas`` (G groups of (N_g, L)) in place of the study's per-sequence λ when given."""
        lam = st.lambdas if lambdas is None else lambdas
        return cls(np.stack(st.attention), np.stack([x.mean(axis=0) for x in lam]),
                   np.stack([x.mean(axis=0) for x in st.influence]),
                   np.stack(st.value_weights), np.stack(st.content), st.slopes,
                   np.array([x.shape[0] for x in st.influence], dtype=np.float64),
                   getattr(st, "windows", None))  # fmt: skip


def _checked(w: Windows) -> Windows:
    """``w`` as float64 arrays, or one ValueError naming the argument and the rule."""
    A = np.asarray(w.attention, dtype=np.float64)
    if A.ndim != 4 or A.shape[2] != A.shape[3] or A.shape[2] < 2:
        raise ValueError(f"attention must have shape (N, L, n, n) with n >= 2; got {A.shape}")
    N, L, n = A.shape[:3]
    lam = np.asarray(w.lambdas, dtype=np.float64)
    g = np.asarray(w.influence, dtype=np.float64)
    if lam.shape != (N, L):
        raise ValueError(f"lambdas must have shape (N, L) = {(N, L)}; got {lam.shape}")
    if g.shape != (N, n):
        raise ValueError(f"influence must have shape (N, n) = {(N, n)}; got {g.shape}")
    for name, x in (("attention", A), ("lambdas", lam), ("influence", g)):
        if not np.isfinite(x).all():
            raise ValueError(f"{name} must be finite")
    if (g < 0).any() or (g.sum(axis=1) <= 0).any():
        raise ValueError("influence must be nonnegative with a positive sum in every window")
    V = None if w.values is None else np.asarray(w.values, dtype=np.float64)
    if V is not None and V.shape != A.shape:
        raise ValueError(f"values must have the shape of attention {A.shape}; got {V.shape}")
    c = None if w.content is None else np.asarray(w.content, dtype=np.float64)
    if c is not None and (c.ndim != 3 or c.shape[:2] != (N, L) or not np.isfinite(c).all()):
        raise ValueError(f"content must be finite with shape (N, L, H) = ({N}, {L}, H); "
                         f"got {c.shape}")  # fmt: skip
    H = 1 if c is None else c.shape[2]
    m = np.zeros(H) if w.slopes is None else np.asarray(w.slopes, dtype=np.float64).reshape(-1)
    if m.shape != (H,) or not np.isfinite(m).all():
        raise ValueError(f"slopes must be finite with shape (H,) = ({H},); got {m.shape}")
    wt = np.ones(N) if w.weights is None else np.asarray(w.weights, dtype=np.float64)
    if wt.shape != (N,) or not (np.isfinite(wt) & (wt > 0)).all():
        raise ValueError(f"weights must be positive and finite with shape (N,) = ({N},)")
    ws = None if w.windows is None else check_windows(w.windows, L)
    return Windows(A, lam, g, V, c, m, wt, ws)


@dataclass
class CrossFit:
    """Cross-fitted metrics of every predictor with their jackknife replicates.

    ``metrics[metric][key]`` has shape (G + 1,): replicate 0 is the full sample, replicate g + 1
    leaves out group ``groups[g]``; each value is the mean of the two directions H₁ → H₂ and
    H₂ → H₁. ``params[key]`` (2,) are the full-sample parameters fitted on H₁ and on H₂ (α, r or
    s), ``matched[key]`` (2,) whether the fit reached the measured mean, ``profiles[key]`` (2, n)
    the profiles scored on H₂ and on H₁, ``measured`` (2, n) p̂ of H₂ and of H₁.
    """

    keys: tuple
    groups: np.ndarray
    halves: tuple
    metrics: dict
    params: dict
    matched: dict
    profiles: dict
    measured: np.ndarray
    perm: np.ndarray
    splits: dict | None = None
    """``splits[metric][key]`` (S,): the full-sample statistic under S random splits (split 0
    the seeded one of ``metrics``); None with one split."""

    def interval(self, metric: str, key: str, confidence: float) -> tuple:
        """(estimate, se, lo, hi) of ``metric`` of ``key``: :func:`jackknife_interval`, and with
        S > 1 splits the split-averaged estimate with the split variance added
        (:func:`split_interval`)."""
        reps = self.metrics[metric][key]
        if not self.splits or metric not in self.splits:
            return jackknife_interval(reps, confidence)
        return split_interval(reps, self.splits[metric][key], confidence)

    def difference(self, metric: str, key: str, other: str, confidence: float) -> tuple:
        """(estimate, se, lo, hi) of metric(key) − metric(other), jackknifed pairwise (with the
        split variance of the difference when there are S > 1 splits)."""
        m = self.metrics[metric]
        if not self.splits or metric not in self.splits:
            return jackknife_interval(m[key] - m[other], confidence)
        sp = self.splits[metric]
        return split_interval(m[key] - m[other], sp[key] - sp[other], confidence)



def group_labels(groups, N: int, least: int, why: str) -> tuple[np.ndarray, np.ndarray]:
    """(labels (N,), the distinct labels) of jackknife ``groups`` (None: one group per row), or
    one ValueError: integers of shape (N,) naming at least ``least`` groups (``why``)."""
    labels = np.arange(N) if groups is None else np.asarray(groups)
    if labels.shape != (N,) or labels.dtype.kind not in "iu":
        raise ValueError(f"groups must be integers with shape (N,) = ({N},)")
    uniq = np.unique(labels)
    if uniq.size < least:
        raise ValueError(f"groups must name at least {least} groups ({why}); got {uniq.size}")
    return labels, uniq


def _pool(w: Windows, rows) -> dict:
    """The pooled means of the windows ``rows`` (weighted): A and V rows renormalised."""
    wt = w.weights[rows] / w.weights[rows].sum()
    A = np.tensordot(wt, w.attention[rows], axes=1)
    out = {"A": A / A.sum(axis=-1, keepdims=True),
           "lambdas": np.clip(wt @ w.lambdas[rows], 0.0, 1.0)}  # fmt: skip
    g = wt @ w.influence[rows]
    out["measured"] = g / g.sum()
    if w.values is not None:
        V = np.tril(np.tensordot(wt, w.values[rows], axes=1))
        out["V"] = V / V.sum(axis=-1, keepdims=True)
    if w.content is not None:
        out["c"] = np.tensordot(wt, w.content[rows], axes=1)
    return out


def _content_kernel(n: int, slopes, content, window=None) -> np.ndarray:
    """[A]'s kernel (1/H) Σ_h band_w softmax_{j ≤ i}(c_h [i = j] − m_h (i − j)), shape (n, n):
    each head banded to the ``window`` of w keys (:func:`~posflow.simulate.models.bands.band`;
    None or w ≥ n: no band)."""
    i = np.arange(n)
    gap = (i[:, None] - i[None, :]).astype(np.float64)
    z = -slopes[:, None, None] * gap + content[:, None, None] * np.eye(n)
    z = np.where(gap >= 0, z, -np.inf)
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    heads = e / e.sum(axis=-1, keepdims=True)
    if window is not None and window < n:
        heads = band(heads[None], [window])[0]
    return heads.mean(axis=0)


def _kernels(P: dict, slopes, perm, rollouts=None, windows=None) -> dict:
    """``{key: (kernels (L, n, n), base λ (L,))}`` of every rollout the pooled ``P`` allows (of
    those named in ``rollouts``, when given); the uniform and content kernels banded to the
    layers' ``windows`` (None: every layer global)."""
    A, lam = P["A"], P["lambdas"]
    L, n = lam.size, A.shape[-1]
    ones = np.ones(L)
    windows = (None,) * L if windows is None else windows
    S = A.copy()  # sink-aware: rows i ≥ 1 keep their token-0 share on the diagonal
    i = np.arange(1, n)
    S[:, i, i] += S[:, i, 0]
    S[:, i, 0] = 0.0
    U = np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]  # uniform: 1/(i + 1), j ≤ i
    out = {"a": (A, ones), "b": (A, lam), "e": (S, lam),
           "uniform": (band(U, windows), lam), "shuffled": (A, lam[perm])}  # fmt: skip
    if "c" in P:
        K = np.stack([_content_kernel(n, slopes, P["c"][t], windows[t]) for t in range(L)])
        out["c"], out["a_c"] = (K, lam), (K, ones)
    if "V" in P:
        out["d"] = (P["V"], lam)
    return out if rollouts is None else {k: v for k, v in out.items() if k in rollouts}


def _metrics(p, q) -> dict:
    """The metrics of the profiles ``p`` (K, n) against ``q`` (n,), each of shape (K,)."""
    from posflow.simulate.models.profiles import batched_spearman, batched_w1

    return {"w1": batched_w1(p, q[None]), "shape": centred_w1(p, q[None]),
            "spearman": batched_spearman(p, np.broadcast_to(q, p.shape)), "first": p[:, 0],
            "last": p[:, -1]}  # fmt: skip


def _direction(fit: dict, score: dict) -> dict:
    """Fit every predictor on the pooled half ``fit`` and score it on the pooled half ``score``
    (each ``{"P": pooled means, "K": kernels}``): ``{key: (parameter, matched, profile)}``."""
    from posflow.simulate.nulls import geometric_recency, ramp_slope

    n = fit["P"]["measured"].size
    mu = float(np.clip(fit["P"]["measured"] @ np.arange(n), 0.0, n - 1.0))
    out = {}
    for k, (K, lam) in fit["K"].items():
        alpha, ok = fit_scale(K, lam, mu)
        Ks, lams = score["K"][k]
        out[k] = (alpha, ok, scaled_rollout(Ks, lams, alpha))
    ratio = float(geometric_recency(n, mu)[1])
    out["geometric"] = (ratio, True, geometric_profile(n, ratio))
    s = float(ramp_slope(n, mu))
    out["linear"] = (s, abs(s) < 1.0, ramp_profile(n, s))
    return out


def _one(w: Windows, halves, perm, rollouts=None) -> tuple[dict, dict]:
    """Both directions on the row sets ``halves``: (metrics, full detail of each direction)."""
    sides = []
    for rows in halves:
        P = _pool(w, rows)
        sides.append({"P": P, "K": _kernels(P, w.slopes, perm, rollouts, w.windows)})
    got = [_direction(sides[0], sides[1]), _direction(sides[1], sides[0])]
    q = [sides[1]["P"]["measured"], sides[0]["P"]["measured"]]  # scored on H₂, then H₁
    keys = list(got[0])
    ms = [_metrics(np.stack([got[d][k][2] for k in keys]), q[d]) for d in (0, 1)]
    out = {m: {k: 0.5 * float(ms[0][m][i] + ms[1][m][i]) for i, k in enumerate(keys)}
           for m in METRICS}  # fmt: skip
    j = np.arange(q[0].size)
    out["first"]["measured"] = 0.5 * (q[0][0] + q[1][0])
    out["last"]["measured"] = 0.5 * (q[0][-1] + q[1][-1])
    out["mean"] = {"measured": 0.5 * float(q[0] @ j + q[1] @ j)}
    # the fitted parameter (α, r or s) averaged over the two directions: its jackknife interval
    out["param"] = {k: 0.5 * float(got[0][k][0] + got[1][k][0]) for k in keys}
    return out, {"got": got, "measured": q}


def crossfit(data, *, lambdas=None, groups=None, halves=None, seed: int = 0, perm=None,
             rollouts=None, splits: int = 1) -> CrossFit:  # fmt: skip
    """Cross-fitted, one-parameter-each comparison of every predictor with the measured influence.

    Parameters
    ----------
    data : Windows or an object with its fields (``PerSequence``)
        N windows (or groups) of a model at one length n with L layers; its ``windows`` (the
        layers' sliding windows, when present) band the uniform and content kernels.
    lambdas : array_like, shape (N, L), optional
        The λ to use in place of ``data.lambdas`` (e.g. λ with the MLP update counted).
    groups : array_like of int, shape (N,), optional
        Jackknife groups (the halves are unions of groups); default one group per row. At least
        4 groups, so that each half keeps a group when one is left out.
    halves : pair of array_like of int, optional
        The group labels of H₁ and of H₂ (disjoint, together every group, ≥ 2 each); drawn at
        random by default (half of the groups each, H₁ the smaller when G is odd).
    seed : int
        Seeds the split into halves (``default_rng([seed, 24])``) and, when ``perm`` is None,
        the shuffled null's derangement (``[seed, 15]``, as PB15's bootstrap).
    perm : array_like of int, shape (L,), optional
        Layer t of the shuffled null takes λ of layer perm[t].
    rollouts : iterable of str, optional
        Only these rollouts of :data:`ROLLOUT_KEYS` (default: all the data allows); the
        ``geometric`` and ``linear`` nulls are always fitted.
    splits : int
        Random splits into halves (≥ 1). With S > 1, splits 1 … S − 1 (``default_rng([seed,
        24, s])``) are scored on the full sample beside the seeded split 0, and the intervals
        average the S statistics and add their variance (:func:`split_interval`); the jackknife
        replicates stay those of split 0. Cost S − 1 more full-sample cross-fits.

    Returns
    -------
    CrossFit
        Metrics of :data:`KEYS` (those the data allows: ``c``/``a_c`` need content, ``d``
        values), cost (G + 1) × 2 × (fits of ≈ 40 rollouts of O(L n²)) for the 8 rollouts.

    Raises ValueError naming the argument for bad shapes, non-finite values, fewer than 4 groups
    or a bad ``perm``/``seed``/``windows``.
    """
    from posflow.simulate.nulls import derangement

    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0; got {seed!r}")
    if rollouts is not None:
        rollouts = tuple(rollouts)
        bad = [k for k in rollouts if k not in ROLLOUT_KEYS]
        if bad or not rollouts:
            raise ValueError(f"rollouts must name some of {ROLLOUT_KEYS}; got {rollouts!r}")
    w = data if isinstance(data, Windows) else Windows.of(data)
    keep_v = rollouts is None or "d" in rollouts  # pool only what the rollouts asked for use
    keep_c = rollouts is None or bool({"c", "a_c"} & set(rollouts))
    w = _checked(Windows(w.attention, w.lambdas if lambdas is None else lambdas, w.influence,
                         w.values if keep_v else None, w.content if keep_c else None,
                         w.slopes if keep_c else None, w.weights, w.windows))  # fmt: skip
    N, L = w.lambdas.shape
    labels, uniq = group_labels(groups, N, 4, "2 per half")
    if perm is None:
        perm = derangement(L, [seed, 15]) if L >= 2 else np.zeros(1, dtype=int)
    perm = np.asarray(perm)
    if perm.shape != (L,) or sorted(perm.tolist()) != list(range(L)):
        raise ValueError(f"perm must be a permutation of 0..{L - 1}")
    if isinstance(splits, bool) or not isinstance(splits, int | np.integer) or splits < 1:
        raise ValueError(f"splits must be an integer >= 1; got {splits!r}")
    if splits > 1 and halves is not None:
        raise ValueError("splits > 1 draws its own halves: give halves or splits, not both")
    if halves is None:
        order = np.random.default_rng([seed, 24]).permutation(uniq)
        halves = (order[: uniq.size // 2], order[uniq.size // 2 :])
    halves = tuple(np.sort(np.asarray(h).reshape(-1)) for h in halves)
    if (
        len(halves) != 2
        or min(h.size for h in halves) < 2
        or not np.array_equal(np.sort(np.concatenate(halves)), uniq)
    ):
        raise ValueError("halves must split the groups into two disjoint sets of >= 2 groups")

    def rows(keep_groups, drop=None):
        return np.flatnonzero(np.isin(labels, keep_groups) & (labels != drop))

    full, detail = _one(w, [rows(h) for h in halves], perm, rollouts)
    reps = [full] + [_one(w, [rows(h, g) for h in halves], perm, rollouts)[0] for g in uniq]
    metrics = {m: {k: np.array([r[m][k] for r in reps]) for k in full[m]} for m in full}
    by_split = None
    if splits > 1:
        more = [full]
        for s in range(1, splits):
            order = np.random.default_rng([seed, 24, s]).permutation(uniq)
            more.append(_one(w, [rows(order[: uniq.size // 2]), rows(order[uniq.size // 2 :])],
                             perm, rollouts)[0])  # fmt: skip
        by_split = {m: {k: np.array([r[m][k] for r in more]) for k in full[m]} for m in full}
    got = detail["got"]
    keys = tuple(k for k in KEYS if k in got[0])
    return CrossFit(
        keys, uniq, halves, metrics,
        params={k: np.array([got[0][k][0], got[1][k][0]]) for k in keys},
        matched={k: np.array([got[0][k][1], got[1][k][1]]) for k in keys},
        profiles={k: np.stack([got[0][k][2], got[1][k][2]]) for k in keys},
        measured=np.stack(detail["measured"]), perm=perm, splits=by_split,
    )  # fmt: skip
