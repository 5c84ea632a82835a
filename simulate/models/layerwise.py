"""Layer-wise fidelity of the rollout (claim PB19, ours; issue 24 item 4).

[A]'s prediction is a last row :math:`p = e_{n-1}^\\top R_{L-1} \\cdots R_0` compared with the
gradient influence at the model's input. The same rollout started at layer t,

.. math::
    p_t = e_{n-1}^\\top R_{L-1} \\cdots R_t,\\qquad R_s = (1-\\lambda_s) I + \\lambda_s K_s,

predicts the influence at that layer's input, :math:`\\lVert \\partial p^* / \\partial x_t[j]
\\rVert` normalised over j (``Measurement.layer_influence``, (L, n)). Comparing the two for each
t says where along depth the prediction breaks. :func:`layerwise_profiles` computes every p_t in
one vector chain from the top (O(L·n²) through the kernels' ``apply_left``, no matrix product);
:func:`layerwise_w1` scores each against the measured profile of its layer and against the
geometric-recency null fitted to that layer's mean position (in sample, no parameter for the
rollout). :func:`layerwise_crossfit` is the like-for-like version claim PB19 judges: at each
layer t, :func:`posflow.simulate.models.crossfit.crossfit` on the layers t … L − 1 against the
influence at layer t's input — the rollout with one fitted α (λ_s → clip(α λ_s)), the nulls with
one fitted parameter each, fitted on one half of the windows and scored on the other.
"""

from __future__ import annotations

import numpy as np

from posflow.simulate.backend import to_numpy
from posflow.simulate.kernels import dense_kernel

__all__ = ["layerwise_crossfit", "layerwise_profiles", "layerwise_w1"]


def layerwise_profiles(kernels, lambdas) -> np.ndarray:
    """Every rollout from layer t to the top, as rows of an (L, n) array.

    Parameters
    ----------
    kernels : sequence of L Kernel, or array_like of shape (L, n, n)
        Causal row-stochastic kernels K_0 … K_{L−1} (arrays become dense kernels).
    lambdas : array_like, shape (L,)
        Mixing coefficients in [0, 1].

    Returns
    -------
    ndarray, shape (L, n)
        Row t is :math:`e_{n-1}^\\top R_{L-1} \\cdots R_t` (row L − 1 involves one layer, row 0
        all of them: it equals :func:`posflow.simulate.rollout.influence`).
    """
    if isinstance(kernels, np.ndarray) or (
        isinstance(kernels, list | tuple) and kernels and not hasattr(kernels[0], "apply_left")
    ):  # fmt: skip
        kernels = [dense_kernel(np.asarray(A, dtype=np.float64)) for A in kernels]
    kernels = list(kernels)
    lam = np.asarray(lambdas, dtype=np.float64)
    if not kernels:
        raise ValueError("kernels must hold at least one layer")
    if lam.shape != (len(kernels),):
        raise ValueError(f"lambdas must have shape ({len(kernels)},) (one per kernel); got "
                         f"{lam.shape}")  # fmt: skip
    if not np.isfinite(lam).all() or (lam < 0).any() or (lam > 1).any():
        raise ValueError("lambdas must lie in [0, 1]")
    n = kernels[0].n
    if any(k.n != n for k in kernels):
        raise ValueError(f"kernels must all have n = {n}; got {[k.n for k in kernels]}")
    p = np.zeros(n)
    p[-1] = 1.0
    out = np.empty((len(kernels), n))
    for t in range(len(kernels) - 1, -1, -1):  # p ← p R_t, from the top layer down
        p = (1.0 - lam[t]) * p + lam[t] * to_numpy(kernels[t].apply_left(p))
        out[t] = p
    return out


