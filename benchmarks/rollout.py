"""Rollout benchmarks: vector chain vs the dense matrix-product rollout, in one run.

    python benchmarks/rollout.py [--quick]

1. ratio  dense rollout (P = R_{T-1} ⋯ R_0 by matrix products, last row) / ``influence``
   at n = 2048, T = 32, 32 ALiBi heads (goal ≥ 1000×);
2. absolute time and peak memory of ``influence`` at n = 10⁶, T = 64 with 1 and 32 heads
   (goals < 0.3 s and < 3 s on one core; memory O(n·H));
3. the 15 real-model profiles together (goal < 0.5 s);
4. building the content kernels of the 15 real-model configurations with content (5 models ×
   3 datasets, ``all_content``) and of bloom's 70-layer (c) profile: ratio today's builder (one
   ``AlibiKernel`` per layer with the pre-issue-15 tables, kept below as ``LegacyAlibiKernel``)
   / ``MeasuredConfig.kernels`` (``alibi_kernels``: one pass, slope-only tables shared) (goal
   ≥ 10×), with where the time of ``measured.profile(..., "residual_content")`` goes now;
5. the mass drift |Σp − 1| of attention-only rollouts (λ ≡ 1) at n = 256 and 1024, the plain
   chain of steps (before) against ``influence`` with its mass projection (after; goal ≤ 1e-15).

Everything runs on one core (BLAS and numba threads pinned to 1). Results are written to
``benchmarks/results/rollout.json`` and ``rollout.md``.
"""

from __future__ import annotations

import _bench  # noqa: F401  (first: pins BLAS, OpenMP and numba to one thread)

# isort: split

import argparse
import json
import math
import tracemalloc

import numpy as np
from _bench import best_of, cpu_model, write_results

from posflow.simulate import measured
from posflow.simulate._kernel import check_n
from posflow.simulate._validate import as_vector
from posflow.simulate.backend import host
from posflow.simulate.kernels import AlibiKernel, alibi_kernel, alibi_slopes, uniform_kernel
from posflow.simulate.rollout import constant, influence

# ------------------------------------------------------------------------------------------
# The content-kernel builder as it was before issue 15 (simulate/_alibi.py at 405980e): one
# kernel per layer, each with its own log-partial sums, logaddexp terms and exponentials.
_SAT = 45.0


def _legacy_log_partial(a, i):
    a = np.asarray(a, dtype=np.float64)[None, :]
    i = np.asarray(i, dtype=np.float64)[:, None]
    safe = np.where(a > 0, a, 1.0)
    with np.errstate(over="ignore", under="ignore"):
        core = np.log(-np.expm1(-safe * i)) - np.log(-np.expm1(-safe))
    if (a > 0).all():
        return core
    return np.where(a > 0, core, np.log(np.broadcast_to(i, core.shape)))


class LegacyAlibiKernel(AlibiKernel):
    """AlibiKernel with the constructor and tables of 405980e (the benchmark's baseline)."""

    def __init__(self, n, slopes, content=0.0, head_weights=None, backend=None, device=None):
        self.n = check_n(n)
        self._place(backend, device, slopes, content, head_weights)
        m = as_vector(host(slopes), "slopes")
        c = as_vector(host(content), "content")
        for name, v in (("slopes", m), ("content", c)):
            if v.size == 0:
                raise ValueError(f"{name} must have at least one value (one per head); got none")
        if m.size != c.size and 1 not in (m.size, c.size):
            raise ValueError("slopes and content must be scalars or have one value per head")
        H = max(m.size, c.size)
        self.slopes = np.broadcast_to(m, (H,)).copy()
        self.content = np.broadcast_to(c, (H,)).copy()
        if head_weights is None:
            w = np.full(H, 1.0 / H)
        else:
            w = as_vector(host(head_weights), "head_weights", size=H)
            w = w / w.sum()
        self.head_weights = w
        self.num_heads = H
        self._pos = np.flatnonzero(self.slopes >= 0)
        self._neg = np.flatnonzero(self.slopes < 0)
        self._use_numba = self.backend == "numpy"
        self._build_tables()

    def _table_rows(self) -> int:
        m = self.slopes
        if (m <= _SAT / self.n).any():
            return self.n
        return int(min(self.n, np.ceil(_SAT / m.min()) + 2))

    def _legacy_terms(self, i, heads=slice(None)):
        m, c = self.slopes[heads], self.content[heads]
        g = _legacy_log_partial(np.abs(m), i)
        with np.errstate(over="ignore"):
            lead = np.where(m >= 0, c + m, c + m * np.asarray(i, dtype=np.float64)[:, None])
        u = g - lead
        t = np.log1p(np.exp(-np.abs(u)))
        return -(np.maximum(lead, g) + t), np.exp(-(np.maximum(u, 0.0) + t))

    def _build_tables(self) -> None:
        nt = self._table_rows()
        log_w, head_diag = self._legacy_terms(np.arange(1, nt))
        dtab = np.ones(nt)
        dtab[1:] = head_diag @ self.head_weights
        diag = np.empty(self.n)
        diag[:nt], diag[nt:] = dtab, dtab[-1]
        self._diag = self._put(diag)
        w = np.zeros((nt, self.num_heads))
        w[1:] = np.exp(log_w)
        self._w_off = np.ascontiguousarray(w[:, self._pos])
        self._r = np.exp(-self.slopes[self._pos])
        self._hw = self.head_weights[self._pos].copy()
        self._neg_tables = []
        for h in self._neg:
            with np.errstate(over="ignore"):
                scale = self.head_weights[h] * np.exp(self.slopes[h] * np.arange(self.n))
            self._neg_tables.append((self._put(w[:, h]), self._put(scale)))


