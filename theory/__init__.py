"""Exact mathematics of posflow (sympy): closed forms, drifts, bounds and limits.

Modules
-------
rollout
    Residual-aware attention rollout (paper [A]): symbolic R and P, the diagonal identity and
    its bound chain, drift terms of the four forces, the Hausdorff closed form of the
    uniform-kernel rollout and its n → ∞ limit law, summability of λ schedules (collapse), the
    continuous-depth limit of the uniform-kernel profile (PB18).
transport
    Accumulated transformations (paper [B]): far mass and its bounds, angle laws and their
    characteristic functions, mixing windows, Householder steps, concentration tails and the
    score gap, the value side (AT1–AT17).

``theory`` never imports ``simulate`` or ``proofs_checks``.
"""

from posflow.theory import rollout, transport

__all__ = ["rollout", "transport"]
