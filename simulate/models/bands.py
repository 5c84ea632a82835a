"""Sliding-window bands: constructed kernels restricted to each layer's window (issue 24, item 2).

A layer with a sliding window of w keys lets query i attend to the keys j with 0 ≤ i − j < w
only (itself included); Gemma 3 270M has 15 such layers of 512 keys and 3 global ones.
:func:`posflow.simulate.models.measure.measure` records the windows (``Measurement.windows``:
per layer w, or None for every earlier key), and the kernels read from the measured attention —
(a), (b), the value-norm kernels (d) and the sink-aware kernels (e) — are already zero outside
them. The kernels posflow *constructs* for a measured model — the uniform null and [A]'s ALiBi +
diagonal content kernels (c) — span every earlier key; :func:`band` restricts them:

.. math::
    \\big(\\operatorname{band}_w K\\big)_{ij}
      = \\frac{K_{ij}\\,[\\,i - j < w\\,]}{\\sum_{k > i - w} K_{ik}}\\quad (i \\ge w),
    \\qquad \\text{rows } i < w \\text{ unchanged.}

For one softmax head this is the softmax restricted to the band; for the uniform kernel the rows
become 1/min(i + 1, w). A head average is banded head by head (the band of an average is not the
average of the banded heads): :func:`content_kernels` does so for [A]'s kernels, and
:func:`uniform_kernels` builds the banded uniform kernels. Layers without a window (None) or
with w ≥ n are left as they are.
"""

from __future__ import annotations

import numpy as np

__all__ = ["band", "check_windows", "content_kernels", "uniform_kernels"]


def check_windows(windows, L: int | None = None) -> tuple:
    """``windows`` as a tuple of int ≥ 1 or None, one per layer.

    Parameters
    ----------
    windows : sequence of (int or None)
        Keys a query sees in each layer, itself included (None: every earlier key), as
        ``Measurement.windows``.
    L : int, optional
        The number of layers ``windows`` must hold.

    Returns
    -------
    tuple of (int or None), length L

    Raises ValueError naming ``windows`` for something that is not a sequence, an entry that is
    neither None nor an integer ≥ 1 (bools included), an empty sequence, or a length other
    than ``L``.
    """
    if windows is None or isinstance(windows, str | bytes):
        raise ValueError(f"windows must be a sequence of int >= 1 or None; got {windows!r}")
    try:
        ws = tuple(windows.tolist() if isinstance(windows, np.ndarray) else windows)
    except TypeError:
        raise ValueError(f"windows must be a sequence of int >= 1 or None; got {windows!r}") \
            from None  # fmt: skip
    for w in ws:
        if w is not None and (isinstance(w, bool) or not isinstance(w, int | np.integer)
                              or w < 1):  # fmt: skip
            raise ValueError(f"windows must hold integers >= 1 or None; got {w!r} in {ws}")
    if not ws:
        raise ValueError("windows must hold at least one layer")
    if L is not None and len(ws) != L:
        raise ValueError(f"windows must hold one window per layer, L = {L}; got {len(ws)}")
    return tuple(None if w is None else int(w) for w in ws)


def band(kernels, windows) -> np.ndarray:
    """Each layer's kernel restricted to its sliding window, rows renormalised over the window.

    .. math::
        B^{(t)}_{ij} = \\frac{K^{(t)}_{ij}\\,[\\,i - j < w_t\\,]}
                           {\\sum_{i - w_t < k \\le i} K^{(t)}_{ik}}\\quad (i \\ge w_t),\\qquad
        B^{(t)}_{ij} = K^{(t)}_{ij}\\quad (i < w_t)

    (rows i < w_t see every earlier key already and are left bit for bit). For a causal
    softmax kernel :math:`K_{ij} = e^{z_{ij}} / \\sum_{k \\le i} e^{z_{ik}}` this is the softmax
    over the band :math:`i - w_t < j \\le i`; for the uniform kernel the rows become
    1/min(i + 1, w_t) (within a few ulp: the rounding of the row sums; :func:`uniform_kernels`
    builds them exactly). A causal row-stochastic kernel stays causal and row-stochastic.

    Parameters
    ----------
    kernels : array_like, shape (L, ..., n, n), (1, ..., n, n) or (n, n)
        Kernels of the L layers (axis 0; of size 1, or absent, for one kernel shared by every
        layer). Further axes (e.g. heads, (L, H, n, n)) are banded alike, each matrix on its
        own: band the heads of a head average before averaging them.
    windows : sequence of L (int or None)
        Keys a query of layer t sees, itself included (``Measurement.windows``); None or
        w_t ≥ n: the layer is left unchanged.

    Returns
    -------
    ndarray, shape (L, ..., n, n), float64
        When no layer is banded, ``kernels`` itself (as float64) or a read-only broadcast view
        of it, no copy; otherwise a new array. Cost O(L·n²) per banded matrix.

    Raises ValueError naming ``windows`` (:func:`check_windows`; its length must be the L of
    ``kernels`` unless that is 1), and naming ``kernels`` for a shape that is not square in its
    last two axes or a banded row without positive finite mass inside its window.
    """
    K = np.asarray(kernels, dtype=np.float64)
    if K.ndim < 2 or K.shape[-1] != K.shape[-2]:
        raise ValueError(f"kernels must have shape (L, ..., n, n) or (n, n); got {K.shape}")
    if K.ndim == 2:
        K = K[None]
    ws = check_windows(windows, None if K.shape[0] == 1 else K.shape[0])
    L, n = len(ws), K.shape[-1]
    shape = (L, *K.shape[1:])
    banded = [(t, w) for t, w in enumerate(ws) if w is not None and w < n]
    if not banded:
        return K if K.shape == shape else np.broadcast_to(K, shape)
    out = np.array(np.broadcast_to(K, shape))
    i = np.arange(n)
    gap = i[:, None] - i[None, :]
    for t, w in banded:
        M = out[t]
        M[..., gap >= w] = 0.0
        rows = M[..., w:, :]
        s = rows.sum(axis=-1, keepdims=True)
        if not (np.isfinite(s) & (s > 0)).all():
            raise ValueError(f"kernels of layer {t} have a row with no positive finite mass "
                             f"inside its window of {w} keys")  # fmt: skip
        rows /= s
    return out


