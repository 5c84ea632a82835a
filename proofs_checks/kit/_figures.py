"""Figures shared by the command line and the claim checks (matplotlib; rasters at 150 dpi).

One colour per variant or scheme across every figure (colour-blind-safe Okabe–Ito palette).
Figures are built with matplotlib's object-oriented :class:`matplotlib.figure.Figure` (no
pyplot), so importing this module neither imports matplotlib nor changes the user's backend.
As in pandas and seaborn plotting, the plot helpers draw into a given ``ax=`` (or a new figure)
and return what they drew on; with a ``path`` they save the figure in any format matplotlib
writes (``.png``, ``.pdf``, ``.svg``, …, chosen by the suffix) and return the path.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np

__all__ = ["COLORS", "figure_suffixes", "plot_profile", "plot_profiles", "render", "save"]

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


def _figure(**kw):
    """A new matplotlib Figure, detached from pyplot (nothing to close, no backend chosen)."""
    from matplotlib.figure import Figure

    return Figure(**kw)


def figure_suffixes() -> tuple[str, ...]:
    """The file suffixes matplotlib can save a figure as (``".png"``, ``".pdf"``, ``".svg"``, …)."""
    from matplotlib.backend_bases import FigureCanvasBase

    return tuple(sorted("." + k for k in FigureCanvasBase.get_supported_filetypes()))


def save(fig, path) -> Path:
    """Write ``fig`` to ``path`` in the format its suffix names (rasters at 150 dpi), creating
    the folder; ValueError for a suffix matplotlib cannot write."""
    path = Path(path)
    if path.suffix.lower() not in figure_suffixes():
        raise ValueError(f"path must end in a figure format matplotlib writes "
                         f"({', '.join(figure_suffixes())}); got {str(path)!r}")  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    return path


def _axes(ax, figsize):
    """``ax`` (checked) or the one Axes of a new figure of ``figsize``."""
    if ax is None:
        return _figure(figsize=figsize).subplots()
    if not hasattr(ax, "plot") or getattr(ax, "figure", None) is None:
        raise TypeError(f"ax must be a matplotlib Axes; got {type(ax).__name__}")
    return ax


def _done(ax, path):
    return ax if path is None else save(ax.figure, path)


def plot_profiles(profiles: dict, title: str, path=None, *, logy: bool = False, ax=None):
    """Plot influence profiles ``{label: p}`` against token position.

    Draws into ``ax`` (a matplotlib Axes) or a new figure; returns that Axes, or with ``path``
    saves the figure there (format from the suffix) and returns the path.
    """
    ax = _axes(ax, (6.4, 3.6))
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
    return _done(ax, path)


def plot_profile(p, title: str, path=None, *, ax=None):
    """Plot one influence profile with its minimum marked (into ``ax`` or a new figure);
    returns the Axes, or with ``path`` saves the figure there and returns the path."""
    p = np.asarray(p, dtype=float)
    ax = _axes(ax, (6.4, 3.6))
    ax.plot(np.arange(p.size), p, color=COLORS["profile"], lw=1.6)
    k = int(np.argmin(p))
    ax.plot([k], [p[k]], "o", color=COLORS["bound"], label=f"argmin j = {k}")
    ax.set_xlabel("token position j")
    ax.set_ylabel("$p^{(T)}(j)$")
    ax.set_title(title)
    ax.legend(frameon=False)
    ax.grid(alpha=0.3)
    return _done(ax, path)


def _color(name):
    if name is None:
        return None
    return COLORS.get(name, name)


def _draw_panel(ax, panel) -> None:
    if panel.image is not None:
        im = ax.imshow(np.asarray(panel.image, dtype=float), aspect="auto", origin="lower")
        ax.figure.colorbar(im, ax=ax, label=panel.image_label)
    for s in panel.series:
        x, y, c = np.asarray(s.x), np.asarray(s.y), _color(s.color)
        label = s.label or None
        if s.kind == "band":
            lo = np.asarray(s.lo if s.lo is not None else y)
            hi = np.asarray(s.hi if s.hi is not None else y)
            ax.fill_between(x, lo, hi, color=c, alpha=0.25, lw=0, label=label)
        elif s.kind == "errorbar":
            ax.errorbar(x, y, yerr=s.yerr, fmt="o", ms=3, capsize=2, color=c, label=label)
        elif s.kind == "markers":
            ax.plot(x, y, "o", ms=3.5, color=c, label=label)
        elif s.kind == "step":
            ax.step(x, y, where="mid", color=c, lw=1.4, ls=s.style, label=label)
        else:
            ax.plot(x, y, color=c, lw=1.5, ls=s.style, label=label)
    for value, label in panel.hlines:
        ax.axhline(value, color="0.4", lw=0.9, ls="--", label=label or None)
    for value, label in panel.vlines:
        ax.axvline(value, color="0.4", lw=0.9, ls=":", label=label or None)
    if panel.logx:
        ax.set_xscale("log")
    if panel.logy:
        ax.set_yscale("log")
    if panel.ylim is not None:
        ax.set_ylim(*panel.ylim)
    if panel.xticks is not None:  # after the scale, which resets the tick locators
        ax.set_xticks([p for p, _ in panel.xticks], [label for _, label in panel.xticks])
        ax.set_xticks([], minor=True)  # the named ticks are the only ones (log axes too)
    ax.set_xlabel(panel.xlabel)
    ax.set_ylabel(panel.ylabel)
    if panel.title:
        ax.set_title(panel.title, fontsize=10)
    if ax.get_legend_handles_labels()[0] and panel.legend == "inside":
        ax.legend(frameon=False, fontsize=8)
    ax.grid(alpha=0.3)


def _crowded(ax) -> bool:
    """Whether two neighbouring x tick labels of ``ax`` overlap (or nearly touch) as drawn."""
    labels = [t for t in ax.get_xticklabels() if t.get_visible() and t.get_text()]
    boxes = sorted((t.get_window_extent() for t in labels), key=lambda b: b.x0)
    pad = 0.3 * ax.figure.dpi * 8 / 72  # a third of an 8-point character, in display units
    return any(a.x1 + pad > b.x0 for a, b in itertools.pairwise(boxes))


def _slant_crowded_ticks(fig, axes, panels) -> bool:
    """Slant (30°, anchored at the tick) the named x tick labels of panels with ``xticks``
    whose labels overlap as laid out now; returns whether any were slanted."""
    slanted = False
    for ax, panel in zip(axes, panels, strict=False):
        if panel.xticks and _crowded(ax):
            for t in ax.get_xticklabels():
                t.set_rotation(30)
                t.set_horizontalalignment("right")
                t.set_rotation_mode("anchor")
            slanted = True
    return slanted


def render(figure, path=None):
    """Draw a :class:`~posflow.proofs_checks.kit.Figure` spec (panels side by side, at most
    three per row); returns the matplotlib Figure, or with ``path`` saves it there (format from
    the suffix) and returns the path."""
    k = len(figure.panels)
    cols = min(k, 3)
    rows = -(-k // cols)
    fig = _figure(figsize=(4.6 * cols, 3.5 * rows))
    axes = fig.subplots(rows, cols, squeeze=False)
    shared = None  # (handles, labels) of the first panel whose legend is shared
    for ax, panel in zip(axes.flat, figure.panels, strict=False):
        _draw_panel(ax, panel)
        if panel.legend == "shared" and shared is None:
            shared = ax.get_legend_handles_labels()
    spare = list(axes.flat)[k:]
    for ax in spare:
        ax.set_visible(False)
    fig.suptitle(figure.title, fontsize=11)
    rect = (0, 0, 1, 1)  # tight_layout's default; a legend below the grid takes the bottom 8 %
    if shared is not None and shared[0]:
        if spare:
            spare[0].set_visible(True)
            spare[0].axis("off")
            spare[0].legend(*shared, frameon=False, fontsize=8, loc="center")
        else:
            ncol = min(len(shared[0]), 2 * cols)  # two legend columns per panel column
            fig.legend(*shared, frameon=False, fontsize=8, loc="lower center", ncol=ncol)
            rect = (0, min(0.3, 0.045 * -(-len(shared[0]) // ncol) + 0.02), 1, 1)
    fig.tight_layout(rect=rect)
    if _slant_crowded_ticks(fig, axes.flat, figure.panels):
        fig.tight_layout(rect=rect)
    return fig if path is None else save(fig, path)
