"""How many CPU threads posflow's numeric libraries use: torch, BLAS/OpenMP and numba, set together.

The default (:func:`default_threads`) is the number of cores this process may use that other
processes are not already keeping busy::

    cores   = len(os.sched_getaffinity(0)), capped by a cgroup CPU quota (cpu.max) if any
    busy    = max(load1 * cores / cpu_count,        1-minute load average, our share of it
                  busy_now)                         cores of our set in use over the last 0.1 s
    threads = max(1, cores - round(busy)), capped by OMP_NUM_THREADS if set when posflow started

so a two-core machine with one core loaded by another job gets one thread, not two threads that
fight for one core (OpenMP and numba workers spin while they wait, so oversubscribing a core
costs far more than the lost parallelism). ``busy_now`` (from ``/proc/stat``, sampled while this
process sleeps) sees a job that started seconds ago, which the load average only reaches after
a minute; the load average smooths out a momentary lull. Both err toward fewer threads.

:func:`set_threads` applies one count everywhere: ``torch.set_num_threads`` (when torch is
imported or asked for), the BLAS already loaded (threadpoolctl when installed, else the OpenBLAS
``*_set_num_threads`` entry points found in the loaded libraries), ``numba.set_num_threads``
(at most numba's ``NUMBA_NUM_THREADS``), and the ``OMP_NUM_THREADS`` family of environment
variables for libraries loaded later and for child processes.
"""

from __future__ import annotations

import ctypes
import math
import numbers
import os
import sys
import time

__all__ = ["available_cores", "default_threads", "set_threads", "thread_counts"]

_ENV_VARS = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
# OMP_NUM_THREADS as the user (or a test harness) set it before posflow started: a cap on the
# default. Read once, so that set_threads's own writes never feed back into the default.
_ENV_AT_START = os.environ.get("OMP_NUM_THREADS")

_BLAS_SETTERS = (
    "openblas_set_num_threads",
    "scipy_openblas_set_num_threads64_",
    "scipy_openblas_set_num_threads",
    "openblas_set_num_threads64_",
    "MKL_Set_Num_Threads",
)
_BLAS_GETTERS = (
    "openblas_get_num_threads",
    "scipy_openblas_get_num_threads64_",
    "scipy_openblas_get_num_threads",
    "openblas_get_num_threads64_",
    "MKL_Get_Max_Threads",
)


def _cgroup_cpus() -> int | None:
    """CPUs allowed by a cgroup v2 quota (``cpu.max``: "quota period"), or None if unlimited."""
    try:
        with open("/sys/fs/cgroup/cpu.max", encoding="ascii") as fh:
            quota, period = fh.read().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    try:
        return max(1, math.ceil(int(quota) / int(period)))
    except (ValueError, ZeroDivisionError):
        return None


def available_cores() -> int:
    """Cores this process may run on: its CPU affinity, capped by a cgroup CPU quota."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - no affinity API (macOS, Windows)
        cores = os.cpu_count() or 1
    quota = _cgroup_cpus()
    return max(1, min(cores, quota) if quota else cores)


def _load() -> float:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):  # pragma: no cover - no load average (Windows)
        return 0.0


def _cpu_times(cpus) -> tuple[int, int] | None:
    """(busy, total) jiffies of the CPUs ``cpus`` from /proc/stat, or None."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    busy = total = 0
    for line in lines:
        name, *fields = line.split()
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus:
            ticks = [int(x) for x in fields[:8]]  # user nice system idle iowait irq softirq steal
            total += sum(ticks)
            busy += sum(ticks) - ticks[3] - ticks[4]
    return (busy, total) if total else None


def _busy_now(interval: float = 0.1) -> float:
    """Cores of this process's CPU set busy over the next ``interval`` seconds (0 if unknown)."""
    try:
        cpus = os.sched_getaffinity(0)
    except (AttributeError, OSError):  # pragma: no cover - no affinity API
        return 0.0
    a = _cpu_times(cpus)
    time.sleep(interval)
    b = _cpu_times(cpus)
    if a is None or b is None or b[1] <= a[1]:
        return 0.0
    return len(cpus) * (b[0] - a[0]) / (b[1] - a[1])


def default_threads() -> int:
    """Threads that do not oversubscribe the machine: ``max(1, cores - round(busy))``.

    ``cores`` is :func:`available_cores`; ``busy`` the larger of this CPU set's share of the
    1-minute load average and the cores busy over a 0.1 s sample (module docstring). Capped by
    an ``OMP_NUM_THREADS`` (a positive integer) set before posflow was imported.
    """
    cores = available_cores()
    share = cores / max(os.cpu_count() or cores, cores)
    busy = max(_load() * share, _busy_now())
    n = max(1, cores - round(busy))
    if _ENV_AT_START is not None and _ENV_AT_START.strip().isdigit() and int(_ENV_AT_START) >= 1:
        n = min(n, int(_ENV_AT_START))
    return n


def _check(n) -> int:
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ValueError(f"threads must be an integer >= 1; got {n!r}")
    return int(n)


def _loaded_blas() -> list[ctypes.CDLL]:
    """The BLAS libraries mapped into this process (Linux: from /proc/self/maps)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            paths = {line.split(None, 5)[-1].strip() for line in fh if ".so" in line}
    except OSError:  # pragma: no cover - not Linux
        return []
    libs = []
    for p in sorted(paths):
        name = os.path.basename(p).lower()
        if "openblas" in name or name.startswith("libmkl_rt"):
            try:
                libs.append(ctypes.CDLL(p))
            except OSError:  # pragma: no cover - unloadable mapping
                continue
    return libs


def _call_first(lib, names, *args):
    for name in names:
        fn = getattr(lib, name, None)
        if fn is not None:
            return fn(*args)
    return None


def _set_blas(n: int) -> None:
    try:
        import threadpoolctl
    except ImportError:
        for lib in _loaded_blas():
            _call_first(lib, _BLAS_SETTERS, ctypes.c_int(n))
        return
    threadpoolctl.threadpool_limits(limits=n)


def _blas_counts() -> list[int]:
    try:
        import threadpoolctl
    except ImportError:
        out = []
        for lib in _loaded_blas():
            v = _call_first(lib, _BLAS_GETTERS)
            if v is not None:
                out.append(int(v))
        return out
    return [int(i["num_threads"]) for i in threadpoolctl.threadpool_info()]


def set_threads(n=None, *, torch: bool | None = None) -> int:
    """Use ``n`` CPU threads in torch, BLAS/OpenMP and numba; return the count applied.

    Parameters
    ----------
    n : int >= 1, optional
        Threads; :func:`default_threads` when omitted.
    torch : bool, optional
        Set torch's intra-op threads: True imports torch, None sets it only if torch is
        already imported (torch imported later reads ``OMP_NUM_THREADS``, set here), False
        leaves it.

    Returns
    -------
    int
        The count applied (numba's share is at most its ``NUMBA_NUM_THREADS``).

    Raises ValueError for ``n`` that is not an integer >= 1.
    """
    n = default_threads() if n is None else _check(n)
    for var in _ENV_VARS:
        os.environ[var] = str(n)
    _set_blas(n)
    import numba

    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
    if torch or (torch is None and "torch" in sys.modules):
        import torch as _torch

        _torch.set_num_threads(n)
    return n


def thread_counts() -> dict:
    """Threads each library uses now: ``{"numba": int, "blas": [int, ...], "torch": int}``
    (torch only when imported)."""
    import numba

    out = {"numba": int(numba.get_num_threads()), "blas": _blas_counts()}
    if "torch" in sys.modules:
        out["torch"] = int(sys.modules["torch"].get_num_threads())
    return out
