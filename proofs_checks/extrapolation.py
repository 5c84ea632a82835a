"""Claims AT1–AT20 of [B], "Why Do Accumulated Transformations Extrapolate?".

Importing this module registers one check per claim (catalog: CLAIMS.md, or ``posflow claims``)
and attaches the AT relaxations of :mod:`posflow.proofs_checks.relaxations_at`. The checks live in
topical modules, each pairing :mod:`posflow.theory.transport` (exact side) with :mod:`simulate`
(numeric side):

=====================================  =====================================================
module                                 claims
=====================================  =====================================================
``extrapolation_mixing``               AT1 characteristic decay, AT2 product means, AT3 Haar
                                       mean, AT4 Householder steps
``extrapolation_windows``              AT5 L-free window, AT6 per-block windows (d_h = 96)
``extrapolation_tails``                AT7 Lévy tail, AT8 the I₀ tail of block-rotated scores,
                                       AT9 the far-score maximum
``extrapolation_scores``               AT10 far-mass lower bound, AT11 logit bound
``extrapolation_far_mass``             AT12 near-signal decay, AT13 ALiBi far mass
``extrapolation_stylized``             AT19 the stylized single-layer comparison
``extrapolation_values``               AT14 value-side incoherence, AT15 M^{-1/2} scaling
``extrapolation_values_drift``         AT16 RoPE has no gap, AT17 zero-mean angles
``extrapolation_identities``           AT18 implementation identities
``extrapolation_trained``              AT20 trained small models extrapolating (saved runs)
=====================================  =====================================================

Shared helpers (tolerances, scheme colours, the cached stylized sweep) are in
:mod:`posflow.proofs_checks.extrapolation_common`. Every check returns
:class:`~posflow.proofs_checks.evidence.Evidence` and registers the mutants it must catch.
"""

from __future__ import annotations

# importing registers the checks and attaches the AT relaxations
from posflow.proofs_checks import (  # noqa: F401
    extrapolation_far_mass,
    extrapolation_identities,
    extrapolation_mixing,
    extrapolation_scores,
    extrapolation_stylized,
    extrapolation_trained,
    extrapolation_values,
    extrapolation_windows,
    relaxations_at,
)

__all__: list[str] = []
