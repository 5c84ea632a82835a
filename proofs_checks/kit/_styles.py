"""Colours and labels that every figure shares: one colour per attention scheme.

Okabe–Ito colours (colour-blind safe); the same scheme has the same colour in every figure of
[B]'s claims (AT12, AT13, AT19, AT20).
"""

from __future__ import annotations

__all__ = ["PALETTE", "SCHEME_COLORS", "SCHEME_LABELS"]

# the Okabe–Ito colours in a fixed order, for families of curves indexed by a parameter (λ, β)
PALETTE = ("#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7",
           "#000000")  # fmt: skip

SCHEME_COLORS = {
    "rope": "#D55E00",
    "random_qk": "#0072B2",
    "random_qkv": "#009E73",
    "learned": "#E69F00",
    "learned_qkv": "#56B4E9",
    "alibi": "#CC79A7",
    "accum_alibi": "#000000",
}
SCHEME_LABELS = {
    "rope": "RoPE",
    "random_qk": "random Q/K",
    "random_qkv": "random Q/K/V",
    "learned": "learned Q/K",
    "learned_qkv": "learned Q/K/V",
    "alibi": "ALiBi",
    "accum_alibi": "random Q/K + ALiBi",
}
