"""Claim PB14 of [A] (legacy form, being moved to Evidence)."""

from __future__ import annotations

import numpy as np

from posflow.proofs_checks._common import save_figure, verdict
from posflow.proofs_checks.figures import COLORS, save
from posflow.proofs_checks.registry import Context, LegacyEvidence, register
from posflow.simulate import measured
from posflow.simulate.compare import mean_position, profile_shape
from posflow.simulate.kernels import (
    alibi_kernel,
)
from posflow.simulate.rollout import diagonal


@register(
    "PB14",
    "[A]",
    "real-model predictions (falcon-rw-7b, mpt-7b, mpt-30b, bloom-7b1, "
    "bloom; n = 256): (a) attention-only puts ≥ 0.99 on token 0; (b) residual-aware "
    "profiles are U-shaped with interior minima; (c) content moves mass toward recent "
    "tokens; min_i P_ii = ∏(1 − λ_t δ_t)",
    assumptions=("released λ_t and content",),
)
def pb14(ctx: Context) -> LegacyEvidence:
    table, ok = {}, True
    profiles = {}
    for model in measured.models():
        a, b, c = (measured.profile(model, v) for v in measured.VARIANTS)
        profiles[model] = (a, b, c)
        cfg = measured.config(model)
        K = alibi_kernel(cfg.n, cfg.slopes)
        logd = diagonal(K, cfg.lambdas, log=True)
        log_bound = float(np.log1p(-cfg.lambdas * np.max(1 - K.diagonal())).sum())
        k = int(np.argmin(b))
        row = {
            "a_p0": float(a[0]),
            "b_p0": float(b[0]),
            "b_p_last": float(b[-1]),
            "b_argmin": k,
            "b_interior_min_below_ends": bool(0 < k < 255 and b[k] < min(b[0], b[-1])),
            "b_shape": profile_shape(b),
            "c_shape": profile_shape(c),
            "c_p0": float(c[0]),
            "c_p_last": float(c[-1]),
            "mean_position_b": mean_position(b),
            "mean_position_c": mean_position(c),
            "min_Pii": float(np.exp(logd.min())),
            "prod_1_minus_lambda_delta": float(np.exp(log_bound)),
            "min_Pii_equality_rel_err": float(abs(np.expm1(logd.min() - log_bound))),
        }
        row["c_toward_recent"] = row["mean_position_c"] > row["mean_position_b"]
        ok &= (
            row["a_p0"] >= 0.99
            and row["b_interior_min_below_ends"]
            and row["c_toward_recent"]
            and row["min_Pii_equality_rel_err"] <= 1e-12
        )
        table[model] = row
    not_strict = [m for m, r in table.items() if r["b_shape"] != "strict_u"]

    def draw(path):
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 5, figsize=(17, 3.4), sharey=True)
        for ax, (model, (a, b, c)) in zip(axes, profiles.items(), strict=True):
            j = np.arange(a.size)
            ax.plot(
                j, np.maximum(a, 1e-12), color=COLORS["attention_only"], label="(a) attention only"
            )
            ax.plot(j, b, color=COLORS["residual"], label="(b) residual")
            ax.plot(j, c, color=COLORS["residual_content"], label="(c) residual + content")
            ax.set_yscale("log")
            ax.set_ylim(1e-6, 1.5)
            ax.set_title(f"{model} ({table[model]['b_shape'].replace('_', ' ')})", fontsize=9)
            ax.set_xlabel("token position j")
            ax.grid(alpha=0.3)
        axes[0].set_ylabel("$p^{(T)}(j)$")
        axes[0].legend(frameon=False, fontsize=7, loc="lower left")
        fig.suptitle(
            "predicted influence profiles of five ALiBi LLMs (fineweb-edu, n = 256)", fontsize=10
        )
        save(fig, path)

    summary = (
        "(a) ≥ 0.99 on token 0, (b) interior minima, (c) recency, equality of min P_ii "
        "for every model"
    )
    if not_strict:
        summary += f"; the (b) valley is not a strict U for {', '.join(not_strict)}"
    return LegacyEvidence(
        verdict(ok),
        {"models": table, "not_strict_U": not_strict},
        save_figure(ctx, "PB14_real_models.png", draw),
        summary=summary,
    )
