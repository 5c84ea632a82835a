"""Transport benchmarks of [B]'s toolkit side, in one run on one core.

    python benchmarks/transport.py [--quick]

1. ratio  ``scipy.stats.ortho_group.rvs`` / :func:`posflow.simulate.orthogonal.haar` for Haar O(d)
   samples at d = 64 (goal ≥ 1×: at least as fast as scipy);
2. ratio  explicit 2×2 prefix products / :func:`posflow.simulate.transport.so2_scores` for all route
   scores s_ij = q_iᵀ P_{j→i} k_j, j ≤ i, of SO(2)-block steps at n = 4096, d = 64 (goal ≥ 3×).
   The baseline is written here: for every query it multiplies the 2×2 block rotations of its
   route one step at a time (vectorised over queries and blocks, O(n²·d) work in n numpy calls);
   ``so2_scores`` rotates queries and keys by absolute angles (O(n·d)) and does one matmul;
3. Monte Carlo throughput: stylized single-layer trials per second
   (:func:`posflow.simulate.transport.stylized_attention`, L = 8192, d = 96) and route-angle samples
   per second (:func:`posflow.simulate.transport.empirical_route_mean`, d = 96, 48 blocks).

Everything runs on one core (BLAS and numba threads pinned to 1). The machine is shared with other
work, so absolute times are noisy; the ratios are measured in one run, best of a few repeats.
Results are written to ``benchmarks/results/transport.json`` and ``transport.md`` (full run only).
"""

from __future__ import annotations

import _bench  # noqa: F401  (first: pins BLAS, OpenMP and numba to one thread)

# isort: split

import argparse
import platform

import numpy as np
import scipy
from _bench import best_of, write_results
from scipy.stats import ortho_group

from posflow.simulate.orthogonal import SO2BlockLaw, block_indices, haar
from posflow.simulate.transport import (
    empirical_route_mean,
    so2_scores,
    stylized_attention,
)


def naive_prefix_scores(q, k, theta):
    """All scores s_ij = q_iᵀ R_{i-1} ⋯ R_j k_j (j ≤ i) by explicit 2×2 block products.

    Step s extends every route of length s - 1 by one rotation on the source side:
    A_i ← A_i R(θ_{i-s}) for all queries i ≥ s at once, then s_{i, i-s} = Σ_b q_{i,b}ᵀ A_{i,b}
    k_{i-s,b}. Half-split blocks (b, b + d/2), as in :mod:`posflow.simulate.orthogonal`.
    Cost O(n²·d), n numpy calls. Returns (n, n) with NaN above the diagonal.
    """
    n, d = k.shape
    i1, i2 = block_indices(d)
    q2 = np.stack([q[:, i1], q[:, i2]], axis=-1)  # (n, B, 2)
    k2 = np.stack([k[:, i1], k[:, i2]], axis=-1)
    c, s = np.cos(theta), np.sin(theta)
    rot = np.stack([np.stack([c, -s], -1), np.stack([s, c], -1)], -2)  # (n, B, 2, 2)
    acc = np.broadcast_to(np.eye(2), (n, d // 2, 2, 2)).copy()
    out = np.full((n, n), np.nan)
    idx = np.arange(n)
    out[idx, idx] = np.einsum("ibx,ibx->i", q2, k2)
    for step in range(1, n):
        acc[step:] = acc[step:] @ rot[: n - step]
        out[idx[step:], idx[: n - step]] = np.einsum(
            "ibx,ibxy,iby->i", q2[step:], acc[step:], k2[: n - step]
        )
    return out


def bench_haar(d, size, repeat):
    haar(d, 4, seed=0)
    t_fast, _ = best_of(lambda: haar(d, size, seed=1), repeat)
    t_scipy, _ = best_of(lambda: ortho_group.rvs(d, size=size, random_state=1), repeat)
    return {
        "d": d,
        "size": size,
        "t_haar_s": t_fast,
        "t_scipy_ortho_group_s": t_scipy,
        "ratio": t_scipy / t_fast,
    }


def bench_scores(n, d, repeat):
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((2, n, d))
    theta = SO2BlockLaw(d).sample_angles(n, seed=rng)
    t_fast, fast = best_of(lambda: so2_scores(q, k, theta), repeat)
    t_naive, naive = best_of(lambda: naive_prefix_scores(q, k, theta), 1)
    low = np.tril_indices(n)
    err = float(np.abs(fast[low] - naive[low]).max())
    return {
        "n": n,
        "d": d,
        "t_so2_scores_s": t_fast,
        "t_naive_prefix_s": t_naive,
        "ratio": t_naive / t_fast,
        "max_abs_diff": err,
    }


def bench_monte_carlo(length, trials, routes, repeat):
    stylized_attention("random_qkv", 512, seed=0)
    t_sty, _ = best_of(
        lambda: stylized_attention("random_qkv", length, n_trials=trials, seed=1), repeat
    )
    law = SO2BlockLaw(96)
    steps = 512
    t_route, _ = best_of(
        lambda: empirical_route_mean(law, steps, n_routes=routes, seed=2, per_block=True), repeat
    )
    return {
        "stylized_L": length,
        "stylized_trials": trials,
        "stylized_trials_per_s": trials / t_sty,
        "stylized_tokens_per_s": trials * length / t_sty,
        "route_steps": steps,
        "route_samples": routes,
        "route_angle_samples_per_s": routes * steps * 48 / t_route,
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes (smoke run)")
    args = ap.parse_args(argv)
    rep = 1 if args.quick else 3
    res = {
        "machine": platform.processor() or platform.machine(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "note": "one core on a machine shared with other work: absolute times are noisy",
        "haar": bench_haar(64, 100 if args.quick else 1000, rep),
        "scores": bench_scores(1024 if args.quick else 4096, 64, rep),
        "monte_carlo": bench_monte_carlo(
            8192, 2 if args.quick else 8, 500 if args.quick else 2000, rep
        ),
    }
    h, s, m = res["haar"], res["scores"], res["monte_carlo"]
    lines = [
        "# Transport benchmark (one core, shared machine: times are noisy)",
        "",
        f"- Haar O({h['d']}) sampling, {h['size']} matrices: scipy.stats.ortho_group / haar = "
        f"**{h['ratio']:.1f}×** ({h['t_scipy_ortho_group_s']:.3f} s vs {h['t_haar_s']:.3f} s; "
        "goal ≥ 1×)",
        f"- SO(2) route scores, n = {s['n']}, d = {s['d']}: explicit 2×2 prefix products / "
        f"so2_scores = **{s['ratio']:.0f}×** ({s['t_naive_prefix_s']:.2f} s vs "
        f"{s['t_so2_scores_s'] * 1e3:.1f} ms; max |Δs| = {s['max_abs_diff']:.1e}; goal ≥ 3×)",
        f"- stylized single layer (random Q/K/V, L = {m['stylized_L']}, d = 96): "
        f"{m['stylized_trials_per_s']:.1f} trials/s ({m['stylized_tokens_per_s']:.2e} tokens/s)",
        f"- route-angle Monte Carlo (48 SO(2) blocks, {m['route_steps']} steps): "
        f"{m['route_angle_samples_per_s']:.2e} angle samples/s",
    ]
    text = "\n".join(lines)
    print(text)
    if not args.quick:
        write_results("transport", res, text)
    return res


if __name__ == "__main__":
    main()
