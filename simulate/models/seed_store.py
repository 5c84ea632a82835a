"""The multi-seed extrapolation store and its statistics, read without torch (claim AT20).

A store (written by :func:`posflow.simulate.models.extrapolate_seeds.run_seeds`) is a folder
with ``meta.json`` and one ``<scheme>__s<seed>.json`` per finished (scheme, seed) run holding
``nats``: the per-window mean NLL ℓ̄_w(L) (shape (W, lengths), nested prefixes of the same W
windows for every run). From it:

* the log-ratio of a run at length L, a paired difference over the same windows,

  .. math:: \\ell_{s,k}(L) = \\ln\\frac{\\mathrm{PPL}_{s,k}(L)}{\\mathrm{PPL}_{s,k}(L_0)}
            = \\frac1W\\sum_w \\bar\\ell_w(L) - \\frac1W\\sum_w \\bar\\ell_w(L_0)

  (L_0 = the training length, k the seed) — :func:`log_ratios`;
* across seeds: the mean and a Student-t interval
  m ± t_{1−α/2, n−1}·s/√n (:func:`t_interval`), and a percentile bootstrap over windows that
  resamples the same windows for every seed and both lengths (:func:`window_bootstrap`);
* paired comparisons of two schemes across seeds: d_k = ℓ_{A,k} − ℓ_{B,k} over the seeds both
  have (:func:`paired_differences`), with the t interval of the mean of d and an exact two-sided
  sign test (:func:`sign_test`), gathered for one comparison against a bound by
  :func:`comparison_statistics`;
* the summary AT20 reads: every scheme's seed-mean ratio at every length with both intervals
  (:func:`ratio_summary`), seed means of PPL and of the ratio (:func:`seed_mean_ppl`,
  :func:`seed_mean_ratio`), and the same ratios recomputed from the raw run files
  (:func:`raw_ratio_error`).

:data:`COMMITTED_STORE` is the committed CPU run (package data
``posflow/simulate/data/extrapolation_v2``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

__all__ = [
    "COMMITTED_STORE",
    "FORMAT",
    "VERSION",
    "SeedStore",
    "comparison_statistics",
    "load_seed_store",
    "log_ratios",
    "paired_differences",
    "paired_log_ratios",
    "ratio_summary",
    "raw_ratio_error",
    "run_file",
    "seed_mean_ppl",
    "seed_mean_ratio",
    "sign_test",
    "t_interval",
    "window_bootstrap",
]

FORMAT = "posflow-extrapolation-seeds"
VERSION = 1
COMMITTED_STORE = resources.files("posflow.simulate") / "data" / "extrapolation_v2"


def run_file(scheme: str, seed: int) -> str:
    """The file name of run (scheme, seed): ``<scheme>__s<seed>.json``."""
    return f"{scheme}__s{int(seed)}.json"


@dataclass
class SeedStore:
    """``meta`` (dict) and ``runs`` {(scheme, seed): {"nats": (W, lengths) array, …}}."""

    meta: dict
    runs: dict

    @property
    def lengths(self) -> list[int]:
        return [int(x) for x in self.meta["eval_lengths"]]

    @property
    def train_len(self) -> int:
        return int(self.meta["config"]["train_len"])

    @property
    def schemes(self) -> list[str]:
        return sorted({s for s, _ in self.runs})

    def seeds(self, scheme: str) -> list[int]:
        return sorted(k for s, k in self.runs if s == scheme)

    def nats(self, scheme: str, seed: int) -> np.ndarray:
        return self.runs[scheme, seed]["nats"]

    def ppl(self, scheme: str, seed: int) -> np.ndarray:
        """PPL at every length: exp of the mean over windows of ℓ̄_w(L), shape (lengths,)."""
        return np.exp(self.nats(scheme, seed).mean(0))


def load_seed_store(store=COMMITTED_STORE) -> SeedStore | None:
    """The store at ``store`` (path or traversable), or None when it has no ``meta.json``.

    Raises ValueError naming a run file that is not a result of this format, or whose nats
    do not have shape (windows, lengths) of the meta.
    """
    if isinstance(store, str):
        store = Path(store)
    if not store.is_dir() or not store.joinpath("meta.json").is_file():
        return None
    meta = json.loads(store.joinpath("meta.json").read_text(encoding="utf-8"))
    if meta.get("format") != FORMAT:
        raise ValueError(f"{str(store)!r}: meta.json is not a {FORMAT!r} store")
    shape = (int(meta["windows"]), len(meta["eval_lengths"]))
    runs = {}
    for p in sorted(store.iterdir(), key=lambda q: q.name):
        if not p.name.endswith(".json") or p.name == "meta.json":
            continue
        try:
            blob = json.loads(p.read_text(encoding="utf-8"))
            nats = np.asarray(blob["nats"], dtype=np.float64)
            key = (str(blob["scheme"]), int(blob["seed"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"store file {p.name!r} in {str(store)!r} is not a run") from exc
        if nats.shape != shape or not np.isfinite(nats).all():
            raise ValueError(f"store file {p.name!r}: nats must be finite of shape {shape}")
        blob["nats"] = nats
        runs[key] = blob
    return SeedStore(meta, runs)


def log_ratios(st: SeedStore, scheme: str, length: int) -> dict:
    """{seed: ln PPL(length) − ln PPL(L_train)} of ``scheme`` (mean nats over windows)."""
    j, j0 = st.lengths.index(length), st.lengths.index(st.train_len)
    return {
        k: float(st.nats(scheme, k)[:, j].mean() - st.nats(scheme, k)[:, j0].mean())
        for k in st.seeds(scheme)
    }


def paired_differences(a: dict, b: dict) -> np.ndarray:
    """d_k = a[k] − b[k] over the seeds k that both dicts have, in seed order."""
    common = sorted(set(a) & set(b))
    return np.array([a[k] - b[k] for k in common], dtype=np.float64)


def t_interval(x, alpha: float) -> tuple[float, float, float]:
    """(mean, lower, upper): m ± t_{1−α/2, n−1}·s/√n of the sample ``x`` (n ≥ 2).

    Raises ValueError for fewer than 2 values or α outside (0, 1).
    """
    x = np.asarray(x, dtype=np.float64)
    if x.size < 2:
        raise ValueError(f"x needs at least 2 values for an interval; got {x.size}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1); got {alpha!r}")
    from scipy.stats import t

    m = float(x.mean())
    h = float(t.ppf(1 - alpha / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))
    return m, m - h, m + h


def sign_test(d) -> float:
    """Exact two-sided sign-test p-value of H0 P(d > 0) = 1/2 (zeros dropped), by
    ``scipy.stats.binomtest``: p = min(1, 2·P(Bin(n, 1/2) ≤ min(n₊, n₋))) for the symmetric
    binomial; 1.0 for an empty sample."""
    from scipy.stats import binomtest

    d = np.asarray(d, dtype=np.float64)
    d = d[d != 0]
    if d.size == 0:
        return 1.0
    return float(binomtest(int((d > 0).sum()), d.size, 0.5).pvalue)


def window_bootstrap(
    st: SeedStore, scheme: str, length: int, *, reps: int = 2000, alpha: float = 0.05, seed: int = 0
) -> tuple[float, float]:
    """Percentile interval of the seed-mean ratio PPL(L)/PPL(L_train) of ``scheme`` under
    resampling the W windows with replacement (the same resample for every seed and both
    lengths: the windows are shared)."""
    seeds = st.seeds(scheme)
    j, j0 = st.lengths.index(length), st.lengths.index(st.train_len)
    d = np.stack([st.nats(scheme, k)[:, j] - st.nats(scheme, k)[:, j0] for k in seeds])  # (n, W)
    W = d.shape[1]
    idx = np.random.default_rng(seed).integers(0, W, size=(reps, W))
    stat = np.exp(d[:, idx].mean(axis=(0, 2)))  # (reps,)
    lo, hi = np.quantile(stat, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


def paired_log_ratios(st: SeedStore, a: str, b: str, length: int) -> dict:
    """{seed: ℓ_{a,k}(length) − ℓ_{b,k}(length)} over the seeds both schemes have, in seed order
    (:func:`log_ratios` paired by :func:`paired_differences`); {} when a scheme is missing."""
    x = log_ratios(st, a, length) if a in st.schemes else {}
    y = log_ratios(st, b, length) if b in st.schemes else {}
    ks = sorted(set(x) & set(y))
    return dict(zip(ks, paired_differences(x, y).tolist(), strict=True))


def comparison_statistics(values: dict, bound: float, alpha: float) -> dict:
    """The statistics of one comparison of the seed values ``values`` {seed: x} with ``bound``.

    Returns ``{"n", "mean", "lo", "hi", "p_sign"}``: n values (in seed order), their mean, the
    :func:`t_interval` at level 1 − ``alpha`` (NaN ends with fewer than 2 values) and the
    :func:`sign_test` p-value of x − bound (NaN mean and p for no values).
    """
    x = np.array([values[k] for k in sorted(values)])
    out = {"n": len(values), "mean": math.nan, "lo": math.nan, "hi": math.nan,
           "p_sign": math.nan}  # fmt: skip
    if x.size:
        out["mean"] = float(x.mean())
        out["p_sign"] = sign_test(x - bound)
    if x.size >= 2:
        out["mean"], out["lo"], out["hi"] = t_interval(x, alpha)
    return out


def seed_mean_ppl(st: SeedStore, scheme: str, length: int) -> float:
    """The mean over ``scheme``'s seeds of PPL(``length``) (:meth:`SeedStore.ppl`)."""
    j = st.lengths.index(length)
    return float(np.mean([st.ppl(scheme, k)[j] for k in st.seeds(scheme)]))


