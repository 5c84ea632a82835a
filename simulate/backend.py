"""One array code path for NumPy, torch and CuPy (array-api-compat), and seeded random numbers.

A *backend* names an array library: ``"numpy"`` (the default; numba is its CPU fast path for
the ALiBi recurrence, where ``benchmarks/backend.py`` measures it faster),
``"torch"`` (CPU or CUDA), ``"cupy"`` (CUDA) or ``"array_api_strict"`` (the reference
implementation of the array API standard, used to prove that the generic path uses nothing
else). Generic code asks :func:`namespace` for the array-api-compat namespace ``xp`` and calls
only standard functions on it, so the same lines run on every backend; float64 throughout.

Kernel constructors (:mod:`posflow.simulate.kernels`) take ``backend=``/``device=`` and resolve
them once; the rollout functions then run on that backend and return its arrays. The transport
functions of :mod:`posflow.simulate.transport` take any backend's arrays and return the same
kind; their Monte Carlo estimators take ``backend=``/``device=``/``host=`` for their draws.
This module is a leaf: it imports no other posflow module.

Random numbers come from one adapter per backend (:func:`random_source`): a NumPy
``Generator``, a ``torch.Generator`` or a CuPy ``RandomState``, seeded from ``seed`` (None, an
int or a NumPy Generator), so one seed gives the same numbers on a backend across runs.
``host=True`` draws on the host with NumPy and moves the numbers to the device: then every
backend sees exactly the numbers of the NumPy functions, which is what the sweeps use.
"""

from __future__ import annotations

import importlib
import numbers

import numpy as np

__all__ = [
    "BACKENDS",
    "BackendUnavailableError",
    "RandomSource",
    "asarray",
    "available_backends",
    "backend_of",
    "host",
    "namespace",
    "random_source",
    "resolve_backend",
    "to_numpy",
]

BACKENDS = ("numpy", "torch", "cupy", "array_api_strict")

_INSTALL = {
    "torch": "pip install torch==2.13.0 (or pip install 'posflow[torch]')",
    "cupy": "pip install cupy-cuda12x (or pip install 'posflow[gpu]')",
    "array_api_strict": "pip install array-api-strict",
}


class BackendUnavailableError(ValueError):
    """A known backend that cannot be used here (not installed, or no such device)."""


def _check_name(backend) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}; got {backend!r}")
    return backend


def _import(backend: str):
    """The array library itself (numpy, torch, cupy, array_api_strict)."""
    try:
        return importlib.import_module(backend)
    except ImportError as exc:
        raise BackendUnavailableError(
            f"backend {backend!r} is not installed ({exc}); {_INSTALL[backend]}"
        ) from exc


def namespace(backend: str = "numpy"):
    """The array-api-compat namespace ``xp`` of a backend (claims PB1–PB14, AT18).

    ``"numpy"`` → ``array_api_compat.numpy``, ``"torch"`` → ``array_api_compat.torch``,
    ``"cupy"`` → ``array_api_compat.cupy``, ``"array_api_strict"`` → the strict module.
    Raises ValueError for an unknown name and :class:`BackendUnavailableError` (a ValueError)
    naming the install command when the library is missing.
    """
    _check_name(backend)
    _import(backend)
    if backend == "array_api_strict":
        return importlib.import_module("array_api_strict")
    return importlib.import_module(f"array_api_compat.{backend}")


def available_backends() -> tuple[str, ...]:
    """Backends usable here: installed, and for CuPy with a CUDA device, in ``BACKENDS`` order."""
    out = []
    for b in BACKENDS:
        try:
            resolve_backend(b, None)
        except BackendUnavailableError:
            continue
        out.append(b)
    return tuple(out)


def backend_of(x) -> str | None:
    """The backend of an array (``None`` for lists, scalars and other array_like)."""
    import array_api_compat as aac

    if aac.is_numpy_array(x):
        return "numpy"
    if aac.is_torch_array(x):
        return "torch"
    if aac.is_cupy_array(x):
        return "cupy"
    if type(x).__module__.startswith("array_api_strict"):
        return "array_api_strict"
    return None