def legacy_kernels(cfg):
    """Today's builder before issue 15: ``[alibi_kernel(n, slopes, c) for c in content]``."""
    return [LegacyAlibiKernel(cfg.n, cfg.slopes, c) for c in cfg.content]


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


def content_keys():
    return [(m, "all_content", d) for m in measured.models() for d in measured.DATASETS]


def bench_content_build(repeat):
    """Ratio legacy builder / alibi_kernels over the 15 content configs and bloom (c)."""
    cfgs = [measured.config(*k) for k in content_keys()]
    bloom = measured.config("bloom", "all_content", "fineweb-edu")
    for c in cfgs:  # warm: compile / load numba, touch the data
        c.kernels()
        legacy_kernels(c)
    out = {}
    for name, group in (("all15", cfgs), ("bloom_c", [bloom])):
        t_old, old = best_of(lambda g=group: [legacy_kernels(c) for c in g], repeat)
        t_new, new = best_of(lambda g=group: [c.kernels() for c in g], repeat)
        t_loop, _ = best_of(
            lambda g=group: [[alibi_kernel(c.n, c.slopes, x) for x in c.content] for c in g],
            repeat,
        )
        # the tables agree with the legacy ones to a few ulp, the profiles to 1e-15
        d_tab = max(
            max(float(np.abs(a._w_off - b._w_off).max()), float(np.abs(a._diag - b._diag).max()))
            for ko, kn in zip(old, new, strict=True)
            for a, b in zip(ko, kn, strict=True)
        )
        d_prof = max(
            float(np.abs(influence(ko, c.lambdas) - influence(kn, c.lambdas)).max())
            for c, ko, kn in zip(group, old, new, strict=True)
        )
        out[name] = {
            "configs": len(group),
            "layers": int(sum(c.num_layers for c in group)),
            "t_legacy_s": t_old,
            "t_alibi_kernels_s": t_new,
            "t_alibi_kernel_loop_s": t_loop,
            "ratio": t_old / t_new,
            "max_table_diff": d_tab,
            "max_profile_diff": d_prof,
        }
    return out


def profile_breakdown(repeat):
    """Where measured.profile(model, "residual_content", dataset) spends its time now."""
    rows = {}
    for name, keys in (
        ("all15", content_keys()),
        ("bloom_c", [("bloom", "all_content", "fineweb-edu")]),
    ):
        cfgs = [measured.config(*k) for k in keys]
        t_cfg, _ = best_of(lambda k=keys: [measured.config(*x) for x in k], repeat)
        t_build, ks = best_of(lambda g=cfgs: [c.kernels() for c in g], repeat)
        t_roll, _ = best_of(
            lambda g=cfgs, kk=ks: [influence(k, c.lambdas) for c, k in zip(g, kk, strict=True)],
            repeat,
        )
        t_all, _ = best_of(
            lambda k=keys: [measured.profile(m, "residual_content", d) for m, _, d in k], repeat
        )
        rows[name] = {
            "t_profile_s": t_all,
            "t_config_s": t_cfg,
            "t_build_s": t_build,
            "t_rollout_s": t_roll,
            "t_other_s": max(0.0, t_all - t_cfg - t_build - t_roll),
        }
    return rows