def seed_mean_ratio(st: SeedStore, scheme: str, length: int) -> float:
    """exp(seed mean of ℓ_s(``length``)): the seed-mean ratio PPL(L)/PPL(L_train)."""
    return math.exp(float(np.mean(list(log_ratios(st, scheme, length).values()))))


def ratio_summary(st: SeedStore, alpha: float = 0.05) -> dict:
    """{scheme: {L: {"ratio", "lo", "hi", "boot_lo", "boot_hi", "ppl", "seeds"}}} (claim AT20).

    ``ratio`` = exp(seed mean of ℓ_s(L)); (lo, hi) its t interval over seeds (level 1 − α, no
    multiplicity correction; NaN with one seed); (boot_lo, boot_hi) the percentile bootstrap over
    windows (:func:`window_bootstrap`, 1000 resamples); ``ppl`` the seed mean of PPL(L)
    (:func:`seed_mean_ppl`); ``seeds`` the number of seeds.
    """
    out = {}
    for s in st.schemes:
        seeds = st.seeds(s)
        d = {}
        for L in st.lengths:
            lr = np.array(list(log_ratios(st, s, L).values()))
            if lr.size >= 2:
                m, lo, hi = t_interval(lr, alpha)
            else:
                m, lo, hi = float(lr.mean()), math.nan, math.nan
            blo, bhi = window_bootstrap(st, s, L, alpha=alpha, reps=1000)
            d[L] = {"ratio": math.exp(m), "lo": math.exp(lo), "hi": math.exp(hi),
                    "boot_lo": blo, "boot_hi": bhi, "ppl": seed_mean_ppl(st, s, L),
                    "seeds": len(seeds)}  # fmt: skip
        out[s] = d
    return out


def raw_ratio_error(store, st: SeedStore, summary: dict) -> float:
    """max over (scheme, L) of |summary ratio / exp(seed mean of Δ mean nats) − 1|, the latter
    read directly from the run files of ``store`` (a folder path or traversable) with plain
    Python sums, independently of :class:`SeedStore`; ``summary`` as :func:`ratio_summary`."""
    if isinstance(store, str):
        store = Path(store)
    worst = 0.0
    for s, d in summary.items():
        raw = [json.loads(store.joinpath(run_file(s, k)).read_text(encoding="utf-8"))
               for k in st.seeds(s)]  # fmt: skip
        for L, cell in d.items():
            vals = []
            for blob in raw:
                ls = blob["eval_lengths"]
                col = [row[ls.index(L)] for row in blob["nats"]]
                col0 = [row[ls.index(blob["train_len"])] for row in blob["nats"]]
                vals.append(sum(col) / len(col) - sum(col0) / len(col0))
            worst = max(worst, abs(cell["ratio"] / math.exp(sum(vals) / len(vals)) - 1))
    return worst
