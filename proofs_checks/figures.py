"""Figures shared by the command line and the claim checks (matplotlib, Agg, PNG at 150 dpi).

One colour per variant or scheme across every figure (colour-blind-safe Okabe–Ito palette).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

__all__ = ["COLORS", "plot_profile", "plot_profiles", "save"]

COLORS = {
    "attention_only": "#D55E00",
    "residual": "#0072B2",
    "residual_content": "#009E73",
    "measured": "#000000",
    "profile": "#0072B2",
    "bound": "#CC79A7",
    "exact": "#E69F00",
}
DPI = 150


def save(fig, path) -> Path:
    """Write ``fig`` as a PNG (150 dpi), creating the folder, and close it."""
    path = Path(path)
    if path.suffix.lower() != ".png":
        raise ValueError(f"path must end in .png; got {str(path)!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return path


def plot_profiles(profiles: dict, title: str, path, *, logy: bool = False) -> Path:
    """Plot influence profiles ``{label: p}`` against token position and save a PNG."""
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for label, p in profiles.items():
        p = np.asarray(p, dtype=float)
        ax.plot(
            np.arange(p.size), p, label=label.replace("_", " "), color=COLORS.get(label), lw=1.6
        )
    ax.set_xlabel("token position j")
    ax.set_ylabel("$p^{(T)}(j)$")
    if logy:
        ax.set_yscale("log")
    ax.set_title(title)
    if len(profiles) > 1:
        ax.legend(frameon=False)
    ax.grid(alpha=0.3)
    return save(fig, path)


def plot_profile(p, title: str, path) -> Path:
    """Plot one influence profile with its minimum marked; save a PNG."""
    p = np.asarray(p, dtype=float)
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    ax.plot(np.arange(p.size), p, color=COLORS["profile"], lw=1.6)
    k = int(np.argmin(p))
    ax.plot([k], [p[k]], "o", color=COLORS["bound"], label=f"argmin j = {k}")
    ax.set_xlabel("token position j")
    ax.set_ylabel("$p^{(T)}(j)$")
    ax.set_title(title)
    ax.legend(frameon=False)
    ax.grid(alpha=0.3)
    return save(fig, path)
