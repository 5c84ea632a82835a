"""The named experiments of :mod:`posflow.simulate.sweep`: parameters, checks and one run each.

Every experiment is a pure function of its parameters (random ones take the ``seed``
parameter), computed on the requested array backend and reduced to a flat dict of Python
numbers, so that the same task gives the same row on every worker and every backend.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["EXPERIMENTS", "Experiment"]


@dataclass(frozen=True)
class Experiment:
    """A named experiment: ``params`` maps each parameter to (default, rule).

    A rule is None (any finite number), a tuple of allowed values, or a closed range
    ``(lo, hi)`` given as a list (None: unbounded). ``run(params, backend, device)`` returns the
    results as a dict of Python numbers.
    """

    name: str
    version: int
    claims: str
    description: str
    params: dict
    run: Callable[[dict, str, object], dict]

    def defaults(self) -> dict:
        return {k: v[0] for k, v in self.params.items()}

    def check(self, name: str, value):
        """Return ``value`` converted to the parameter's type, or raise naming the parameter."""
        if name not in self.params:
            raise ValueError(
                f"unknown parameter {name!r} for experiment {self.name!r}; "
                f"known: {', '.join(sorted(self.params))}"
            )
        default, rule = self.params[name]
        where = f"parameter {name!r} of experiment {self.name!r}"
        if isinstance(default, str):
            if not isinstance(value, str):
                raise TypeError(f"{where} must be a string; got {value!r}")
        elif isinstance(default, bool):
            if not isinstance(value, bool):
                raise TypeError(f"{where} must be true or false; got {value!r}")
        elif isinstance(default, int):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise TypeError(f"{where} must be an integer; got {value!r}")
            value = int(value)
        else:
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise TypeError(f"{where} must be a number; got {value!r}")
            value = float(value)
            if not math.isfinite(value):
                raise ValueError(f"{where} must be finite; got {value!r}")
        if isinstance(rule, tuple) and value not in rule:
            raise ValueError(f"{where} must be one of {rule}; got {value!r}")
        if isinstance(rule, list):
            lo, hi = rule
            if (lo is not None and value < lo) or (hi is not None and value > hi):
                if hi is None:
                    raise ValueError(f"{where} must be >= {lo}; got {value!r}")
                if lo is None:
                    raise ValueError(f"{where} must be <= {hi}; got {value!r}")
                raise ValueError(f"{where} must lie in [{lo}, {hi}]; got {value!r}")
        return value


def _np(x) -> np.ndarray:
    from posflow.simulate.backend import to_numpy

    return np.asarray(to_numpy(x), dtype=np.float64)


def _rollout_profile(p: dict, backend: str, device) -> dict:
    from posflow.simulate.kernels import alibi_kernel, alibi_slopes
    from posflow.simulate.rollout import power_decay, rollout_summary

    slopes = alibi_slopes(p["heads"]) * p["slope_scale"]
    K = alibi_kernel(p["n"], slopes, p["content"], backend=backend, device=device)
    s = rollout_summary(K, power_decay(p["lam"], p["beta"], p["T"]))
    prof = _np(s.pop("profile"))
    del s["n"], s["T"]
    n = prof.size
    s["mean_position"] = float(prof @ np.arange(n) / (n - 1)) if n > 1 else 0.0
    s["u_shaped"] = bool(0 < s["argmin"] < n - 1 and s["p_min"] < min(s["p_first"], s["p_last"]))
    return s


def _dichotomy(p: dict, backend: str, device) -> dict:
    from posflow.simulate.kernels import alibi_kernel, uniform_kernel
    from posflow.simulate.rollout import diagonal, influence, power_decay, total_mixing

    n = p["n"]
    if p["kernel"] == "uniform":
        K = uniform_kernel(n, backend=backend, device=device)
    else:
        K = alibi_kernel(n, p["slope"], p["content"], backend=backend, device=device)
    lam = power_decay(p["lam0"], p["beta"], p["T"])
    prof = _np(influence(K, lam))
    tail = float(prof[1:].sum())
    delta = float(np.max(1.0 - _np(K.diagonal())))
    logd = _np(diagonal(K, lam, log=True)) if lam.size else np.zeros(n)
    with np.errstate(divide="ignore"):
        bound = float(np.sum(np.log1p(-lam * delta)))
    return {
        "p_first": float(prof[0]),
        "log_one_minus_p0": math.log(tail) if tail > 0 else -math.inf,
        "log_min_diag": float(logd.min()),
        "log_diag_bound": bound,
        "sum_lambda": float(lam.sum()),
        "sum_lambda_delta": total_mixing(K, lam) if lam.size else 0.0,
    }


def _far_mass(p: dict, backend: str, device) -> dict:
    from posflow.simulate.transport import stylized_attention

    kw = {k: v for k, v in p.items() if k not in ("scheme", "length")}
    res = stylized_attention(
        p["scheme"], p["length"], backend=backend, device=device, host=True, **kw
    )
    return res.summary()


_SCHEMES = ("rope", "random_qk", "random_qkv", "learned", "learned_qkv", "alibi", "accum_alibi")

EXPERIMENTS = {
    e.name: e
    for e in (
        Experiment(
            "rollout_profile",
            1,
            "PB9, PB10, PB11",
            "influence profile statistics of an ALiBi + content rollout, λ_t = lam/(t+1)^beta",
            {
                "n": (256, [1, None]),
                "T": (32, [0, None]),
                "lam": (0.5, [0.0, 1.0]),
                "beta": (0.0, [0.0, None]),
                "heads": (8, [1, None]),
                "slope_scale": (1.0, [0.0, None]),
                "content": (0.0, None),
            },
            _rollout_profile,
        ),
        Experiment(
            "dichotomy",
            1,
            "PB4, PB5, PB6",
            "collapse onto token 0 vs depth for λ_t = lam0/(t+1)^beta (collapse ⇔ Σλ_t = ∞)",
            {
                "kernel": ("uniform", ("uniform", "alibi")),
                "n": (64, [1, None]),
                "T": (1000, [0, None]),
                "lam0": (0.5, [0.0, 1.0]),
                "beta": (1.0, [0.0, None]),
                "slope": (0.5, [0.0, None]),
                "content": (0.0, None),
            },
            _dichotomy,
        ),
        Experiment(
            "far_mass",
            1,
            "AT12, AT13, AT19",
            "far attention mass of [B]'s stylized single layer vs context length",
            {
                "scheme": ("random_qk", _SCHEMES),
                "length": (4096, [2, None]),
                "d": (96, [2, None]),
                "window": (64, [2, None]),
                "near_distance": (4, [1, None]),
                "logit_scale": (8.0, [0.0, None]),
                "alibi_slope": (2.0**-4, [0.0, None]),
                "n_trials": (4, [1, None]),
                "seed": (0, [0, None]),
            },
            _far_mass,
        ),
    )
}