def layerwise_w1(profiles, measured) -> dict[str, np.ndarray]:
    """W1/(n − 1) per layer of the rollout rows and of the geometric null against ``measured``.

    Parameters
    ----------
    profiles : array_like, shape (L, n)
        :func:`layerwise_profiles`.
    measured : array_like, shape (L, n)
        The measured influence at each layer's input (rows are normalised here).

    Returns
    -------
    dict with ``rollout`` (L,), ``geometric`` (L,) — the geometric-recency null
    (:func:`posflow.simulate.nulls.geometric_recency`) fitted to each measured row's mean
    position, one parameter per layer — and ``mean_position`` (L,) of the measured rows.
    """
    from posflow.simulate.compare import w1_normalised
    from posflow.simulate.nulls import geometric_recency

    P = np.asarray(profiles, dtype=np.float64)
    G = np.asarray(measured, dtype=np.float64)
    if P.ndim != 2 or P.shape != G.shape:
        raise ValueError(f"profiles and measured must have the same shape (L, n); got {P.shape} "
                         f"and {G.shape}")  # fmt: skip
    if not np.isfinite(G).all() or (G < 0).any() or (G.sum(axis=1) <= 0).any():
        raise ValueError("measured rows must be finite, non-negative and not all zero")
    G = G / G.sum(axis=1, keepdims=True)
    n = G.shape[1]
    mean = G @ np.arange(n)
    geo = geometric_recency(n, mean)[0]
    return {
        "rollout": np.array([w1_normalised(p, g) for p, g in zip(P, G, strict=True)]),
        "geometric": np.array([w1_normalised(q, g) for q, g in zip(geo, G, strict=True)]),
        "mean_position": mean,
    }


def layerwise_crossfit(data, *, rollouts=("b", "e"), seed: int = 0, lambdas=None) -> list:
    """The cross-fitted comparison of every layer's rollout with its input's influence.

    Parameters
    ----------
    data : PerSequence (or an object with its fields)
        Per-window measurements with ``layer_influence`` of shape (N, L, n)
        (:func:`~posflow.simulate.models.profiles_bootstrap.measure_per_sequence` with
        ``layer_influence=True``); its ``windows`` (per layer, when present) band the uniform
        and content kernels, the rollout from layer t using ``windows[t:]``.
    rollouts : iterable of str
        The rollouts compared (keys of :data:`~posflow.simulate.models.crossfit.ROLLOUT_KEYS`);
        the geometric and linear nulls are always fitted.
    seed : int
        Seeds the split into halves (the same split at every layer) and the shuffled null's
        derangement of the L − t layers (when ``"shuffled"`` is among the rollouts).
    lambdas : array_like, shape (N, L), optional
        λ in place of ``data.lambdas`` (e.g. with the MLP update counted).

    Returns
    -------
    list of L :class:`~posflow.simulate.models.crossfit.CrossFit`
        Entry t compares the rollouts through layers t … L − 1 (measured kernels, λ, content
        and value weights of those layers) with the influence at layer t's input; entry 0 is
        the comparison with the input embeddings' influence up to that normalisation. Cost:
        Σ_t (L − t)/L of one full-depth :func:`~posflow.simulate.models.crossfit.crossfit`.
    """
    from posflow.simulate.models.crossfit import Windows, crossfit

    G = getattr(data, "layer_influence", None)
    if G is None:
        raise ValueError("data must carry layer_influence (N, L, n): measure with "
                         "layer_influence=True")  # fmt: skip
    G = np.asarray(G, dtype=np.float64)
    lam = np.asarray(data.lambdas if lambdas is None else lambdas, dtype=np.float64)
    if G.ndim != 3 or G.shape[:2] != lam.shape:
        raise ValueError(f"layer_influence must have shape (N, L, n) = {(*lam.shape, 'n')}; "
                         f"got {G.shape}")  # fmt: skip
    L = lam.shape[1]

    def cut(x, t):
        return None if x is None else np.asarray(x)[:, t:]

    windows = getattr(data, "windows", None)
    out = []
    for t in range(L):
        w = Windows(np.asarray(data.attention)[:, t:], lam[:, t:], G[:, t],
                    cut(getattr(data, "values", None), t), cut(getattr(data, "content", None), t),
                    getattr(data, "slopes", None),
                    windows=None if windows is None else tuple(windows)[t:])  # fmt: skip
        out.append(crossfit(w, seed=seed, rollouts=rollouts))
    return out