def uniform_kernels(n: int, windows) -> list:
    """The uniform kernels of every layer, banded to each layer's window (the ``uniform`` null).

    .. math::
        U^{(t)}_{ij} = \\frac{[\\,0 \\le i - j < w_t\\,]}{\\min(i + 1, w_t)}

    Parameters
    ----------
    n : int
    windows : sequence of L (int or None)
        As :func:`band`; None or w ≥ n: 1/(i + 1) on every j ≤ i.

    Returns
    -------
    list of L Kernel
        One :func:`~posflow.simulate.kernels.uniform_kernel` (O(n) per step) shared by every
        unbanded layer, one dense kernel (O(n²) per step) per distinct window shared by its
        layers, its entries exactly the rounded 1/min(i + 1, w) (``band`` of the uniform
        kernel gives them within a few ulp: the rounding of its row sums).
    """
    from posflow.simulate.kernels import dense_kernel, uniform_kernel

    ws = check_windows(windows)
    full = uniform_kernel(n)
    i = np.arange(n)
    gap = i[:, None] - i[None, :]
    made: dict = {}
    out = []
    for w in ws:
        if w is None or w >= n:
            out.append(full)
            continue
        if w not in made:
            inside = (gap >= 0) & (gap < w)
            made[w] = dense_kernel(np.where(inside, 1.0 / np.minimum(i + 1, w)[:, None], 0.0))
        out.append(made[w])
    return out


def content_kernels(n: int, slopes, content, windows=None) -> list:
    """[A]'s ALiBi + diagonal content kernels of every layer, each head banded to the window.

    .. math::
        K^{(t)} = \\frac1H \\sum_h \\operatorname{band}_{w_t}\\,
            \\mathrm{softmax}_{j \\le i}\\big(c_{t,h} [i = j] - m_h (i - j)\\big)

    Parameters
    ----------
    n : int
    slopes : array_like, shape (H,)
        ALiBi slopes m_h in logit units (zeros without ALiBi).
    content : array_like, shape (L, H)
        Diagonal content c_{t,h} in logit units.
    windows : sequence of L (int or None), optional
        As :func:`band`; None: every layer global.

    Returns
    -------
    list of L Kernel
        :func:`~posflow.simulate.kernels.alibi_kernel` (O(n·H) per step) for a layer without
        a window or with w ≥ n; a dense kernel built from the H banded head kernels
        (``AlibiKernel.head_dense``; O(n²) per step, O(H·n²) memory to build) otherwise.
    """
    from posflow.simulate.kernels import alibi_kernel, dense_kernel

    c = np.asarray(content, dtype=np.float64)
    if c.ndim != 2:
        raise ValueError(f"content must have shape (L, H); got {c.shape}")
    L = c.shape[0]
    ws = (None,) * L if windows is None else check_windows(windows, L)
    out = []
    for t, w in enumerate(ws):
        K = alibi_kernel(n, slopes, c[t])
        if w is not None and w < n:
            heads = np.stack([K.head_dense(h) for h in range(K.num_heads)])
            K = dense_kernel(band(heads[None], [w])[0].mean(axis=0))
        out.append(K)
    return out
