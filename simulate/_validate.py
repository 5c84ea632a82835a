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

@njit(cache=True, nogil=True)
def _pairwise_leaf(a, lo, n):  # pragma: no cover - compiled
    # NumPy's pairwise sum of a[lo:lo + n] for n ≤ 128: below 8 entries a plain loop; else eight
    # accumulators, combined as ((0+1)+(2+3))+((4+5)+(6+7)), then the rest one by one.
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    b = a[lo : lo + n]
    r0, r1, r2, r3, r4, r5, r6, r7 = b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]
    m = n - n % 8
    for t in range(8, m, 8):
        c = b[t : t + 8]  # a slice from 0: constant indices, no wraparound test
        r0 += c[0]
        r1 += c[1]
        r2 += c[2]
        r3 += c[3]
        r4 += c[4]
        r5 += c[5]
        r6 += c[6]
        r7 += c[7]
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    for i in range(m, n):
        res += b[i]
    return res


@njit(cache=True, nogil=True)
def _pairwise_sum(a, k, frames, vals):  # pragma: no cover - compiled
    # NumPy's pairwise sum of a (numpy/_core/src/umath/loops_utils.h.src), the same additions
    # in the same order: above 128 entries the sum of the halves split at n2 = n//2 rounded down
    # to a multiple of 8, each summed the same way; up to 128, _pairwise_leaf. Evaluated in
    # post-order on an explicit stack (numba's cache cannot hold a recursive function):
    # frames[s] = (lo, n, halves done), vals the finished subtotals. Entries at index ≥ k are
    # known to be +0.0: a subtree wholly beyond k sums to +0.0 exactly and is not read.
    frames[0, 0], frames[0, 1], frames[0, 2] = 0, a.shape[0], 0
    sp, vp = 1, 0
    while sp > 0:
        lo, n, done = frames[sp - 1, 0], frames[sp - 1, 1], frames[sp - 1, 2]
        if lo >= k or n <= 128:
            vals[vp] = 0.0 if lo >= k else _pairwise_leaf(a, lo, n)
            vp += 1
            sp -= 1
        elif done == 2:
            vals[vp - 2] = vals[vp - 2] + vals[vp - 1]
            vp -= 1
            sp -= 1
        else:
            n2 = n // 2
            n2 -= n2 % 8
            frames[sp - 1, 2] = done + 1
            frames[sp, 0] = lo if done == 0 else lo + n2
            frames[sp, 1] = n2 if done == 0 else n - n2
            frames[sp, 2] = 0
            sp += 1
    return vals[0]


@njit(cache=True, nogil=True)
def _copy_rows_checked(A, causal, out, sums):  # pragma: no cover - compiled
    # out = A with the strict upper triangle zeroed when causal, sums[i] = np.sum(out[i]) bit
    # for bit (the row is summed from the L1 cache right after it is written); True when every
    # entry is finite and ≥ −NEG_TOL and, when causal, |A[i, j]| ≤ CAUSAL_TOL for j > i (which
    # implies the other two), False at the end of the first row that fails. The loops run over
    # slices from 0 (no negative-index wraparound test), so LLVM vectorises them; `ok` is
    # reduced with `&` (no branch), NaN fails every test.
    n = A.shape[1]
    ok = True
    frames = np.empty((64, 3), np.int64)  # the halves shrink n at least twofold: depth < 64
    vals = np.empty(64)
    for i in range(A.shape[0]):
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
        if not ok:
            return False
        sums[i] = 0.0 + _pairwise_sum(out[i], k, frames, vals)  # NumPy adds to its identity, +0.0
    return True


def dense_checked_copy(A: np.ndarray, causal: bool, out: np.ndarray) -> np.ndarray | None:
    """Copy a square matrix into ``out`` while checking the entry rules of a dense kernel.

    One compiled pass over the rows of ``A``: each row is copied (its strict upper triangle
    zeroed when ``causal``), its entries checked, and its sum taken while it is in the L1 cache.
    Memory traffic: ``A`` read once and ``out`` written once, 16 n² bytes (two matrix–vector
    products' worth), where the array-API check
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
        The row sums of ``out``, bit for bit ``np.sum(out, axis=1)``: NumPy's pairwise sum,
        the same additions in the same order (:func:`_pairwise_sum`; the zeros of a causal
        row's upper triangle are not read, which adds nothing). None at the first row that
        fails (``out`` is then partly written), so that the caller can run the full check for
        its message.
    """
    sums = np.empty(A.shape[0])
    return sums if _copy_rows_checked(A, causal, out, sums) else None
