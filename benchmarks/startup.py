"""Start-up time: ``import posflow`` and ``posflow --help`` in fresh processes (issue 27).

    python benchmarks/startup.py [--repeat 7]

Each command runs ``--repeat`` times in a new interpreter; the table gives the best wall time and
its ratio to a bare ``python -c pass`` measured in the same run (the interpreter's own start-up),
with the load average, because the machine is shared. Goal: both under 1 s on a quiet machine.
Results: ``benchmarks/results/startup.md``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = {
    "python -c pass (baseline)": [sys.executable, "-c", "pass"],
    "import posflow": [sys.executable, "-c", "import posflow"],
    "posflow --help": [sys.executable, "-m", "posflow", "--help"],
    "import posflow.simulate.models": [sys.executable, "-c", "import posflow.simulate.models"],
}


def best_of(cmd: list[str], repeat: int) -> float:
    """The fastest of ``repeat`` wall times of ``cmd`` in a fresh process (seconds)."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error("--repeat must be >= 1")
    load = os.getloadavg()
    rows = {name: best_of(cmd, args.repeat) for name, cmd in COMMANDS.items()}
    base = rows["python -c pass (baseline)"]
    lines = [
        f"# Start-up time (best of {args.repeat} fresh processes)",
        "",
        f"Load average at start: {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f} (2 cores).",
        "",
        "| command | best wall time (s) | ratio to `python -c pass` |",
        "|---|---|---|",
    ]
    lines += [f"| `{k}` | {v:.3f} | {v / base:.1f}× |" for k, v in rows.items()]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    out = Path(__file__).resolve().parent / "results" / "startup.md"
    out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
