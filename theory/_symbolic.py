"""Symbolic causal kernels (claims PB1, PB2, PB9); a leaf module of :mod:`posflow.theory`.

Used by the symbolic rollout (:mod:`posflow.theory.rollout`, which re-exports it) and by the
drift identities (:mod:`posflow.theory._drift`).
"""

from __future__ import annotations

import sympy as sp

from posflow.theory._exact import as_count

__all__ = ["symbolic_kernel"]


def symbolic_kernel(
    n: int, name: str = "a", *, stochastic: bool = False
) -> tuple[sp.Matrix, tuple[sp.Symbol, ...]]:
    """A causal (lower-triangular) n × n kernel with symbolic entries (claims PB1, PB2).

    Entry (i, j), j ≤ i, is the symbol ``{name}_{i}_{j}``; entries above the diagonal are 0.
    With ``stochastic=True`` each diagonal entry is ``1 - Σ_{j<i} A[i, j]`` so that every row
    sums to 1 (row 0 is ``e_0``) and only the strictly lower entries are free.

    Returns
    -------
    A : sympy Matrix, shape (n, n)
    symbols : tuple of the free entry symbols (nonnegative), row by row.
    """
    n = as_count(n, "n")
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"name must be an identifier such as 'a'; got {name!r}")
    A = sp.zeros(n, n)
    free: list[sp.Symbol] = []
    for i in range(n):
        for j in range(i + 1):
            if stochastic and j == i:
                A[i, i] = 1 - sp.Add(*[A[i, k] for k in range(i)])
                continue
            s = sp.Symbol(f"{name}_{i}_{j}", nonnegative=True)
            A[i, j] = s
            free.append(s)
    return A, tuple(free)
