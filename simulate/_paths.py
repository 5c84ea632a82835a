"""Where posflow keeps what it computes: the per-user cache, never the package or the checkout.

``POSFLOW_CACHE_DIR`` overrides the location; otherwise :func:`platformdirs.user_cache_dir`
(``~/.cache/posflow`` on Linux, honouring ``XDG_CACHE_HOME``). numba's compiled-function cache
goes there too (unless ``NUMBA_CACHE_DIR`` is set), so that importing posflow never writes next
to its own source files.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["numba_cache_dir", "user_cache_dir"]


def user_cache_dir() -> Path:
    """The per-user cache folder of posflow (not created here)."""
    env = os.environ.get("POSFLOW_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("posflow", appauthor=False))


def numba_cache_dir() -> Path:
    """``<user cache>/numba``: where numba keeps posflow's compiled kernels (``cache=True``)."""
    return user_cache_dir() / "numba"
