"""Exact mathematics of [B], "Why Do Accumulated Transformations Extrapolate?" (claims AT1–AT17).

A query at position i reads a source at j ≤ i through the transport P_{j→i} = M_j ⋯ M_{i-1}
of per-token orthogonal steps. This module holds the closed forms, bounds and symbolic
derivations the claim checks compare simulations with; it never imports :mod:`simulate`.

Far mass (``_transport_mass``)
    :func:`far_mass_derivation`, :func:`far_mass`, :func:`far_mass_lower_bound`,
    :func:`near_signal_upper_bound`, :func:`far_mass_minimiser` — ρ_D ≥ M/(M + K e^{2λ}) (AT10);
    :func:`alibi_far_mass_derivation`, :func:`alibi_far_mass`, :func:`alibi_far_mass_bound`,
    :func:`alibi_far_mass_ratio_bound` — ALiBi keeps far mass bounded in L (AT13).
Angle laws (``_transport_angles``)
    :func:`angle_characteristic`, :func:`characteristic_value`,
    :func:`log_characteristic_modulus`, :func:`phase_moments`, :func:`log_sinc` (AT1, AT17);
    :func:`rope_phase`, :func:`rope_unwrapped_blocks`, :func:`rope_blocks_outside_training`
    (AT16).
Windows and Householder steps (``_transport_windows``)
    :func:`mixing_window` (AT5), :func:`rope_frequencies`, :func:`block_mixing_windows`,
    :func:`blocks_mixed`, :func:`window_approximation_derivation` (AT6);
    :func:`householder_derivation`, :func:`householder_mean_factor` (AT4).
Concentration (``_transport_tails``)
    :func:`levy_tail`, :func:`sphere_coordinate_tail` (AT7), :func:`hoeffding_tail` (AT8),
    :func:`score_gap_union_bound`, :func:`score_gap_quantile` (AT9).
Value side (``_transport_values``)
    :func:`value_side_derivation`, :func:`value_side_bound`, :func:`value_side_expectation`
    (AT14).

The symbolic derivations return frozen dataclasses of sympy expressions and booleans decided by
sympy (``.summary()`` prints them); they are cached, so a claim check pays for each once.
Statements marked [INF] in papers/B_transport.md are reconstructions, and so are the exact
constants used here (e.g. the Lévy exponent d ε²/2); the docstrings state the assumptions.
"""

from __future__ import annotations

from ._transport_angles import (
    ANGLE_LAWS,
    AngleCharacteristic,
    angle_characteristic,
    characteristic_value,
    log_characteristic_modulus,
    log_sinc,
    phase_moments,
    rope_blocks_outside_training,
    rope_phase,
    rope_unwrapped_blocks,
)
from ._transport_mass import (
    AlibiFarMassDerivation,
    FarMassDerivation,
    alibi_far_mass,
    alibi_far_mass_bound,
    alibi_far_mass_derivation,
    alibi_far_mass_ratio_bound,
    far_mass,
    far_mass_derivation,
    far_mass_lower_bound,
    far_mass_minimiser,
    near_signal_upper_bound,
)
from ._transport_tails import (
    hoeffding_tail,
    levy_tail,
    score_gap_quantile,
    score_gap_union_bound,
    sphere_coordinate_tail,
)
from ._transport_values import (
    ValueSideBound,
    ValueSideDerivation,
    value_side_bound,
    value_side_derivation,
    value_side_expectation,
)
from ._transport_windows import (
    BlockWindows,
    HouseholderDerivation,
    WindowApproximationDerivation,
    block_mixing_windows,
    blocks_mixed,
    householder_derivation,
    householder_mean_factor,
    mixing_window,
    rope_frequencies,
    window_approximation_derivation,
)

__all__ = [
    "ANGLE_LAWS",
    "AlibiFarMassDerivation",
    "AngleCharacteristic",
    "BlockWindows",
    "FarMassDerivation",
    "HouseholderDerivation",
    "ValueSideBound",
    "ValueSideDerivation",
    "WindowApproximationDerivation",
    "alibi_far_mass",
    "alibi_far_mass_bound",
    "alibi_far_mass_derivation",
    "alibi_far_mass_ratio_bound",
    "angle_characteristic",
    "block_mixing_windows",
    "blocks_mixed",
    "characteristic_value",
    "far_mass",
    "far_mass_derivation",
    "far_mass_lower_bound",
    "far_mass_minimiser",
    "hoeffding_tail",
    "householder_derivation",
    "householder_mean_factor",
    "levy_tail",
    "log_characteristic_modulus",
    "log_sinc",
    "mixing_window",
    "near_signal_upper_bound",
    "phase_moments",
    "rope_blocks_outside_training",
    "rope_frequencies",
    "rope_phase",
    "rope_unwrapped_blocks",
    "score_gap_quantile",
    "score_gap_union_bound",
    "sphere_coordinate_tail",
    "value_side_bound",
    "value_side_derivation",
    "value_side_expectation",
    "window_approximation_derivation",
]
