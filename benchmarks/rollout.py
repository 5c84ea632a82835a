"""Rollout benchmarks: vector chain vs the dense matrix-product rollout, in one run.

    python benchmarks/rollout.py [--quick]

1. ratio  dense rollout (P = R_{T-1} ⋯ R_0 by matrix products, last row) / ``influence``
   at n = 2048, T = 32, 32 ALiBi heads (goal ≥ 1000×);
2. absolute time and peak memory of ``influence`` at n = 10⁶, T = 64 with 1 and 32 heads
   (goals < 0.3 s and < 3 s on one core; memory O(n·H));
3. the 15 real-model profiles together (goal < 0.5 s).

Everything runs on one core (BLAS and numba threads pinned to 1). Results are written to
``benchmarks/results/rollout.json`` and ``rollout.md``.
"""

from __future__ import annotations

import _bench  # noqa: F401  (first: pins BLAS, OpenMP and numba to one thread)

# isort: split

import argparse
import platform
import tracemalloc

import numpy as np
from _bench import best_of, write_results

from posflow.simulate import measured
from posflow.simulate.kernels import alibi_kernel, alibi_slopes
from posflow.simulate.rollout import constant, influence


def dense_rollout_last_row(A, lam):
    """What existing rollout code does: P = R_{T-1} ⋯ R_0 as n×n products, then the last row."""
    n = A.shape[0]
    P = np.eye(n)
    eye = np.eye(n)
    for t in range(lam.size):
        P = ((1 - lam[t]) * eye + lam[t] * A) @ P
    return P[-1]


def bench_ratio(n, T, H, repeat):
    K = alibi_kernel(n, alibi_slopes(H))
    lam = constant(0.1, T)
    A = K.dense()
    influence(K, lam)  # compile / warm
    t_fast, p = best_of(lambda: influence(K, lam), repeat)
    t_dense, p_ref = best_of(lambda: dense_rollout_last_row(A, lam), 1)
    err = float(np.abs(p - p_ref).max())
    return {
        "n": n,
        "T": T,
        "heads": H,
        "t_influence_s": t_fast,
        "t_dense_s": t_dense,
        "ratio": t_dense / t_fast,
        "max_abs_diff": err,
    }


def bench_large(n, T, H, repeat):
    K = alibi_kernel(n, alibi_slopes(H) if H > 1 else 0.5)
    lam = constant(0.1, T)
    influence(K, constant(0.1, 1))
    t, p = best_of(lambda: influence(K, lam), repeat)
    tracemalloc.start()
    influence(K, lam)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "n": n,
        "T": T,
        "heads": H,
        "seconds": t,
        "peak_MiB": peak / 2**20,
        "table_rows": int(K._w_off.shape[0]),
        "sum_p": float(p.sum()),
    }


def bench_models(repeat):
    measured.configs()  # load the packed data once

    def all15():
        return [measured.profile(m, v) for m in measured.models() for v in measured.VARIANTS]

    all15()
    t, _ = best_of(all15, repeat)
    return {"profiles": 15, "seconds": t}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes (smoke run)")
    args = ap.parse_args(argv)
    rep = 1 if args.quick else 3
    res = {
        "machine": platform.processor() or platform.machine(),
        "numpy": np.__version__,
        "ratio": bench_ratio(512 if args.quick else 2048, 32, 32, rep),
        "large": [bench_large(10**5 if args.quick else 10**6, 64, H, rep) for H in (1, 32)],
        "models": bench_models(rep),
    }
    r = res["ratio"]
    lines = [
        "# Rollout benchmark (one core)",
        "",
        f"- dense matrix-product rollout / influence at n = {r['n']}, T = {r['T']}, "
        f"{r['heads']} heads: **{r['ratio']:.0f}×** ({r['t_dense_s']:.3f} s vs "
        f"{r['t_influence_s'] * 1e3:.2f} ms; max |Δp| = {r['max_abs_diff']:.1e})",
    ]
    for b in res["large"]:
        lines.append(
            f"- influence at n = {b['n']:,}, T = {b['T']}, {b['heads']} head(s): "
            f"{b['seconds']:.3f} s, peak memory {b['peak_MiB']:.0f} MiB"
        )
    lines.append(f"- all 15 real-model profiles (n = 256): {res['models']['seconds']:.3f} s")
    text = "\n".join(lines)
    print(text)
    if not args.quick:
        write_results("rollout", res, text)
    return res


if __name__ == "__main__":
    main()
