"""Resumable parameter sweeps of named experiments on Dask distributed.

A *spec* (TOML) names an experiment and a grid of parameters::

    experiment = "dichotomy"        # rollout_profile | dichotomy | far_mass
    version = 1                     # optional: refuse to run another version of it
    [params]                        # fixed parameters (the rest take their defaults)
    n = 1024
    [grid]                          # every combination, in this order (last varies fastest)
    beta = [0.5, 1.0, 1.5]
    T = [100, 1000]

A spec is bounded before anything runs: at most :data:`MAX_TASKS` grid points, a spec file of at
most :data:`MAX_SPEC_BYTES`, and one task at the largest grid point must fit in the memory
available now (:meth:`SweepSpec.peak_task_bytes`, an estimate of the float64 values a task of the
experiment holds at once).

Every task (one grid point) is keyed by ``sha256`` of the experiment, its version and the full
parameter set, and written to the store (SQLite in WAL mode, ``DIR/sweep.sqlite``) in its own
transaction as soon as it finishes. A sweep killed at any moment therefore resumes without
recomputing finished tasks, and ``INSERT OR IGNORE`` on the key forbids duplicates. A store
remembers the fingerprint of its spec and refuses another one, unchanged. Tasks run on a Dask
``LocalCluster`` (``workers`` processes, or threads) or on the cluster at ``scheduler``.
:meth:`SweepStore.to_dataframe` (and :meth:`SweepReport.to_dataframe`) give the table as a pandas
DataFrame, one row per task; pandas is imported only there.
Claims: those of the experiments (PB4–PB6, PB9–PB11, AT12, AT13, AT19).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import numbers
import sqlite3
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

from posflow.simulate._sweep_experiments import EXPERIMENTS, Experiment
from posflow.simulate._validate import read_text

__all__ = [
    "EXPERIMENTS",
    "MAX_SPEC_BYTES",
    "MAX_TASKS",
    "NEEDS_DASK",
    "NEEDS_PANDAS",
    "Experiment",
    "SweepReport",
    "SweepSpec",
    "SweepStore",
    "load_spec",
    "load_table",
    "parse_spec",
    "run_sweep",
    "run_task",
    "task_key",
]

NEEDS_DASK = (
    "posflow sweep needs dask.distributed: pip install -e .[cluster] (or 'posflow[cluster]')"
)
NEEDS_PANDAS = "to_dataframe needs pandas, which is not installed: pip install pandas"
STORE_FILE = "sweep.sqlite"
_SPEC_KEYS = {"experiment", "version", "params", "grid"}
MAX_TASKS = 10**6  # grid points of one sweep
MAX_SPEC_BYTES = 2**20  # a spec is a short text file


def _task_values(experiment: str, p: dict) -> float:
    """About how many float64 values one task holds at once (kernel tables, the λ schedule,
    the log-diagonal summed in blocks of 2^22 values, trial arrays); an upper estimate."""
    if experiment in ("rollout_profile", "dichotomy"):
        n, T = p["n"], p["T"]
        heads = p.get("heads", 1)
        return 4 * n * heads + 12 * n + 2 * T + 3 * min(T * n, 2**22)
    if experiment == "far_mass":
        return 8 * p["length"] * p["d"] + 1024 * p["d"] + 5 * p["n_trials"]
    return 0.0  # pragma: no cover - an experiment without an estimate is not bounded


def _canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def task_key(experiment: str, version: int, params: dict) -> str:
    """Key of a task: the first 24 hex digits of sha256 of {experiment, version, params}."""
    text = _canonical({"experiment": experiment, "version": version, "params": params})
    return hashlib.sha256(text.encode()).hexdigest()[:24]


@dataclass(frozen=True)
class SweepSpec:
    """A validated sweep: experiment, version, fixed parameters and the grid (name → values)."""

    experiment: str
    version: int
    fixed: dict
    grid: dict

    def as_dict(self) -> dict:
        """The spec as plain data; the grid as [name, values] pairs, keeping its order."""
        return {
            "experiment": self.experiment,
            "version": self.version,
            "params": self.fixed,
            "grid": [[k, v] for k, v in self.grid.items()],
        }

    @property
    def fingerprint(self) -> str:
        """sha256 of the canonical spec: two specs with one fingerprint share a store."""
        return hashlib.sha256(_canonical(self.as_dict()).encode()).hexdigest()

    @property
    def num_tasks(self) -> int:
        """Grid points: the product of the grid's list lengths (1 without a grid)."""
        return math.prod(len(v) for v in self.grid.values())

    def largest_task(self) -> dict:
        """Parameters of the largest grid point: the largest value of every numeric grid
        parameter (sizes grow with them), the first value of the others."""
        base = EXPERIMENTS[self.experiment].defaults() | self.fixed
        big = {}
        for k, vals in self.grid.items():
            nums = [v for v in vals if isinstance(v, numbers.Real) and not isinstance(v, bool)]
            big[k] = max(nums) if len(nums) == len(vals) else vals[0]
        return base | big

    def peak_task_bytes(self) -> float:
        """Bytes one task at :meth:`largest_task` holds at once (an upper estimate)."""
        return 8.0 * _task_values(self.experiment, self.largest_task())

    def tasks(self) -> list[tuple[int, str, dict]]:
        """(index, key, params) of every grid point, in grid order (last name fastest)."""
        base = EXPERIMENTS[self.experiment].defaults() | self.fixed
        names = list(self.grid)
        out = []
        for i, combo in enumerate(itertools.product(*(self.grid[k] for k in names))):
            params = base | dict(zip(names, combo, strict=True))
            out.append((i, task_key(self.experiment, self.version, params), params))
        return out


