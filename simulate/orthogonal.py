"""Per-token step laws M_t for accumulated transport (paper [B], claims AT2-AT4, AT6, AT16, AT17).

Every law has the same interface (:class:`StepLaw`): ``.d``, ``.sample(size, seed=None)`` giving
an array of shape (size, d, d), ``.mean()`` giving the exact E M where a closed form exists,
``.gamma`` = ‖E M‖_op (the spectral-gap constant) and ``.is_orthogonal``.
:func:`mean_operator_norm` returns γ with a standard error, exactly or by Monte Carlo.

SO(2) blocks use the half-split pairing of [B]'s code by default: block b acts on coordinates
(b, b + d/2); ``pairing="interleaved"`` uses (2b, 2b + 1). A block rotation is
R(θ) = [[cos θ, −sin θ], [sin θ, cos θ]]. :func:`rotate_blocks` takes any backend's arrays;
the laws sample on the host with NumPy. ``rope_frequencies`` is the one definition of
:func:`posflow.conventions.rope_frequencies`, re-exported here.
"""

from __future__ import annotations

import abc
import numbers

import numpy as np

from posflow.conventions import rope_frequencies
from posflow.simulate._arrays import as_float, namespace_of
from posflow.simulate._arrays import check_int as _check_int

__all__ = [
    "HaarLaw",
    "HouseholderLaw",
    "SO2BlockLaw",
    "StepLaw",
    "block_indices",
    "haar",
    "mean_operator_norm",
    "phase_paths",
    "rope_frequencies",
    "rotate_blocks",
    "so2_matrices",
]

PAIRINGS = ("half", "interleaved")


def _rng(seed) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None or (isinstance(seed, numbers.Integral) and not isinstance(seed, bool)):
        return np.random.default_rng(seed)
    raise TypeError(f"seed must be None, an int or a numpy Generator; got {type(seed).__name__}")


def _check_even_d(d) -> int:
    d = _check_int(d, "d", 1)
    if d % 2:
        raise ValueError(f"d must be even for SO(2) blocks; got {d}")
    return d


def _check_pairing(pairing: str) -> str:
    if pairing not in PAIRINGS:
        raise ValueError(f"pairing must be one of {PAIRINGS}; got {pairing!r}")
    return pairing


