"""GPU figures for one accelerator (prepared for one H200): the generic code path at scale.

    python benchmarks/gpu_sweep.py [OUT_DIR] [--backend torch|cupy] [--device cuda] [--tiny]

OUT_DIR defaults to the ``OUT`` environment variable. ``--tiny --device cpu`` checks the script
on a CPU in seconds. Each step is timed after a warm-up, with the device synchronised, and
checked against an independent CPU result (numba / NumPy, float64):

1. structured ``influence``: 32-head ALiBi, T = 64, λ = 0.1, n = 10⁸ (tiny 10⁵); checks
   Σp = 1 and the closed form p(n−1) = ∏(1 − λ(1 − A[n−1, n−1])) (claims PB1, PB10);
2. the same on GPU and with numba on the CPU at n = 10⁶ (tiny 10⁴): max |Δp|;
3. dense ``influence``: the same kernel as an explicit n × n matrix built on the device,
   n = 32768 (tiny 512), T = 64 matrix–vector products; max |Δp| against numba's structured
   rollout of the same kernel;
4. SO(2) route scores (``transport.so2_scores`` on device arrays), n = 65536 keys, n_q = 4096
   queries, d = 96 (tiny 2048 / 256): max |Δs| against NumPy for 64 queries;
5. Monte Carlo route means (``transport.empirical_route_mean`` on the device, native device
   RNG, statistic ``"cos"``), 10⁵ routes, 512 steps, uniform angles: max error against
   (sin a / a)ⁿ (claim AT1).

Writes ``gpu_sweep.json`` and ``gpu_sweep.md`` to OUT_DIR. Budget: well under 8 minutes on an
H200 (the CPU reference at n = 10⁶ takes a few seconds).

Limits (as ``benchmarks/limits.py`` on one CPU core, but against this device's own rates): first,
in the same process and on the same device, best of 5 (3 with ``--tiny``) timed with CUDA events
(the wall clock off a GPU),

- ``triad``: the STREAM triad a = b + s·c on float64 device arrays of 2^27 elements (1 GiB each;
  tiny 2^16), one fused kernel, 24 bytes per element as STREAM counts them (two reads, one write);
- ``matmul_f64`` and ``matmul_f32``: C = A·B at 8192 × 8192 (tiny 64), 2·8192³ flops (float32
  as torch runs it by default: TF32 off);

then every timed step above gives a row: its achieved rate under the byte or flop model stated
next to it in :func:`limit_rows`, the reference it is held against, their ratio in %, and the
1-minute load average of the host. The table goes to the end of ``gpu_sweep.md``.

``--train-step L H D_HEAD V LEN BATCH`` measures the references and one optimiser step of the
language model of ``benchmarks/gpu_extrapolate.sh`` (L layers, H heads of D_HEAD, vocabulary V,
BATCH sequences of LEN tokens) instead of the sweep, and writes ``gpu_limits.json`` and
``gpu_limits.md``.

With no usable device (no CUDA device for torch, CuPy missing) the script says so and exits
with status 2 before measuring anything.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from posflow.simulate import backend as B  # noqa: E402
from posflow.simulate import transport  # noqa: E402
from posflow.simulate.kernels import alibi_kernel, alibi_slopes, dense_kernel  # noqa: E402
from posflow.simulate.orthogonal import SO2BlockLaw  # noqa: E402
from posflow.simulate.rollout import constant, influence  # noqa: E402

SIZES = {
    "full": {"n_big": 10**8, "n_check": 10**6, "n_dense": 32768, "n_keys": 65536, "n_q": 4096},
    "tiny": {"n_big": 10**5, "n_check": 10**4, "n_dense": 512, "n_keys": 2048, "n_q": 256},
}
T, HEADS, LAM = 64, 32, 0.1
REF_SIZES = {"full": {"triad": 2**27, "matmul": 8192, "repeat": 5},
             "tiny": {"triad": 2**16, "matmul": 64, "repeat": 3}}  # fmt: skip
SO2_BLOCKS = 48  # d/2 angle blocks of route_means (d = 96)


def _sync(name):
    if name == "torch":
        import torch

        if torch.cuda.is_available():
            torch.cuda.synchronize()
    elif name == "cupy":
        import cupy

        cupy.cuda.Device().synchronize()


def timed(fn, name, repeat=1):
    best, out = np.inf, None
    for _ in range(repeat):
        _sync(name)
        t0 = time.perf_counter()
        out = fn()
        _sync(name)
        best = min(best, time.perf_counter() - t0)
    return best, out


def peak_memory(name):
    if name == "torch":
        import torch

        if torch.cuda.is_available():
            return torch.cuda.max_memory_allocated() / 2**30
    return None


# ------------------------------------------------------------------------------------------
# limits: this device's own triad and matmul, and each path's rate as a share of them


def load1() -> float:
    """The host's 1-minute load average (printed next to every rate)."""
    return os.getloadavg()[0]


