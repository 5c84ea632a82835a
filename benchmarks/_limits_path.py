"""The PaTH section of ``benchmarks/limits.py``: Householder transport ([B], AT18) on one core.

    python benchmarks/_limits_path.py      # this section alone, against a matmul measured now

:func:`path_sections` times, best of 5 on one thread (``_bench`` pins BLAS, OpenMP and numba;
``torch.set_num_threads(1)``), with D = D_v = 64, chunk C = 64, route ``path``, no bias. Times
are the CPU time of this process (``time.process_time``; one thread, so it equals the wall time
of an idle core): on this shared machine other processes' load then stretches neither side.

- :func:`posflow.simulate.transport.path_attention` on torch (CPU) against NumPy at T = 1024 and
  T = 4096: achieved = NumPy time / torch time (torch's speed relative to NumPy's), reference 1
  (the goal: torch at least as fast); the two are timed alternately in the same rounds, so that
  a change of the machine's load hits both;
- the same calls as rates: useful flops over the best time, held against the float64 matmul's
  GFLOP/s. Flop model: the scores and the value sums of causal attention,
  T(T + 1)/2 · 2·(D + D_v) flops; the transport (UT transform, chunk and superblock carries:
  the carries alone add D/S = 25 % to the score products at S = 256) is extra work, not
  counted, so 100 % is out of reach;
- :func:`posflow.simulate.transport.householder_route_scores` (NumPy) at T = 4096: the share of
  its time spent assembling the T × T result, i.e. inside ``_householder._put``: the copies
  into the result (the diagonal blocks, the −inf fill above them, the blocks of the partial
  first and last bands), timed by wrapping ``_put`` during the calls; reference 20 % (the goal:
  assembly ≤ 20 %), so percent ≤ 100 meets it. Two rows: into a **fresh** result (allocated by
  the call), whose pages the operating system clears when they are first written — by a band's
  diagonal block, so inside ``_put``: at T = 4096 128 MiB, 17 ms of 94 ms on the Intel host,
  18 % by itself — and into a **reused** result (``out=``, written once before the timed
  calls), where only the copies and the fill remain. The blocks left of the diagonal of full
  bands are no copies: their products write into the result in place
  (``np.matmul(..., out=)``; before, they were formed apart and copied, 17–22 % in all);
- the page clearing alone, measured apart: a fresh T × T float64 array allocated and one entry
  of each 4 KiB page written (what any fresh result pays, however it is filled), as a share of
  the fresh call's time, and the fresh call's assembly share less it (an estimate: the two
  times come from different runs; a negative value would mean noise larger than the rest).

Every dict carries ``{"path", "achieved", "unit", "reference", "percent"}``, percent =
100 · achieved / reference; the path text names what the reference is.
"""

from __future__ import annotations

import _bench  # noqa: F401  (first: pins BLAS, OpenMP and numba to one thread)

# isort: split

import math
import os
import time

import numpy as np

from posflow.simulate import _householder as H
from posflow.simulate.transport import householder_route_scores, path_attention

D = 64  # head width D = D_v
CHUNK = 64


def _inputs(t: int, seed: int = 0):
    """q, k, v, w (unit rows), β ~ Unif[0, 2], float64 NumPy, T × D."""
    rng = np.random.default_rng(seed)
    q, k, v, w = rng.standard_normal((4, t, D))
    w /= np.linalg.norm(w, axis=1, keepdims=True)
    return q, k, v, w, rng.uniform(0.0, 2.0, t)


def _alternate(calls: dict, repeat: int) -> dict:
    """Best wall time of each call, the calls run alternately ``repeat`` rounds."""
    best = dict.fromkeys(calls, math.inf)
    for _ in range(repeat):
        for name, fn in calls.items():
            t0 = time.process_time()
            fn()
            best[name] = min(best[name], time.process_time() - t0)
    return best


def _assembly_share(t: int, repeat: int, reuse: bool = False) -> tuple[float, float]:
    """(Time inside ``_householder._put``, total time) of householder_route_scores' fastest
    run, into a fresh result each call, or (``reuse``) into one ``out`` written before the runs."""
    q, k, _, w, b = _inputs(t, 1)
    original, spent = H._put, [0.0]

    def timed(*args, **kwargs):
        t0 = time.process_time()
        original(*args, **kwargs)
        spent[0] += time.process_time() - t0

    warm = householder_route_scores(q, k, w, b, "path", CHUNK)  # compiled, caches warm
    kw = {"out": warm} if reuse else {}
    del warm  # fresh runs: no second T × T array held meanwhile
    runs = []
    H._put = timed
    try:
        for _ in range(repeat):
            spent[0] = 0.0
            t0 = time.process_time()
            householder_route_scores(q, k, w, b, "path", CHUNK, **kw)
            runs.append((time.process_time() - t0, spent[0]))
    finally:
        H._put = original
    total, put = min(runs)
    return put, total


