"""Regenerate the README's figures from the package itself.

    python docs/make_figures.py [--quick-only]

Each figure is one a claim's evidence specifies (what ``posflow verify ID --out DIR`` draws),
rendered into ``docs/figures/`` under a stable name; missing optional pieces (e.g. no trained
extrapolation results, a model that is not installed) are reported and skipped. The figures of
both real models need ``--full`` runs (PB17 on SmolLM2 and Gemma 3 ~35 min, PB19 ~27 min on 2
cores); ``--quick-only`` skips them.
"""

from __future__ import annotations

import sys
from pathlib import Path

from posflow.proofs_checks.kit import Context, get_claim, render, run_claim

FIGURES = Path(__file__).resolve().parent / "figures"

# README name  <-  (claim ID, name of the figure spec in the claim's evidence (None: the first),
#                   size of the run)
WANTED = {
    "real_models.png": ("PB14", None, "quick"),
    "dichotomy.png": ("PB6", None, "quick"),
    "regimes.png": ("PB11", None, "quick"),
    "far_mass.png": ("AT19", None, "quick"),
    "extrapolation.png": ("AT20", "at20_extrapolation", "quick"),
    "synthetic_tasks.png": ("AT20", "at20_tasks", "quick"),
    "rope_context.png": ("AT20", "at20_real_rope", "quick"),
    "smollm2.png": ("PB15", "pb15_smollm2_study", "quick"),
    "gemma3.png": ("PB15", "pb15_gemma3_study", "quick"),
    "layerwise.png": ("PB19", "pb19_smollm2_layerwise", "quick"),
    "layerwise_gemma3.png": ("PB19", "pb19_gemma3_layerwise", "full"),
    "crossfit_gemma3.png": ("PB15", "pb15_gemma3_crossfit", "full"),
    "retrieval_smollm2.png": ("PB17", "PB17_lost_in_the_middle", "full"),
    "retrieval_gemma3.png": ("PB17", "PB17_lost_in_the_middle_gemma3", "full"),
}


def main() -> int:
    FIGURES.mkdir(parents=True, exist_ok=True)
    quick_only = "--quick-only" in sys.argv[1:]
    missing, runs = [], {}
    for target, (cid, name, size) in WANTED.items():
        if quick_only and size != "quick":
            continue
        try:
            if (cid, size) not in runs:  # one run per claim and size
                runs[cid, size] = run_claim(get_claim(cid), Context(size=size, seed=0))
            result = runs[cid, size]
        except ValueError as exc:  # claim not registered in this installation
            missing.append(f"{target}: {exc}")
            continue
        figs = getattr(result.evidence, "figures", []) if result.evidence else []
        pick = [f for f in figs if name is None or f.name == name]
        if not pick:
            missing.append(f"{target}: {cid} has no figure ({result.status} {result.error})")
            continue
        render(pick[0], FIGURES / target)
        print(f"wrote docs/figures/{target}  ({cid}: {result.status})")
    for m in missing:
        print(f"skipped {m}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
