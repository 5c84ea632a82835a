"""Rollout predictions from a measured model, compared with its measured influence (PB15).

Three predicted last-row profiles, as in [A] §4.4, from a :class:`posflow.simulate.models.measure.
Measurement` of L layers:

* ``attention_only`` (a) — λ_t ≡ 1 through the measured head-averaged kernels A_t
  (Wu et al.'s attention-only rollout);
* ``residual`` (b) — the measured λ_t through the measured kernels A_t;
* ``residual_content`` (c) — the measured λ_t through [A]'s parametric kernels
  ``softmax_j(c_{t,h}[i=j] − m_h (i−j))`` head-averaged, m_h the model's ALiBi slopes in logit
  units (zero for a model without ALiBi) and c_{t,h} the content fitted from the mean q·k
  (``content_scale="sqrt_d"``: divided by √d_head, the model's logit units; ``"raw"``: [A]'s
  released configs). In a layer with a sliding window of w < n keys (``Measurement.windows``)
  each head's softmax is taken over the band i − w < j ≤ i
  (:func:`posflow.simulate.models.bands.content_kernels`); (a) and (b) are measured, zero
  outside the band already.

and two more from :mod:`posflow.simulate.models.sinks` (:func:`predict_sink_profiles`, issue 13):

* ``value_norm`` (d) — the measured λ_t through the value-norm kernels (Kobayashi et al. 2020);
* ``sink_aware`` (e) — the measured λ_t through the sink-aware kernels (token 0's attention
  returned to each token's own state).

Each is compared with the measured gradient influence by the normalised W1
(``scipy.stats.wasserstein_distance`` over positions, divided by n − 1) and Spearman's ρ.
"""

from __future__ import annotations

import numpy as np

from posflow.simulate.compare import mean_position, profile_shape, spearman, w1_normalised
from posflow.simulate.models.bands import content_kernels
from posflow.simulate.rollout import influence

__all__ = ["SINK_VARIANTS", "VARIANTS", "compare_profiles", "predict_profiles",
           "predict_sink_profiles"]  # fmt: skip

VARIANTS = ("attention_only", "residual", "residual_content")
SINK_VARIANTS = ("value_norm", "sink_aware")
CONTENT_SCALES = ("sqrt_d", "raw")


def predict_profiles(m, *, content_scale: str = "sqrt_d") -> dict[str, np.ndarray]:
    """Predicted influence profiles (a), (b), (c) of a measured model (claim PB15).

    .. math::
        p = e_{n-1}^\\top R_{L-1}\\cdots R_0,\\qquad R_t = (1-\\lambda_t) I + \\lambda_t K_t

    with (a) λ ≡ 1, K_t = A_t; (b) measured λ_t, K_t = A_t; (c) measured λ_t, K_t the ALiBi +
    content kernel of layer t,

    .. math::
        K_t = \\frac1H \\sum_h \\operatorname{band}_{w_t}\\,
              \\mathrm{softmax}_{j \\le i}\\big(c_{t,h}[i=j] - m_h (i-j)\\big),

    each head banded to the layer's window w_t (``m.windows``; no band where None).

    Parameters
    ----------
    m : Measurement
        With ``lambdas``, ``attention`` and ``qk`` recorded.
    content_scale : {"sqrt_d", "raw"}

    Returns
    -------
    dict
        ``{variant: ndarray (n,)}``, each a probability vector. Cost O(L·n²) for (a), (b) and
        O(L·n·H) for (c) (O(n²) per banded layer, whose kernel is dense).
    """
    if content_scale not in CONTENT_SCALES:
        raise ValueError(f"content_scale must be one of {CONTENT_SCALES}; got {content_scale!r}")
    if m.lambdas is None:
        raise ValueError("lambdas were not measured; call measure(..., lambdas=True)")
    ks = m.kernels()
    L = len(ks)
    _, c = m.content(content_scale)  # (L, H)
    slopes = np.zeros(m.num_heads) if m.slopes is None else np.asarray(m.slopes, dtype=float)
    kc = content_kernels(m.n, slopes, c, m.windows)  # alibi_kernel where no band
    return {
        "attention_only": influence(ks, np.ones(L)),
        "residual": influence(ks, m.lambdas),
        "residual_content": influence(kc, m.lambdas),
    }


def predict_sink_profiles(m) -> dict[str, np.ndarray]:
    r"""Predicted profiles (d) value-norm and (e) sink-aware of a measured model (issue 13).

    .. math::
        p = e_{n-1}^\top R_{L-1}\cdots R_0,\quad R_t = (1-\lambda_t) I + \lambda_t K_t,
        \quad K_t = \tilde A_t \text{ (d) or } \hat A_t \text{ (e)}

    (see :func:`posflow.simulate.models.sinks.value_norm_kernels` and
    :func:`~posflow.simulate.models.sinks.sink_aware_kernels`).

    Parameters
    ----------
    m : Measurement
        With ``lambdas`` and ``attention``; (d) only when ``value_weights`` were recorded
        (``measure(..., value_norms=True)``).

    Returns
    -------
    dict
        ``{"sink_aware": p}`` and, when available, ``"value_norm"``; cost O(L·n²).
    """
    from posflow.simulate.models.sinks import sink_aware_kernels, value_norm_kernels

    if m.lambdas is None or m.attention is None:
        raise ValueError("predict_sink_profiles needs lambdas and attention measured")
    out = {}
    if m.value_weights is not None:
        out["value_norm"] = influence(value_norm_kernels(m.value_weights), m.lambdas)
    out["sink_aware"] = influence(sink_aware_kernels(m.attention), m.lambdas)
    return out


def compare_profiles(predicted: dict, measured) -> dict[str, dict[str, float]]:
    """Normalised W1 and Spearman ρ of each predicted profile against the measured one (PB15).

    .. math:: W_1/(n-1) = \\frac{1}{n-1}\\sum_k |F_p(k) - F_{\\hat p}(k)|

    Parameters
    ----------
    predicted : dict of name -> array_like, shape (n,)
    measured : array_like, shape (n,)

    Returns
    -------
    dict
        ``{name: {"w1": float in [0, 1], "spearman": float in [-1, 1], "mean_position": float,
        "shape": str}}``; profiles are renormalised to sum 1 first.
    """
    out = {}
    for name, p in predicted.items():
        out[name] = {
            "w1": w1_normalised(p, measured),
            "spearman": spearman(p, measured),
            "mean_position": mean_position(p),
            "shape": profile_shape(p),
        }
    return out
