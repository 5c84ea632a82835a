"""The result of a measurement and the kernels and content read from it (private; public through
:mod:`posflow.simulate.models.measure`, whose docstring defines every quantity)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from posflow.simulate.kernels import DenseKernel, dense_kernel

__all__ = ["ROW_TOL", "Measurement", "content_scores", "measured_kernels"]

ROW_TOL = 1e-4  # float32 softmax rows sum to 1 within ~1e-6; anything worse is not a softmax


@dataclass
class Measurement:
    """What :func:`measure` recorded (NumPy float64 arrays; None when not requested)."""

    architecture: str
    n: int
    num_sequences: int
    num_heads: int
    d_head: int
    lambdas: np.ndarray | None  # (L,)
    lambdas_std: np.ndarray | None  # (L,)
    lambda_per_sequence: np.ndarray | None  # (N, L)
    attention: np.ndarray | None  # (L, H, n, n)
    qk: np.ndarray | None  # (L, H, n, n), raw
    influence: np.ndarray | None  # (n,), sums to 1
    influence_raw: np.ndarray | None  # (n,), mean ‖∂p*/∂e_j‖
    slopes: np.ndarray | None  # (H,) ALiBi slopes in logit units, or None
    num_layers: int = 0
    value_weights: np.ndarray | None = None  # (L, n, n) mean Σ_h α_ij^h ‖W_O^h v_j^h‖
    layer_influence: np.ndarray | None = None  # (L, n) mean ‖∂p*/∂x_t[j]‖, rows sum to 1
    influence_per_sequence: np.ndarray | None = None  # (N, n) ‖∂p*/∂e_j‖ of each sequence
    qk_sums: np.ndarray | None = None  # (L, H, 2) mean Σ_i q_i·k_i and Σ_{j<i} q_i·k_j
    lambdas_mlp: np.ndarray | None = None  # (L,) λ_t with ‖m_t‖ in the denominator
    lambdas_mlp_std: np.ndarray | None = None  # (L,)
    lambda_mlp_per_sequence: np.ndarray | None = None  # (N, L)
    windows: tuple | None = None  # (L,): keys a query sees, or None (every earlier key);
    # None as a whole for interface families measured without attention, q·k or value norms
    # measure(..., per_sequence=True): each sequence's own statistics, sequence first
    attention_per_sequence: np.ndarray | None = None  # (N, L, n, n), head mean
    value_weights_per_sequence: np.ndarray | None = None  # (N, L, n, n)
    qk_sums_per_sequence: np.ndarray | None = None  # (N, L, H, 2), as qk_sums
    layer_influence_per_sequence: np.ndarray | None = None  # (N, L, n) ‖∂p*/∂x_t[j]‖, raw

    def bootstrap_influence(self, reps: int = 1000, seed: int = 0) -> np.ndarray:
        """Influence profiles of ``reps`` bootstrap resamples of the sequences, (reps, n).

        Each resample draws N sequences with replacement and normalises the mean of their
        ``‖∂p*/∂e_j‖`` to sum 1, as :attr:`influence` does for the sample (seeded; the same
        ``seed`` gives the same resamples on every run and thread count).
        """
        if self.influence_per_sequence is None:
            raise ValueError("influence was not measured; call measure(..., influence=True)")
        if isinstance(reps, bool) or not isinstance(reps, int) or reps < 1:
            raise ValueError(f"reps must be a positive integer; got {reps!r}")
        G = self.influence_per_sequence
        idx = np.random.default_rng(seed).integers(0, G.shape[0], size=(reps, G.shape[0]))
        out = G[idx].mean(axis=1)
        return out / out.sum(axis=1, keepdims=True)

    def kernels(self) -> list[DenseKernel]:
        """Head-averaged measured kernels A_t (see :func:`measured_kernels`)."""
        if self.attention is None:
            raise ValueError("attention was not measured; call measure(..., attention=True)")
        return measured_kernels(self.attention)

    def content(self, scale: str = "sqrt_d") -> tuple[np.ndarray, np.ndarray]:
        """Content (b, c), each (L, H), from the mean raw q·k (see :func:`content_scores`).

        With only the sums recorded (``measure(..., qk="summary")``) the same b and c follow
        from them: b = Σ_{j<i} S_ij / (n(n−1)/2), c = Σ_i S_ii / n − b.
        """
        if scale not in ("sqrt_d", "raw"):
            raise ValueError(f"scale must be 'sqrt_d' or 'raw'; got {scale!r}")
        if self.qk is not None:
            return content_scores(self.qk, d_head=self.d_head if scale == "sqrt_d" else None)
        if self.qk_sums is None:
            raise ValueError("q·k was not measured; call measure(..., qk=True)")
        return self._content_of_sums(self.qk_sums, scale)

    def content_per_sequence(self, scale: str = "sqrt_d") -> tuple[np.ndarray, np.ndarray]:
        """Each sequence's content (b, c), each (N, L, H), from its own q·k sums; row s is
        ``measure(model, input_ids[s:s+1]).content(scale)`` (needs ``per_sequence=True``)."""
        if scale not in ("sqrt_d", "raw"):
            raise ValueError(f"scale must be 'sqrt_d' or 'raw'; got {scale!r}")
        if self.qk_sums_per_sequence is None:
            raise ValueError(
                "q·k was not measured per sequence; call measure(..., qk=..., per_sequence=True)"
            )
        return self._content_of_sums(self.qk_sums_per_sequence, scale)

    def _content_of_sums(self, sums, scale):
        """b = Σ_{j<i} S_ij / (n(n−1)/2), c = Σ_i S_ii / n − b from sums (..., 2)."""
        s = np.sqrt(self.d_head) if scale == "sqrt_d" else 1.0
        n = self.n
        b = sums[..., 1] / (n * (n - 1) / 2) / s
        return b, sums[..., 0] / n / s - b


def content_scores(qk_mean, *, d_head: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """[A]'s content model ``C = b 11ᵀ + c I`` fitted to mean q·k matrices (claim PB15).

    .. math::
        b = \\frac{2}{n(n-1)} \\sum_{j<i} S_{ij}, \\qquad c = \\frac1n \\sum_i S_{ii} - b,
        \\qquad S = \\overline{q k^\\top} / s

    with ``s = √d_head`` when ``d_head`` is given (logit units of a model that scales q·k by
    1/√d_head) and ``s = 1`` otherwise ([A]'s released configs use the raw scores).

    Parameters
    ----------
    qk_mean : array_like, shape (..., n, n), n >= 2
    d_head : int, optional

    Returns
    -------
    b, c : ndarray, shape (...)
    """
    S = np.asarray(qk_mean, dtype=np.float64)
    if S.ndim < 2 or S.shape[-1] != S.shape[-2] or S.shape[-1] < 2:
        raise ValueError(f"qk_mean must have shape (..., n, n) with n >= 2; got {S.shape}")
    if not np.isfinite(S).all():
        raise ValueError("qk_mean must be finite")
    if d_head is not None:
        if isinstance(d_head, bool) or not isinstance(d_head, int | np.integer) or d_head < 1:
            raise ValueError(f"d_head must be a positive integer; got {d_head!r}")
        S = S / np.sqrt(d_head)
    n = S.shape[-1]
    i, j = np.tril_indices(n, -1)
    b = S[..., i, j].mean(axis=-1)
    c = np.diagonal(S, axis1=-2, axis2=-1).mean(axis=-1) - b
    return b, c


def measured_kernels(attention) -> list[DenseKernel]:
    """Head-averaged kernels ``A_t = (1/H) Σ_h Ā_{t,h}`` as validated dense kernels (PB15).

    Rows of float32 softmaxes sum to 1 within ~1e-6; rows within ``ROW_TOL`` = 1e-4 of 1 and
    entries above the diagonal at most 1e-6 are accepted, cleaned (upper part zeroed) and
    renormalised to sum 1 within 1e-12. Anything worse raises ValueError (not a causal softmax).

    Parameters
    ----------
    attention : array_like, shape (L, H, n, n) or (L, n, n)

    Returns
    -------
    list of L DenseKernel
    """
    A = np.asarray(attention, dtype=np.float64)
    if A.ndim == 4:
        A = A.mean(axis=1)
    if A.ndim != 3 or A.shape[1] != A.shape[2]:
        raise ValueError(f"attention must have shape (L, H, n, n) or (L, n, n); got {A.shape}")
    if not np.isfinite(A).all():
        raise ValueError("attention must be finite")
    out = []
    for t, M in enumerate(A):
        upper = np.abs(np.triu(M, 1)).max(initial=0.0)
        if upper > 1e-6:
            raise ValueError(
                f"attention of layer {t} is not causal: an entry above the diagonal is {upper:.3g}"
            )
        M = np.tril(M)
        dev = np.abs(M.sum(axis=1) - 1).max()
        if dev > ROW_TOL:
            raise ValueError(
                f"attention of layer {t} is not row-stochastic: a row sum is off by "
                f"{dev:.3g} (tolerance {ROW_TOL:g})"
            )
        out.append(dense_kernel(M / M.sum(axis=1, keepdims=True)))
    return out