def _plain_chain(K, T):
    """The chain of steps without the mass projection (what influence did before)."""
    p = np.zeros((1, K.n))
    p[0, -1] = 1.0
    for _ in range(T):
        p = K._residual_step(p, 1.0)
    return p[0]


def bench_mass(T=64):
    out = []
    for n in (256, 1024):
        cases = {
            "uniform": uniform_kernel(n),
            "alibi 8 heads": alibi_kernel(n, alibi_slopes(8)),
            "alibi 8 heads + content": alibi_kernel(n, alibi_slopes(8), np.linspace(-3, 5, 8)),
            "alibi m = 0.1": alibi_kernel(n, 0.1),
            "alibi negative slope": alibi_kernel(n, [-0.05, 0.1], [1.0, 2.0]),
        }
        for name, K in cases.items():
            before = _plain_chain(K, T)
            after = influence(K, np.ones(T))
            out.append(
                {
                    "n": n,
                    "T": T,
                    "kernel": name,
                    "drift_before": abs(math.fsum(before) - 1.0),
                    "drift_after": abs(math.fsum(after) - 1.0),
                    "max_rel_change": float(
                        np.max(np.abs(after - before) / np.maximum(before, 1e-300))
                    ),
                }
            )
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes (smoke run)")
    ap.add_argument(
        "--content", action="store_true", help="only the content-build, profile and mass parts"
    )
    args = ap.parse_args(argv)
    rep = 1 if args.quick else 3
    if args.content:
        res = {
            "content_build": bench_content_build(5),
            "profile_breakdown": profile_breakdown(5),
            "mass": bench_mass(),
        }
        print(json.dumps(res, indent=1))
        return res
    res = {
        "machine": cpu_model(),
        "numpy": np.__version__,
        "ratio": bench_ratio(512 if args.quick else 2048, 32, 32, rep),
        "large": [bench_large(10**5 if args.quick else 10**6, 64, H, rep) for H in (1, 32)],
        "models": bench_models(rep),
        "content_build": bench_content_build(rep),
        "profile_breakdown": profile_breakdown(rep),
        "mass": bench_mass(),
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
    lines += ["", "## Content kernels: legacy builder / alibi_kernels (one run)", ""]
    labels = {"all15": "15 configs with content", "bloom_c": "bloom (c), 70 layers × 112 heads"}
    for key, b in res["content_build"].items():
        lines.append(
            f"- {labels[key]} ({b['layers']} layers): **{b['ratio']:.1f}×** "
            f"({b['t_legacy_s'] * 1e3:.1f} ms vs {b['t_alibi_kernels_s'] * 1e3:.1f} ms; "
            f"one new alibi_kernel per layer {b['t_alibi_kernel_loop_s'] * 1e3:.1f} ms; "
            f"max table diff {b['max_table_diff']:.1e}, max profile diff "
            f"{b['max_profile_diff']:.1e})"
        )
    lines += ["", "## Where measured.profile(..., 'residual_content') spends its time now", ""]
    for key, b in res["profile_breakdown"].items():
        lines.append(
            f"- {labels[key]}: {b['t_profile_s'] * 1e3:.1f} ms = config "
            f"{b['t_config_s'] * 1e3:.2f} + kernels {b['t_build_s'] * 1e3:.1f} + rollout "
            f"{b['t_rollout_s'] * 1e3:.1f} + other {b['t_other_s'] * 1e3:.1f} ms"
        )
    lines += [
        "",
        "## Mass drift |Σp − 1| at λ ≡ 1, T = 64 (math.fsum): plain chain / influence",
        "",
        "| n | kernel | before | after | max relative change of an entry |",
        "|---|---|---|---|---|",
    ]
    for b in res["mass"]:
        lines.append(
            f"| {b['n']} | {b['kernel']} | {b['drift_before']:.1e} | {b['drift_after']:.1e} "
            f"| {b['max_rel_change']:.1e} |"
        )
    text = "\n".join(lines)
    print(text)
    if not args.quick:
        write_results("rollout", res, text)
    return res


if __name__ == "__main__":
    main()
