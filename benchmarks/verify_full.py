"""The main job at full size: ``posflow verify --full`` with both real models installed (issue 41).

    python benchmarks/verify_full.py [--threads 2] [--ids PB15 PB20 PB19 PB17] [--note TEXT]

Runs ``posflow verify --full --out DIR`` in a fresh process on this checkout (SmolLM2-135M and
Gemma 3 270M must be installed: ``posflow models install smollm2-135m gemma3-270m``), and
writes ``benchmarks/results/verify_full.md``: the wall time of the whole run, each claim's
seconds and verdict (from the report's ``results.json``), the load average before and after
(the machine may be shared), the CPU model and the commit. The figures of earlier runs that
this one is compared with are kept in the file's "before" section (they were measured before
the claims shared one measurement per model; see issue 41). Goal: ≤ 20 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _bench import cpu_model

RESULTS = Path(__file__).resolve().parent / "results" / "verify_full.md"
# _bench pins these to 1 for in-process timings; the verify run sets its own (--threads)
_PINNED = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")
BEFORE = """## Before (measured in earlier runs, each claim separately, 2 loaded cores)

| claim(s) | seconds | source |
|---|---|---|
| PB17 --full | 2514 | issue 24's lock reason (30 contexts a cell, K = 10, 20, 50, 2 models) |
| PB19 --full | 1151–1592 | issue 24's lock reason and issue 41 |
| PB15 --full (now PB20) | 230 | issue 24's lock reason (toy 128, SmolLM2 64, Gemma 32 windows) |

Each claim measured its models itself; PB15, PB19 and PB17 together took ≈ 65–72 min.
"""


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ids", nargs="*", default=[], help="claim IDs (default: every claim)")
    ap.add_argument("--note", default="", help="a line on the conditions of the run")
    args = ap.parse_args(argv)
    if args.threads < 1:
        ap.error("--threads must be >= 1")
    out = Path(tempfile.mkdtemp(prefix="posflow-verify-full-"))
    cmd = [sys.executable, "-m", "posflow", "verify", *args.ids, "--full", "--threads",
           str(args.threads), "--out", str(out)]  # fmt: skip
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    env = {k: v for k, v in os.environ.items() if k not in _PINNED}
    rc = subprocess.run(cmd, env=env).returncode
    wall = time.perf_counter() - t0
    load1 = os.getloadavg()
    recs = json.loads((out / "results.json").read_text())
    rows = sorted(((r["id"], r["status"], r.get("expected", ""), float(r.get("seconds", 0)))
                   for r in recs), key=lambda r: -r[3])  # fmt: skip
    shown = " ".join(["posflow", "verify", *args.ids, "--full", "--threads", str(args.threads)])
    lines = [
        "# `posflow verify --full` (issue 41: one measurement per model, shared)", "",
        f"Command: `{shown}`; exit status {rc}. Commit {_commit()}, {cpu_model()}, "
        f"{os.cpu_count()} CPUs; load average "
        f"{load0[0]:.2f} before, {load1[0]:.2f} after. {args.note}".rstrip(), "",
        f"**Wall time: {wall:.0f} s ({wall / 60:.1f} min)**; goal ≤ 20 min on 2 cores.", "",
        "| claim | verdict | expected | seconds |", "|---|---|---|---|",
        *[f"| {i} | {s} | {e} | {t:.0f} |" for i, s, e, t in rows], "", BEFORE,
    ]  # fmt: skip
    RESULTS.write_text("\n".join(lines))
    print("\n".join(lines[:6]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
