"""Argument checks shared by the numeric modules.

Every check raises one ``ValueError``/``TypeError`` whose message names the argument and the
rule it broke, so that the command line can print it as a single line.

:func:`dense_checked_copy` checks a dense kernel's entries while copying it, in one pass over
its rows (compiled by numba; :class:`posflow.simulate.kernels.DenseKernel` on NumPy).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
from numba import config as _numba_config
from numba import njit

from posflow.simulate._paths import numba_cache_dir

# cache=True writes compiled code to disk: send it to the per-user cache, never beside the
# source files of the installed package (unless the user chose a folder with NUMBA_CACHE_DIR).
if not _numba_config.CACHE_DIR:
    _numba_config.CACHE_DIR = str(numba_cache_dir())

__all__ = [
    "CAUSAL_TOL",
    "NEG_TOL",
    "as_lambdas",
    "as_vector",
    "available_memory",
    "dense_checked_copy",
    "ensure_fits",
    "ensure_memory",
]

NEG_TOL = 1e-12  # a kernel entry ≥ −1e-12 counts as nonnegative
CAUSAL_TOL = 1e-12  # an entry above the diagonal with |A[i, j]| ≤ 1e-12 counts as 0


def as_vector(x, name: str, *, size: int | None = None, allow_scalar: bool = True) -> np.ndarray:
    """Return ``x`` as a finite 1-D float64 array (a scalar becomes shape (1,))."""
    if isinstance(x, str | bytes):
        raise TypeError(f"{name} must be a number or a sequence of numbers; got a string")
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a number or a sequence of numbers; got {x!r}") from exc
    if arr.ndim == 0:
        if not allow_scalar:
            raise ValueError(f"{name} must be one-dimensional; got a scalar")
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional; got shape {arr.shape}")
    if size is not None and arr.shape[0] != size:
        raise ValueError(f"{name} must have length {size}; got {arr.shape[0]}")
    bad = ~np.isfinite(arr)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{name} must be finite; got {arr[k]} at index {k}")
    return arr


def as_lambdas(lambdas) -> np.ndarray:
    """Validate a mixing schedule: a 1-D float64 array with entries in [0, 1]."""
    if isinstance(lambdas, int | float | np.floating | np.integer):
        raise TypeError(
            "lambdas must be a sequence with one value per layer; "
            "use constant(lam, T) for a constant schedule"
        )
    lam = as_vector(lambdas, "lambdas", allow_scalar=False)
    out = (lam < 0.0) | (lam > 1.0)
    if out.any():
        k = int(np.flatnonzero(out)[0])
        raise ValueError(f"lambdas must lie in [0, 1]; got {lam[k]} at index {k}")
    return lam


def available_memory() -> int:
    """Bytes of memory available to this process (MemAvailable on Linux)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 2**62


def ensure_fits(shape: Sequence[int], name: str, *, copies: int = 1) -> None:
    """Raise ``ValueError`` if ``copies`` float64 arrays of ``shape`` exceed available memory."""
    nbytes = 8 * copies
    for s in shape:
        nbytes *= int(s)
    avail = available_memory()
    if nbytes > 0.8 * avail:
        raise ValueError(
            f"{name} would need {nbytes / 2**30:.1f} GiB for a dense {tuple(shape)} float64 "
            f"array but only {avail / 2**30:.1f} GiB is available; use a vector chain "
            "(influence / apply_left) instead"
        )


def ensure_memory(nbytes: float, name: str, what: str) -> None:
    """Raise ``ValueError`` naming ``name`` (the argument that sets the size, with its value)
    when ``what`` would hold ``nbytes`` at once, more than 80% of the memory available now.

    Checked before anything is allocated, so a size that cannot fit is refused in one line
    instead of a ``MemoryError`` (or the out-of-memory killer) part way through.
    """
    avail = available_memory()
    if not nbytes <= 0.8 * avail:
        raise ValueError(
            f"{name} is too large: {what} would need {nbytes / 2**30:.1f} GiB but only "
            f"{avail / 2**30:.1f} GiB of memory is available"
        )