def _device(backend: str, device):
    """Validate ``device`` for ``backend`` and return the library's device object."""
    if backend == "numpy":
        if device not in (None, "cpu"):
            raise ValueError(f"device must be None or 'cpu' for backend 'numpy'; got {device!r}")
        return None
    if backend == "array_api_strict":
        xp = namespace(backend)
        if device is None or device == "cpu":
            return xp.Device("CPU_DEVICE")
        if isinstance(device, xp.Device):
            return device
        raise ValueError(f"device must be None or 'cpu' for backend {backend!r}; got {device!r}")
    if backend == "torch":
        torch = _import("torch")
        try:
            dev = torch.device("cpu" if device is None else device)
        except (RuntimeError, TypeError) as exc:
            raise ValueError(f"device must name a torch device; got {device!r}") from exc
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise BackendUnavailableError(
                f"device {str(dev)!r} is not available: torch finds no CUDA device"
            )
        if dev.type not in ("cpu", "cuda"):
            raise ValueError(f"device must be 'cpu' or 'cuda[:N]' for torch; got {device!r}")
        return dev
    cupy = _import("cupy")
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDA driver missing: cupy imports but cannot run
        raise BackendUnavailableError(f"backend 'cupy' needs a CUDA device: {exc}") from exc
    if count < 1:
        raise BackendUnavailableError("backend 'cupy' needs a CUDA device; none was found")
    if device is None:
        return cupy.cuda.Device(0)
    if isinstance(device, str) and device.startswith("cuda"):
        device = int(device.split(":", 1)[1]) if ":" in device else 0
    if isinstance(device, numbers.Integral) and 0 <= device < count:
        return cupy.cuda.Device(int(device))
    if isinstance(device, cupy.cuda.Device):
        return device
    raise ValueError(
        f"device must be 'cuda[:N]' or an index below {count} for cupy; got {device!r}"
    )


def resolve_backend(backend=None, device=None, *arrays) -> tuple[str, object]:
    """Choose and validate ``(backend, device)`` (claims PB1–PB14, AT18).

    ``backend=None`` takes the backend of the first non-NumPy array among ``arrays`` (and its
    device when ``device`` is None), else ``"numpy"``. Raises ValueError for an unknown backend
    or a malformed device, :class:`BackendUnavailableError` when it is missing here.
    """
    if backend is None:
        for a in arrays:
            b = backend_of(a)
            if b not in (None, "numpy"):
                backend = b
                if device is None:
                    import array_api_compat as aac

                    device = aac.device(a)
                break
        else:
            backend = "numpy"
    _check_name(backend)
    return backend, _device(backend, device)


def asarray(x, backend: str = "numpy", device=None):
    """``x`` as a float64 array of ``backend`` on ``device`` (copied across devices as needed).

    Arrays of another backend go through the host (NumPy); ``device=None`` keeps the device of
    an array that is already on ``backend``. Cost O(size), plus one transfer.
    """
    backend, dev = resolve_backend(backend, device)
    xp = namespace(backend)
    src = backend_of(x)
    if src == backend and device is None:
        return xp.astype(x, xp.float64) if x.dtype != xp.float64 else x
    if src not in (None, "numpy", backend):
        x = to_numpy(x)
    if backend == "numpy":
        return np.asarray(x, dtype=np.float64)
    if src == backend:
        import array_api_compat as aac

        return xp.astype(aac.to_device(x, dev), xp.float64)
    host = np.ascontiguousarray(np.asarray(x, dtype=np.float64))
    return xp.asarray(host, dtype=xp.float64, device=dev)


def to_numpy(x) -> np.ndarray:
    """A NumPy copy (or view) of any backend's array; array_like is passed to ``np.asarray``."""
    b = backend_of(x)
    if b == "torch":
        return x.detach().cpu().numpy()
    if b == "cupy":
        return x.get()
    if b == "array_api_strict":
        return np.from_dlpack(x)
    return np.asarray(x)


def host(x):
    """Another backend's array as NumPy; NumPy arrays, lists, scalars and strings unchanged."""
    return to_numpy(x) if backend_of(x) not in (None, "numpy") else x


def _int_seed(seed) -> int:
    if isinstance(seed, np.random.Generator):
        return int(seed.integers(2**63 - 1))
    if seed is None:
        return int(np.random.default_rng().integers(2**63 - 1))
    if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
        if seed < 0:
            raise ValueError(f"seed must be a nonnegative integer; got {seed}")
        return int(seed)
    raise TypeError(f"seed must be None, an int or a numpy Generator; got {type(seed).__name__}")


