"""``posflow extrapolate``: train short, evaluate long, per position scheme and seed (claim AT20).

Trains with :func:`posflow.simulate.models.extrapolate_seeds.run_seeds` (equal step budgets,
several seeds, BPE tokens, nested prefixes of shared windows) and prints the store with
intervals and the unigram ceiling. torch is imported only when training runs, so ``--results``
and ``--plot`` of a saved store, and ``posflow`` itself, work without it.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from posflow.proofs_checks.cli._common import (
    UsageError,
    add_threads_option,
    integer,
    output_dir,
    positive_float,
    print_json,
    torch_device,
)
from posflow.proofs_checks.cli._output import figure_file

__all__ = ["add_parser", "cmd_extrapolate"]

NEEDS_TORCH = "posflow extrapolate needs torch to train: pip install torch==2.13.0"

EPILOG = """\
Default CPU run (the committed store, shipped as package data): 7 schemes x 3 seeds, each a
3-layer, 2-head, d_head = 48 LM on a 4096-token byte-level BPE vocabulary (pydoc English +
standard-library source), trained for exactly --steps optimiser steps (the same for every
scheme) at context 64 with batch 16, then scored on nested prefixes of the same 10 held-out
windows of 4096 tokens at 64, 128, ..., 4096 (random schemes: 3 angle draws averaged). The
angle base (RoPE and every rotation scheme) is chosen so that 5 of 24 frequency blocks mix
within the training length, [B]'s 10 of 48 at 512. Checkpoints every 100 steps: a killed run
resumes with identical numbers. --part K/M runs every M-th job from the K-th, so M processes
(--threads 1 each) can share one store.