def read_text(path, name: str, max_bytes: int) -> str:
    """The UTF-8 text of file ``path``, read only when it is at most ``max_bytes`` long.

    Bounded before reading, so a huge or binary file costs nothing. Raises ValueError naming
    ``name`` (the argument or role of the file): missing, too large, unreadable or not UTF-8.
    """
    text = str(path)
    if not os.path.isfile(text):
        raise ValueError(f"{name}: no such file {text!r} (it does not exist)")
    size = os.stat(text).st_size
    if size > max_bytes:
        raise ValueError(
            f"{name}: {text!r} is {size / 2**20:.1f} MiB; at most {max_bytes / 2**20:.1f} MiB "
            "is read"
        )
    try:
        with open(text, "rb") as fh:
            return fh.read().decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{name}: {text!r} is not UTF-8 text") from None
    except OSError as exc:
        raise ValueError(f"{name}: cannot read {text!r} ({exc.strerror})") from None


# ---------------------------------------------------------------------------------------------
# dense kernels: the entry rules and the copy in one pass

_BLOCK_BYTES = 2**18  # 256 KiB of rows per block: the row sums read the block from the L2 cache


@njit(cache=True, nogil=True)
def _copy_rows_checked(A, causal, out, r0, r1):  # pragma: no cover - compiled
    # out[r0:r1] = A[r0:r1] with the strict upper triangle zeroed when causal; True when every
    # entry is finite and ≥ −NEG_TOL and, when causal, |A[i, j]| ≤ CAUSAL_TOL for j > i (which
    # implies the other two). The loops run over slices from 0 (no negative-index wraparound
    # test), so LLVM vectorises them; `ok` is reduced with `&` (no branch), NaN fails every test.
    n = A.shape[1]
    ok = True
    for i in range(r0, r1):
        k = i + 1 if causal else n
        a = A[i, :k]
        o = out[i, :k]
        for j in range(k):
            x = a[j]
            o[j] = x
            ok = ok & (x >= -NEG_TOL) & (x < np.inf)
        a = A[i, k:]
        o = out[i, k:]
        for j in range(n - k):
            ok = ok & (abs(a[j]) <= CAUSAL_TOL)  # read before the 0 is written: out may be A
            o[j] = 0.0
    return ok


def dense_checked_copy(A: np.ndarray, causal: bool, out: np.ndarray) -> np.ndarray | None:
    """Copy a square matrix into ``out`` while checking the entry rules of a dense kernel.

    One pass over the rows of ``A``, in blocks of 256 KiB: a compiled loop copies each row
    (zeroing the strict upper triangle when ``causal``) and checks its entries, then NumPy sums
    the block's rows while they are in cache. Memory traffic: ``A`` read once and ``out``
    written once, 16 n² bytes (two matrix–vector products' worth), where the array-API check
    (:func:`posflow.simulate.kernels._validated`) makes about ten passes and (n, n) temporaries.

    .. math::
        \\text{ok} \\iff \\forall i, j:\\; A_{ij} \\in [-10^{-12}, \\infty)
        \\;\\wedge\\; (\\text{causal} \\Rightarrow |A_{ij}| \\le 10^{-12} \\text{ for } j > i)

    Parameters
    ----------
    A : ndarray, shape (n, n), float64
        The matrix, any strides (C-contiguous is fastest).
    causal : bool
        Check and zero the strict upper triangle.
    out : ndarray, shape (n, n), float64, C-contiguous
        Receives the copy; may be ``A`` itself (checked and zeroed in place).

    Returns
    -------
    sums : ndarray, shape (n,), or None
        The row sums of ``out`` by ``np.sum(out, axis=1)`` (the same pairwise sums, bit for
        bit) when every entry passes; None as soon as a block fails (``out`` is then partly
        written), so that the caller can run the full check for its message.
    """
    n = A.shape[0]
    rows = max(1, _BLOCK_BYTES // (8 * n))
    sums = np.empty(n)
    for r0 in range(0, n, rows):
        r1 = min(n, r0 + rows)
        if not _copy_rows_checked(A, causal, out, r0, r1):
            return None
        np.sum(out[r0:r1], axis=1, out=sums[r0:r1])
    return sums