class DeviceTimer:
    """Time ``fn()`` on the device of backend ``name`` and device ``dev``.

    On a GPU (torch on ``cuda[:N]``, CuPy) a pair of CUDA events is recorded on the device's
    current stream around the call after a synchronisation, and the time is the events' elapsed
    time once the end event has completed; elsewhere the wall clock (torch on the CPU runs
    synchronously).
    """

    def __init__(self, name: str, dev):
        self.name, self.dev = name, dev
        self.cuda = name == "cupy" or (name == "torch" and str(dev).startswith("cuda"))

    def once(self, fn):
        """(seconds, output) of one call of ``fn``."""
        if not self.cuda:
            t0 = time.perf_counter()
            out = fn()
            return time.perf_counter() - t0, out
        if self.name == "torch":
            import torch

            stream = torch.cuda.current_stream(self.dev)
            start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
            torch.cuda.synchronize(self.dev)
            start.record(stream)
            out = fn()
            end.record(stream)
            end.synchronize()
            return start.elapsed_time(end) / 1e3, out
        import cupy

        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        with self.dev:
            cupy.cuda.Device().synchronize()
            start.record()
            out = fn()
            end.record()
            end.synchronize()
        return cupy.cuda.get_elapsed_time(start, end) / 1e3, out

    def best(self, fn, repeat: int):
        """(shortest of ``repeat`` ≥ 1 times in s, last output)."""
        if repeat < 1:
            raise ValueError(f"repeat must be at least 1; got {repeat}")
        best, out = np.inf, None
        for _ in range(repeat):
            t, out = self.once(fn)
            best = min(best, t)
        return best, out


def triad_gbs(name: str, dev, n: int, timer, repeat: int) -> float:
    """STREAM triad a = b + s·c on float64 device arrays of ``n`` elements, in GB/s.

    One fused kernel (``torch.add(b, c, alpha=s, out=a)``; a CuPy elementwise kernel); bytes
    as STREAM counts them, 24 per element (reads of b and c, the write of a). ``a`` is written
    once before timing (no first-touch cost is timed) and checked after it (1 + 3·2 = 7).
    """
    s = 3.0
    if name == "torch":
        import torch

        a, b, c = (torch.full((n,), v, dtype=torch.float64, device=dev) for v in (0.0, 1.0, 2.0))

        def triad():
            return torch.add(b, c, alpha=s, out=a)
    else:
        import cupy

        with dev:
            a, b, c = (cupy.full((n,), v, dtype=cupy.float64) for v in (0.0, 1.0, 2.0))
        kernel = cupy.ElementwiseKernel("float64 b, float64 c, float64 s", "float64 a",
                                        "a = b + s * c", "posflow_triad")  # fmt: skip

        def triad():
            with dev:
                return kernel(b, c, s, a)

    triad()
    t, _ = timer.best(triad, repeat)
    if not (float(a[0]) == 7.0 and float(a[n - 1]) == 7.0):
        raise RuntimeError("the triad computed a wrong value")
    return 24.0 * n / t / 1e9


