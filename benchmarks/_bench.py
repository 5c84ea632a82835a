"""Shared pieces of the benchmark scripts: one core, best-of timing, result files.

Import this module before numpy so that BLAS, OpenMP and numba run on one thread.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

RESULTS = Path(__file__).resolve().parent / "results"


def best_of(fn, repeat: int):
    """Run ``fn`` ``repeat`` times; return (shortest wall time in s, last output)."""
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def write_results(name: str, res: dict, text: str) -> None:
    """Write ``results/<name>.json`` (the numbers) and ``results/<name>.md`` (the summary)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(res, indent=2) + "\n")
    (RESULTS / f"{name}.md").write_text(text + "\n")


def cpu_model() -> str:
    """The CPU's model name (Linux: /proc/cpuinfo), else what ``platform`` says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
