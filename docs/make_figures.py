"""Regenerate the README's figures from the package itself.

    python docs/make_figures.py

Each figure is one a claim's evidence specifies (what ``posflow verify ID --out DIR`` draws),
rendered into ``docs/figures/`` under a stable name; missing optional pieces (e.g. no trained
extrapolation results) are reported and skipped.
"""

from __future__ import annotations

import sys
from pathlib import Path

from posflow.proofs_checks.kit import Context, get_claim, render, run_claim

FIGURES = Path(__file__).resolve().parent / "figures"

# README name  <-  (claim ID, name of the figure spec in the claim's evidence; None: the first)
WANTED = {
    "real_models.png": ("PB14", None),
    "dichotomy.png": ("PB6", None),
    "regimes.png": ("PB11", None),
    "far_mass.png": ("AT19", None),
    "extrapolation.png": ("AT20", None),
    "smollm2.png": ("PB15", "pb15_smollm2_study"),
    "gemma3.png": ("PB15", "pb15_gemma3_study"),
    "layerwise.png": ("PB19", "pb19_smollm2_layerwise"),
}


def main() -> int:
    FIGURES.mkdir(parents=True, exist_ok=True)
    missing = []
    ctx = Context(size="quick", seed=0)
    for target, (cid, name) in WANTED.items():
        try:
            result = run_claim(get_claim(cid), ctx)
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