def matmul_gflops(name: str, dev, n: int, dtype: str, timer, repeat: int) -> float:
    """C = A·B for ``dtype`` ("float64" or "float32") n × n device matrices, GFLOP/s (2 n³
    flops). torch runs float32 products as full float32 unless TF32 is switched on (it is off
    by default; the reference records the switch)."""
    if name == "torch":
        import torch

        dt = getattr(torch, dtype)
        g = torch.Generator(device=dev).manual_seed(0)
        A, Bm = (torch.randn((n, n), generator=g, dtype=dt, device=dev) for _ in range(2))
        C = torch.empty((n, n), dtype=dt, device=dev)

        def product():
            return torch.matmul(A, Bm, out=C)
    else:
        import cupy

        with dev:
            rng = cupy.random.default_rng(0)
            A, Bm = (rng.standard_normal((n, n), dtype=dtype) for _ in range(2))
            C = cupy.empty((n, n), dtype=dtype)

        def product():
            with dev:
                return cupy.matmul(A, Bm, out=C)

    product()
    t, _ = timer.best(product, repeat)
    return 2.0 * n**3 / t / 1e9


def references(name: str, dev, timer, tiny: bool = False) -> dict:
    """This device's reference rates, measured now (module docstring): {"triad": GB/s,
    "matmul_f64": GFLOP/s, "matmul_f32": GFLOP/s, "load": 1-minute load, sizes, …}."""
    size = REF_SIZES["tiny" if tiny else "full"]
    r = size["repeat"]
    refs = {
        "triad": triad_gbs(name, dev, size["triad"], timer, r),
        "matmul_f64": matmul_gflops(name, dev, size["matmul"], "float64", timer, r),
        "matmul_f32": matmul_gflops(name, dev, size["matmul"], "float32", timer, r),
        "load": load1(),
        "triad_n": size["triad"],
        "matmul_n": size["matmul"],
        "repeat": r,
    }
    if name == "torch":
        import torch

        refs["tf32"] = bool(torch.backends.cuda.matmul.allow_tf32)
    return refs


@dataclass
class Row:
    """One line of the table: a path, its achieved rate and the reference it is held against
    (the same columns as ``benchmarks/limits.py``)."""

    section: str
    path: str
    achieved: float
    unit: str  # "GB/s" or "GFLOP/s"
    reference: float
    ref_name: str  # "triad", "matmul_f64" or "matmul_f32"
    load: float

    @property
    def percent(self) -> float:
        return 100.0 * self.achieved / self.reference


UNITS = {"triad": "GB/s", "matmul_f64": "GFLOP/s", "matmul_f32": "GFLOP/s"}


def rate_row(section: str, path: str, amount: float, seconds: float, refs: dict, ref: str,
             load: float) -> Row:  # fmt: skip
    """The row of a path that moved ``amount`` bytes (``ref`` "triad") or did ``amount`` flops
    (a matmul reference) in ``seconds``: achieved = amount / seconds / 10⁹."""
    if not seconds > 0:
        raise ValueError(f"seconds must be positive; got {seconds}")
    return Row(section, path, amount / seconds / 1e9, UNITS[ref], float(refs[ref]), ref, load)


def train_flops(n_layer: int, d_model: int, vocab: int, length: int, batch: int) -> float:
    """Flops of one optimiser step of the LM of ``posflow.simulate.models.lm``.

    Per token and layer, forward: the projections q, k, v (2·3D²), the output (2·D²) and the
    MLP D → 4D → D (2·8D²), 24 D²; the scores q·k and the mix of values over all n positions
    (2·n·D each: the model builds the full n × n score matrix and masks the future), 4 n D;
    per token the tied output head, 2 D V. The step costs three forwards (the backward pass
    forms two products per forward product). LayerNorm, softmax, GELU and AdamW's elementwise
    updates are not counted.
    """
    per_token = n_layer * (24.0 * d_model**2 + 4.0 * length * d_model) + 2.0 * d_model * vocab
    return 3.0 * per_token * length * batch


