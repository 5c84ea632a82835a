"""How posflow runs: CPU threads, the per-user cache, and the input checks the command line shares.

* :func:`set_threads`, :func:`default_threads`, :func:`available_cores`, :func:`thread_counts` —
  one thread count for torch, BLAS and numba alike (results are reproducible across counts
  where the routines promise it; float32 torch reductions are not);
* :func:`user_cache_dir`, :func:`numba_cache_dir` — where trained models, stores and compiled
  kernels go (``$POSFLOW_CACHE_DIR`` or the platform's user cache), never the package;
* :func:`as_lambdas`, :func:`read_text` — the checks of a λ schedule and of a text file that the
  library applies and the command line reuses for its one-line errors;
* :func:`available_memory` — the memory available now, which dense requests are checked against;
* :func:`progress` — progress of long work on stderr: a bar on a terminal, plain lines when piped.
"""

from posflow.simulate import _validate
from posflow.simulate._paths import numba_cache_dir, user_cache_dir
from posflow.simulate._progress import progress
from posflow.simulate._threads import available_cores, default_threads, set_threads, thread_counts
from posflow.simulate._validate import as_lambdas, read_text

__all__ = [
    "as_lambdas",
    "available_cores",
    "available_memory",
    "default_threads",
    "numba_cache_dir",
    "progress",
    "read_text",
    "set_threads",
    "thread_counts",
    "user_cache_dir",
]


def available_memory() -> int:
    """Bytes of memory available now (as the library's own size checks read it)."""
    return _validate.available_memory()
