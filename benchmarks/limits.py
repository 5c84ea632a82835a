"""How close each code path runs to the machine's limits, measured in one process on one core.

    python benchmarks/limits.py [--quick] [--only NAME] [--rounds R] [--out PATH] [--clock cpu|wall]

Two references are measured before each section, in the same process and on the same core,
best of 5:

- ``triad``: the STREAM triad a = b + s·c on float64 arrays of 2^24 elements (128 MiB each,
  four times the largest last-level cache we run on), computed by NumPy in blocks of 2^14
  elements so that the two ufunc passes of a block (a ← s·c, a ← a + b) meet in the L1/L2 cache
  and memory sees one pass; bytes counted as STREAM counts them, 24 per element (two reads, one
  write; the write-allocate read is not counted).
- ``matmul``: float64 C = A·B at 2048 × 2048 (BLAS on one thread), 2·2048³ flops.

Then every section of the registry ``SECTIONS`` (a list of (name, function) pairs; a function
takes ``(refs, quick)`` and returns rows) measures its path and states its byte or flop model
next to the code. Each row reports the achieved rate, the reference it is held against, their
ratio in %, and the 1-minute load average when it was measured (this machine is shared: a load
above the number of idle cores means the numbers are low). ``--only NAME`` runs one section
(the references are always measured). The table is written to ``benchmarks/results/limits.md``
(rows of sections not run this time are kept); ``--quick`` runs tiny sizes and writes only to
an ``--out`` given explicitly.

Rounds: every section is measured ``--rounds`` times (5 by default), in turn, each time right
after the references are measured again, and its rows are held against those references, so
that a change of the machine's state between sections and rounds moves a path and its
reference together. The table gives the median over the rounds of the achieved rate, of the
reference and of their ratio, the ratio's range, the issue's goal where the row has one
(``GOALS``; for the full sizes), how many rounds met it, and the highest load seen. On this
shared machine the state of the host changes within minutes (the same matmul at 40 and at
63 GFLOP/s): one round is an anecdote, the range over rounds says how far a number can be
trusted.

Clock: every time is the best of 5 on this process's CPU clock (``time.process_time``; one
thread, so on an idle core it is the wall time): on this shared machine the load of other
processes then stretches neither the references nor the paths, though their traffic still
shares the caches and memory. ``--clock wall`` times with ``_bench.best_of`` (wall clock).

To add a path: write ``def bench_<path>(refs, quick) -> list[Row]`` (timing with
:func:`best`) and append ``("<name>", bench_<path>)`` to ``SECTIONS``.
"""

from __future__ import annotations

import _bench  # noqa: F401  (first: pins BLAS, OpenMP and numba to one thread)

# isort: split

import argparse
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from _bench import RESULTS, best_of, cpu_model

from posflow.simulate.kernels import alibi_kernel, alibi_slopes
from posflow.simulate.rollout import constant, influence

REPEAT = 5  # best of 5 (≥ 3) for every timing
ROUNDS = 5  # references and sections measured five times in turn (--rounds)
CLOCK = "cpu"  # or "wall" (--clock)

# The goals of issue 26 as (comparison, % of the row's reference), by the start of the path
# text; rows without one are context (the other rates).
GOALS = {
    "influence, ALiBi 1 head": (">=", 70.0),
    "influence, ALiBi 32 heads": (">=", 30.0),
    "dense_kernel build + influence": (">=", 80.0),
    "path_attention torch/NumPy speed": (">=", 100.0),
    "householder_route_scores (NumPy)": ("<=", 100.0),
}


def best(fn, repeat: int):
    """(shortest time in s, last output) of ``repeat`` runs of ``fn``: on the process CPU clock,
    or ``_bench.best_of`` when ``CLOCK == "wall"`` (module docstring)."""
    if CLOCK == "wall":
        return best_of(fn, repeat)
    times, out = [], None
    for _ in range(repeat):
        t0 = time.process_time()
        out = fn()
        times.append(time.process_time() - t0)
    return min(times), out


@dataclass
class Row:
    """One line of the table: a path, its achieved rate and the reference it is held against."""

    path: str
    achieved: float
    unit: str  # "GB/s" or "GFLOP/s"
    reference: float
    ref_name: str  # "triad" or "matmul"
    load: float

    @property
    def percent(self) -> float:
        return 100.0 * self.achieved / self.reference


