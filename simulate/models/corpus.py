"""An offline text corpus for training and measuring small LMs (claims PB15, PB16).

The default corpus is the running Python's standard-library source (``*.py`` files under
``sysconfig.get_paths()["stdlib"]``, without ``site-packages``), read as bytes: real text that
exists on every machine, vocabulary 256. Files are listed in sorted order, shuffled by a seeded
``numpy.random.Generator`` and concatenated (separated by a newline) up to ``max_bytes``, so a
(seed, Python version) pair always gives the same corpus. Users may name their own text files
or folders instead.
"""

from __future__ import annotations

import sysconfig
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["Corpus", "load_corpus", "stdlib_files", "training_batch", "windows"]

DEFAULT_MAX_BYTES = 4_000_000


def _rng(seed) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int | np.integer)):
        raise TypeError(f"seed must be an int, None or a numpy Generator; got {seed!r}")
    return np.random.default_rng(seed)


def stdlib_files() -> list[Path]:
    """The standard library's ``*.py`` files in sorted order (no ``site-packages``)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    out = []
    for p in sorted(root.rglob("*.py")):
        parts = p.relative_to(root).parts
        if any(s in ("site-packages", "dist-packages", "__pycache__") for s in parts):
            continue
        if p.is_file():
            out.append(p)
    return out


@dataclass
class Corpus:
    """Byte tokens ``data`` (uint8, shape (N,)) and the files they came from."""

    data: np.ndarray
    sources: list[str]
    description: str

    def split(self, valid_fraction: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
        """(train, valid): the last ``valid_fraction`` of the bytes is held out."""
        if not (0 < valid_fraction < 1):
            raise ValueError(f"valid_fraction must lie in (0, 1); got {valid_fraction}")
        cut = round(self.data.size * (1 - valid_fraction))
        return self.data[:cut], self.data[cut:]


def _expand(paths) -> list[Path]:
    if isinstance(paths, str | Path):
        paths = [paths]
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            out += sorted(q for q in p.rglob("*") if q.is_file())
        elif p.is_file():
            out.append(p)
        else:
            raise ValueError(f"corpus path {str(p)!r} is neither a file nor a folder")
    if not out:
        raise ValueError("corpus paths name no files")
    return out


def load_corpus(paths=None, *, max_bytes: int = DEFAULT_MAX_BYTES, seed=0) -> Corpus:
    """Read a byte corpus (claims PB15, PB16).

    Parameters
    ----------
    paths : None, path, or sequence of paths
        Text files or folders (read recursively, sorted). None: the standard library's
        ``*.py`` files (:func:`stdlib_files`), shuffled by ``seed``.
    max_bytes : int
        Stop after this many bytes (files are read whole, the last one truncated).
    seed : int, None or numpy Generator
        Order of the standard-library files; user-named files keep the given order.

    Returns
    -------
    Corpus
        ``data`` of shape (N,), N <= max_bytes, dtype uint8. Cost: reading N bytes.
    """
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int | np.integer) or max_bytes < 1:
        raise ValueError(f"max_bytes must be a positive integer; got {max_bytes!r}")
    if paths is None:
        files = stdlib_files()
        order = _rng(seed).permutation(len(files))
        files = [files[i] for i in order]
        what = f"Python standard library ({sysconfig.get_paths()['stdlib']})"
    else:
        files = _expand(paths)
        what = f"{len(files)} user file(s)"
    chunks, used, total = [], [], 0
    for f in files:
        if total >= max_bytes:
            break
        b = f.read_bytes()[: max_bytes - total]
        if b:
            chunks.append(b + b"\n")
            used.append(str(f))
            total += len(b) + 1
    data = np.frombuffer(b"".join(chunks)[:max_bytes], dtype=np.uint8).copy()
    return Corpus(data, used, f"{what}: {data.size} bytes from {len(used)} file(s)")


def windows(tokens, n: int, count: int, seed=0) -> np.ndarray:
    """``count`` disjoint windows of ``n`` tokens, chosen at random among the aligned ones.

    The token stream is cut into ``len(tokens) // n`` non-overlapping windows and ``count`` of
    them are drawn without replacement (seeded), kept in stream order. Claims PB15, PB16.

    Returns
    -------
    ndarray, shape (count, n), int64

    Raises ValueError when the stream holds fewer than ``count`` windows ("too little text").
    """
    t = np.asarray(tokens)
    if t.ndim != 1:
        raise ValueError(f"tokens must be one-dimensional; got shape {t.shape}")
    for name, v in (("n", n), ("count", count)):
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
            raise ValueError(f"{name} must be a positive integer; got {v!r}")
    have = t.size // n
    if have < count:
        raise ValueError(
            f"corpus has too little text: {t.size} tokens hold {have} windows of n = {n}, "
            f"but {count} sequences were asked for (need {count * n} tokens)"
        )
    pick = np.sort(_rng(seed).choice(have, size=count, replace=False))
    return np.stack([t[i * n : (i + 1) * n] for i in pick]).astype(np.int64)


def training_batch(tokens, batch_size: int, n: int, rng: np.random.Generator):
    """Random (input, target) windows: inputs ``t[o:o+n]``, targets ``t[o+1:o+n+1]``.

    Returns two int64 arrays of shape (batch_size, n). Raises ValueError when the stream has
    fewer than ``n + 1`` tokens.
    """
    t = np.asarray(tokens)
    if t.size < n + 1:
        raise ValueError(
            f"corpus has too little text: {t.size} tokens, training windows need n + 1 = {n + 1}"
        )
    off = rng.integers(0, t.size - n, size=batch_size)
    idx = off[:, None] + np.arange(n + 1)
    w = t[idx].astype(np.int64)
    return w[:, :-1], w[:, 1:]