def _page_clearing(t: int, repeat: int) -> float:
    """Best time to allocate a fresh T × T float64 array and write one entry of each 4 KiB
    page: the operating system's clearing of the pages on first touch, which any fresh T × T
    result pays however it is written."""
    best = math.inf
    for _ in range(repeat):
        t0 = time.process_time()
        a = np.empty((t, t))
        a.reshape(-1)[:: 4096 // a.itemsize] = 0.0
        best = min(best, time.process_time() - t0)
        del a
    return best


def path_sections(
    matmul_gflops: float, *, lengths=(1024, 4096), assembly_t: int = 4096, repeat: int = 5
) -> list[dict]:
    """torch vs NumPy ``path_attention``, their flop rates, and the route scores' assembly share.

    Parameters
    ----------
    matmul_gflops : float
        The float64 matmul's GFLOP/s measured in the same process (the flop reference).
    lengths : tuple of int
        Sequence lengths T of the torch/NumPy comparison (default 1024 and 4096).
    assembly_t : int
        T of the assembly share of ``householder_route_scores`` (default 4096).
    repeat : int
        Best-of count (≥ 3 for the table); T < 4096 runs repeat·4096/T rounds.

    Returns
    -------
    list of dict
        ``{"path", "achieved", "unit", "reference", "percent"}`` per row (module docstring):
        per T the speed ratio (×, reference 1), then the NumPy and torch GFLOP/s at the largest
        T (reference: matmul), then the assembly shares, fresh and reused (%, reference
        20).
    """
    import torch

    torch.set_num_threads(1)
    rows, rates = [], {}
    for t in lengths:
        arrays = _inputs(t)
        tensors = [torch.from_numpy(a) for a in arrays]
        path_attention(*arrays, chunk=CHUNK)
        path_attention(*tensors, chunk=CHUNK)
        best = _alternate(
            {
                "numpy": lambda a=arrays: path_attention(*a, chunk=CHUNK),
                "torch": lambda a=tensors: path_attention(*a, chunk=CHUNK),
            },
            max(repeat, repeat * 4096 // t),  # shorter runs: more rounds in the same time
        )
        ratio = best["numpy"] / best["torch"]
        rows.append({
            "path": f"path_attention torch/NumPy speed (NumPy time / torch time), T = {t}, "
                    f"D = {D}, C = {CHUNK}; reference: equal speed",
            "achieved": ratio,
            "unit": "×",
            "reference": 1.0,
            "percent": 100.0 * ratio,
        })  # fmt: skip
        flops = t * (t + 1) / 2 * 2.0 * (D + D)
        rates[t] = {name: flops / sec / 1e9 for name, sec in best.items()}
    t = max(lengths)
    for name in ("numpy", "torch"):
        rate = rates[t][name]
        rows.append({
            "path": f"path_attention {'NumPy' if name == 'numpy' else 'torch'}, T = {t}, "
                    f"D = {D}: causal-attention flops T(T+1)/2·2(D + D_v) per second",
            "achieved": rate,
            "unit": "GFLOP/s",
            "reference": float(matmul_gflops),
            "percent": 100.0 * rate / float(matmul_gflops),
        })  # fmt: skip
    fresh = _assembly_share(assembly_t, repeat)
    for (put, total), into in ((fresh, "a fresh result (first touch included)"),
                               (_assembly_share(assembly_t, repeat, reuse=True),
                                "a reused result (out=)")):  # fmt: skip
        rows.append(_share_row(f"householder_route_scores (NumPy), T = {assembly_t}, D = {D}: "
                               f"share of the time writing the T × T result, into {into}",
                               100.0 * put / total))  # fmt: skip
    put, total = fresh
    clear = _page_clearing(assembly_t, repeat)
    rows.append(_share_row(f"page clearing alone of a fresh {assembly_t} × {assembly_t} float64 "
                           "array (np.empty, one write per 4 KiB page), as a share of the "
                           "fresh call's time", 100.0 * clear / total))  # fmt: skip
    beyond = 100.0 * (put - clear) / total
    rows.append(_share_row(f"householder_route_scores (NumPy), T = {assembly_t}, D = {D}: "
                           "share of the time writing the T × T result, into a fresh result, "
                           "less the page clearing alone", beyond))  # fmt: skip
    return rows


def _share_row(path: str, share: float) -> dict:
    """A share of a call's time (%), against the 20 % goal of the route scores' assembly."""
    return {"path": f"{path}; reference: the 20 % goal", "achieved": share, "unit": "%",
            "reference": 20.0, "percent": 100.0 * share / 20.0}  # fmt: skip


if __name__ == "__main__":
    from limits import matmul_gflops

    ref = matmul_gflops()
    print(f"matmul {ref:.2f} GFLOP/s; load {os.getloadavg()[0]:.2f}")
    for row in path_sections(ref):
        print(f"{row['path']}: {row['achieved']:.3g} {row['unit']} = {row['percent']:.0f} % of "
              f"{row['reference']:.3g} {row['unit']}")  # fmt: skip
    print(f"load {os.getloadavg()[0]:.2f}")