class RandomSource:
    """Seeded random arrays of one backend (see :func:`random_source`).

    Methods return float64 arrays (int64 for ``integers``) of the backend on its device:
    ``standard_normal(shape)``, ``normal(loc, scale, shape)``, ``uniform(low, high, shape)``
    (``low``/``high`` scalars or host arrays broadcastable to ``shape``) and
    ``integers(low, high, shape)`` (``low <= x < high``).
    """

    def __init__(self, seed, backend: str, device, host: bool):
        self.backend, self.device = resolve_backend(backend, device)
        self.host = bool(host) or self.backend in ("numpy", "array_api_strict")
        self.xp = namespace(self.backend)
        if self.host:
            gen = seed if isinstance(seed, np.random.Generator) else None
            self._gen = gen if gen is not None else np.random.default_rng(_int_seed(seed))
        elif self.backend == "torch":
            torch = _import("torch")
            self._gen = torch.Generator(device=self.device).manual_seed(_int_seed(seed))
        else:
            cupy = _import("cupy")
            with self.device:
                self._gen = cupy.random.RandomState(_int_seed(seed) % 2**63)

    @property
    def generator(self) -> np.random.Generator:
        """The host NumPy Generator (only with host draws, e.g. for step laws that sample on it)."""
        if not self.host:
            raise ValueError("generator exists only for host draws (host=True, NumPy, strict)")
        return self._gen

    def _put(self, a, dtype=None):
        if self.backend == "numpy":
            return a
        xp = self.xp
        return xp.asarray(np.ascontiguousarray(a), dtype=dtype or xp.float64, device=self.device)

    def _kw(self):
        return {"generator": self._gen, "dtype": self.xp.float64, "device": self.device}

    def standard_normal(self, shape):
        shape = (shape,) if isinstance(shape, numbers.Integral) else tuple(shape)
        if self.host:
            return self._put(self._gen.standard_normal(shape))
        if self.backend == "torch":
            return _import("torch").randn(shape, **self._kw())
        with self.device:
            return self._gen.standard_normal(shape, dtype=np.float64)

    def normal(self, loc, scale, shape):
        if self.host:
            return self._put(self._gen.normal(loc, scale, size=shape))
        loc, scale = (self._put(np.asarray(v, dtype=np.float64)) for v in (loc, scale))
        return loc + scale * self.standard_normal(shape)

    def uniform(self, low, high, shape):
        if self.host:
            return self._put(self._gen.uniform(low, high, size=shape))
        low, high = (self._put(np.asarray(v, dtype=np.float64)) for v in (low, high))
        if self.backend == "torch":
            u = _import("torch").rand(shape, **self._kw())
        else:
            with self.device:
                u = self._gen.random_sample(shape, dtype=np.float64)
        return low + (high - low) * u

    def integers(self, low: int, high: int, shape):
        if self.host:
            return self._put(self._gen.integers(low, high, size=shape), self.xp.int64)
        if self.backend == "torch":
            kw = self._kw() | {"dtype": self.xp.int64}
            return _import("torch").randint(low, high, shape, **kw)
        with self.device:
            return self._gen.randint(low, high, size=shape, dtype=np.int64)

    def __repr__(self) -> str:
        where = "host" if self.host else str(self.device)
        return f"RandomSource(backend={self.backend!r}, {where})"


def random_source(seed=None, backend: str = "numpy", device=None, *, host: bool = False):
    """One seeded random-number adapter per backend (claims AT1–AT19 Monte Carlo).

    numpy / array_api_strict: ``numpy.random.default_rng(seed)`` (a Generator ``seed`` is used
    as is); torch: ``torch.Generator(device).manual_seed(s)``; CuPy: ``cupy.random.RandomState
    (s)``, with ``s`` the int seed (drawn from a Generator or fresh entropy for None). Same seed,
    same backend and device: the same numbers on every run. ``host=True`` draws with NumPy on the
    host and transfers, giving every backend the numbers of the NumPy functions.

    Returns a :class:`RandomSource`. Raises TypeError for a seed that is not None, an int or a
    Generator, ValueError for a negative seed or an unknown backend.
    """
    return RandomSource(seed, backend, device, host)