def parse_spec(data: dict, source: str = "spec") -> SweepSpec:
    """Validate a spec given as a dict (the parsed TOML); see the module docstring.

    Raises ValueError/TypeError naming the offending key: an unknown experiment, top-level key
    or parameter, a parameter both fixed and in the grid, an empty grid list, a value of the
    wrong type or outside its range, a version other than the experiment's, a grid of more than
    :data:`MAX_TASKS` points, or a largest task that would not fit in the memory available now.
    """
    if not isinstance(data, dict):
        raise TypeError(f"{source}: a spec must be a table; got {type(data).__name__}")
    extra = sorted(set(data) - _SPEC_KEYS)
    if extra:
        raise ValueError(f"{source}: unknown key {extra[0]!r}; allowed: {sorted(_SPEC_KEYS)}")
    name = data.get("experiment")
    if name is None:
        raise ValueError(
            f"{source}: no experiment = NAME line; choose one of {', '.join(EXPERIMENTS)}"
            + (" (the file is empty)" if not data else "")
        )
    if name not in EXPERIMENTS:
        raise ValueError(
            f"{source}: unknown experiment {name!r}; choose one of {', '.join(EXPERIMENTS)}"
        )
    exp = EXPERIMENTS[name]
    version = data.get("version", exp.version)
    if version != exp.version:
        raise ValueError(
            f"{source}: version {version!r} of experiment {name!r} was asked for; "
            f"this posflow has version {exp.version}"
        )
    fixed, grid = data.get("params", {}), data.get("grid", {})
    for key, val in (("params", fixed), ("grid", grid)):
        if not isinstance(val, dict):
            raise TypeError(f"{source}: [{key}] must be a table; got {type(val).__name__}")
    both = sorted(set(fixed) & set(grid))
    if both:
        raise ValueError(f"{source}: parameter {both[0]!r} is both in [params] and in [grid]")
    fixed = {k: exp.check(k, v) for k, v in fixed.items()}
    checked = {}
    for k, values in grid.items():
        if not isinstance(values, list) or not values:
            raise ValueError(f"{source}: grid parameter {k!r} must be a non-empty list")
        vals = [exp.check(k, v) for v in values]
        if len(set(vals)) != len(vals):
            raise ValueError(f"{source}: grid parameter {k!r} repeats a value")
        checked[k] = vals
    spec = SweepSpec(name, exp.version, fixed, checked)
    if spec.num_tasks > MAX_TASKS:
        sizes = " x ".join(f"{len(v)} {k}" for k, v in checked.items())
        raise ValueError(
            f"{source}: the grid has {spec.num_tasks} points ({sizes}); at most {MAX_TASKS} "
            "run in one sweep"
        )
    _check_memory(spec, source)
    return spec


