"""Breaks shared by several claims: factories for :func:`posflow.proofs_checks.kit.add_mutant`.

Each factory returns ``make(original) -> replacement``; the targets they are meant for are
named in their docstrings. Claim modules register them for the claims that must catch them.
"""

from __future__ import annotations

import functools

__all__ = [
    "CHAIN",
    "DENSE_APPLY",
    "RESIDUAL_STEP",
    "STYLIZED",
    "STYLIZED_INPUTS",
    "SUMMABILITY_TEST",
    "U_TEST",
    "constant_result",
    "leaky_residual_step",
    "loose_is_u",
    "negated_result",
    "reversed_layer_order",
    "scaled_argument",
    "scaled_keyword",
    "scaled_result",
    "swapped_residual_weights",
    "transposed_dense_apply",
]

CHAIN = "posflow.simulate.rollout:_chain"
RESIDUAL_STEP = "posflow.simulate._kernel:Kernel._residual_step"
DENSE_APPLY = "posflow.simulate.kernels:DenseKernel._apply"
STYLIZED = "posflow.simulate._stylized:stylized_attention"
STYLIZED_INPUTS = "posflow.simulate._stylized:_draw_inputs"
SUMMABILITY_TEST = "posflow.theory._summability:_decide_positive"
U_TEST = "posflow.proofs_checks.kit._u_test:is_u"


def reversed_layer_order():
    """For :data:`CHAIN`: multiply the layers in the wrong order, R_0 ⋯ R_{T−1}."""

    def make(original):
        @functools.wraps(original)
        def chain(ks, lam, rows):
            return original(list(ks)[::-1], lam[::-1], rows)

        return chain

    return make


def leaky_residual_step(leak: float = 1e-6):
    """For :data:`RESIDUAL_STEP`: the attention branch loses a fraction ``leak`` of its mass,
    (1 − λ) p + λ (1 − leak) p A."""

    def make(original):
        @functools.wraps(original)
        def step(self, p, lam):
            return (1.0 - lam) * p + lam * (1.0 - leak) * self._apply(p)

        return step

    return make


def scaled_result(factor: float):
    """Any routine returning an array or number: its result times ``factor``."""

    def make(original):
        @functools.wraps(original)
        def scaled(*args, **kwargs):
            return original(*args, **kwargs) * factor

        return scaled

    return make


def scaled_argument(index: int, factor: float, name: str | None = None):
    """Any routine: positional argument ``index`` (or keyword ``name``) times ``factor``."""

    def make(original):
        @functools.wraps(original)
        def scaled(*args, **kwargs):
            if name is not None and name in kwargs:
                kwargs[name] = kwargs[name] * factor
            elif len(args) > index:
                args = (*args[:index], args[index] * factor, *args[index + 1 :])
            return original(*args, **kwargs)

        return scaled

    return make


def scaled_keyword(name: str, factor: float, default: float):
    """Any routine with keyword ``name`` (default ``default``): that keyword times ``factor``,
    passed as a keyword (e.g. a slip in one default of a simulator)."""

    def make(original):
        @functools.wraps(original)
        def changed(*args, **kwargs):
            kwargs[name] = kwargs.get(name, default) * factor
            return original(*args, **kwargs)

        return changed

    return make


def constant_result(value):
    """Any routine: ignore the inputs and return ``value`` (a detector that returns 0)."""

    def make(original):
        @functools.wraps(original)
        def constant(*args, **kwargs):
            return value

        return constant

    return make


def transposed_dense_apply(original):
    """For :data:`DENSE_APPLY`: a dense (measured) kernel applied as p Aᵀ instead of p A."""

    @functools.wraps(original)
    def apply_transposed(self, p):
        return p @ self._A.T

    return apply_transposed


def swapped_residual_weights(original):
    """For :data:`RESIDUAL_STEP`: λ read as the residual weight, λ p + (1 − λ) p A."""

    @functools.wraps(original)
    def step(self, p, lam):
        return lam * p + (1.0 - lam) * self._apply(p)

    return step


def negated_result(original):
    """Any test returning True / False / None (undecided): True and False swapped."""

    @functools.wraps(original)
    def decide(*args, **kwargs):
        v = original(*args, **kwargs)
        return None if v is None else not v

    return decide


def loose_is_u(original):
    """For :data:`U_TEST`: ``or`` for ``and`` — the argmin away from the ends OR a deep enough
    dip (PB11 and PB14: their flat / shallow-dip / end-dip controls must catch it)."""
    from posflow.proofs_checks.kit._u_test import U_END_MARGIN, U_MIN_DEPTH, valley

    @functools.wraps(original)
    def is_u_loose(p, depth=U_MIN_DEPTH, margin=U_END_MARGIN):
        _, d, away = valley(p, margin)
        return away or d >= depth

    return is_u_loose
