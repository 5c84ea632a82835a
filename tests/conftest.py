"""Shared test settings: Hypothesis profiles (CI runs the default 'ci' profile)."""

import os

# Two pytest-xdist workers on two cores: keep BLAS/OpenMP/torch to one thread each so the
# workers do not oversubscribe the machine (set before numpy or torch is imported).
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=300, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