def _check_memory(spec: SweepSpec, source: str) -> None:
    from posflow.simulate._validate import available_memory

    need, avail = spec.peak_task_bytes(), available_memory()
    if need > 0.8 * avail:
        big = spec.largest_task()
        sizes = ", ".join(
            f"{k} = {big[k]}" for k in ("n", "T", "heads", "length", "d", "n_trials") if k in big
        )
        raise ValueError(
            f"{source}: one task of {spec.experiment} at {sizes} would need about "
            f"{need / 2**30:.3g} GiB, but only {avail / 2**30:.3g} GiB of memory is available"
        )


def load_spec(path) -> SweepSpec:
    """Read and validate a TOML spec file (see :func:`parse_spec`)."""
    path = Path(path)
    text = read_text(path, "spec", MAX_SPEC_BYTES)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"spec {str(path)!r} is not valid TOML: {exc}") from exc
    except RecursionError:
        raise ValueError(f"spec {str(path)!r} is nested too deeply") from None
    return parse_spec(data, str(path))


def run_task(experiment: str, params: dict, backend: str = "numpy", device=None):
    """Run one task; returns (results dict, seconds). Executed on the Dask workers.

    A result that is not a finite number (NaN, an infinity from an underflow) is refused with a
    ValueError naming it, so that the store and its JSON hold only finite numbers.
    """
    t0 = time.perf_counter()
    res = EXPERIMENTS[experiment].run(params, backend, device)
    for k, v in res.items():
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError(
                f"experiment {experiment!r} gave {k} = {v}, not a finite number "
                f"(an underflow at these parameters)"
            )
    return res, time.perf_counter() - t0


# ------------------------------------------------------------------------------------------
# store