def limit_rows(res: dict, refs: dict) -> list[Row]:
    """One row per timed path in ``res`` (the steps' dicts), with its byte or flop model."""
    rows = []
    for key in ("cross_check", "structured"):
        if key not in res:
            continue
        r = res[key]
        n, t, h = r["n"], r["T"], r["heads"]
        # flops, as benchmarks/limits.py counts the ALiBi rollout: per token and layer 5 per
        # head (the reduction term ω_h G_h and the suffix recurrence) and 5 for the blend,
        # (5 H + 5) n T in all. The device's chunked scan (posflow.simulate._scan) does more
        # arithmetic than this (B × B block products), so the row understates its flop rate.
        rows.append(rate_row(key, f"influence, ALiBi {h} heads, n = {n:,}, T = {t}",
                             (5.0 * h + 5.0) * n * t, r["influence_s"], refs, "matmul_f64",
                             r["load"]))  # fmt: skip
        if "influence_1head_s" in r:
            # bytes, as benchmarks/limits.py counts one head: each layer reads the row p and
            # writes the new row, 16 n per layer; the slope tables stay in cache.
            rows.append(rate_row(key, f"influence, ALiBi 1 head, n = {n:,}, T = {t}",
                                 16.0 * n * t, r["influence_1head_s"], refs, "triad",
                                 r["load"]))  # fmt: skip
    if "dense" in res:
        r = res["dense"]
        n, t = r["n"], r["T"]
        # bytes over n² float64: K.dense writes the matrix once (8 n²); dense_kernel reads it
        # and writes its own checked copy (2·8 n², as benchmarks/_limits_dense.py); the
        # rollout reads the matrix once per layer (T·8 n²). Vectors of length n not counted.
        rows += [
            rate_row("dense", f"ALiBi kernel as an n × n matrix, n = {n:,}", 8.0 * n * n,
                     r["build_s"], refs, "triad", r["load"]),
            rate_row("dense", f"dense_kernel checks and copy, n = {n:,}", 16.0 * n * n,
                     r["validate_s"], refs, "triad", r["load"]),
            rate_row("dense", f"influence, dense kernel, n = {n:,}, T = {t}", 8.0 * n * n * t,
                     r["influence_s"], refs, "triad", r["load"]),
        ]  # fmt: skip
    if "so2_scores" in res:
        r = res["so2_scores"]
        # flops: the score product (n_q × d)·(d × n), 2 n_q n d; the O((n + n_q)·d) rotations
        # are not counted.
        rows.append(rate_row("so2_scores", f"SO(2) scores {r['n_q']:,} × {r['n']:,}, d = {r['d']}",
                             2.0 * r["n_q"] * r["n"] * r["d"], r["seconds"], refs, "matmul_f64",
                             r["load"]))  # fmt: skip
    if "route_means" in res:
        r = res["route_means"]
        # bytes per angle (route, block, step), float64: the draw written (8), ψ ← ψ + θ (two
        # reads and a write, 24), cos ψ (a read and a write, 16), the mean over routes (a read,
        # 8): 56 bytes; the generator's own arithmetic is not counted.
        rows.append(rate_row("route_means",
                             f"route means, {r['routes']:,} routes × {r['steps']} steps",
                             56.0 * SO2_BLOCKS * r["routes"] * r["steps"], r["seconds"], refs,
                             "triad", r["load"]))  # fmt: skip
    if "train_step" in res:
        r = res["train_step"]
        # flops: train_flops (its docstring states the model); the LM runs in float32.
        rows.append(rate_row("train_step",
                             f"LM training step, L = {r['n_layer']}, d_model {r['d_model']}, "
                             f"{r['batch']} × {r['length']} tokens",
                             train_flops(r["n_layer"], r["d_model"], r["vocab"], r["length"],
                                         r["batch"]), r["seconds"], refs, "matmul_f32",
                             r["load"]))  # fmt: skip
    return rows


HEADER = ["| section | path | achieved | reference | % of reference | load (1 min) |",
          "|---|---|---|---|---|---|"]  # fmt: skip


def table_line(row: Row) -> str:
    return (
        f"| {row.section} | {row.path} | {row.achieved:.2f} {row.unit} | {row.ref_name} "
        f"{row.reference:.2f} {row.unit} | {row.percent:.0f} % | {row.load:.2f} |"
    )