def goal_of(path: str) -> tuple[str, float] | None:
    """The goal of a row (``GOALS``), or None."""
    return next((g for start, g in GOALS.items() if path.startswith(start)), None)


@dataclass
class Summary:
    """One path over the rounds: its rows, one per round, each against that round's references."""

    rows: list[Row]

    @property
    def percents(self) -> np.ndarray:
        return np.array([r.percent for r in self.rows])

    def met(self) -> int | None:
        """How many rounds met the goal (None for a row without one)."""
        goal = goal_of(self.rows[0].path)
        if goal is None:
            return None
        op, value = goal
        return int(np.sum(self.percents >= value if op == ">=" else self.percents <= value))


def load1() -> float:
    """The 1-minute load average (printed next to every number)."""
    return os.getloadavg()[0]


# ------------------------------------------------------------------------------------------
# references


def triad_gbs(n: int = 2**24, block: int = 2**14, repeat: int = REPEAT) -> float:
    """STREAM triad a = b + s·c, GB/s (24 bytes per element), blocked NumPy (module docstring)."""
    b = np.full(n, 1.0)
    c = np.full(n, 2.0)
    a = np.zeros(n)  # touched, so no first-touch page faults are timed
    s = 3.0

    def triad():
        for i in range(0, n, block):
            ab = a[i : i + block]
            np.multiply(c[i : i + block], s, out=ab)
            np.add(ab, b[i : i + block], out=ab)

    triad()
    t, _ = best(triad, repeat)
    assert a[0] == 7.0 and a[-1] == 7.0
    return 24.0 * n / t / 1e9


def matmul_gflops(n: int = 2048, repeat: int = REPEAT) -> float:
    """float64 n × n matrix product on one BLAS thread, GFLOP/s (2 n³ flops)."""
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    C = np.empty((n, n))
    np.matmul(A, B, out=C)
    t, _ = best(lambda: np.matmul(A, B, out=C), repeat)
    return 2.0 * n**3 / t / 1e9


def references(quick: bool) -> dict:
    """The reference rates, measured now: {"triad": GB/s, "matmul": GFLOP/s, "load": …}."""
    if quick:
        return {"triad": triad_gbs(2**16, repeat=1), "matmul": matmul_gflops(64, 1),
                "load": load1()}  # fmt: skip
    return {"triad": triad_gbs(), "matmul": matmul_gflops(), "load": load1()}


# ------------------------------------------------------------------------------------------
# sections


def bench_alibi(refs: dict, quick: bool) -> list[Row]:
    """``influence`` with ALiBi kernels at n = 10⁶, T = 64, λ = 0.1 (as benchmarks/rollout.py).

    One head (slope 0.5): memory-bound. Byte model: each layer reads the row p (8n bytes) and
    writes the new row (8n bytes), 16 n bytes per layer, 16 n T in all; the tables (≤ 92 rows
    for slope 0.5) stay in cache and are not counted; any further pass over the row (a separate
    mass sum) is extra traffic, not counted. Held against the triad's GB/s.

    32 heads (``alibi_slopes(32)``): compute-bound. Flop model per token and layer: per head
    the reduction term ω_h G_h (a multiply and an add) and the recurrence
    G_h ← p_j w_h(j) + r_h G_h (two multiplies, an add), 5 flops; per token the blend
    (1 − λ) p_j + λ (p_j d_j + Σ_h ω_h G_h), 5 flops: (5 H + 5) n T flops in all. Held against
    the float64 matmul's GFLOP/s. Most of this profile is 0 (80.6 % of its entries at n = 10⁶,
    T = 64, 0.9 % subnormal): the kernel of several heads computes in a scaled domain and drops
    states below any output's rounding (simulate/_alibi_nb.py), where a recurrence in gradual
    underflow left 81.5 % at subnormal floors and ran on Intel cores at 0.21 GFLOP/s; the third
    row times one step of the same kernel on a row of normal numbers (uniform in [0, 1)), same
    flop model, to show the kernel's own rate. The kernel writes a block of zeros behind zero
    states as zeros, without its per-head work (the same bits), so on the profile the model
    counts flops that are not done: the rollout's row can pass the one-step row's rate.
    """
    n, T = (10**4, 4) if quick else (10**6, 64)
    repeat = 1 if quick else REPEAT
    lam = constant(0.1, T)
    rows = []
    for H in (1, 32):
        K = alibi_kernel(n, alibi_slopes(H) if H > 1 else 0.5)
        influence(K, constant(0.1, 1))  # compile / load the numba code
        t, p = best(lambda K=K: influence(K, lam), repeat)
        assert abs(float(p.sum()) - 1.0) < 1e-12
        what = f"influence, ALiBi {H} head{'s' if H > 1 else ''}, n = {n:,}, T = {T}"
        if H == 1:
            rows.append(Row(what, 16.0 * n * T / t / 1e9, "GB/s", refs["triad"], "triad",
                            load1()))  # fmt: skip
        else:
            rows.append(Row(what, (5.0 * H + 5.0) * n * T / t / 1e9, "GFLOP/s",
                            refs["matmul"], "matmul", load1()))  # fmt: skip
    dense = np.random.default_rng(0).random((1, n))
    t, _ = best(lambda: K._residual_step(dense, 0.1), repeat)
    rows.append(Row(f"one step, ALiBi 32 heads, n = {n:,}, a row of normal numbers",
                    (5.0 * 32 + 5.0) * n / t / 1e9, "GFLOP/s", refs["matmul"], "matmul",
                    load1()))  # fmt: skip
    return rows


