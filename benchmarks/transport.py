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
   per second (:func:`posflow.simulate.transport.empirical_route_mean`, d = 96, 48 blocks);
4. PaTH (Householder) route scores s_ij = q_iᵀ H_i ⋯ H_{j+1} k_j for all j ≤ i, D = 64:
   ratio per-query sweep (all T queries through
   :func:`posflow.simulate.transport.householder_scores`, NumPy) / the chunked compact-WY
   :func:`posflow.simulate.transport.householder_route_scores` (NumPy, C = 64) at T = 1024 (goal
   ≥ 20×), the chunk-size dependence, and the crossover length (smallest T of 2, 4, 8, … from
   which on the chunked path beats the sweep at every scanned length); torch (CPU, one thread):
   ratio ``schemes.path_scores`` (its plain reverse sweep, ``chunk=None``, all queries in one
   call) / chunked torch at T = 256, 512, 1024, and its crossover, with the time of
   ``path_scores(..., chunk=64)`` (the chunked path the training code's ``Path`` scheme uses);
   max |Δs| against the sweep in each case; and
   :func:`posflow.simulate.transport.path_attention` against softmax of the swept scores;
5. ``path_attention`` on torch (CPU, one thread) against NumPy at T = 1024 and 4096, D = 64,
   C = 64: NumPy time / torch time (goal ≥ 1×: torch at least as fast), timed alternately.

Everything runs on one core (BLAS and numba threads pinned to 1). The machine is shared with other
work, so absolute times are noisy; the ratios are measured in one run, best of a few repeats.
Results are written to ``benchmarks/results/transport.json`` and ``transport.md`` (full run only).
"""

from __future__ import annotations

import _bench  # noqa: F401  (first: pins BLAS, OpenMP and numba to one thread)

# isort: split

import argparse
import math
import os
import time

import numpy as np
import scipy
from _bench import best_of, cpu_model, write_results
from scipy.stats import ortho_group

from posflow.simulate.orthogonal import SO2BlockLaw, block_indices, haar
from posflow.simulate.transport import (
    empirical_route_mean,
    householder_route_scores,
    householder_scores,
    path_attention,
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


def _path_inputs(t, d, seed=0):
    rng = np.random.default_rng(seed)
    q, k, v, w = rng.standard_normal((4, t, d))
    w /= np.linalg.norm(w, axis=1, keepdims=True)
    return q, k, v, w, rng.uniform(0, 2, t)


def path_sweep(q, k, w, beta):
    """All route scores by T per-query sweeps of householder_scores; NaN above the diagonal."""
    t = q.shape[0]
    s = np.full((t, t), np.nan)
    for i in range(t):
        s[i, : i + 1] = householder_scores(q[i], k, w, beta, i)
    return s


def _low_err(a, b):
    low = np.tril_indices(a.shape[-1])
    return float(
        np.abs(np.asarray(a)[..., low[0], low[1]] - np.asarray(b)[..., low[0], low[1]]).max()
    )


def _crossover(rows):
    """Smallest scanned T from which on the chunked path is faster at every larger T."""
    cross = None
    for r in reversed(rows):
        if r["ratio"] <= 1:
            break
        cross = r["T"]
    return cross


def _path_scan_row(n, d, repeat):
    q, k, _, w, beta = _path_inputs(n, d, 1)
    t_sw, sw = best_of(lambda: path_sweep(q, k, w, beta), repeat)
    t_ch, ch = best_of(lambda: householder_route_scores(q, k, w, beta), repeat)
    return {
        "T": n,
        "t_sweep_s": t_sw,
        "t_chunked_s": t_ch,
        "ratio": t_sw / t_ch,
        "max_abs_diff": _low_err(ch, sw),
    }


def bench_path_numpy(t, d, chunks, scan, repeat):
    q, k, v, w, beta = _path_inputs(t, d)
    t_sweep, ref = best_of(lambda: path_sweep(q, k, w, beta), 1)
    by_chunk = {}
    for c in chunks:
        t_c, s = best_of(lambda c=c: householder_route_scores(q, k, w, beta, "path", c), repeat)
        by_chunk[str(c)] = {
            "t_chunked_s": t_c,
            "ratio": t_sweep / t_c,
            "max_abs_diff": _low_err(s, ref),
        }
    z = np.where(np.isnan(ref), -np.inf, ref / np.sqrt(d))
    a = np.exp(z - z.max(axis=1, keepdims=True))
    t_att, out = best_of(lambda: path_attention(q, k, v, w, beta, chunk=64), repeat)
    rows = [_path_scan_row(n, d, repeat) for n in scan]
    cross = _crossover(rows)
    return {
        "T": t,
        "D": d,
        "t_sweep_s": t_sweep,
        "chunks": by_chunk,
        "ratio": by_chunk["64"]["ratio"],
        "max_abs_diff": by_chunk["64"]["max_abs_diff"],
        "t_path_attention_s": t_att,
        "path_attention_max_abs_diff": float(np.abs(out - (a / a.sum(1, keepdims=True)) @ v).max()),
        "scan": rows,
        "crossover_T": cross,
    }


def bench_path_torch(lengths, d, scan, repeat):
    try:
        import torch

        from posflow.simulate.models.schemes import path_scores
    except ImportError as exc:  # pragma: no cover - torch is optional here
        return {"skipped": f"torch is not importable ({exc})"}
    torch.set_num_threads(1)

    def one(t, seed, rep):
        q, k, _, w, beta = (torch.from_numpy(x) for x in _path_inputs(t, d, seed))
        t_ref, ref = best_of(
            lambda: path_scores(q[None, None], k[None, None], w[None, None], beta[None, None]), rep
        )
        t_ch, s = best_of(lambda: householder_route_scores(q, k, w, beta), rep)
        t_sch, s_sch = best_of(
            lambda: path_scores(
                q[None, None], k[None, None], w[None, None], beta[None, None], chunk=64
            ),
            rep,
        )
        return {
            "T": t,
            "t_schemes_path_scores_s": t_ref,
            "t_chunked_s": t_ch,
            "t_schemes_path_scores_chunked_s": t_sch,
            "ratio": t_ref / t_ch,
            "max_abs_diff": _low_err(s.numpy(), ref[0, 0].numpy()),
            "max_abs_diff_schemes_chunked": _low_err(s_sch[0, 0].numpy(), ref[0, 0].numpy()),
        }

    rows = [one(t, 0, repeat) for t in lengths]
    scan_rows = [one(t, 1, repeat) for t in scan]
    cross = _crossover(scan_rows)
    return {
        "torch": torch.__version__,
        "D": d,
        "rows": rows,
        "scan": scan_rows,
        "crossover_T": cross,
    }


def bench_path_attention_backends(lengths, d, repeat):
    """path_attention on torch (CPU, one thread) vs NumPy, timed alternately (best of repeat)."""
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is optional here
        return {"skipped": f"torch is not importable ({exc})"}
    torch.set_num_threads(1)
    rows = []
    for t in lengths:
        arrays = _path_inputs(t, d, 2)
        tensors = [torch.from_numpy(x) for x in arrays]
        best, outs = {"numpy": math.inf, "torch": math.inf}, {}
        for _ in range(repeat + 1):  # the first round warms both up
            for name, args in (("numpy", arrays), ("torch", tensors)):
                t0 = time.perf_counter()
                outs[name] = np.asarray(path_attention(*args, chunk=64))
                best[name] = min(best[name], time.perf_counter() - t0)
        rows.append({
            "T": t,
            "t_numpy_s": best["numpy"],
            "t_torch_s": best["torch"],
            "speed_torch_over_numpy": best["numpy"] / best["torch"],
            "max_abs_diff": float(np.abs(outs["numpy"] - outs["torch"]).max()),
        })  # fmt: skip
    return {"torch": torch.__version__, "D": d, "rows": rows, "load": os.getloadavg()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes (smoke run)")
    args = ap.parse_args(argv)
    rep = 1 if args.quick else 3
    res = {
        "machine": cpu_model(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "note": "one core on a machine shared with other work: absolute times are noisy",
        "haar": bench_haar(64, 100 if args.quick else 1000, rep),
        "scores": bench_scores(1024 if args.quick else 4096, 64, rep),
        "monte_carlo": bench_monte_carlo(
            8192, 2 if args.quick else 8, 500 if args.quick else 2000, rep
        ),
    }
    scan = [2**e for e in range(1, 8 if args.quick else 10)]
    res["path"] = bench_path_numpy(256 if args.quick else 1024, 64, (16, 32, 64, 128), scan, rep)
    res["path_torch"] = bench_path_torch(
        (128, 256) if args.quick else (256, 512, 1024), 64, scan, rep
    )
    res["path_attention_backends"] = bench_path_attention_backends(
        (256,) if args.quick else (1024, 4096), 64, rep
    )
    h, s, m = res["haar"], res["scores"], res["monte_carlo"]
    p, pt, pa = res["path"], res["path_torch"], res["path_attention_backends"]
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
        f"- PaTH route scores (Householder, all j ≤ i), T = {p['T']}, D = {p['D']}, NumPy: "
        f"per-query sweep (householder_scores × T) / chunked householder_route_scores (C = 64) = "
        f"**{p['ratio']:.0f}×** ({p['t_sweep_s']:.2f} s vs "
        f"{p['chunks']['64']['t_chunked_s'] * 1e3:.1f} ms; max |Δs| = {p['max_abs_diff']:.1e}; "
        "goal ≥ 20×); by chunk size C: "
        + ", ".join(f"C = {c}: {r['ratio']:.0f}×" for c, r in p["chunks"].items())
        + f"; path_attention {p['t_path_attention_s'] * 1e3:.1f} ms (max |Δo| against softmax "
        f"of the swept scores = {p['path_attention_max_abs_diff']:.1e})",
        f"- PaTH crossover, NumPy: the chunked path beats the sweep from T = "
        f"**{p['crossover_T']}** on (scan T = {p['scan'][0]['T']} … {p['scan'][-1]['T']}: "
        + ", ".join(f"{r['T']}: {r['ratio']:.3g}×" for r in p["scan"])
        + f"; max |Δs| ≤ {max(r['max_abs_diff'] for r in p['scan']):.1e})",
    ]
    if "skipped" in pt:
        lines.append(f"- PaTH torch: skipped ({pt['skipped']})")
    else:
        lines += [
            f"- PaTH route scores, torch {pt['torch']} (CPU, one thread), D = {pt['D']}: "
            "schemes.path_scores (plain reverse sweep, all queries in one call) / chunked "
            "householder_route_scores = "
            + ", ".join(
                f"**{r['ratio']:.1f}×** at T = {r['T']} ({r['t_schemes_path_scores_s'] * 1e3:.0f} "
                f"ms vs {r['t_chunked_s'] * 1e3:.1f} ms; max |Δs| = {r['max_abs_diff']:.1e}; "
                f"path_scores(chunk=64), what the Path scheme trains with: "
                f"{r['t_schemes_path_scores_chunked_s'] * 1e3:.1f} ms, max |Δs| = "
                f"{r['max_abs_diff_schemes_chunked']:.1e})"
                for r in pt["rows"]
            ),
            f"- PaTH crossover, torch: the chunked path beats path_scores from T = "
            f"**{pt['crossover_T']}** on ("
            + ", ".join(f"{r['T']}: {r['ratio']:.3g}×" for r in pt["scan"])
            + ")",
        ]
    if "skipped" in pa:
        lines.append(f"- PaTH attention, torch vs NumPy: skipped ({pa['skipped']})")
    else:
        lines.append(
            f"- path_attention, torch {pa['torch']} (CPU, one thread) vs NumPy, D = {pa['D']}, "
            "C = 64: NumPy time / torch time = "
            + ", ".join(
                f"**{r['speed_torch_over_numpy']:.2f}×** at T = {r['T']} "
                f"({r['t_numpy_s'] * 1e3:.1f} ms vs {r['t_torch_s'] * 1e3:.1f} ms; "
                f"max |Δo| = {r['max_abs_diff']:.1e})"
                for r in pa["rows"]
            )
            + f" (goal ≥ 1×; load {pa['load'][0]:.2f})"
        )
    text = "\n".join(lines)
    print(text)
    if not args.quick:
        write_results("transport", res, text)
    return res


if __name__ == "__main__":
    main()
