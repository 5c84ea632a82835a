"""Backend benchmark: NumPy vs numba vs torch (CPU) for ``influence`` and SO(2) scores, one run.

    python benchmarks/backend.py [--quick]

1. ``influence`` of 32-head and one-head ALiBi kernels at n = 10⁶, T = 64 (``--quick``: n = 10⁵):
   numba   the NumPy backend's compiled suffix recurrence (the CPU fast path);
   NumPy   the array-API chunked scan (simulate._scan) on NumPy arrays (the same kernel with
           numba switched off, ``K._use_numba = False``): the measurement that keeps numba as
           the NumPy fast path;
   torch   the same array-API code on torch CPU tensors (``backend="torch"``);
   with the largest difference from numba (float64).
2. SO(2) route scores (RoPE trick) for n = n_q = 4096 keys and queries, d = 96:
   :func:`posflow.simulate.transport.so2_scores` on NumPy arrays and on torch CPU tensors (one
   code path, two backends).

Everything runs on one core (BLAS, numba and torch threads pinned to 1); the machine is shared,
so absolute times are noisy and only the ratios within one run mean much. Results are written to
``benchmarks/results/backend.json`` and ``backend.md`` (not with ``--quick``).
"""

from __future__ import annotations

import _bench  # noqa: F401  (first: pins BLAS, OpenMP and numba to one thread)

# isort: split

import argparse

import numpy as np
from _bench import best_of, cpu_model, write_results

from posflow.simulate import backend, transport
from posflow.simulate.kernels import alibi_kernel, alibi_slopes
from posflow.simulate.rollout import constant, influence

NOTE = (
    "Shared 2-core machine, one core per run: absolute times are noisy (other jobs run at the "
    "same time); compare the ratios of one run."
)


def bench_influence(n, T, H, repeat):
    lam = constant(0.1, T)
    slopes = alibi_slopes(H)
    K = alibi_kernel(n, slopes)
    influence(K, constant(0.1, 1))  # compile
    t_nb, p_nb = best_of(lambda: influence(K, lam), repeat)
    Kx = alibi_kernel(n, slopes)
    Kx._use_numba = False  # the array-API scan, on NumPy arrays
    t_np, p_np = best_of(lambda: influence(Kx, lam), repeat)
    out = {
        "n": n,
        "T": T,
        "heads": H,
        "numba_s": t_nb,
        "numpy_s": t_np,
        "numpy_max_abs_diff": float(np.abs(p_np - p_nb).max()),
    }
    try:
        import torch
    except ImportError:
        return out
    torch.set_num_threads(1)
    Kt = alibi_kernel(n, slopes, backend="torch")
    influence(Kt, constant(0.1, 1))
    t_t, p_t = best_of(lambda: influence(Kt, lam), repeat)
    out |= {
        "torch_s": t_t,
        "torch_max_abs_diff": float(np.abs(backend.to_numpy(p_t) - p_nb).max()),
        "torch_version": torch.__version__,
    }
    return out


def bench_scores(n, d, repeat):
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((n, d)), rng.standard_normal((n, d))
    theta = rng.uniform(-0.5, 0.5, (n, d // 2))
    t_np, s_np = best_of(lambda: transport.so2_scores(q, k, theta), repeat)
    out = {"n": n, "n_q": n, "d": d, "numpy_s": t_np}
    if "torch" not in backend.available_backends():
        return out
    args = [backend.asarray(x, "torch") for x in (q, k, theta)]
    t_t, s_t = best_of(lambda: transport.so2_scores(*args), repeat)
    out |= {"torch_s": t_t, "torch_max_abs_diff": float(np.abs(s_t.numpy() - s_np).max())}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes (smoke run)")
    args = ap.parse_args(argv)
    res = {
        "machine": cpu_model(),
        "numpy": np.__version__,
        "note": NOTE,
        "influence": bench_influence(
            10**5 if args.quick else 10**6, 64, 32, 1 if args.quick else 3
        ),
        "influence_one_head": bench_influence(
            10**5 if args.quick else 10**6, 64, 1, 1 if args.quick else 3
        ),
        "so2_scores": bench_scores(1024 if args.quick else 4096, 96, 1 if args.quick else 3),
    }
    s = res["so2_scores"]
    lines = ["# Backend benchmark (one core)", "", f"_{NOTE}_"]
    for b in (res["influence"], res["influence_one_head"]):
        heads = f"{b['heads']}-head" if b["heads"] > 1 else "one-head"
        lines += [
            "",
            f"influence, {heads} ALiBi, n = {b['n']:,}, T = {b['T']}:",
            f"- numba (NumPy backend): {b['numba_s']:.2f} s",
            f"- array-API scan on NumPy: {b['numpy_s']:.2f} s "
            f"(**{b['numpy_s'] / b['numba_s']:.1f}×** numba; "
            f"max |Δp| = {b['numpy_max_abs_diff']:.1e})",
        ]
        if "torch_s" in b:
            lines.append(
                f"- array-API scan on torch {b['torch_version']} CPU: {b['torch_s']:.2f} s "
                f"(**{b['torch_s'] / b['numba_s']:.1f}×** numba, "
                f"{b['torch_s'] / b['numpy_s']:.2f}× NumPy; "
                f"max |Δp| = {b['torch_max_abs_diff']:.1e})"
            )
    lines += ["", f"SO(2) scores, n = n_q = {s['n']}, d = {s['d']}:"]
    lines.append(f"- NumPy (simulate.transport.so2_scores): {s['numpy_s'] * 1e3:.0f} ms")
    if "torch_s" in s:
        lines.append(
            f"- torch CPU (the same so2_scores): {s['torch_s'] * 1e3:.0f} ms "
            f"(**{s['torch_s'] / s['numpy_s']:.2f}×** NumPy; max |Δs| = "
            f"{s['torch_max_abs_diff']:.1e})"
        )
    text = "\n".join(lines)
    print(text)
    if not args.quick:
        write_results("backend", res, text)
    return res


if __name__ == "__main__":
    main()
