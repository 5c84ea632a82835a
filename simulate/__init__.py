"""posflow numerics: attention kernels, residual-aware rollouts, measured real-model data.

Public names are re-exported from the topical modules:

* :mod:`simulate.kernels` — ``uniform_kernel``, ``alibi_kernel``, ``dense_kernel``,
  ``alibi_slopes``, ``is_stochastically_monotone``, ``monotonicity_deficit``;
* :mod:`simulate.rollout` — ``influence``, ``rollout_matrix``, ``diagonal``, ``constant``,
  ``power_decay``, ``total_mixing``, ``rollout_summary``;
* :mod:`simulate.measured` — ``models``, ``config``, ``profile`` (five ALiBi LLMs, n = 256).
"""

from simulate.kernels import (
    Kernel,
    alibi_kernel,
    alibi_slopes,
    dense_kernel,
    is_stochastically_monotone,
    monotonicity_deficit,
    uniform_kernel,
)
from simulate.rollout import (
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
    "alibi_slopes",
    "constant",
    "dense_kernel",
    "diagonal",
    "influence",
    "is_stochastically_monotone",
    "monotonicity_deficit",
    "power_decay",
    "rollout_matrix",
    "rollout_summary",
    "total_mixing",
    "uniform_kernel",
]