def bench_dense(refs: dict, quick: bool) -> list[Row]:
    """Dense measured kernels built and rolled out (benchmarks/_limits_dense.py)."""
    from _limits_dense import dense_section

    d = dense_section(refs["triad"], **({"n": 256, "T": 2, "repeat": 1} if quick else {}))
    return [Row(d["path"], d["achieved"], d["unit"], d["reference"], "triad", load1())]


def bench_path(refs: dict, quick: bool) -> list[Row]:
    """PaTH: torch against NumPy path_attention, and the route scores' assembly share
    (benchmarks/_limits_path.py)."""
    from _limits_path import path_sections

    kw = {"lengths": (128, 256), "assembly_t": 300, "repeat": 1} if quick else {}
    ref = {"×": "NumPy", "GFLOP/s": "matmul", "%": "goal"}
    return [Row(r["path"], r["achieved"], r["unit"], r["reference"], ref[r["unit"]], load1())
            for r in path_sections(refs["matmul"], **kw)]


# The registry: (name, function) pairs, run in this order; `--only NAME` picks one.
SECTIONS: list[tuple[str, Callable[[dict, bool], list[Row]]]] = [
    ("alibi", bench_alibi),
    ("dense", bench_dense),
    ("path", bench_path),
]


# ------------------------------------------------------------------------------------------
# the table

