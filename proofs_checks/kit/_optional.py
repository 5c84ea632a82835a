"""torch is optional: the model claims ask for it here and say INCONCLUSIVE without it."""

from __future__ import annotations

from posflow.proofs_checks.kit._evidence import Evidence, undecided

__all__ = ["no_torch", "optional_torch"]


def no_torch() -> Evidence:
    """The evidence of a model claim when torch is not installed (the verdict: INCONCLUSIVE)."""
    return Evidence(
        [undecided("torch", "not installed", "the models run on torch, which is not installed")],
        absent=("torch",),
    )


def optional_torch():
    """The ``torch`` module, or None when it is not installed."""
    try:
        import torch
    except ImportError:
        return None
    return torch
