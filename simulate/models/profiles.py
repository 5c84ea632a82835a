"""One profiles pipeline: a measured model → profiles (a)–(e), nulls, W1 / Spearman with intervals.

Used by ``posflow measure``, the stored SmolLM2 study (:mod:`posflow.simulate.models.study`,
``docs/smollm2_study.py``) and claim PB15 (with the per-sequence bootstrap of
:mod:`posflow.simulate.models.profiles_bootstrap`). Every profile is a last row
:math:`p = e_{n-1}^\\top R_{L-1} \\cdots R_0`, :math:`R_t = (1-\\lambda_t) I + \\lambda_t K_t`:

=============  ====================  ==========================================================
key            name (``measure``)    kernel K_t and mixing λ_t
=============  ====================  ==========================================================
``a``          ``attention_only``    measured head-averaged A_t, λ ≡ 1 (Wu et al.'s rollout)
``b``          ``residual``          measured A_t, measured λ_t
``c``          ``residual_content``  [A]'s ALiBi + diagonal content kernel, measured λ_t
``a_c``        ``attention_content`` [A]'s ALiBi + content kernel, λ ≡ 1
``d``          ``value_norm``        value-norm kernel (Kobayashi et al. 2020), measured λ_t
``e``          ``sink_aware``        sink-aware kernel (token 0's share kept in place)
``geometric``  ``geometric``         null: p(j) ∝ r^{n−1−j} fitted to the measured mean position
``linear``     ``linear``            null: a linear ramp fitted to the measured mean position
``uniform``    ``uniform``           null: measured λ_t through uniform kernels 1/(i+1)
``shuffled``   ``shuffled``          null: measured A_t with λ_t moved to other layers
=============  ====================  ==========================================================

Sliding windows. A layer that sees only its last w keys (``Measurement.windows``, e.g. Gemma 3's
512-key layers) has measured kernels (a), (b), (d), (e) that are zero outside the band already;
the constructed ones — the uniform null and [A]'s content kernels (c) — are banded to it by
:mod:`posflow.simulate.models.bands` (rows 1/min(i + 1, w); each head's softmax over the band).

One colour per profile (:data:`COLORS`: the Okabe–Ito palette, then greys), predicted profiles
drawn solid and nulls dashed (:func:`line_style`). Distances to the measured influence p̂:
W1/(n − 1) (``scipy.stats.wasserstein_distance`` over positions, divided by n − 1) and
Spearman's ρ, row by row for bootstrap replicates (:func:`batched_w1`, :func:`batched_spearman`).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "COLORS",
    "KEY_OF_NAME",
    "LABELS",
    "NAMES",
    "NULLS",
    "PREDICTED",
    "batched_spearman",
    "batched_w1",
    "color",
    "line_style",
    "measured_profiles",
    "null_profiles",
    "percentile_interval",
    "rollout_profiles",
    "run_measure",
]

PREDICTED = ("a", "b", "c", "a_c", "d", "e")
NULLS = ("geometric", "linear", "uniform", "shuffled")
LABELS = {
    "a": "(a) attention only, measured kernels",
    "b": "(b) residual-aware, measured kernels",
    "c": "(c) residual-aware, [A]'s content kernels",
    "a_c": "(a) attention only, [A]'s content kernels",
    "d": "(d) residual-aware, value-norm kernels",
    "e": "(e) residual-aware, sink-aware kernels",
    "geometric": "null: geometric recency fitted to the mean position",
    "linear": "null: linear ramp fitted to the mean position",
    "uniform": "null: measured λ through uniform kernels",
    "shuffled": "null: λ moved to other layers (derangement)",
}
NAMES = {
    "a": "attention_only",
    "b": "residual",
    "c": "residual_content",
    "a_c": "attention_content",
    "d": "value_norm",
    "e": "sink_aware",
    **{k: k for k in NULLS},
}
KEY_OF_NAME = {v: k for k, v in NAMES.items()}
COLORS = {
    "measured": "#000000",
    "a": "#D55E00",  # Okabe–Ito vermillion
    "b": "#0072B2",  # blue
    "c": "#009E73",  # bluish green
    "d": "#CC79A7",  # reddish purple
    "e": "#56B4E9",  # sky blue
    "geometric": "#E69F00",  # orange
    "linear": "#F0E442",  # yellow
    "uniform": "#999999",  # grey
    "shuffled": "#555555",  # dark grey
    "a_c": "#882255",  # wine (beyond Okabe–Ito's eight)
}


def _key(name: str) -> str:
    return name if name in COLORS else KEY_OF_NAME.get(name, name)


def color(name: str) -> str | None:
    """The colour of a profile by key (``"b"``) or measure name (``"residual"``), else None."""
    return COLORS.get(_key(name))


def line_style(name: str) -> str:
    """``"--"`` for a null, ``"-"`` for a predicted or the measured profile."""
    return "--" if _key(name) in NULLS else "-"


# ----------------------------------------------------------------------------------------------
# metrics over a batch of replicates (equal to posflow.simulate.compare's, row by row)


def batched_w1(p, q) -> np.ndarray:
    """W1(p, q)/(n − 1) row by row: Σ_k |F_p(k) − F_q(k)| / (n − 1), rows renormalised first.

    Parameters
    ----------
    p, q : array_like, shape (..., n)

    Returns
    -------
    ndarray, shape (...)
        Equal to :func:`posflow.simulate.compare.w1_normalised` on each row.
    """
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    p = p / p.sum(axis=-1, keepdims=True)
    q = q / q.sum(axis=-1, keepdims=True)
    d = np.cumsum(p - q, axis=-1)[..., :-1]
    return np.abs(d).sum(axis=-1) / (p.shape[-1] - 1)


def batched_spearman(p, q) -> np.ndarray:
    """Spearman's ρ row by row (average ranks for ties), as ``scipy.stats.spearmanr``.

    Parameters
    ----------
    p, q : array_like, shape (..., n)

    Returns
    -------
    ndarray, shape (...); NaN for a constant row
    """
    from scipy.stats import rankdata

    rp = rankdata(np.asarray(p, dtype=np.float64), axis=-1)
    rq = rankdata(np.asarray(q, dtype=np.float64), axis=-1)
    rp = rp - rp.mean(axis=-1, keepdims=True)
    rq = rq - rq.mean(axis=-1, keepdims=True)
    num = (rp * rq).sum(axis=-1)
    den = np.sqrt((rp * rp).sum(axis=-1) * (rq * rq).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return num / den


def percentile_interval(x, level: float) -> tuple[float, float]:
    """Two-sided percentile interval of bootstrap replicates ``x[1:]`` at coverage ``level``.

    Parameters
    ----------
    x : array_like, shape (B + 1,)
        Replicate 0 is the full sample (left out), replicates 1..B the resamples.
    level : float in (0, 1)
    """
    a = (1.0 - level) / 2
    lo, hi = np.quantile(np.asarray(x)[1:], [a, 1.0 - a])
    return float(lo), float(hi)


# ----------------------------------------------------------------------------------------------
# the profiles of one set of pooled measurements, through posflow.simulate.rollout


def rollout_profiles(A, lam, *, values=None, content=None, slopes=None, perm=None,
                     windows=None) -> dict:  # fmt: skip
    """The rollout profiles of measured kernels, through the library (:mod:`~posflow.simulate.
    rollout`).

    Parameters
    ----------
    A : array_like, shape (L, n, n)
        Head-averaged attention (rows renormalised by ``measured_kernels``).
    lam : array_like, shape (L,)
        λ_t in [0, 1].
    values : array_like, shape (L, n, n), optional
        Value-norm weights: profile ``d``.
    content, slopes : array_like, shapes (L, H) and (H,), optional
        [A]'s diagonal content and ALiBi slopes (zeros without ALiBi): profiles ``c`` and ``a_c``.
    perm : array_like of int, shape (L,), optional
        Layer t takes λ of layer perm[t]: the ``shuffled`` null.
    windows : sequence of L (int or None), optional
        Keys a query of each layer sees (``Measurement.windows``; None: every earlier key).
        The uniform and content kernels of a layer with w < n are banded to it
        (:func:`~posflow.simulate.models.bands.uniform_kernels`, ``content_kernels``); the
        measured ones (``A``, ``values``) are taken as they are.

    Returns
    -------
    dict
        ``{key: ndarray (n,)}`` for ``a``, ``b``, ``e``, ``uniform`` and, with their inputs,
        ``c``, ``a_c``, ``d``, ``shuffled``. Cost O(L n²) per profile.
    """
    from posflow.simulate.models.bands import check_windows, content_kernels, uniform_kernels
    from posflow.simulate.models.measure import measured_kernels
    from posflow.simulate.models.sinks import sink_aware_kernels, value_norm_kernels
    from posflow.simulate.rollout import influence

    lam = np.asarray(lam, dtype=np.float64)
    ks = measured_kernels(A)
    L, n = lam.size, ks[0].n
    ones = np.ones(L)
    windows = (None,) * L if windows is None else check_windows(windows, L)
    out = {"b": influence(ks, lam), "a": influence(ks, ones)}
    if content is not None:
        kc = content_kernels(n, slopes, content, windows)
        out["c"] = influence(kc, lam)
        out["a_c"] = influence(kc, ones)
    out["uniform"] = influence(uniform_kernels(n, windows), lam)
    if perm is not None:
        out["shuffled"] = influence(ks, lam[np.asarray(perm)])
    if values is not None:
        out["d"] = influence(value_norm_kernels(values), lam)
    out["e"] = influence(sink_aware_kernels(A), lam)
    return out


def null_profiles(measured) -> dict:
    """The two fitted nulls of a measured profile: ``geometric`` and ``linear``, each with the
    measured mean position μ = Σ_j j p̂(j) (clipped to [0, n − 1]).

    Parameters
    ----------
    measured : array_like, shape (n,) or (B, n)
        p̂ (rows summing to 1).

    Returns
    -------
    dict
        ``{"geometric": (…, n), "linear": (…, n), "ratio": r, "slope": s}``
        (:func:`posflow.simulate.nulls.geometric_recency`, ``linear_ramp``, ``ramp_slope``).
    """
    from posflow.simulate.nulls import geometric_recency, linear_ramp, ramp_slope

    measured = np.asarray(measured, dtype=np.float64)
    n = measured.shape[-1]
    mu = np.clip(measured @ np.arange(n), 0.0, n - 1.0)
    geo, ratio = geometric_recency(n, mu)
    return {"geometric": geo, "linear": linear_ramp(n, mu), "ratio": ratio,
            "slope": ramp_slope(n, mu)}  # fmt: skip


def measured_profiles(m, *, content_scale: str = "sqrt_d", seed: int = 0) -> dict:
    """Every profile of one :class:`~posflow.simulate.models.measure.Measurement`, by measure name.

    (a), (b), (c) from :func:`posflow.simulate.models.predict.predict_profiles`, (d) (when value
    norms were measured) and (e) from ``predict_sink_profiles``, then the nulls: geometric and
    linear fitted to the measured mean position, uniform kernels, and (L ≥ 2) λ_t moved by the
    derangement seeded ``[seed, 15]``. The uniform and content kernels are banded to the
    measured ``m.windows`` (:mod:`~posflow.simulate.models.bands`), so n may exceed a window.

    Returns
    -------
    dict
        ``{name: ndarray (n,)}`` in the order above.
    """
    from posflow.simulate.models.bands import uniform_kernels
    from posflow.simulate.models.predict import predict_profiles, predict_sink_profiles
    from posflow.simulate.nulls import derangement
    from posflow.simulate.rollout import influence

    out = predict_profiles(m, content_scale=content_scale)
    out.update(predict_sink_profiles(m))
    fitted = null_profiles(m.influence)
    out["geometric"], out["linear"] = fitted["geometric"], fitted["linear"]
    windows = (None,) * len(m.lambdas) if m.windows is None else m.windows
    out["uniform"] = influence(uniform_kernels(m.n, windows), m.lambdas)
    if m.num_layers >= 2:
        perm = derangement(m.num_layers, [seed, 15])
        out["shuffled"] = influence(m.kernels(), np.asarray(m.lambdas)[perm])
    return out


def _comparison(m, profiles: dict, reps: int, seed: int) -> dict:
    """W1/(n−1), ρ, mean position and shape of each profile against p̂, with 95 % percentile
    bootstrap intervals over sequences (the resampled measured influence, the profile fixed)."""
    from posflow.simulate.models.predict import compare_profiles

    out = compare_profiles(profiles, m.influence)
    if reps:
        boot = m.bootstrap_influence(reps=reps, seed=seed)
        for name, p in profiles.items():
            w = batched_w1(np.broadcast_to(p, boot.shape), boot)
            r = batched_spearman(np.broadcast_to(p, boot.shape), boot)
            out[name]["w1_interval"] = np.percentile(w, [2.5, 97.5]).tolist()
            out[name]["spearman_interval"] = np.nanpercentile(r, [2.5, 97.5]).tolist()
    return out


def run_measure(model, input_ids, *, content_scale="sqrt_d", batch_size=None, progress=False,
                bootstrap=200, seed=0) -> dict:  # fmt: skip
    """Measure ``input_ids`` (N, n) on ``model``, predict every profile and compare (PB15).

    Returns
    -------
    dict
        JSON-ready: sizes, λ_t (mean and std over sequences), slopes, content c, ``comparison``
        {name: {w1, spearman, mean_position, shape, w1_interval, spearman_interval}},
        ``bootstrap`` (reps, seed, level 0.95, over sequences), the per-layer ``sinks`` table,
        ``influence_of_0`` and ``profiles`` {name: list (n,)} with "measured" last.
    """
    from posflow.simulate.models._adapters import adapter_for
    from posflow.simulate.models.measure import measure
    from posflow.simulate.models.sinks import sink_table

    # the arguments that are used only after the (long) measurement are checked before it
    if content_scale not in ("sqrt_d", "raw"):
        raise ValueError(f"content_scale must be 'sqrt_d' or 'raw'; got {content_scale!r}")
    if isinstance(bootstrap, bool) or not isinstance(bootstrap, int | np.integer) or bootstrap < 0:
        raise ValueError(f"bootstrap must be an integer >= 0; got {bootstrap!r}")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0; got {seed!r}")
    blocks = adapter_for(model).blocks(model)
    vn = adapter_for(model).value_source(blocks[0]) is not None
    m = measure(model, input_ids, batch_size=batch_size, progress=progress, value_norms=vn,
                layer_influence=True)  # fmt: skip
    profiles = measured_profiles(m, content_scale=content_scale, seed=seed)
    comparison = _comparison(m, profiles, bootstrap, seed)
    _, c = m.content(content_scale)
    sinks = sink_table(m.attention, m.value_weights, m.layer_influence)
    return {
        "architecture": m.architecture,
        "n": m.n,
        "num_sequences": m.num_sequences,
        "num_layers": m.num_layers,
        "num_heads": m.num_heads,
        "d_head": m.d_head,
        "lambdas": m.lambdas.tolist(),
        "lambdas_std": m.lambdas_std.tolist(),
        "slopes": None if m.slopes is None else m.slopes.tolist(),
        "content_scale": content_scale,
        "content_c": c.tolist(),
        "comparison": comparison,
        "bootstrap": {"reps": bootstrap, "seed": seed, "level": 0.95, "over": "sequences"},
        "sinks": {k: v.tolist() for k, v in sinks.items()},
        "influence_of_0": float(m.influence[0]),
        "profiles": {
            **{k: v.tolist() for k, v in profiles.items()},
            "measured": m.influence.tolist(),
        },
    }