Schemes: rope, alibi, random_qk / random_qkv (accumulated angles ~ Unif[-f_b, f_b]),
learned_qk / learned_qkv (pi tanh(E[x_t]) - f_b), random_qk_alibi (random Q/K rotations plus
ALiBi biases); also nope, random_pos_qk, random_pos_qkv, path.
"""


def _torch_available() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def _iv(lo, hi):
    return f"[{lo:.2f}, {hi:.2f}]" if math.isfinite(lo) and math.isfinite(hi) else ""


def _print_table(st) -> None:
    from rich.console import Console

    from posflow.proofs_checks.cli._output import table as Table
    from posflow.simulate.models.seed_store import ratio_summary

    summ = ratio_summary(st)
    L0, lengths = st.train_len, st.lengths
    unigram = float(st.meta["unigram_ppl"])
    t = Table(
        title="PPL(L)/PPL(L_train): seed mean [95 % t interval over seeds]",
        caption=f"unigram perplexity of the held-out text {unigram:.1f}; ceiling = unigram / "
        f"PPL(L_train); tokens per length: "
        + ", ".join(
            f"{L}: {v}"
            for L, v in sorted(st.meta["tokens_per_length"].items(), key=lambda x: int(x[0]))
        ),
    )
    for c in ("scheme", "seeds", f"PPL({L0})", "ceiling"):
        t.add_column(c, justify="left" if c == "scheme" else "right")
    for L in lengths[1:]:
        t.add_column(f"{L // L0}x", justify="right")
    for s, d in summ.items():
        cells = [f"{d[L]['ratio']:.3f} {_iv(d[L]['lo'], d[L]['hi'])}" for L in lengths[1:]]
        t.add_row(s, str(d[L0]["seeds"]), f"{d[L0]['ppl']:.2f}", f"{unigram / d[L0]['ppl']:.2f}",
                  *cells)  # fmt: skip
    Console(width=max(120, 30 + 22 * len(lengths))).print(t)


def _print_judge(store) -> str:
    """Print AT20's judge on ``store``: each comparison's interval and decision, the verdict."""
    from rich.console import Console

    from posflow.proofs_checks.claims.at20_trained import store_evidence
    from posflow.proofs_checks.cli._output import table as Table

    ev = store_evidence(store)
    con = Console(width=140)
    try:
        sub = ev.table("sub_claims")
    except KeyError:
        sub = None
    if sub is not None:
        t = Table(title="AT20 sub-claims: " + sub.note)
        for c in sub.columns:
            t.add_column(c, justify="left" if c in ("sub-claim", "comparison") else "right",
                         overflow="fold")  # fmt: skip
        for row in sub.rows:
            t.add_row(*[f"{v:.4g}" if isinstance(v, float) else str(v) for v in row])
        con.print(t)
    con.print(f"AT20 on {store}: {ev.status} — {ev.summary}", soft_wrap=True)
    return ev.status


def _rows(st) -> list[dict]:
    """One JSON row per (scheme, length): seed-mean ratio and PPL with the intervals."""
    from posflow.simulate.models.seed_store import ratio_summary

    out = []
    for s, d in ratio_summary(st).items():
        for L, c in d.items():
            row = {"scheme": s, "train_len": st.train_len, "eval_len": L, **c}
            out.append({k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                        for k, v in row.items()})  # fmt: skip
    return out


def _store(args) -> Path:
    """The run store: checked as a writable folder when training, as a folder when reading."""
    from posflow.simulate.models.seed_store import COMMITTED_STORE

    if args.results:  # reading: the committed run unless --store names another
        if args.store is None:
            return COMMITTED_STORE
        store = Path(args.store)
        if not store.exists():
            raise UsageError(
                f"--store {args.store!r} does not exist (--results reads a saved store)"
            )
        if not store.is_dir():
            raise UsageError(f"--store {args.store!r} is a file, not a folder")
        return store
    if args.store is None:
        from posflow.simulate.runtime import user_cache_dir

        return output_dir("--store (the per-user cache)", user_cache_dir() / "extrapolation_v2")
    return output_dir("--store", args.store)


def _part(text):
    try:
        k, m = (int(x, 10) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must look like K/M; got {text!r}") from None
    if not (m >= 1 and 0 <= k < m):
        raise argparse.ArgumentTypeError(f"must be K/M with 0 <= K < M; got {text!r}")
    return k, m


def cmd_extrapolate(args) -> int:
    """Run (or read) a multi-seed train-short/test-long comparison; returns the exit code."""
    from posflow.proofs_checks.claims.at20_figures import plot_extrapolation
    from posflow.simulate.models.seed_store import load_seed_store

    if args.judge and not args.results:
        raise UsageError("--judge reads a saved store: give it with --results")
    if args.judge and args.json:
        raise UsageError("--judge prints a table; it takes no --json")
    if args.results and (args.schemes or args.seeds):
        raise UsageError("--results prints the saved table; it takes no --schemes or --seeds")
    plot = figure_file("--plot", args.plot) if args.plot else None
    store = _store(args)
    if not args.results:
        if not _torch_available():
            raise UsageError(NEEDS_TORCH)
        device = torch_device("--device", args.device or "cpu")
        from posflow.simulate.models.bpe import BPEConfig
        from posflow.simulate.models.extrapolate_seeds import SeedRunConfig, run_seeds
        from posflow.simulate.runtime import set_threads

        kw = {}
        for name in ("train_len", "max_factor", "steps", "batch_size", "lr", "warmup", "n_layer",
                     "n_head", "d_head", "base", "eval_windows", "angle_draws", "chunk",
                     "checkpoint_every"):  # fmt: skip
            v = getattr(args, name)
            if v is not None:
                kw[name] = v
        bpe = {k: getattr(args, k) for k in ("vocab_size", "code_bytes", "english_chars")}
        kw["bpe"] = BPEConfig(**{k: v for k, v in bpe.items() if v is not None})
        kw["device"] = str(device)
        if args.schemes:
            kw["schemes"] = tuple(s for x in args.schemes for s in x.replace(",", " ").split())
        if args.seeds:
            kw["seeds"] = tuple(int(s) for x in args.seeds for s in x.replace(",", " ").split())
        kw["threads"] = set_threads(args.threads, torch=True)
        cfg = SeedRunConfig(**kw)

        def log(msg):
            if not args.json:
                print(msg, flush=True)

        log(f"{kw['threads']} CPU thread(s), device {device}, store {store}, base {cfg.base}")
        run_seeds(cfg, store, part=args.part, log=log)
    st = load_seed_store(store)
    if plot is not None:
        if st is None or not st.runs:
            raise UsageError(f"--plot: no saved results in {store}")
        plot_extrapolation(st, plot)
    if st is None or not st.runs:
        print(f"no saved results in {store}; run `posflow extrapolate` to produce them")
    elif args.json:
        print_json(_rows(st), inputs="--store")
    else:
        _print_table(st)
        if plot is not None:
            print(f"plot written to {plot}")
    if args.judge and st is not None and st.runs:
        _print_judge(store)
    return 0


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``posflow extrapolate`` on the CLI's subparsers (claim AT20)."""
    p = subparsers.add_parser(
        "extrapolate",
        help="train each position scheme short over several seeds, evaluate up to 64x longer "
        "(AT20)",
        description="Train small LMs per position scheme and seed at a short context for an "
        "equal step budget and measure perplexity on nested prefixes up to 64x the training "
        "length (claim AT20).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--schemes", nargs="+", metavar="NAME", help="schemes to run (default: 7)")
    p.add_argument("--seeds", nargs="+", metavar="K", help="seeds (default: 0 1 2)")
    p.add_argument(
        "--part",
        type=_part,
        metavar="K/M",
        help="run jobs K, K+M, ... (default: take unclaimed jobs)",
    )
    p.add_argument("--train-len", type=int, help="training context (default 64)")
    p.add_argument("--max-factor", type=int, help="longest length / training (default 64)")
    p.add_argument("--steps", type=int, help="optimiser steps of every run (default 1000)")
    p.add_argument("--batch-size", type=int, help="training batch (default 16)")
    p.add_argument("--lr", type=positive_float, help="peak learning rate (default 3e-3)")
    p.add_argument("--warmup", type=integer(0), help="warm-up steps (default 50)")
    p.add_argument("--n-layer", type=int, help="layers (default 3)")
    p.add_argument("--n-head", type=int, help="heads (default 2)")
    p.add_argument("--d-head", type=int, help="head dimension (default 48)")
    p.add_argument("--base", type=positive_float, help="angle base (default: the mixing match)")
    p.add_argument("--vocab-size", type=int, help="BPE vocabulary (default 4096)")
    p.add_argument("--code-bytes", type=int, help="standard-library bytes (default 3,000,000)")
    p.add_argument("--english-chars", type=int, help="English characters (default: all)")
    p.add_argument("--eval-windows", type=int, help="held-out windows (default 10)")
    p.add_argument("--angle-draws", type=int, help="angle draws of random schemes (default 3)")
    p.add_argument("--checkpoint-every", type=int, help="steps between checkpoints (100)")
    p.add_argument("--chunk", type=int, help="queries per attention chunk (default 1024)")
    p.add_argument("--device", help="torch device: cpu (default), cuda, cuda:1")
    add_threads_option(p)
    p.add_argument("--store", metavar="DIR", help="run store (default: the per-user cache when "
                   "training, the committed run with --results)")  # fmt: skip
    p.add_argument("--results", action="store_true", help="print the saved table; train nothing")
    p.add_argument("--judge", action="store_true", help="with --results: AT20's sub-claim "
                   "verdicts on the store (paired intervals across seeds)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print rows as JSON")
    p.add_argument("--plot", metavar="PATH",
                   help="write a figure of the ratio curves (.png, .pdf, .svg, … by suffix)")
    p.set_defaults(func=cmd_extrapolate)
    return p