class SweepStore:
    """The result store of one spec: ``DIR/sweep.sqlite`` (WAL, one transaction per task).

    ``SweepStore(path)`` opens an existing store (``path`` is the directory or the file);
    ``SweepStore(path, spec)`` also creates it, or checks that it was written by ``spec``
    (ValueError otherwise, and the store is left as it was).
    """

    def __init__(self, path, spec: SweepSpec | None = None):
        path = Path(path)
        self.file = path if path.suffix == ".sqlite" else path / STORE_FILE
        if spec is None and not self.file.is_file():
            raise ValueError(f"no sweep store at {str(path)!r} (expected {self.file})")
        if spec is not None:
            self.file.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.file, timeout=60.0, isolation_level=None)
        try:
            self._open(spec)
        except (sqlite3.DatabaseError, KeyError, json.JSONDecodeError) as exc:
            self.db.close()
            raise self._corrupt(exc) from None
        except BaseException:
            self.db.close()
            raise

    def _corrupt(self, exc) -> ValueError:
        """The one-line error of a store file that is damaged or not a sweep store."""
        if isinstance(exc, sqlite3.OperationalError):  # locked, unreadable, read-only, I/O
            return ValueError(f"cannot use the sweep store {str(self.file)!r} ({exc})")
        why = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
        return ValueError(
            f"{str(self.file)!r} is not a readable posflow sweep store ({why}); it is damaged "
            "or not a sweep store: rerun the sweep with another --store"
        )

    def _open(self, spec):
        tables = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master")}
        if not tables and spec is not None:
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute("CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
            self.db.execute(
                "CREATE TABLE results (key TEXT PRIMARY KEY, idx INTEGER NOT NULL, "
                "params TEXT NOT NULL, results TEXT NOT NULL, backend TEXT, seconds REAL, "
                "finished REAL)"
            )
            meta = {
                "format": "1",
                "fingerprint": spec.fingerprint,
                "spec": _canonical(spec.as_dict()),
            }
            self.db.executemany("INSERT INTO meta VALUES (?, ?)", meta.items())
            self.db.execute("COMMIT")
        elif not {"meta", "results"} <= tables:
            raise ValueError(f"{str(self.file)!r} is not a posflow sweep store")
        self.meta = dict(self.db.execute("SELECT name, value FROM meta"))
        self.spec = json.loads(self.meta["spec"])
        if spec is not None and self.meta["fingerprint"] != spec.fingerprint:
            raise ValueError(
                f"store {str(self.file.parent)!r} was written by a different spec "
                f"({self.spec['experiment']} v{self.spec['version']}, fingerprint "
                f"{self.meta['fingerprint'][:12]}; this spec: {spec.fingerprint[:12]}); "
                "choose another --store"
            )
        self.db.execute("PRAGMA synchronous=FULL")

    def keys(self) -> set[str]:
        return {r[0] for r in self.db.execute("SELECT key FROM results")}

    def put(self, idx: int, key: str, params: dict, results: dict, backend: str, seconds: float):
        """Write one finished task in its own transaction; a key already present is kept."""
        self.db.execute(
            "INSERT OR IGNORE INTO results VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                key,
                idx,
                _canonical(params),
                json.dumps(results, allow_nan=False),
                backend,
                seconds,
                time.time(),
            ),
        )

    def _records(self) -> list[tuple]:
        """(idx, key, params, results, backend, seconds) of every finished task, in grid order."""
        try:
            cur = self.db.execute(
                "SELECT idx, key, params, results, backend, seconds FROM results ORDER BY idx"
            )
            return [(idx, key, json.loads(params), json.loads(results), backend, seconds)
                    for idx, key, params, results, backend, seconds in cur]  # fmt: skip
        except (sqlite3.DatabaseError, json.JSONDecodeError, TypeError) as exc:
            raise self._corrupt(exc) from None

    def rows(self, meta: bool = False) -> list[dict]:
        """Rows in grid order: {"key", "params", "results"} (+ backend, seconds with meta)."""
        out = []
        for _, key, params, results, backend, seconds in self._records():
            row = {"key": key, "params": params, "results": results}
            if meta:
                row |= {"backend": backend, "seconds": seconds}
            out.append(row)
        return out

    def to_dataframe(self, meta: bool = False):
        """The table of :meth:`rows` as a pandas DataFrame: one row per finished task.

        Index ``task``: the grid position of the task (0 … num_tasks − 1, last grid name
        fastest; a sweep still running or interrupted lacks the unfinished positions). Columns,
        all plain scalars: ``key``, the grid parameters in grid order, the fixed parameters (the
        experiment's defaults included), then the experiment's results in the order it returns
        them (a result named like a parameter becomes ``NAME_result``); with ``meta`` also
        ``backend`` and ``seconds`` (each task's wall-clock time on its worker).

        pandas is imported here only (``import posflow`` does not load it); ImportError naming
        ``pip install pandas`` when it is missing.
        """
        pd = _pandas()
        recs = self._records()
        grid = [g[0] for g in self.spec.get("grid", [])]
        params = list(dict.fromkeys([*grid, *(k for r in recs for k in r[2])]))
        results = list(dict.fromkeys(k for r in recs for k in r[3]))
        names = {k: f"{k}_result" if k in params or k == "key" else k for k in results}
        extra = ["backend", "seconds"] if meta else []
        rows = [[key, *(p.get(k) for k in params), *(res.get(k) for k in results),
                 *([backend, seconds] if meta else [])]
                for _, key, p, res, backend, seconds in recs]  # fmt: skip
        index = pd.Index([r[0] for r in recs], name="task", dtype="int64")
        columns = ["key", *params, *(names[k] for k in results), *extra]
        return pd.DataFrame(rows, index=index, columns=columns)

    def close(self):
        self.db.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def load_table(path, meta: bool = False) -> list[dict]:
    """The tidy table of a store: one row per finished task, in grid order."""
    with SweepStore(path) as store:
        return store.rows(meta)


def _pandas():
    """pandas, imported on first use; ImportError naming the install command otherwise."""
    try:
        import pandas
    except ImportError as exc:
        raise ImportError(NEEDS_PANDAS) from exc
    return pandas


# ------------------------------------------------------------------------------------------
# running


