"""The dense-kernel section of ``benchmarks/limits.py``: build a measured kernel, roll it out.

    python benchmarks/_limits_dense.py      # this section alone, against a triad measured now

:func:`dense_section` times ``influence(dense_kernel(A), λ)`` for a causal row-stochastic A of
n = 2048 and T = 8 layers (λ_t = 0.3): building the kernel (the entry checks and its own copy of
A) and the rollout, best of 5, on the thread count ``_bench`` pins (one). The rate is held
against the STREAM triad's GB/s of the same process.

Byte model, build + T rollout matrix–vector products over n² float64:

    bytes = (2 + T) · 8 n²

- build: A read once and the kernel's copy written once (the checks and the row sums run on
  each row while it is in the L1 cache, posflow.simulate._validate.dense_checked_copy): 2 · 8 n²;
- rollout: each layer's p ↦ (1 − λ) p + λ p A reads A once: T · 8 n²;
- vectors of length n, the write-allocate read of the copy and the page faults of a new
  (n, n) array are not counted (they are why 100 % is out of reach for the build).
"""

from __future__ import annotations

import _bench  # noqa: F401  (first: pins BLAS, OpenMP and numba to one thread)

# isort: split

import os

import numpy as np
from _bench import best_of

from posflow.simulate.kernels import dense_kernel
from posflow.simulate.rollout import constant, influence


def dense_section(triad_gbs: float, *, n: int = 2048, T: int = 8, repeat: int = 5) -> dict:
    """Achieved GB/s of building a dense kernel of n tokens and rolling it out over T layers.

    Parameters
    ----------
    triad_gbs : float
        The STREAM triad's GB/s measured in the same process (the reference).
    n, T, repeat : int
        Tokens, layers and the best-of count (defaults: the section's sizes, 2048, 8, 5).

    Returns
    -------
    dict
        ``{"path", "achieved", "unit", "reference", "percent"}``: achieved = (2 + T)·8 n² bytes
        (module docstring) over the best time, in GB/s; percent = 100 · achieved / triad.
    """
    rng = np.random.default_rng(0)
    A = np.tril(rng.random((n, n)) + 0.01)
    A /= A.sum(axis=1, keepdims=True)
    lam = constant(0.3, T)

    def build_and_roll():
        return influence(dense_kernel(A), lam)

    build_and_roll()  # compile / load the numba code, touch the code paths once
    t, p = best_of(build_and_roll, repeat)
    assert abs(float(p.sum()) - 1.0) < 1e-12
    achieved = (2 + T) * 8.0 * n * n / t / 1e9  # bytes: build 2·8n², rollout T·8n²
    return {
        "path": f"dense_kernel build + influence, n = {n}, T = {T}",
        "achieved": achieved,
        "unit": "GB/s",
        "reference": float(triad_gbs),
        "percent": 100.0 * achieved / float(triad_gbs),
    }


if __name__ == "__main__":
    from limits import triad_gbs

    triad = triad_gbs()
    row = dense_section(triad)
    print(f"triad {triad:.2f} GB/s; {row['path']}: {row['achieved']:.2f} GB/s = "
          f"{row['percent']:.1f} % of triad; load {os.getloadavg()[0]:.2f}")  # fmt: skip
