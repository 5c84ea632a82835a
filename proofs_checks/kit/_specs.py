"""Plain-data parts of Evidence: tables and figure specs, and the scalar/number conventions.

- :class:`Table` — a small table of plain values (e.g. the sensitivity of a verdict to a named
  modelling parameter);
- :class:`Series`, :class:`Panel`, :class:`Figure` — a figure spec the report draws (a check
  never draws);
- the scalar rules every measurement and table cell obeys (plain Python scalars, NaN and ±inf
  round-tripped through JSON as strings) and the 4-significant-digit number format of the report.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Figure", "Panel", "Series", "Table"]


def _scalar(name: str, what: str, v):
    """A plain Python scalar (bool, int, float, str) from ``v``; TypeError otherwise."""
    if isinstance(v, bool | np.bool_):
        return bool(v)
    if isinstance(v, int | np.integer):
        return int(v)
    if isinstance(v, float | np.floating):
        return float(v)
    if isinstance(v, str):
        return v
    if v is None:
        return None
    raise TypeError(
        f"{what} of measurement {name!r} must be a scalar (bool, int, float or str); got "
        f"{type(v).__name__} — put arrays in a Table or a Figure"
    )


@dataclass
class Table:
    """A small table of plain values (rows of scalars), e.g. a sensitivity table."""

    key: str
    title: str
    columns: list[str]
    rows: list[list]
    note: str = ""

    def __post_init__(self):
        self.columns = [str(c) for c in self.columns]
        rows = []
        for row in self.rows:
            row = [_scalar(self.key, "table cell", v) for v in row]
            if len(row) != len(self.columns):
                raise ValueError(
                    f"table {self.key!r}: a row has {len(row)} cells for {len(self.columns)} "
                    "columns"
                )
            rows.append(row)
        self.rows = rows

    def as_json(self) -> dict:
        return {
            "key": self.key,
            "title": self.title,
            "columns": self.columns,
            "rows": [[_json_num(v) for v in r] for r in self.rows],
            "note": self.note,
        }

    @classmethod
    def from_json(cls, d: dict) -> Table:
        rows = [[_from_json_num(v) for v in r] for r in d["rows"]]
        return cls(d["key"], d["title"], d["columns"], rows, d.get("note", ""))


def _floats(x, what: str) -> list:
    if x is None:
        return None
    a = np.asarray(x, dtype=float)  # None (a non-finite point in JSON) becomes NaN
    if a.ndim not in (1, 2):
        raise ValueError(f"{what} must be 1-D (or 2-D for an image); got shape {a.shape}")
    return a.tolist()


@dataclass
class Series:
    """One curve of a panel. ``kind``: "line", "markers", "step", "errorbar" (with ``yerr``) or
    "band" (``lo``/``hi``). ``color`` names an entry of :data:`figures.COLORS` or is a hex."""

    label: str
    x: list
    y: list
    kind: str = "line"
    lo: list | None = None
    hi: list | None = None
    yerr: list | None = None
    color: str | None = None
    style: str = "-"

    def __post_init__(self):
        kinds = ("line", "markers", "step", "errorbar", "band")
        if self.kind not in kinds:
            raise ValueError(f"series kind must be one of {kinds}; got {self.kind!r}")
        self.x, self.y = _floats(self.x, "x"), _floats(self.y, "y")
        self.lo, self.hi = _floats(self.lo, "lo"), _floats(self.hi, "hi")
        self.yerr = _floats(self.yerr, "yerr")
        if len(self.x) != len(self.y):
            raise ValueError(f"series {self.label!r}: x has {len(self.x)} points, y {len(self.y)}")


def _ticks(ticks) -> list[tuple[float, str]]:
    """``ticks`` as a list of (position, label) pairs: finite, distinct positions (numbers, not
    bools) and string labels; ValueError naming ``xticks`` otherwise."""
    if isinstance(ticks, str | bytes) or not isinstance(ticks, list | tuple):
        raise ValueError(f"xticks must be a list of (position, label) pairs; got "
                         f"{type(ticks).__name__}")  # fmt: skip
    out = []
    for t in ticks:
        if isinstance(t, str | bytes) or not isinstance(t, list | tuple) or len(t) != 2:
            raise ValueError(f"xticks must be (position, label) pairs; got {t!r}")
        pos, label = t
        if (isinstance(pos, bool | np.bool_) or not isinstance(pos, numbers.Real)
                or not math.isfinite(pos)):  # fmt: skip
            raise ValueError(f"xticks positions must be finite numbers; got {pos!r}")
        if not isinstance(label, str):
            raise ValueError(f"xticks labels must be strings; got {label!r} at {pos!r}")
        out.append((float(pos), label))
    positions = [p for p, _ in out]
    if len(set(positions)) != len(positions):
        raise ValueError(f"xticks positions must be distinct; got {positions}")
    return out


@dataclass
class Panel:
    """One axes: series, reference lines (``hlines``/``vlines`` as (value, label)), log axes,
    and optionally an ``image`` (a 2-D list drawn with imshow; ``image_label`` its colour bar).

    ``legend``: ``"inside"`` (the axes' own legend) or ``"shared"`` (panels with many series:
    the renderer draws the legend of the first shared panel once, in a spare grid slot or below
    the figure, so it covers no curve).

    ``xticks``: optional (position, label) pairs, the only ticks of the x axis, each named by
    its label (e.g. one point per predictor at x = 0, 1, …, named on the axis); the renderer
    slants the labels when they would overlap. Positions finite and distinct, labels strings."""

    title: str = ""
    xlabel: str = ""
    ylabel: str = ""
    series: list[Series] = field(default_factory=list)
    logx: bool = False
    logy: bool = False
    hlines: list = field(default_factory=list)
    vlines: list = field(default_factory=list)
    ylim: tuple | None = None
    image: list | None = None
    image_label: str = ""
    legend: str = "inside"
    xticks: list | None = None

    def __post_init__(self):
        if self.legend not in ("inside", "shared"):
            raise ValueError(f"legend must be 'inside' or 'shared'; got {self.legend!r}")
        if self.xticks is not None:
            self.xticks = _ticks(self.xticks)


@dataclass
class Figure:
    """A figure spec: ``name`` (file stem), a title stating the setting, and its panels."""

    name: str
    title: str
    panels: list[Panel]
    caption: str = ""

    def __post_init__(self):
        if not self.name or any(c in self.name for c in "/\\ "):
            raise ValueError(f"figure name must be a plain file stem; got {self.name!r}")

    def as_json(self) -> dict:
        """Plain JSON data: tuples become lists, non-finite points become null (NaN on load)."""
        from dataclasses import asdict

        def plain(x):
            if isinstance(x, dict):
                return {k: plain(v) for k, v in x.items()}
            if isinstance(x, list | tuple):
                return [plain(v) for v in x]
            if isinstance(x, float) and not math.isfinite(x):
                return None
            return x

        return plain(asdict(self))

    @classmethod
    def from_json(cls, d: dict) -> Figure:
        panels = []
        for p in d["panels"]:
            p = dict(p)
            p["series"] = [Series(**s) for s in p["series"]]
            p["hlines"] = [tuple(h) for h in p.get("hlines", [])]
            p["vlines"] = [tuple(v) for v in p.get("vlines", [])]
            panels.append(Panel(**p))
        return cls(d["name"], d["title"], panels, d.get("caption", ""))


def _num(v) -> str:
    """A number as a reader wants it: 4 significant digits, no numpy reprs."""
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return str(v)
        if v == 0:
            return "0"
        return f"{v:.4g}".replace("e-0", "e-").replace("e+0", "e").replace("e+", "e")
    return str(v)


def _json_num(v):
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v


def _from_json_num(v):
    if v in ("nan", "inf", "-inf"):
        return float(v)
    return v