HEADER = ["| section | path | achieved | reference | % of reference | % range | goal | rounds "
          "meeting it | load (1 min) |",
          "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip


def table_line(section: str, row: Row) -> str:
    """One round's row (printed as it is measured)."""
    return (
        f"| {section} | {row.path} | {row.achieved:.2f} {row.unit} | {row.ref_name} "
        f"{row.reference:.2f} {row.unit} | {row.percent:.0f} % | {row.load:.2f} |"
    )


def summary_line(section: str, s: Summary) -> str:
    """A path over the rounds: medians of the achieved rate, the reference and the % (each
    round's own ratio), the % range, the goal, the rounds meeting it, the highest load."""
    r0 = s.rows[0]
    goal, met = goal_of(r0.path), s.met()
    goal_text = "–" if goal is None else f"{'≥' if goal[0] == '>=' else '≤'} {goal[1]:.0f} %"
    return (
        f"| {section} | {r0.path} | {np.median([r.achieved for r in s.rows]):.2f} {r0.unit} | "
        f"{r0.ref_name} {np.median([r.reference for r in s.rows]):.2f} {r0.unit} | "
        f"{np.median(s.percents):.0f} % | {s.percents.min():.0f}–{s.percents.max():.0f} % | "
        f"{goal_text} | {'–' if met is None else f'{met} of {len(s.rows)}'} | "
        f"{max(r.load for r in s.rows):.2f} |"
    )


def section_of(line: str) -> str:
    """The first cell of a markdown table line (its section)."""
    return line.strip().strip("|").split("|")[0].strip()


def kept_lines(path: Path, sections: set[str]) -> list[str]:
    """Table lines of ``path`` whose section is not among ``sections`` (not re-measured)."""
    if not path.is_file():
        return []
    return [line for line in path.read_text().splitlines()
            if line.startswith("| ") and section_of(line) not in ("", "section", *sections)]


def write_table(path: Path, refs: list[dict], results: dict[str, list[Summary]]) -> str:
    """Write (and return) the markdown table: this run's paths over its rounds (``refs``: the
    references measured before each section of each round), and the kept rows of sections not
    run."""
    rounds = max((len(s.rows) for sums in results.values() for s in sums), default=1)
    tri, mm = (np.array([r[k] for r in refs]) for k in ("triad", "matmul"))
    kept = kept_lines(path, set(results))
    names = sorted({section_of(line) for line in kept})
    kept_text = (
        f" Rows of {', '.join(names)} are kept from an earlier run written to this file (not "
        "re-measured here: their reference, achieved rate and load columns are that run's)."
        if kept else ""
    )
    lines = [
        "# Code paths against the machine's limits (one core, one process)",
        "",
        f"Machine: {cpu_model()}, {os.cpu_count()} CPUs; "
        f"{rounds} round{'s' if rounds > 1 else ''}, references measured again just before "
        f"each section: triad {tri.min():.2f}–{tri.max():.2f} GB/s, float64 matmul "
        f"{mm.min():.2f}–{mm.max():.2f} GFLOP/s (load {min(r['load'] for r in refs):.2f}–"
        f"{max(r['load'] for r in refs):.2f}); times: best of {REPEAT} on the "
        f"{'process CPU' if refs[0].get('clock', 'cpu') == 'cpu' else 'wall'} clock. Columns: "
        "medians over the rounds (% of reference: the median of each round's own ratio), the "
        "range of that ratio, the goal (issue 26) and how many rounds met it. Byte and flop "
        f"models: benchmarks/limits.py.{kept_text}",
        "",
        *HEADER,
        *kept,
        *(summary_line(name, s) for name, sums in results.items() for s in sums),
    ]
    text = "\n".join(lines)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    return text


def main(argv=None) -> dict[str, list[Row]]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes (smoke run)")
    ap.add_argument("--only", choices=[name for name, _ in SECTIONS], metavar="NAME",
                    help="run only this section: " + ", ".join(n for n, _ in SECTIONS))  # fmt: skip
    ap.add_argument("--clock", choices=["cpu", "wall"], default="cpu",
                    help="time on the process CPU clock (default) or the wall clock")  # fmt: skip
    ap.add_argument("--rounds", type=int, default=None,
                    help=f"measure references and sections this many times in turn (default "
                    f"{ROUNDS}; 1 with --quick)")  # fmt: skip
    ap.add_argument("--out", type=Path, default=None,
                    help="the table (default results/limits.md; none with --quick)")  # fmt: skip
    args = ap.parse_args(argv)
    rounds = args.rounds if args.rounds is not None else (1 if args.quick else ROUNDS)
    if rounds < 1:
        ap.error(f"--rounds must be at least 1; got {rounds}")
    global CLOCK
    CLOCK = args.clock
    all_refs, per_round = [], {}
    for k in range(rounds):
        for name, fn in SECTIONS:
            if args.only not in (None, name):
                continue
            refs = references(args.quick)  # measured again just before each section
            refs["clock"] = CLOCK
            all_refs.append(refs)
            print(f"round {k + 1}/{rounds}, {name}: triad {refs['triad']:.2f} GB/s   "
                  f"matmul {refs['matmul']:.2f} GFLOP/s   load {refs['load']:.2f}",
                  flush=True)  # fmt: skip
            rows = fn(refs, args.quick)
            per_round.setdefault(name, []).append(rows)
            for row in rows:
                print(table_line(name, row), flush=True)
    results = {name: [Summary(list(rs)) for rs in zip(*rounds_, strict=True)]
               for name, rounds_ in per_round.items()}  # fmt: skip
    if rounds > 1:
        print("over the rounds:")
        for name, sums in results.items():
            for s in sums:
                print(summary_line(name, s))
    out = args.out if args.out is not None or args.quick else RESULTS / "limits.md"
    if out is not None:
        write_table(out, all_refs, results)
    return results


if __name__ == "__main__":
    main()
