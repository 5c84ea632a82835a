"""``posflow extrapolate``: train short, evaluate long, per position scheme (claim AT20).

torch is imported only when training runs, so ``--results`` and ``--plot`` of a saved store,
and ``posflow`` itself, work without it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from posflow.proofs_checks.cli._common import (
    UsageError,
    add_threads_option,
    integer,
    output_dir,
    output_file,
    positive_float,
    print_json,
    torch_device,
)

__all__ = ["add_parser", "cmd_extrapolate"]

NEEDS_TORCH = "posflow extrapolate needs torch to train: pip install torch==2.13.0"

EPILOG = """\
Default CPU run (the committed table, shipped as package data): 9 schemes, each a
3-layer, 4-head, d = 64 byte-level LM trained for 160 s (--time; or a fixed --steps) at context
64 with batch 16 on the Python standard library, then evaluated at 64, 128, ..., 4096 (64x) on
held-out windows (max(2, 8192 // L) windows of L bytes, seed 42 + L). About 30 minutes on two
cores; by default the threads are the cores other processes leave free (--threads N).
PPL = exp(mean next-byte cross-entropy, all positions).

Schemes: nope, rope, alibi; random_qk / random_qkv (accumulated angles ~ Unif[-f_b, f_b],
resampled every training step; fixed seed at evaluation); random_pos_qk / random_pos_qkv
(Unif[0, 2 f_b]); learned_qk / learned_qkv (pi tanh(E[x_t]) - f_b, zero-initialised); path
(Householder, beta = 2 sigmoid). A store made with another configuration is refused; finished
schemes are kept, so an interrupted run resumes.
"""


def _torch_available() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def _print_table(rows) -> None:
    from rich.console import Console
    from rich.table import Table

    lengths = sorted({r["eval_len"] for r in rows})
    by: dict[str, dict[int, float]] = {}
    train = {}
    for r in rows:
        by.setdefault(r["scheme"], {})[r["eval_len"]] = r["ppl"]
        train[r["scheme"]] = r["train_len"]
    t = Table(title="perplexity (ratio to the training length)")
    t.add_column("scheme")
    t.add_column("train")
    for L in lengths:
        t.add_column(str(L), justify="right")
    for s, d in by.items():
        base = d.get(train[s])
        cells = [
            "" if L not in d else f"{d[L]:.3f}" + (f" ({d[L] / base:.2f})" if base else "")
            for L in lengths
        ]
        t.add_row(s, str(train[s]), *cells)
    Console().print(t)


def _store(args) -> Path:
    """The run store: checked as a writable folder when training, as a folder when reading."""
    from posflow.simulate.models.store import COMMITTED_STORE, user_store

    if args.results:  # reading: the committed run unless --store names another
        if args.store is None:
            return COMMITTED_STORE
        store = Path(args.store)
        if store.exists() and not store.is_dir():
            raise UsageError(f"--store {args.store!r} is a file, not a folder")
        return store
    if args.store is None:
        return output_dir("--store (the per-user cache)", user_store())
    return output_dir("--store", args.store)


def cmd_extrapolate(args) -> int:
    """Run (or read) a train-short/test-long comparison; returns the exit code (AT20)."""
    from posflow.proofs_checks.extrapolation_trained import plot_extrapolation, read_store

    if args.steps is not None and args.time is not None:
        raise UsageError("give at most one of --steps and --time")
    if args.results and args.schemes:
        raise UsageError("--results prints the saved table; it takes no --schemes")
    plot = output_file("--plot", args.plot, ".png") if args.plot else None
    store = _store(args)
    if not args.results:
        if not _torch_available():
            raise UsageError(NEEDS_TORCH)
        device = torch_device("--device", args.device or "cpu")
        from posflow.simulate._threads import set_threads
        from posflow.simulate.models.extrapolate import ExtrapolationConfig, run_extrapolation

        kw = {}
        for name in ("train_len", "max_factor", "steps", "batch_size", "lr", "n_layer",
                     "n_head", "d_model", "seed", "max_bytes", "eval_tokens", "chunk",
                     "device"):  # fmt: skip
            v = getattr(args, name)
            if v is not None:
                kw[name] = v
        kw["device"] = str(device)
        if args.time is not None:
            kw["time_s"] = args.time
        if args.schemes:
            kw["schemes"] = tuple(s for x in args.schemes for s in x.replace(",", " ").split())
        kw["threads"] = set_threads(args.threads, torch=True)
        cfg = ExtrapolationConfig(**kw)

        def log(msg):
            if not args.json:
                print(msg, flush=True)

        log(f"{kw['threads']} CPU thread(s), device {device}, store {store}")
        run_extrapolation(cfg, store, log=log)
    rows = read_store(store)
    if plot is not None:
        if not rows:
            raise UsageError(f"--plot: no saved results in {store}")
        plot_extrapolation(rows, plot)
    if args.json:
        print_json(rows, inputs="--store")
    elif rows:
        _print_table(rows)
        if plot is not None:
            print(f"plot written to {plot}")
    else:
        print(f"no saved results in {store}; run `posflow extrapolate` to produce them")
    return 0


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``posflow extrapolate`` on the CLI's subparsers (claim AT20)."""
    p = subparsers.add_parser(
        "extrapolate",
        help="train each position scheme short, evaluate perplexity up to 64x longer (AT20)",
        description="Train small LMs per position scheme at a short context and measure "
        "perplexity at 1x, 2x, ... 64x the training length (claim AT20).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--schemes", nargs="+", metavar="NAME", help="schemes to run (default: 9)")
    p.add_argument("--train-len", type=int, help="training context (default 64)")
    p.add_argument("--max-factor", type=int, help="longest length / training (default 64)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--steps", type=int, help="optimiser steps per scheme (default: use --time)")
    g.add_argument("--time", type=positive_float, help="training seconds per scheme (default 160)")
    p.add_argument("--batch-size", type=int, help="training batch (default 16)")
    p.add_argument("--lr", type=float, help="peak learning rate (default 3e-3)")
    p.add_argument("--n-layer", type=int, help="layers (default 3)")
    p.add_argument("--n-head", type=int, help="heads (default 4)")
    p.add_argument("--d-model", type=int, help="model width (default 64)")
    p.add_argument("--seed", type=integer(0), help="seed of weights and batches (default 0)")
    p.add_argument("--max-bytes", type=int, help="corpus bytes (default 4,000,000)")
    p.add_argument("--eval-tokens", type=int, help="evaluation tokens per length (default 8192)")
    p.add_argument("--chunk", type=int, help="queries per attention chunk (default 512)")
    p.add_argument("--device", help="torch device: cpu (default), cuda, cuda:1")
    add_threads_option(p)
    p.add_argument("--store", metavar="DIR", help="run store (default: the per-user cache when "
                   "training, the committed run with --results)")  # fmt: skip
    p.add_argument("--results", action="store_true", help="print the saved table; train nothing")
    p.add_argument("--json", action="store_true", help="print rows as JSON")
    p.add_argument("--plot", metavar="PATH", help="write a PNG of PPL(L)/PPL(train) per scheme")
    p.set_defaults(func=cmd_extrapolate)
    return p
