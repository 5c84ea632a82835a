"""Exact mathematics of posflow (sympy): closed forms, drifts, bounds and limits.

Modules
-------
rollout
    Residual-aware attention rollout (paper [A]): symbolic R and P, the diagonal identity and
    its bound chain, drift terms of the four forces, the Hausdorff closed form of the
    uniform-kernel rollout and its n → ∞ limit law, summability of λ schedules (collapse).

``theory`` never imports ``simulate`` or ``proofs_checks``.
"""

from posflow.theory import rollout, transport

__all__ = ["rollout", "transport"]
