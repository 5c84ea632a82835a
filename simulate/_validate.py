"""Argument checks shared by the numeric modules.

Every check raises one ``ValueError``/``TypeError`` whose message names the argument and the
rule it broke, so that the command line can print it as a single line.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

__all__ = [
    "as_lambdas",
    "as_vector",
    "available_memory",
    "ensure_fits",
    "ensure_memory",
]


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
