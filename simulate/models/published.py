"""[A]'s comparison as published (claim PB15): residual-aware against attention-only, at α = 1.

[A] predicts a model's input-token influence from its architecture and its measured λ_t alone —
no fitted parameter — and compares the residual-aware rollout with the attention-only one (λ ≡ 1)
in W1/(n − 1) against the measured gradient influence p̂. The kernels are [A]'s own: the ALiBi
kernel of the model's slopes, without and with the measured diagonal content; a model with no
positional bias in its attention scores (RoPE, NoPE) has slopes 0, so [A]'s kernel is the uniform
causal kernel. Beside them, the measured head-averaged kernels. Each residual-aware profile has
its attention-only rival through the same kernels (:data:`PAIRS`):

=========  ==========  ===================================================================
residual   rival       kernels
=========  ==========  ===================================================================
``b``      ``a``       measured head-averaged attention
``b_A``    ``a_A``     [A]'s kernels without content (ALiBi slopes; uniform without ALiBi)
``c``      ``a_c``     [A]'s ALiBi + content kernels (measured content c_{t,h})
=========  ==========  ===================================================================

All profiles are :math:`p = e_{n-1}^\\top R_{L-1}\\cdots R_0`,
:math:`R_t = (1-\\lambda_t) I + \\lambda_t K_t` (the library's :func:`~posflow.simulate.rollout.
influence`), with the pooled λ_t and kernels of the windows; sliding-window layers band [A]'s
kernels to their window (:mod:`~posflow.simulate.models.bands`).

Intervals: nothing is fitted, so no split: the delete-one-group jackknife of the pooled
statistic (every profile recomputed without the group, as :mod:`~posflow.simulate.models.study`),
:math:`\\widehat{se}^2 = \\frac{G-1}{G}\\sum_g (\\theta_{(-g)} - \\bar\\theta)^2`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from posflow.simulate.models._crossfit_fit import jackknife_interval

__all__ = ["LABELS", "PAIRS", "Published", "published_comparison", "published_profiles"]

PAIRS = {"b": "a", "b_A": "a_A", "c": "a_c"}
LABELS = {
    "a": "attention only, measured kernels",
    "b": "residual-aware, measured kernels",
    "a_A": "attention only, [A]'s kernels without content",
    "b_A": "residual-aware, [A]'s kernels without content",
    "a_c": "attention only, [A]'s ALiBi + content kernels",
    "c": "residual-aware, [A]'s ALiBi + content kernels",
}


def published_profiles(A, lam, *, slopes=None, content=None, windows=None) -> dict:
    """[A]'s profiles at α = 1 of pooled measurements.

    Parameters
    ----------
    A : array_like, shape (L, n, n)
        Head-averaged attention (rows summing to 1).
    lam : array_like, shape (L,)
        λ_t in [0, 1].
    slopes : array_like, shape (H,), optional
        ALiBi slopes in logit units (None or zeros: no ALiBi, [A]'s kernel is uniform).
    content : array_like, shape (L, H), optional
        [A]'s diagonal content in logit units: profiles ``c`` and ``a_c``.
    windows : sequence of L (int or None), optional
        Each layer's sliding window (None: global); bands [A]'s kernels.

    Returns
    -------
    dict
        ``{key: ndarray (n,)}`` for ``a``, ``b``, ``a_A``, ``b_A`` and, with ``content``,
        ``c``, ``a_c``. Cost O(L n²) per profile.
    """
    from posflow.simulate.models.bands import check_windows, content_kernels
    from posflow.simulate.models.measure import measured_kernels
    from posflow.simulate.rollout import influence

    lam = np.asarray(lam, dtype=np.float64)
    if lam.ndim != 1 or not np.isfinite(lam).all() or (lam < 0).any() or (lam > 1).any():
        raise ValueError("lam must be a finite vector (L,) with entries in [0, 1]")
    ks = measured_kernels(A)
    L, n = lam.size, ks[0].n
    if len(ks) != L:
        raise ValueError(f"A must have L = {L} layers (the length of lam); got {len(ks)}")
    H = 1 if content is None else np.asarray(content).shape[-1]
    m = np.zeros(H) if slopes is None else np.asarray(slopes, dtype=np.float64).reshape(-1)
    if content is not None and m.size != H:
        raise ValueError(f"slopes must have H = {H} entries (content's last axis); got {m.size}")
    ws = (None,) * L if windows is None else check_windows(windows, L)
    ones = np.ones(L)
    out = {"b": influence(ks, lam), "a": influence(ks, ones)}
    k_a = content_kernels(n, m, np.zeros((L, m.size)), ws)  # [A]'s kernels, no content
    out["b_A"], out["a_A"] = influence(k_a, lam), influence(k_a, ones)
    if content is not None:
        k_c = content_kernels(n, m, np.asarray(content, dtype=np.float64), ws)
        out["c"], out["a_c"] = influence(k_c, lam), influence(k_c, ones)
    return out


@dataclass
class Published:
    """[A]'s comparison with its jackknife replicates.

    ``w1[key]`` (G + 1,) is W1(profile, p̂)/(n − 1): replicate 0 the full sample, replicate g + 1
    without group ``groups[g]``; ``profiles[key]`` (G + 1, n) and ``measured`` (G + 1, n) the
    profiles and p̂ of every replicate (for the U test of each).
    """

    keys: tuple
    groups: np.ndarray
    w1: dict
    profiles: dict
    measured: np.ndarray

    def interval(self, key: str, confidence: float) -> tuple:
        """(estimate, se, lo, hi) of W1(key)/(n − 1) (:func:`jackknife_interval`)."""
        return jackknife_interval(self.w1[key], confidence)

    def difference(self, key: str, rival: str, confidence: float) -> tuple:
        """(estimate, se, lo, hi) of W1(key) − W1(rival), jackknifed pairwise."""
        return jackknife_interval(self.w1[key] - self.w1[rival], confidence)

    def summary(self) -> dict:
        """JSON-ready: ``groups``, ``w1`` {key: replicates}, ``profiles`` {key: replicates × n}
        and ``measured`` (what the stored study keeps, so a claim can judge it later at any
        level)."""
        return {"groups": int(self.groups.size),
                "w1": {k: [float(x) for x in v] for k, v in self.w1.items()},
                "profiles": {k: np.asarray(v).tolist() for k, v in self.profiles.items()},
                "measured": np.asarray(self.measured).tolist()}  # fmt: skip

    @classmethod
    def from_summary(cls, d: dict) -> Published:
        """The comparison a :meth:`summary` stored."""
        try:
            w1 = {k: np.asarray(v, dtype=np.float64) for k, v in d["w1"].items()}
            prof = {k: np.asarray(v, dtype=np.float64) for k, v in d["profiles"].items()}
            return cls(tuple(w1), np.arange(int(d["groups"])), w1, prof,
                       np.asarray(d["measured"], dtype=np.float64))  # fmt: skip
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"d must be a Published.summary() record; {exc}") from None


def published_comparison(data, *, groups=None) -> Published:
    """[A]'s comparison (see the module docstring) on windows or groups of windows.

    Parameters
    ----------
    data : :class:`~posflow.simulate.models.crossfit.Windows` or a per-sequence measurement
        N rows (windows, or group means with ``weights``) of one model at one length n.
    groups : array_like of int, shape (N,), optional
        Jackknife groups; default one per row. At least 2.

    Returns
    -------
    Published
        W1 of every profile of :func:`published_profiles` against p̂ in every replicate. Cost
        (G + 1) × 6 rollouts of O(L n²).

    Raises ValueError naming the argument for bad shapes, non-finite values or < 2 groups.
    """
    from posflow.simulate.models.crossfit import Windows, _checked, _pool, group_labels
    from posflow.simulate.models.profiles import batched_w1

    w = data if isinstance(data, Windows) else Windows.of(data)
    w = _checked(w)
    N = w.lambdas.shape[0]
    labels, uniq = group_labels(groups, N, 2, "the jackknife")
    reps = [np.arange(N)] + [np.flatnonzero(labels != g) for g in uniq]
    profiles: dict = {}
    measured = []
    for rows in reps:
        P = _pool(w, rows)
        got = published_profiles(P["A"], P["lambdas"], slopes=w.slopes, content=P.get("c"),
                                 windows=w.windows)  # fmt: skip
        for k, p in got.items():
            profiles.setdefault(k, []).append(p)
        measured.append(P["measured"])
    measured = np.stack(measured)
    profiles = {k: np.stack(v) for k, v in profiles.items()}
    w1 = {k: np.asarray(batched_w1(v, measured), dtype=np.float64) for k, v in profiles.items()}
    return Published(tuple(profiles), uniq, w1, profiles, measured)