def references_line(refs: dict) -> str:
    return (
        f"references: triad {refs['triad']:.2f} GB/s (n = {refs['triad_n']:,}), matmul "
        f"{refs['matmul_n']} × {refs['matmul_n']} float64 {refs['matmul_f64']:.2f} GFLOP/s, "
        f"float32 {refs['matmul_f32']:.2f} GFLOP/s (TF32 {'on' if refs.get('tf32') else 'off'});"
        f" best of {refs['repeat']}; load {refs['load']:.2f}"
    )


def limits_table(refs: dict, rows: list[Row]) -> list[str]:
    """The markdown lines: the references, then one line per row."""
    return [references_line(refs), "", *HEADER, *(table_line(r) for r in rows)]


def train_step(name: str, dev, timer, n_layer: int, n_head: int, d_head: int, vocab: int,
               length: int, batch: int, repeat: int = 3) -> dict:  # fmt: skip
    """Time one optimiser step (forward, backward, gradient clipping, AdamW) of the RoPE
    language model of ``benchmarks/gpu_extrapolate.sh`` (AT20) on a random batch of token ids,
    as ``posflow.simulate.models.extrapolate_seeds.train_run`` steps it; best of ``repeat``
    after two warm-up steps."""
    if name != "torch":
        raise ValueError(f"--train-step needs --backend torch; got {name!r}")
    import torch

    from posflow.simulate.models.lm import LM, LMConfig

    D = n_head * d_head
    cfg = LMConfig(vocab_size=vocab, n_layer=n_layer, n_head=n_head, d_model=D, scheme="rope",
                   scheme_options={"base": 10000.0})  # fmt: skip
    model = LM(cfg, seed=0).to(dev)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(vocab, (batch, length + 1), generator=g).to(dev)
    x, y = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()

    def step():
        loss = model.loss(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.detach()

    for _ in range(2):
        step()
    t, loss = timer.best(step, repeat)
    if not np.isfinite(float(loss)):
        raise RuntimeError("the training step diverged")
    return {"n_layer": n_layer, "n_head": n_head, "d_model": D, "vocab": vocab,
            "length": length, "batch": batch, "parameters": model.num_parameters(),
            "seconds": t, "peak_GiB": peak_memory(name), "load": load1()}  # fmt: skip


# ------------------------------------------------------------------------------------------
# the sweep


def structured(name, dev, n, repeat, one_head=False):
    slopes = alibi_slopes(HEADS)
    t_build, K = timed(lambda: alibi_kernel(n, slopes, backend=name, device=dev), name)
    lam = constant(LAM, T)
    influence(K, constant(LAM, 1))  # warm-up (kernels, allocator)
    t, p = timed(lambda: influence(K, lam), name, repeat)
    xp = B.namespace(name)
    a_last = float(K.diagonal()[n - 1])
    closed = (1 - LAM * (1 - a_last)) ** T
    row = {
        "n": n,
        "T": T,
        "heads": HEADS,
        "build_s": t_build,
        "influence_s": t,
        "sum_p_minus_1": float(xp.sum(p)) - 1.0,
        "p_last_rel_err": abs(float(p[n - 1]) - closed) / closed,
        "p_first": float(p[0]),
        "peak_GiB": peak_memory(name),
        "load": load1(),
    }
    if one_head:  # the memory-bound row of benchmarks/limits.py: one head of slope 0.5
        K1 = alibi_kernel(n, 0.5, backend=name, device=dev)
        influence(K1, constant(LAM, 1))
        row["influence_1head_s"], p1 = timed(lambda: influence(K1, lam), name, repeat)
        row["sum_p_1head_minus_1"] = float(xp.sum(p1)) - 1.0
    return row, p


def cross_check(name, dev, n):
    slopes, lam = alibi_slopes(HEADS), constant(LAM, T)
    row, p_dev = structured(name, dev, n, 1)
    K = alibi_kernel(n, slopes)
    influence(K, constant(LAM, 1))
    t_cpu, p_cpu = timed(lambda: influence(K, lam), "numpy")
    row |= {"numba_cpu_s": t_cpu, "max_abs_diff": float(np.abs(B.to_numpy(p_dev) - p_cpu).max())}
    return row


def dense(name, dev, n):
    K = alibi_kernel(n, alibi_slopes(HEADS), backend=name, device=dev)
    t_build, A = timed(K.dense, name)
    t_valid, D = timed(lambda: dense_kernel(A), name)
    A = None  # free the unvalidated copy on the device
    lam = constant(LAM, T)
    influence(D, constant(LAM, 1))
    t, p = timed(lambda: influence(D, lam), name, 2)
    ref = influence(alibi_kernel(n, alibi_slopes(HEADS)), lam)
    return {
        "n": n,
        "T": T,
        "build_s": t_build,
        "validate_s": t_valid,
        "influence_s": t,
        "per_layer_ms": 1e3 * t / T,
        "max_abs_diff_vs_structured_numba": float(np.abs(B.to_numpy(p) - ref).max()),
        "peak_GiB": peak_memory(name),
        "load": load1(),
    }


def scores(name, dev, n, n_q, d=96):
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((n_q, d)), rng.standard_normal((n, d))
    theta = rng.uniform(-0.5, 0.5, (n, d // 2))
    qd, kd, td = (B.asarray(x, name, dev) for x in (q, k, theta))
    transport.so2_scores(qd[:8, ...], kd, td, q_pos=np.arange(n - 8, n))
    t, s = timed(lambda: transport.so2_scores(qd, kd, td), name, 3)
    ref = transport.so2_scores(q[:64], k, theta, q_pos=np.arange(n - n_q, n - n_q + 64))
    err = float(np.abs(B.to_numpy(s[:64, ...]) - ref).max())
    return {"n": n, "n_q": n_q, "d": d, "seconds": t, "max_abs_diff": err, "load": load1()}


def route_means(name, dev, routes=10**5, steps=512, a=0.3):
    law = SO2BlockLaw(2 * SO2_BLOCKS, "uniform", a)

    def run():
        return transport.empirical_route_mean(
            law, steps, routes, seed=1, statistic="cos", backend=name, device=dev
        )

    t, r = timed(run, name)
    exact = (np.sin(a) / a) ** np.arange(steps + 1)
    err = float(np.abs(B.to_numpy(r) - exact).max())
    # |mean over 48 blocks and all routes of cos ψ|: standard error ≤ sqrt(1 / (2·48·routes))
    return {
        "routes": routes,
        "steps": steps,
        "seconds": t,
        "max_abs_err": err,
        "mc_se": float(np.sqrt(1 / (2 * SO2_BLOCKS * routes))),
        "load": load1(),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", default=os.environ.get("OUT"), help="output directory")
    ap.add_argument("--backend", default="torch", choices=("torch", "cupy"))
    ap.add_argument("--device", default=None, help="torch device (default cuda)")
    ap.add_argument("--tiny", action="store_true", help="small sizes (a CPU check)")
    ap.add_argument("--train-step", nargs=6, type=int, default=None,
                    metavar=("L", "H", "D_HEAD", "V", "LEN", "BATCH"),
                    help="measure the references and one LM training step instead of the sweep")
    args = ap.parse_args(argv)
    if not args.out:
        ap.error("give OUT_DIR or set the OUT environment variable")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = args.backend
    dev = args.device or ("cuda" if name == "torch" else None)
    try:
        name, dev = B.resolve_backend(name, dev)
    except ValueError as exc:
        ap.error(str(exc))
    size = SIZES["tiny" if args.tiny else "full"]
    info = {"backend": name, "device": str(dev), "tiny": args.tiny, "host": platform.node()}
    if name == "torch":
        import torch

        info["torch"] = torch.__version__
        if torch.cuda.is_available() and str(dev).startswith("cuda"):
            info["gpu"] = torch.cuda.get_device_name()
    res = {"info": info}
    timer = DeviceTimer(name, dev)
    t0 = time.perf_counter()
    refs = res["references"] = references(name, dev, timer, args.tiny)
    print(references_line(refs), flush=True)
    if "gpu" in info:  # the references' arrays are freed: peaks count from here
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(dev)
    if args.train_step is not None:
        return limits_only(res, out, name, dev, timer, args.train_step)
    steps = (
        ("cross_check", lambda: cross_check(name, dev, size["n_check"])),
        ("structured", lambda: structured(name, dev, size["n_big"], 2, one_head=True)[0]),
        ("dense", lambda: dense(name, dev, size["n_dense"])),
        ("so2_scores", lambda: scores(name, dev, size["n_keys"], size["n_q"])),
        ("route_means", lambda: route_means(name, dev, 2000 if args.tiny else 10**5)),
    )
    for key, fn in steps:
        res[key] = fn()
        res["elapsed_s"] = time.perf_counter() - t0
        print(key, json.dumps(res[key]), flush=True)
        (out / "gpu_sweep.json").write_text(json.dumps(res, indent=2) + "\n")
    s, c, d = res["structured"], res["cross_check"], res["dense"]
    lines = [
        f"# GPU figures ({info.get('gpu', dev)}, backend {name})",
        "",
        f"- influence, 32-head ALiBi, n = {s['n']:,}, T = {T}: {s['influence_s']:.3f} s "
        f"(build {s['build_s']:.2f} s; |Σp − 1| = {abs(s['sum_p_minus_1']):.1e}; p(n−1) vs "
        f"closed form {s['p_last_rel_err']:.1e}; peak {s['peak_GiB']} GiB)",
        f"- n = {c['n']:,}: device {c['influence_s']:.3f} s vs numba CPU {c['numba_cpu_s']:.3f} s "
        f"(**{c['numba_cpu_s'] / c['influence_s']:.0f}×**), max |Δp| = {c['max_abs_diff']:.1e}",
        f"- dense n = {d['n']:,}, T = {T}: {d['influence_s']:.3f} s "
        f"({d['per_layer_ms']:.2f} ms per layer), max |Δp| vs structured numba = "
        f"{d['max_abs_diff_vs_structured_numba']:.1e}",
        f"- SO(2) scores {res['so2_scores']['n_q']} × {res['so2_scores']['n']:,}, d = 96: "
        f"{res['so2_scores']['seconds'] * 1e3:.1f} ms, max |Δs| = "
        f"{res['so2_scores']['max_abs_diff']:.1e}",
        f"- route means, {res['route_means']['routes']:,} routes × 512 steps: "
        f"{res['route_means']['seconds']:.2f} s, max error vs (sin a/a)^n = "
        f"{res['route_means']['max_abs_err']:.1e} (MC s.e. ≈ {res['route_means']['mc_se']:.1e})",
        f"- total {res['elapsed_s']:.0f} s",
    ]
    rows = limit_rows(res, refs)
    res["limits"] = [asdict(r) | {"percent": r.percent} for r in rows]
    (out / "gpu_sweep.json").write_text(json.dumps(res, indent=2) + "\n")
    lines += ["", "## Against this device's limits (byte and flop models: gpu_sweep.py)", "",
              *limits_table(refs, rows)]  # fmt: skip
    (out / "gpu_sweep.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return res


def limits_only(res: dict, out: Path, name: str, dev, timer, lm: list[int]) -> dict:
    """``--train-step``: the references and one training step; gpu_limits.json and .md."""
    res["train_step"] = train_step(name, dev, timer, *lm)
    rows = limit_rows(res, res["references"])
    res["limits"] = [asdict(r) | {"percent": r.percent} for r in rows]
    (out / "gpu_limits.json").write_text(json.dumps(res, indent=2) + "\n")
    lines = [f"# Against this device's limits ({res['info'].get('gpu', dev)}, backend {name})",
             "", *limits_table(res["references"], rows)]  # fmt: skip
    (out / "gpu_limits.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[4:]))
    return res


if __name__ == "__main__":
    main()
