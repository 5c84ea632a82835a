"""Claim AT19 of [B], continued: the figure and the tables of the stylized comparison (split from
:mod:`posflow.proofs_checks.claims.at19_stylized` for size; built from the check's numbers), and
the value_blocks table of predictions by where the value content lives."""

from __future__ import annotations

import math

import numpy as np

from posflow.proofs_checks.kit import (
    SCHEME_COLORS,
    SCHEME_LABELS,
    Figure,
    Panel,
    Series,
    Table,
    mean_se,
)
from posflow.simulate.transport import PLANTED, near_mass_reference, value_ratio_reference
from posflow.theory import transport as th

__all__ = ["figure_at19", "tables_at19", "value_blocks"]

D, BASE, LAM, W = PLANTED.d, PLANTED.base, PLANTED.logit_scale, PLANTED.window
NEAR = PLANTED.near_distance


def figure_at19(sw: dict, Ls: list, rows: list, blk: list, seed: int, tau: float) -> Figure:
    """AT19's figure: far mass by L (simulated and predicted), the far-residual ratio Q/K/V : Q/K
    (simulated and by where the value lives) and the output errors against τ.

    ``sw`` is ``{scheme: {L: StylizedResult}}``, ``rows`` the value_side table rows, ``blk`` the
    value_blocks rows.
    """
    ratio, errors = _value_series(Ls, rows, blk)
    return Figure(
        "AT19_stylized",
        f"AT19: stylized single layer, d = {D}, λ = {LAM:g}, W = {W}, planted key at {NEAR}",
        [
            Panel(
                "far mass (± 2 SE; Q/K/V's equals Q/K's)",
                "context length L",
                "far mass ρ_D",
                _far_series(sw, Ls, seed),
                logx=True,
                logy=True,
            ),
            Panel(
                "far residual Q/K/V : Q/K",
                "context length L",
                "ratio",
                ratio,
                logx=True,
                ylim=(0, 1.05),
            ),
            Panel(
                "output error ‖o − t‖/‖t‖",
                "context length L",
                "output error",
                errors,
                logx=True,
                hlines=[(tau, f"τ = {tau}"), (math.sqrt(2), "√2 (Q/K as ρ_D → 1)")],
            ),
        ],
    )


def _far_series(sw: dict, Ls: list, seed: int) -> list[Series]:
    """Far mass ± 2 SE of RoPE, random Q/K and ALiBi, and AT12's prediction for the first two."""
    out = []
    for s in ("rope", "random_qk", "alibi"):
        x = list(sw[s])
        y = [mean_se(sw[s][L].far_mass) for L in x]
        out.append(
            Series(
                SCHEME_LABELS[s],
                x,
                [v[0] for v in y],
                kind="errorbar",
                yerr=[2 * v[1] for v in y],
                color=SCHEME_COLORS[s],
            )
        )
    Lg = np.geomspace(Ls[0], 65536, 30)
    for s in ("rope", "random_qk"):
        out.append(
            Series(
                f"{SCHEME_LABELS[s]}: 1 − K e^Δ/(K e^Δ + M E e^s)",
                Lg,
                [1 - near_mass_reference(s, int(L), seed)["near_mass"] for L in Lg],
                color=SCHEME_COLORS[s],
                style="--",
            )
        )
    return out


def _value_series(Ls: list, rows: list, blk: list) -> tuple[list[Series], list[Series]]:
    """The far-residual ratio (simulated ± 2 SE, predicted by where the value lives) and the
    output errors of random Q/K and Q/K/V."""
    bl = [b[0] for b in blk]
    ratio = [
        Series(
            "simulated",
            Ls,
            [r[1] for r in rows],
            kind="errorbar",
            yerr=[r[2] * 2 for r in rows],
            color="#009E73",
        ),
        Series(
            "predicted (value in all blocks)", bl, [b[3] for b in blk], color="#000000", style="--"
        ),
        Series(
            "value in the 16 fastest blocks", bl, [b[2] for b in blk], color="#0072B2", style=":"
        ),
        Series(
            "value in the 16 slowest blocks", bl, [b[4] for b in blk], color="#D55E00", style=":"
        ),
    ]
    errors = [
        Series(
            "random Q/K", Ls, [r[4] for r in rows], kind="markers", color=SCHEME_COLORS["random_qk"]
        ),
        Series(
            "random Q/K/V",
            Ls,
            [r[5] for r in rows],
            kind="markers",
            color=SCHEME_COLORS["random_qkv"],
        ),
    ]
    return ratio, errors


def tables_at19(rows: list, sens: list, blk: list, zlim: float, Lmax: int) -> list[Table]:
    """AT19's tables: value_side (by L), tau_sensitivity (by τ), value_blocks (by L)."""
    return [
        Table(
            "value_side",
            "Q/K vs Q/K/V by L",
            [
                "L",
                "far-residual ratio",
                "SE",
                "predicted",
                "output error Q/K",
                "output error Q/K/V",
                "far mass",
            ],
            rows,
        ),
        Table(
            "tau_sensitivity",
            "L_τ(Q/K/V) > L_τ(Q/K)? at several τ (parameter tau)",
            ["τ", "L_τ(Q/K)", "L_τ(Q/K/V)", "ratio", "paired z", "verdict"],
            sens,
            note=f"verdict: holds when z ≥ {zlim:.2f}, fails when z ≤ −{zlim:.2f}; 'not "
            f"reached' when Q/K's error stays below τ up to L = {Lmax}, 'above τ at the first "
            "L' when it exceeds τ already at the shortest length (neither decides)",
        ),
        Table(
            "value_blocks",
            "predicted far-residual ratio by where the value content lives",
            [
                "L",
                "blocks mixed at (L − W)/2 (ε = 0.1)",
                "16 fastest blocks",
                "all blocks",
                "16 slowest blocks",
            ],
            blk,
            note="uniform far weights; slow blocks never mix within L, so value rotation "
            "removes only the fast blocks' share of the coherent residual",
        ),
    ]


def value_blocks(Ls) -> list:
    """Predicted far-residual ratio by where the value content lives (uniform far weights):
    rows [L, blocks mixed at (L − W)/2, 16 fastest blocks, all blocks, 16 slowest blocks]."""
    fast = np.zeros(D // 2)
    fast[:16] = 1 / 16
    slow = np.zeros(D // 2)
    slow[-16:] = 1 / 16
    return [
        [
            L,
            int(th.blocks_mixed(D, BASE, 0.1, (L - W) // 2)),
            math.sqrt(value_ratio_reference(L, fast)),
            math.sqrt(value_ratio_reference(L)),
            math.sqrt(value_ratio_reference(L, slow)),
        ]
        for L in sorted({*Ls, 65536})
    ]