@dataclass(frozen=True)
class SweepReport:
    """What :func:`run_sweep` did: tasks in the grid, already stored, computed now, seconds."""

    store: Path
    total: int
    skipped: int
    computed: int
    seconds: float

    def to_dataframe(self, meta: bool = False):
        """The store's table as a pandas DataFrame (:meth:`SweepStore.to_dataframe`)."""
        with SweepStore(self.store) as st:
            return st.to_dataframe(meta)


def _distributed():
    try:
        import distributed
    except ImportError as exc:
        raise ImportError(NEEDS_DASK) from exc
    return distributed


def _client(distributed, scheduler, workers, processes, timeout):
    import logging

    import dask

    if scheduler is not None:
        with dask.config.set({"distributed.comm.timeouts.connect": f"{timeout}s"}):
            try:
                return distributed.Client(scheduler, timeout=f"{timeout}s"), None
            except (OSError, TimeoutError, ValueError) as exc:
                msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise ValueError(f"scheduler {scheduler!r} is unreachable: {msg}") from exc
    cluster = distributed.LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=processes,
        dashboard_address=":0",  # a free port: never clash with another cluster
        silence_logs=logging.CRITICAL,  # a failed task is reported once, by _drive
    )
    return distributed.Client(cluster), cluster


def run_sweep(
    spec: SweepSpec,
    store,
    *,
    scheduler: str | None = None,
    workers: int = 2,
    backend: str = "numpy",
    device=None,
    processes: bool = True,
    progress: bool = True,
    timeout: float = 10.0,
) -> SweepReport:
    """Run every task of ``spec`` not yet in ``store`` and write each as it finishes.

    Parameters
    ----------
    spec : SweepSpec
    store : path
        Store directory (created if needed); refused (ValueError) when written by another spec.
    scheduler : str, optional
        Address of a Dask scheduler (``tcp://host:8786``); a ``LocalCluster`` of ``workers``
        single-threaded workers (processes, or threads with ``processes=False``) otherwise.
    backend, device : str
        Array backend of the experiments (``numpy``, ``torch``, ``cupy``; checked here first).
    progress : bool
        Show a progress bar on stderr.

    Returns a :class:`SweepReport`. Raises ValueError for an unreachable scheduler, a backend
    that is not installed, a foreign store, or a task that failed (finished tasks are kept),
    and ImportError naming ``pip install -e .[cluster]`` when dask.distributed is missing.
    """
    from posflow.simulate.backend import resolve_backend

    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1; got {workers!r}")
    resolve_backend(backend, device)
    dev = None if device is None else str(device)
    tasks = spec.tasks()
    with SweepStore(store, spec) as st:  # check the store before starting anything
        done = st.keys()
    todo = [t for t in tasks if t[1] not in done]
    t0 = time.perf_counter()
    if todo:
        distributed = _distributed()
        client, cluster = _client(distributed, scheduler, workers, processes, timeout)
        try:
            with SweepStore(store, spec) as st:
                _drive(distributed, client, st, spec, todo, backend, dev, progress, len(tasks))
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
    return SweepReport(
        Path(store), len(tasks), len(tasks) - len(todo), len(todo), time.perf_counter() - t0
    )


def _drive(distributed, client, st, spec, todo, backend, dev, progress, total):
    from rich.progress import BarColumn, MofNCompleteColumn, TimeElapsedColumn

    from posflow.simulate._progress import progress as progress_of

    futures = {
        client.submit(
            run_task, spec.experiment, params, backend, dev, key=f"posflow-{key}", pure=False
        ): (idx, key, params)
        for idx, key, params in todo
    }
    cols = ("{task.description}", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with progress_of(len(todo), f"sweep {spec.experiment}", enabled=bool(progress),
                     columns=cols) as bar:  # fmt: skip
        for fut in distributed.as_completed(futures):
            idx, key, params = futures[fut]
            try:
                results, seconds = fut.result()
            except Exception as exc:
                for other in futures:
                    other.cancel()
                msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise ValueError(f"task {idx} {_canonical(params)} failed: {msg}") from exc
            st.put(idx, key, params, results, backend, seconds)
            bar.advance(detail=f"task {idx} ({seconds:.1f} s)")
