"""Which rollout kernel predicts a measured model? A grouped measurement with jackknife intervals.

Issue 13 (items 2–4), claims PB15 and PB17. At sequence lengths where per-sequence attention
matrices do not fit (SmolLM2-135M at n = 1024: 30 layers × n² float64 = 240 MB per sequence),
the N sequences are split into G equal groups measured one group at a time
(:func:`posflow.simulate.models.measure.measure`); each group keeps its head-averaged mean
attention A_g (L, n, n), value-norm weights V_g (L, n, n), content c_g (L, H) and its sequences'
λ and gradient influence. Every statistic θ — a profile's W1/(n − 1) or Spearman ρ against the
measured influence, a per-layer sink share, λ_t — is a function of the pooled group means, so
the delete-one-group jackknife resamples kernels, λ, content and influence together:

.. math::
    \\widehat{\\mathrm{se}}^2 = \\frac{G-1}{G}\\sum_{g=1}^{G} (\\theta_{(-g)} - \\bar\\theta)^2,
    \\qquad \\theta \\pm t_{G-1,\\,1-\\alpha/2}\\, \\widehat{\\mathrm{se}}

(groups are independent and identically distributed because the windows are drawn at random).
The profiles, all :math:`p = e_{n-1}^\\top R_{L-1} \\cdots R_0`,
:math:`R_t = (1-\\lambda_t) I + \\lambda_t K_t`:

* (a) attention-only (λ ≡ 1, K = A), (b) residual-aware (K = A), (c) [A]'s content kernels
  (ALiBi slopes, zero for RoPE, plus the measured diagonal content), (d) value-norm kernels,
  (e) the sink-aware kernels of :mod:`posflow.simulate.models.sinks`;
* nulls (:mod:`posflow.simulate.nulls`): geometric recency and a linear ramp fitted to the
  measured mean position, measured λ through uniform kernels, λ moved to other layers.

The uniform and content kernels are banded to the layers' sliding windows
(``GroupedStudy.windows``, from the measurements; :mod:`posflow.simulate.models.bands`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from posflow.simulate.models.profiles import LABELS, NAMES, NULLS

__all__ = [
    "BOS",
    "PREDICT_NAMES",
    "PROFILES",
    "STORES",
    "GroupedStudy",
    "best_profile",
    "measure_groups",
    "stored_study",
    "study_summary",
]

# the study's profiles and their labels (posflow.simulate.models.profiles, without a_c)
PROFILES = {k: LABELS[k] for k in ("a", "b", "c", "d", "e", *NULLS)}


@dataclass
class GroupedStudy:
    """G groups of sequences of one model at one length n (see the module docstring).

    Attributes are lists over groups: ``attention`` and ``value_weights`` (L, n, n) group means,
    ``content`` (L, H), ``lambdas`` (N_g, L), ``influence`` (N_g, n) raw ‖∂p*/∂e_j‖,
    ``layer_influence`` (L, n) rows summing to 1; ``slopes`` (H,) (zeros without ALiBi);
    ``windows`` (L,) the keys a query of each layer sees (``Measurement.windows``; None: every
    layer global), which band the uniform and content kernels.
    """

    n: int
    slopes: np.ndarray
    attention: list = field(default_factory=list)
    value_weights: list = field(default_factory=list)
    content: list = field(default_factory=list)
    lambdas: list = field(default_factory=list)
    influence: list = field(default_factory=list)
    layer_influence: list = field(default_factory=list)
    perm: np.ndarray | None = None
    windows: tuple | None = None

    @property
    def groups(self) -> int:
        return len(self.attention)

    @property
    def num_sequences(self) -> int:
        return int(sum(x.shape[0] for x in self.lambdas))

    def pooled(self, keep) -> dict:
        """Means over the groups ``keep`` (equal sizes: the mean of group means)."""
        keep = list(keep)

        def mean(xs):
            return sum(xs[g] for g in keep) / len(keep)

        lam = np.concatenate([self.lambdas[g] for g in keep]).mean(axis=0)
        g = np.concatenate([self.influence[g] for g in keep]).mean(axis=0)
        return {
            "A": mean(self.attention),
            "V": mean(self.value_weights),
            "c": mean(self.content),
            "lambdas": np.clip(lam, 0.0, 1.0),
            "measured": g / g.sum(),
            "layer_influence": mean(self.layer_influence),
        }


def measure_groups(model, ids, groups: int, *, seed: int = 0, progress=None) -> GroupedStudy:
    """Measure ``ids`` (N, n) in ``groups`` equal groups (N divisible by G), one at a time.

    Each group runs ``measure(model, ids_g, value_norms=True, layer_influence=True)`` (eager
    attention needed); only its head-averaged summaries are kept, so memory is the model's own
    plus 2·L·H·n² float64 accumulators for one group and 2·G·L·n² for the kept means.
    ``progress(done, total)`` is called after each group.
    """
    from posflow.simulate.models.measure import measure
    from posflow.simulate.nulls import derangement

    ids = np.asarray(ids)
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 2:
        raise ValueError(
            f"groups must be an integer >= 2 (the jackknife needs two); got {groups!r}"
        )
    if ids.ndim != 2 or ids.shape[0] % groups:
        raise ValueError(
            f"ids must have shape (N, n) with N divisible by groups = {groups}; got {ids.shape}"
        )
    size = ids.shape[0] // groups
    st = None
    for g in range(groups):
        m = measure(
            model,
            ids[g * size : (g + 1) * size],
            value_norms=True,
            layer_influence=True,
            heads=False,
            qk="summary",
        )
        if st is None:
            slopes = np.zeros(m.num_heads) if m.slopes is None else np.asarray(m.slopes, float)
            st = GroupedStudy(
                m.n,
                slopes,
                perm=derangement(m.num_layers, [seed, 13]),
                windows=None if m.windows is None else tuple(m.windows),
            )
        st.attention.append(m.attention.mean(axis=1))
        st.value_weights.append(m.value_weights)
        st.content.append(m.content("sqrt_d")[1])
        st.lambdas.append(m.lambda_per_sequence)
        st.influence.append(m.influence_per_sequence)
        st.layer_influence.append(m.layer_influence)
        del m
        if progress is not None:
            progress(g + 1, groups)
    return st


def _profiles(st: GroupedStudy, P: dict) -> dict:
    """The study's nine profiles of the pooled means ``P`` (:mod:`~posflow.simulate.models.
    profiles`: the library rollouts and the fitted nulls)."""
    from posflow.simulate.models.profiles import null_profiles, rollout_profiles

    got = rollout_profiles(P["A"], P["lambdas"], values=P["V"], content=P["c"],
                           slopes=st.slopes, perm=st.perm, windows=st.windows)  # fmt: skip
    got.update(null_profiles(P["measured"]))
    return {k: got[k] for k in PROFILES}


def _statistics(st: GroupedStudy, keep) -> tuple[dict, dict]:
    """Every scalar statistic of the pooled groups ``keep``, and the profiles themselves."""
    from posflow.simulate.compare import spearman, w1_normalised
    from posflow.simulate.models.sinks import sink_table

    P = st.pooled(keep)
    prof = _profiles(st, P)
    out = {}
    for k, p in prof.items():
        out[f"w1.{k}"] = w1_normalised(p, P["measured"])
        out[f"spearman.{k}"] = spearman(p, P["measured"])
        out[f"first.{k}"] = float(p[0] / p.sum())
    out["first.measured"] = float(P["measured"][0])
    out["mean_position.measured"] = float(P["measured"] @ np.arange(st.n))
    sinks = sink_table(P["A"], P["V"], P["layer_influence"])
    for name, v in sinks.items():
        for t, x in enumerate(v):
            out[f"sink.{name}.{t}"] = float(x)
    for t, x in enumerate(P["lambdas"]):
        out[f"lambda.{t}"] = float(x)
    prof["measured"] = P["measured"]
    return out, prof


def study_summary(st: GroupedStudy, confidence: float = 0.95) -> dict:
    """Jackknife estimates and intervals of every statistic, the profiles, and the ranking.

    Returns a JSON-ready dict: ``n``, ``sequences``, ``groups``, ``confidence``,
    ``stats`` {key: [estimate, se, lo, hi]}, ``profiles`` {name: list (n,)} (full sample),
    ``best`` (the profile of least W1 among (a)–(e)), ``differences`` {name: [W1(x) − W1(best),
    se, lo, hi]}, ``lambdas`` / ``sinks`` tables and ``published``: [A]'s comparison at α = 1
    with its replicates (:meth:`posflow.simulate.models.published.Published.summary`).
    Intervals are t intervals with G − 1 degrees of freedom (see the module docstring).
    """
    from scipy.stats import t as student_t

    G = st.groups
    full, prof = _statistics(st, range(G))
    loo = [_statistics(st, [h for h in range(G) if h != g])[0] for g in range(G)]
    q = float(student_t.ppf(0.5 + confidence / 2, G - 1))

    def jack(values):
        v = np.asarray(values, dtype=np.float64)
        return float(np.sqrt((G - 1) / G * ((v - v.mean()) ** 2).sum()))

    stats = {}
    for k, est in full.items():
        se = jack([r[k] for r in loo])
        stats[k] = [est, se, est - q * se, est + q * se]
    best = min("abcde", key=lambda k: full[f"w1.{k}"])
    diffs = {}
    for k in PROFILES:
        d_full = full[f"w1.{k}"] - full[f"w1.{best}"]
        se = jack([r[f"w1.{k}"] - r[f"w1.{best}"] for r in loo])
        diffs[k] = [d_full, se, d_full - q * se, d_full + q * se]
    L = len([k for k in full if k.startswith("lambda.")])
    return {
        "n": st.n,
        "sequences": st.num_sequences,
        "groups": G,
        "confidence": confidence,
        "t_quantile": q,
        "stats": stats,
        "profiles": {k: [float(x) for x in v] for k, v in prof.items()},
        "best": best,
        "differences": diffs,
        "layers": L,
        "shuffle": [int(x) for x in st.perm],
        "published": _published(st),
    }


def _published(st: GroupedStudy) -> dict:
    """[A]'s comparison at α = 1 with its delete-one-group replicates (claim PB15 judges it at
    its own level; :mod:`posflow.simulate.models.published`)."""
    from posflow.simulate.models.crossfit import Windows
    from posflow.simulate.models.published import published_comparison

    return published_comparison(Windows.of_groups(st)).summary()


# ----------------------------------------------------------------------------------------------
# the stored study (package data written by docs/smollm2_study.py)

# one stored study per model (package data); a window convention other than the model's own (the
# ``--bos`` of docs/smollm2_study.py) is stored beside it with that convention in its name
STORES = {"smollm2-135m": "data/smollm2/study.json", "gemma3-270m": "data/gemma3/study.json"}
STORE = STORES["smollm2-135m"]
# the window convention of each model's own tokenizer: Gemma's adds <bos>, SmolLM2's adds none
BOS = {"smollm2-135m": "none", "gemma3-270m": "prepend"}
# study keys -> the names of posflow.simulate.models.predict
PREDICT_NAMES = {k: NAMES[k] for k in "abcde"}


def stored_study(model: str = "smollm2-135m", bos: str | None = None) -> dict | None:
    """The committed study of ``model`` (``{"setup": …, "runs": {n: summary}}``), or None.

    ``bos``: the window convention ("prepend": each window starts with the tokenizer's <bos>;
    "none": windows cut from the token stream); None is the model's own (:data:`BOS`)."""
    import json
    from importlib import resources

    if model not in STORES:
        raise ValueError(f"model must be one of {', '.join(STORES)}; got {model!r}")
    if bos not in (None, "prepend", "none"):
        raise ValueError(f"bos must be None, 'prepend' or 'none'; got {bos!r}")
    path = STORES[model]
    if bos is not None and bos != BOS[model]:
        path = path.replace(".json", f"_bos-{bos}.json")
    f = resources.files("posflow.simulate").joinpath(path)
    if not f.is_file():
        return None
    return json.loads(f.read_text())


def best_profile(store: dict) -> tuple[str, dict]:
    """The profile among (a)–(e) of least W1/(n − 1) averaged over the stored lengths, and the
    averages ``{key: mean W1}`` (PB17 judges its retrieval curve against this one)."""
    runs = store.get("runs", {}) if isinstance(store, dict) else {}
    if not runs:
        raise ValueError("store must hold at least one run (docs/smollm2_study.py writes them)")
    mean = {k: float(np.mean([r["stats"][f"w1.{k}"][0] for r in runs.values()])) for k in "abcde"}
    return min(mean, key=mean.get), mean
