"""Helpers shared by the claim checks: seeded random causal and ALiBi kernels."""

from __future__ import annotations

import numpy as np

from posflow.simulate.kernels import alibi_kernel, dense_kernel

__all__ = ["random_alibi", "random_causal", "random_layers"]


def random_causal(rng: np.random.Generator, n: int, *, floor: float = 0.0) -> np.ndarray:
    """A random causal row-stochastic matrix (Dirichlet(1) rows), optionally A[i,0] >= floor."""
    A = np.tril(rng.exponential(size=(n, n)))
    A /= A.sum(axis=1, keepdims=True)
    if floor > 0:
        A = (1 - floor) * A
        A[:, 0] += floor
    return A


def random_alibi(
    rng: np.random.Generator,
    n: int,
    *,
    heads: int | None = None,
    slope_max: float = 3.0,
    content_abs: float = 50.0,
):
    """A random ALiBi + content kernel with 1–4 heads (slopes in [0, slope_max])."""
    H = int(rng.integers(1, 5)) if heads is None else heads
    return alibi_kernel(n, rng.uniform(0, slope_max, H), rng.uniform(-content_abs, content_abs, H))


def random_layers(rng: np.random.Generator, n: int, T: int):
    """T random causal kernels (ALiBi+content or dense Dirichlet) and λ ~ U[0, 1]."""
    ks = [
        random_alibi(rng, n) if rng.random() < 0.5 else dense_kernel(random_causal(rng, n))
        for _ in range(T)
    ]
    return ks, rng.uniform(0, 1, T)
