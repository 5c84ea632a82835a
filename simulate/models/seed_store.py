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
  sign test (:func:`sign_test`).

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
    "load_seed_store",
    "log_ratios",
    "paired_differences",
    "run_file",
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
    """Exact two-sided sign-test p-value of H0 P(d > 0) = 1/2 (zeros dropped):
    p = min(1, 2·P(Bin(n, 1/2) ≤ min(n₊, n₋))); 1.0 for an empty sample."""
    d = np.asarray(d, dtype=np.float64)
    d = d[d != 0]
    n = d.size
    if n == 0:
        return 1.0
    k = int(min((d > 0).sum(), (d < 0).sum()))
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2.0**n
    return float(min(1.0, 2 * tail))


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
