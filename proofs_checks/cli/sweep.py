"""``posflow sweep``: run a resumable parameter sweep on Dask, or show a sweep's table.

    posflow sweep SPEC.toml [--scheduler ADDRESS] [--workers N] [--store DIR] [--backend B]
                            [--device D] [--in-process] [--connect-timeout S] [--json]
    posflow sweep --show STORE [--json]

dask.distributed is imported only when a sweep runs, so ``posflow`` works without it (a missing
extra gives one line naming ``pip install -e .[cluster]``). Bad input (unknown experiment or
parameter, unreachable scheduler, a store of another spec, a backend that is not installed)
gives one line and exit code 2, with the store left as it was.
"""

from __future__ import annotations

import sys
from pathlib import Path

from posflow.proofs_checks.cli._common import (
    UsageError,
    bad_input,
    ensure_memory,
    output_dir,
    output_file,
    positive_float,
    print_json,
)
from posflow.proofs_checks.cli._output import show

__all__ = ["add_parser", "cmd_sweep", "default_store", "format_table"]

EPILOG = """\
SPEC is a TOML file: experiment = NAME (rollout_profile, dichotomy, far_mass), optional
version = N, a [params] table of fixed parameters and a [grid] table of lists; every
combination of the grid is one task. Finished tasks are written at once to STORE
(default <user cache>/sweeps/<experiment>-<spec hash>.sweep); rerunning the same spec skips
them, so an interrupted sweep resumes where it stopped. Sizes (grid points, n, T, length) are
checked against the available memory before anything runs. See examples/sweeps/.
"""


def add_parser(sub) -> None:
    """Register ``posflow sweep`` on the subparsers of
    :func:`posflow.proofs_checks.cli.build_parser`."""
    p = sub.add_parser(
        "sweep",
        help="run a resumable parameter sweep (Dask), or --show a sweep's table",
        description="Run a grid of parameters over a named experiment on a Dask cluster.",
        epilog=EPILOG,
    )
    p.add_argument("spec", nargs="?", metavar="SPEC.toml", help="the sweep specification")
    p.add_argument("--scheduler", metavar="ADDRESS", help="Dask scheduler (default: local)")
    p.add_argument("--workers", type=int, default=2, help="local workers (default 2)")
    p.add_argument("--store", metavar="DIR", help="result store (default: <user cache>/sweeps/)")
    p.add_argument("--backend", default="numpy", help="numpy (default), torch or cupy")
    p.add_argument("--device", help="device of the backend, e.g. cuda:0")
    p.add_argument(
        "--in-process", action="store_true", help="local workers as threads of this process"
    )
    p.add_argument(
        "--connect-timeout",
        type=positive_float,
        default=10.0,
        metavar="S",
        help="seconds to wait for --scheduler (default 10)",
    )
    p.add_argument("--show", metavar="STORE", help="print the table of a store and exit")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(func=cmd_sweep)


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def format_table(rows: list[dict], spec: dict, title: str):
    """A rich Table: the grid parameters, then every result, one row per task."""
    from posflow.proofs_checks.cli._output import table as Table

    grid = [g[0] for g in spec.get("grid", [])]
    results = list(rows[0]["results"]) if rows else []
    fixed = {k: v for k, v in (rows[0]["params"] if rows else {}).items() if k not in grid}
    caption = "fixed: " + ", ".join(f"{k}={_fmt(v)}" for k, v in fixed.items()) if fixed else None
    t = Table(title=title, caption=caption)
    for c in grid:
        t.add_column(c, style="cyan", justify="right")
    for c in results:
        t.add_column(c, justify="right")
    for r in rows:
        t.add_row(
            *(_fmt(r["params"][c]) for c in grid), *(_fmt(r["results"].get(c)) for c in results)
        )
    return t


def _print_store(path, as_json: bool) -> int:

    from posflow.simulate.sweep import SweepStore

    with SweepStore(path) as store:
        rows, spec = store.rows(), store.spec
    if as_json:
        print_json(rows, inputs=f"--show {path}", indent=1)
        return 0
    title = f"{spec['experiment']} v{spec['version']}: {len(rows)} rows ({path})"
    show(format_table(rows, spec, title))
    return 0


def default_store(spec) -> Path:
    """``<user cache>/sweeps/<experiment>-<hash of the spec>.sweep``: never the working tree."""
    from posflow.simulate.runtime import user_cache_dir

    return user_cache_dir() / "sweeps" / f"{spec.experiment}-{spec.fingerprint[:12]}.sweep"


def _store_path(args, spec) -> Path:
    if args.store is None:
        return output_dir("--store (the per-user cache)", default_store(spec))
    if str(args.store).endswith(".sqlite"):
        return output_file("--store", args.store)
    return output_dir("--store", args.store)


def cmd_sweep(args) -> int:
    """Run a sweep (or ``--show`` a store); the table of the store is printed at the end."""
    if args.show is not None:
        if args.spec is not None:
            raise UsageError("give SPEC.toml or --show STORE, not both")
        with bad_input("--show"):
            return _print_store(args.show, args.json)
    if args.spec is None:
        raise UsageError("sweep needs SPEC.toml (or --show STORE)")
    if args.workers < 1:
        raise UsageError(f"--workers must be at least 1; got {args.workers}")
    from posflow.simulate.sweep import load_spec, run_sweep

    with bad_input("SPEC.toml"):
        spec = load_spec(args.spec)
    parallel = 1 if args.scheduler else min(args.workers, spec.num_tasks)
    ensure_memory(
        "--workers",
        parallel * spec.peak_task_bytes(),
        f"{parallel} task(s) of {spec.experiment} at once (largest grid point)",
    )
    store = _store_path(args, spec)
    try:
        report = run_sweep(
            spec,
            store,
            scheduler=args.scheduler,
            workers=args.workers,
            backend=args.backend,
            device=args.device,
            processes=not args.in_process,
            progress=not args.json,
            timeout=args.connect_timeout,
        )
    except ImportError as exc:
        raise UsageError(str(exc)) from None
    print(
        f"{report.total} tasks: {report.skipped} already in {store}, "
        f"{report.computed} computed in {report.seconds:.1f} s",
        file=sys.stderr,
        flush=True,
    )
    return _print_store(store, args.json)
