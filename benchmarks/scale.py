"""Scale table: the largest size each path handles on 2 cores in under a minute (issue 15).

    python benchmarks/scale.py [--quick] [--limit SECONDS] [--threads 2]

For each path the size doubles from a small start until one run takes longer than ``--limit``
seconds (default 60) or its predicted memory exceeds ``--memory`` GiB (default 16); the table
gives the largest size that finished in time, its seconds and the peak resident memory of the
child process that ran it (each size runs in a fresh process, so the peak is that run's own;
the process first runs the path at size 16, untimed, so compilation is not counted).

Paths (float64, random inputs, seed 0):

* dense product    P = R_{T−1} ⋯ R_0 by n×n matrix products, last row (T = 32)
* dense kernels    ``influence`` through T = 32 distinct measured (dense) kernels, O(T·n²)
* uniform          ``influence`` through the uniform kernel, T = 64
* ALiBi            ``influence`` through one 32-head ALiBi kernel, T = 64, O(T·n·H)
* ALiBi + content  ``alibi_kernels`` (64 layers × 32 heads, per-layer content) + ``influence``
* PaTH sweep       all T queries of ``householder_scores`` (D = 64), the per-query sweep
* PaTH chunked     ``householder_route_scores`` (D = 64, C = 64), the (T, T) scores
* PaTH attention   ``path_attention`` (D = 64, C = 64), outputs only (no T×T array)

The machine is shared with other work; sizes are lower bounds of what an idle machine does.
Results: ``benchmarks/results/scale.json`` and ``scale.md``.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import resource
import time

GiB = 1024**3


def _setup(threads: int) -> None:
    for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
        os.environ[v] = str(threads)


def _run(path: str, size: int):
    """Build the inputs of ``path`` at ``size`` (untimed) and return the timed call."""
    import numpy as np

    from posflow.simulate.kernels import (
        alibi_kernel,
        alibi_kernels,
        alibi_slopes,
        dense_kernel,
        uniform_kernel,
    )
    from posflow.simulate.rollout import constant, influence
    from posflow.simulate.transport import (
        householder_route_scores,
        householder_scores,
        path_attention,
    )

    rng = np.random.default_rng(0)
    n = size
    if path in ("dense product", "dense kernels"):
        T = 32
        A = [np.tril(rng.random((n, n))) for _ in range(T if path == "dense kernels" else 1)]
        for M in A:
            M /= M.sum(axis=1, keepdims=True)
        lam = constant(0.3, T)
        if path == "dense product":
            R = 0.7 * np.eye(n) + 0.3 * A[0]

            def go():
                P = np.eye(n)
                for _ in range(T):
                    P = R @ P
                return P[-1]

            return go
        ks = [dense_kernel(M) for M in A]
        return lambda: influence(ks, lam)
    if path == "uniform":
        k = uniform_kernel(n)
        return lambda: influence(k, constant(0.3, 64))
    if path == "ALiBi":
        k = alibi_kernel(n, alibi_slopes(32))
        return lambda: influence(k, constant(0.3, 64))
    if path == "ALiBi + content":
        c = rng.normal(0, 2, (64, 32))
        return lambda: influence(alibi_kernels(n, alibi_slopes(32), c), constant(0.3, 64))
    D = 64
    q, k, v = (rng.normal(size=(n, D)) for _ in range(3))
    w = rng.normal(size=(n, D))
    w /= np.linalg.norm(w, axis=1, keepdims=True)
    beta = rng.uniform(0, 2, n)
    if path == "PaTH sweep":
        return lambda: [householder_scores(q[i], k, w, beta, i) for i in range(n)]
    if path == "PaTH chunked":
        return lambda: householder_route_scores(q, k, w, beta, chunk=64)
    if path == "PaTH attention":
        return lambda: path_attention(q, k, v, w, beta, chunk=64)
    raise ValueError(f"unknown path {path!r}")


# path -> (size name, first size, predicted bytes at size s)
PATHS = {
    "dense product": ("n", 256, lambda s: 4 * 8 * s * s),
    "dense kernels": ("n", 256, lambda s: 34 * 8 * s * s),
    "uniform": ("n", 2**14, lambda s: 8 * 8 * s),
    "ALiBi": ("n", 2**14, lambda s: 8 * 8 * s * 34),
    "ALiBi + content": ("n", 2**12, lambda s: 8 * s * 32 * 64 * 3),
    "PaTH sweep": ("T", 64, lambda s: 8 * 8 * s * 64),
    "PaTH chunked": ("T", 256, lambda s: 3 * 8 * s * s),
    "PaTH attention": ("T", 256, lambda s: 16 * 8 * s * 64),
}


def _child(path, size, threads, queue):
    _setup(threads)
    _run(path, 16)()  # compile the numba kernels and warm the imports first (not timed)
    go = _run(path, size)
    t0 = time.perf_counter()
    go()
    seconds = time.perf_counter() - t0
    queue.put((seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))  # MiB


def _trial(path, size, threads, limit):
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(path, size, threads, q))
    p.start()
    p.join(timeout=3 * limit + 60)  # building the inputs is untimed but bounded
    if p.is_alive():
        p.kill()
        p.join()
        return None
    return q.get() if p.exitcode == 0 and not q.empty() else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="limit 2 s, nothing written")
    ap.add_argument("--limit", type=float, default=60.0)
    ap.add_argument("--memory", type=float, default=16.0, help="GiB a run may be predicted to use")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--paths", nargs="+", default=list(PATHS))
    args = ap.parse_args()
    limit = 2.0 if args.quick else args.limit
    rows = []
    for path in args.paths:
        unit, size, mem = PATHS[path]
        best, stop = None, "time"
        while True:
            if mem(size) > args.memory * GiB:
                stop = f"memory (> {args.memory:g} GiB predicted at {unit} = {size})"
                break
            got = _trial(path, size, args.threads, limit)
            if got is None or got[0] > limit:
                stop = "time" if got is not None else "failed or killed"
                break
            best = (size, *got)
            print(f"{path}: {unit} = {size}: {got[0]:.2f} s, peak {got[1]:.0f} MiB", flush=True)
            size *= 2
        size, sec, peak = best if best is not None else (None, None, None)
        rows.append({"path": path, "unit": unit, "size": size, "seconds": sec,
                     "peak_mib": peak, "stop": stop})  # fmt: skip
    lines = [
        f"# Scale table: the largest size in under {limit:g} s ({args.threads} threads, "
        f"shared machine; sizes double)",
        "",
        "| path | largest size | seconds | peak memory | next size stopped by |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        size = "—" if r["size"] is None else f"{r['unit']} = {r['size']:,}"
        sec = "—" if r["seconds"] is None else f"{r['seconds']:.2f}"
        pk = "—" if r["peak_mib"] is None else f"{r['peak_mib']:.0f} MiB"
        lines.append(f"| {r['path']} | {size} | {sec} | {pk} | {r['stop']} |")
    text = "\n".join(lines)
    print(text)
    if not args.quick:
        import sys

        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from _bench import write_results

        write_results(
            "scale",
            {"limit_s": limit, "threads": args.threads, "python": platform.python_version(),
             "rows": rows},
            text,
        )  # fmt: skip


if __name__ == "__main__":
    main()