def block_indices(d: int, pairing: str = "half") -> tuple[np.ndarray, np.ndarray]:
    """Coordinate pairs (i1[b], i2[b]) of the d/2 rotation blocks.

    ``"half"``: (b, b + d/2) as in [B]'s code; ``"interleaved"``: (2b, 2b + 1). Claim AT18.
    Raises ValueError for odd d or an unknown pairing.
    """
    d = _check_even_d(d)
    _check_pairing(pairing)
    b = np.arange(d // 2)
    if pairing == "half":
        return b, b + d // 2
    return 2 * b, 2 * b + 1


def rotate_blocks(x, angles, pairing: str = "half"):
    """Rotate every 2-block of x by its angle: y_b = R(angle_b) x_b.

    y[i1] = x[i1] cos φ − x[i2] sin φ,  y[i2] = x[i1] sin φ + x[i2] cos φ   (claim AT18)

    with the pairs (i1, i2) of :func:`block_indices`.

    Parameters
    ----------
    x : array_like, shape (..., d), d even
    angles : array_like, shape broadcastable to (..., d/2)
        NumPy, array_like or one other backend's arrays (the result is of that backend).

    Returns an array of the broadcast shape (..., d). Cost O(size of x).
    """
    at = namespace_of(x, angles)
    xp = at.xp
    x = as_float(at, x, "x", finite=False)
    if x.ndim < 1:
        raise ValueError("x must have a last axis of even length d")
    d = _check_even_d(x.shape[-1])
    _check_pairing(pairing)
    angles = as_float(at, angles, "angles", finite=False)
    if angles.ndim < 1 or angles.shape[-1] != d // 2:
        raise ValueError(f"angles must have last axis d/2 = {d // 2}; got {tuple(angles.shape)}")
    c, s = xp.cos(angles), xp.sin(angles)
    if pairing == "half":
        x1, x2 = x[..., : d // 2], x[..., d // 2 :]
        return xp.concat([x1 * c - x2 * s, x1 * s + x2 * c], axis=-1)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    y = xp.stack([x1 * c - x2 * s, x1 * s + x2 * c], axis=-1)
    return xp.reshape(y, (*y.shape[:-2], d))


def so2_matrices(angles, pairing: str = "half") -> np.ndarray:
    """Block-diagonal rotation matrices blockdiag_b R(angles_b).

    Parameters: angles, shape (..., d/2). Returns shape (..., d, d). Claims AT2, AT18.
    """
    angles = np.asarray(angles, dtype=float)
    if angles.ndim < 1 or angles.shape[-1] < 1:
        raise ValueError("angles must have a last axis of length d/2 >= 1")
    d = 2 * angles.shape[-1]
    i1, i2 = block_indices(d, pairing)
    m = np.zeros((*angles.shape[:-1], d, d))
    c, s = np.cos(angles), np.sin(angles)
    m[..., i1, i1] = c
    m[..., i1, i2] = -s
    m[..., i2, i1] = s
    m[..., i2, i2] = c
    return m


def haar(d: int, size: int, seed=None, special: bool = False) -> np.ndarray:
    """Exactly Haar-distributed orthogonal matrices, shape (size, d, d). Claims AT2, AT3.

    Batched QR of standard Gaussian matrices G = QR; the columns of Q are multiplied by
    sign(diag R) (Mezzadri's fix), which makes Q exactly Haar on O(d) (the factorisation with
    positive diag R is unique and equivariant under left multiplication).

    ``special=True`` gives Haar on SO(d): every Q with det Q = −1 has its first column negated,
    S = Q D with D = diag(−1, 1, …, 1). This is Haar on SO(d) because for any fixed U ∈ SO(d),
    UQ is again Haar on O(d) with det(UQ) = det Q, so US is produced from UQ by the same rule and
    has the law of S; a left-invariant law on SO(d) is its Haar measure.

    Cost O(size·d³). E M = 0 for O(d) with d ≥ 1 and for SO(d) with d ≥ 2.
    """
    d = _check_int(d, "d", 1)
    size = _check_int(size, "size", 1)
    rng = _rng(seed)
    g = rng.standard_normal((size, d, d))
    q, r = np.linalg.qr(g)
    signs = np.where(np.diagonal(r, axis1=-2, axis2=-1) < 0, -1.0, 1.0)
    q = q * signs[:, None, :]
    if special:
        flip = np.linalg.det(q) < 0
        q[flip, :, 0] *= -1.0
    return q


class StepLaw(abc.ABC):
    """Law of one i.i.d. per-token step M ∈ R^{d×d} (claims AT2-AT4).

    Subclasses set ``d``, ``is_orthogonal`` and ``has_closed_form``; they implement ``sample`` and,
    when ``has_closed_form``, ``mean``. ``gamma`` is ‖E M‖_op (None without a closed form).
    """

    d: int
    is_orthogonal: bool = True
    has_closed_form: bool = False

    @abc.abstractmethod
    def sample(self, size: int, seed=None) -> np.ndarray:
        """Draw ``size`` i.i.d. steps, shape (size, d, d)."""

    def mean(self) -> np.ndarray:
        """Exact E M, shape (d, d)."""
        raise NotImplementedError(f"{type(self).__name__} has no closed-form mean")

    @property
    def gamma(self) -> float | None:
        """γ = ‖E M‖_op (largest singular value of the exact mean), or None."""
        if not self.has_closed_form:
            return None
        return float(np.linalg.svd(self.mean(), compute_uv=False)[0])


class HaarLaw(StepLaw):
    """Haar law on O(d) (or SO(d) with ``special=True``); E M = 0 (claim AT3).

    The exception is SO(1) = {1}, whose mean is 1.
    """

    has_closed_form = True

    def __init__(self, d: int, special: bool = False):
        self.d = _check_int(d, "d", 1)
        self.special = bool(special)

    def sample(self, size: int, seed=None) -> np.ndarray:
        """Haar matrices via :func:`haar`, shape (size, d, d)."""
        return haar(self.d, size, seed=seed, special=self.special)

    def mean(self) -> np.ndarray:
        """E M = 0 (d × d zeros), except [[1]] for SO(1)."""
        if self.special and self.d == 1:
            return np.ones((1, 1))
        return np.zeros((self.d, self.d))

    def __repr__(self) -> str:
        return f"HaarLaw(d={self.d}, special={self.special})"


class SO2BlockLaw(StepLaw):
    """Block-diagonal SO(2) steps M = blockdiag_b R(θ_b), θ_b independent (claims AT1, AT2, AT6).

    Angle laws, with ``scale`` = s_b (a scalar or one value per block, default the RoPE
    frequencies f_b = base^(−2b/d), base 10^4) and the characteristic value c_b = E e^{iθ_b}:

    ========================  ==========================  ==================================
    ``law``                   θ_b                         c_b
    ========================  ==========================  ==================================
    ``"uniform"``             Unif[−s_b, s_b]             sin s_b / s_b  (1 at s_b = 0)
    ``"normal"``              N(0, s_b²)                  exp(−s_b²/2)
    ``"rope"``                s_b (deterministic)         exp(i s_b)
    ``"positive_uniform"``    Unif[0, 2 s_b]              exp(i s_b) sin s_b / s_b
    ========================  ==========================  ==================================

    E M is blockdiag_b [[Re c_b, −Im c_b], [Im c_b, Re c_b]] and γ = max_b |c_b|. [B]'s random
    model is ``law="uniform"`` with the default scale (θ_b ~ Unif[−f_b, f_b], d_h = 96).
    Raises ValueError for odd d, an unknown law, or a negative/NaN/infinite scale.
    """

    LAWS = ("uniform", "normal", "rope", "positive_uniform")
    has_closed_form = True

    def __init__(
        self,
        d: int,
        law: str = "uniform",
        scale=None,
        *,
        base: float = 10_000.0,
        pairing: str = "half",
    ):
        self.d = _check_even_d(d)
        if law not in self.LAWS:
            raise ValueError(f"law must be one of {self.LAWS}; got {law!r}")
        self.law = law
        self.pairing = _check_pairing(pairing)
        if scale is None:
            scale = rope_frequencies(self.d, base)
        scale = np.asarray(scale, dtype=float)
        if scale.ndim == 0:
            scale = np.full(self.d // 2, float(scale))
        if scale.shape != (self.d // 2,):
            raise ValueError(
                f"scale must be a scalar or have shape ({self.d // 2},); got {scale.shape}"
            )
        bad = ~np.isfinite(scale) | (scale < 0)
        if bad.any():
            b = int(np.flatnonzero(bad)[0])
            raise ValueError(f"scale must be finite and >= 0; got {scale[b]} at block {b}")
        self.scale = scale

    def sample_angles(self, size: int, seed=None) -> np.ndarray:
        """I.i.d. angles θ[t, b], shape (size, d/2); ``sample`` uses the same draws."""
        size = _check_int(size, "size", 1)
        rng = _rng(seed)
        s, shape = self.scale, (size, self.d // 2)
        if self.law == "uniform":
            return rng.uniform(-s, s, size=shape)
        if self.law == "normal":
            return rng.normal(0.0, s, size=shape)
        if self.law == "positive_uniform":
            return rng.uniform(0.0, 2.0 * s, size=shape)
        return np.broadcast_to(s, shape).copy()

    def sample(self, size: int, seed=None) -> np.ndarray:
        """Step matrices blockdiag_b R(θ_b), shape (size, d, d)."""
        return so2_matrices(self.sample_angles(size, seed), self.pairing)

    def characteristic(self) -> np.ndarray:
        """c_b = E e^{iθ_b}, complex array of shape (d/2,)."""
        s = self.scale
        if self.law == "uniform":
            return np.sinc(s / np.pi).astype(complex)
        if self.law == "normal":
            return np.exp(-0.5 * s**2).astype(complex)
        if self.law == "rope":
            return np.exp(1j * s)
        return np.exp(1j * s) * np.sinc(s / np.pi)

    def mean(self) -> np.ndarray:
        """Exact E M = blockdiag_b [[Re c_b, −Im c_b], [Im c_b, Re c_b]], shape (d, d)."""
        c = self.characteristic()
        i1, i2 = block_indices(self.d, self.pairing)
        m = np.zeros((self.d, self.d))
        m[i1, i1], m[i1, i2], m[i2, i1], m[i2, i2] = c.real, -c.imag, c.imag, c.real
        return m

    @property
    def gamma(self) -> float:
        """γ = max_b |c_b|."""
        return float(np.max(np.abs(self.characteristic())))

    def __repr__(self) -> str:
        return f"SO2BlockLaw(d={self.d}, law={self.law!r}, pairing={self.pairing!r})"


class HouseholderLaw(StepLaw):
    """PaTH-style steps H = I − β w wᵀ with fixed β ∈ [0, 2] (claims AT4, AT18).

    w is uniform on the sphere S^{d−1} (``w=None``) or a given unit vector (|‖w‖ − 1| ≤ 1e-12).
    Exact mean: (1 − β/d) I for random w (since E w wᵀ = I/d), I − β w wᵀ for fixed w.
    H has eigenvalues {1 (d−1 times), 1 − β}; it is orthogonal iff β ∈ {0, 2}.
    Raises ValueError for d < 1, β outside [0, 2] or NaN, a non-unit w or a w of wrong shape.
    """

    has_closed_form = True

    def __init__(self, d: int, beta: float, w=None):
        self.d = _check_int(d, "d", 1)
        beta = float(beta)
        if not 0.0 <= beta <= 2.0:  # also rejects NaN
            raise ValueError(f"beta must lie in [0, 2]; got {beta}")
        self.beta = beta
        self.is_orthogonal = beta in (0.0, 2.0)
        if w is not None:
            w = np.asarray(w, dtype=float)
            if w.shape != (self.d,):
                raise ValueError(f"w must have shape ({self.d},); got {w.shape}")
            norm = float(np.linalg.norm(w))
            if not abs(norm - 1.0) <= 1e-12:
                raise ValueError(f"w must be a unit vector (tolerance 1e-12); got norm {norm!r}")
        self.w = w

    def sample_vectors(self, size: int, seed=None) -> np.ndarray:
        """Reflection directions w_t, shape (size, d); ``sample`` uses the same draws."""
        size = _check_int(size, "size", 1)
        if self.w is not None:
            return np.broadcast_to(self.w, (size, self.d)).copy()
        g = _rng(seed).standard_normal((size, self.d))
        return g / np.linalg.norm(g, axis=1, keepdims=True)

    def sample(self, size: int, seed=None) -> np.ndarray:
        """Matrices I − β w_t w_tᵀ, shape (size, d, d)."""
        w = self.sample_vectors(size, seed)
        return np.eye(self.d) - self.beta * w[:, :, None] * w[:, None, :]

    def mean(self) -> np.ndarray:
        """Exact E H: (1 − β/d) I for random w, I − β w wᵀ for fixed w."""
        if self.w is None:
            return (1.0 - self.beta / self.d) * np.eye(self.d)
        return np.eye(self.d) - self.beta * np.outer(self.w, self.w)

    def __repr__(self) -> str:
        kind = "random" if self.w is None else "fixed"
        return f"HouseholderLaw(d={self.d}, beta={self.beta}, w={kind})"


def mean_operator_norm(
    law, n_samples: int = 4096, seed=None, *, n_batches: int = 32, exact: bool = True
) -> tuple[float, float]:
    """Spectral-gap constant γ = ‖E M‖_op of a step law, with a standard error (claims AT2-AT4).

    If ``exact`` and the law has a closed-form mean, returns (‖E M‖_op, 0.0). Otherwise draws
    ``n_samples`` steps in ``n_batches`` batches, estimates γ̂ = ‖(1/N) Σ_t M_t‖_op and its standard
    error by the delete-one-batch jackknife:
    se² = (B − 1)/B Σ_b (γ̂_(−b) − mean_b γ̂_(−b))².
    Note γ̂ is biased upwards by O(√(d/N)) when E M is small (e.g. Haar, claim AT3).

    Parameters
    ----------
    law : StepLaw or any object with ``d`` and ``sample(size, seed)`` giving (size, d, d)
    n_samples, n_batches : int, n_samples ≥ n_batches ≥ 2

    Cost O(N·cost of one sample + B·d³); memory O(B·d² + (N/B)·d²).
    """
    if not (hasattr(law, "sample") and hasattr(law, "d")):
        raise TypeError("law must provide d and sample(size, seed)")
    if exact and getattr(law, "has_closed_form", False):
        return float(law.gamma), 0.0
    n_batches = _check_int(n_batches, "n_batches", 2)
    n_samples = _check_int(n_samples, "n_samples", n_batches)
    rng = _rng(seed)
    d = int(law.d)
    counts = np.diff(np.linspace(0, n_samples, n_batches + 1).astype(int))
    sums = np.empty((n_batches, d, d))
    for b, c in enumerate(counts):
        m = np.asarray(law.sample(int(c), seed=rng), dtype=float)
        if m.shape != (c, d, d):
            raise ValueError(f"law.sample returned shape {m.shape}; expected ({c}, {d}, {d})")
        sums[b] = m.sum(axis=0)
    total = sums.sum(axis=0)
    gamma = float(np.linalg.svd(total / n_samples, compute_uv=False)[0])
    loo = (total[None] - sums) / (n_samples - counts)[:, None, None]
    g_loo = np.linalg.svd(loo, compute_uv=False)[:, 0]
    se = float(np.sqrt((n_batches - 1) / n_batches * np.sum((g_loo - g_loo.mean()) ** 2)))
    return gamma, se


def phase_paths(law, n_routes: int, checkpoints, rng) -> dict[int, np.ndarray]:
    """Cumulative route angles Σ_{l≤L} θ_l of ``n_routes`` routes at every L in ``checkpoints``.

    ``law`` is a :class:`SO2BlockLaw`; one draw of ``law.sample_angles`` per step. Returns
    ``{L: array of shape (n_routes, d/2)}`` (claims AT1, AT17). Cost O(max L · n_routes · d).
    """
    marks = sorted({int(c) for c in checkpoints})
    if not marks or marks[0] < 1:
        raise ValueError(f"checkpoints must be integers >= 1; got {checkpoints!r}")
    s = np.zeros((n_routes, law.d // 2))
    out = {}
    for step in range(1, marks[-1] + 1):
        s += law.sample_angles(n_routes, seed=rng)
        if step in marks:
            out[step] = s.copy()
    return out
