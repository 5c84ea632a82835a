"""posflow numerics: attention kernels, residual-aware rollouts, measured real-model data.

Public names are re-exported from the topical modules:

* :mod:`posflow.simulate.kernels` — ``uniform_kernel``, ``alibi_kernel``, ``alibi_kernels``,
  ``dense_kernel``, ``alibi_slopes``, ``is_stochastically_monotone``, ``monotonicity_deficit``;
* :mod:`posflow.simulate.rollout` — ``influence``, ``rollout_matrix``, ``diagonal``, ``constant``,
  ``power_decay``, ``total_mixing``, ``rollout_summary``;
* :mod:`posflow.simulate.measured` — ``models``, ``config``, ``profile`` (five ALiBi LLMs, n = 256);
* :mod:`posflow.simulate.compare` — ``w1``, ``w1_normalised``, ``spearman``, ``mean_position``,
  ``profile_shape``;
* :mod:`posflow.simulate.orthogonal` — step laws (Haar, SO(2) blocks, Householder), ``haar``,
  ``mean_operator_norm``;
* :mod:`posflow.simulate.transport` — route products, scores, masses, mixing windows, value-side
  transport and the stylized single-layer attention of [B];
* :mod:`posflow.simulate.values` — far residuals of value transport of [B] (AT14, AT15:
  ``far_residual_sq``, ``lazy_haar_residual_sq``, …); :mod:`posflow.simulate.identities` — dense
  route-product references and the fast paths' errors against them (AT18; torch schemes:
  :mod:`posflow.simulate.models.scheme_identities`);
* :mod:`posflow.simulate.concentration` — exact laws and bounds of far scores of [B] (AT7–AT9:
  ``cap_lower_bound``, ``balanced_score_tail``, ``max_score_tail``, …; imported when asked for,
  it needs sympy).

``compare``, ``measured``, ``orthogonal`` and ``transport`` are imported with the package (they
need only numpy and scipy); ``posflow.simulate.models`` (measuring and training models) needs torch
and is imported only when asked for.
"""

from posflow.simulate import compare, measured, orthogonal, transport
from posflow.simulate.compare import mean_position, profile_shape, spearman, w1, w1_normalised
from posflow.simulate.kernels import (
    Kernel,
    alibi_kernel,
    alibi_kernels,
    alibi_slopes,
    dense_kernel,
    is_stochastically_monotone,
    monotonicity_deficit,
    uniform_kernel,
)
from posflow.simulate.rollout import (
    constant,
    diagonal,
    influence,
    power_decay,
    rollout_matrix,
    rollout_summary,
    total_mixing,
)

__all__ = [
    "Kernel",
    "alibi_kernel",
    "alibi_kernels",
    "alibi_slopes",
    "compare",
    "constant",
    "dense_kernel",
    "diagonal",
    "influence",
    "is_stochastically_monotone",
    "mean_position",
    "measured",
    "monotonicity_deficit",
    "orthogonal",
    "power_decay",
    "profile_shape",
    "rollout_matrix",
    "rollout_summary",
    "spearman",
    "total_mixing",
    "transport",
    "uniform_kernel",
    "w1",
    "w1_normalised",
]
