"""The ``posflow`` command line: ``verify``, ``rollout`` and ``counterexample``.

Bad arguments print one line on stderr and exit with code 2.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

import numpy as np

__all__ = ["main"]

# Optional subcommands; a module that is absent is skipped, one that imports but fails raises.
_SUBCOMMAND_MODULES = (
    "posflow.proofs_checks.counterexamples",
    "posflow.proofs_checks.measure_cli",
    "posflow.proofs_checks.extrapolate_cli",
    "posflow.proofs_checks.sweep_cli",
)


class UsageError(Exception):
    """A bad command-line argument (exit code 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2
        raise UsageError(f"{self.prog}: error: {message}")


def _floats(text: str, name: str) -> list[float]:
    try:
        return [float(x) for x in text.replace(",", " ").split()]
    except ValueError as exc:
        raise UsageError(f"{name} must be numbers; got {text!r}") from exc


# ------------------------------------------------------------------------------------------
# rollout


def _rollout_inputs(args):
    from posflow.simulate import kernels, measured, rollout

    if args.model is not None:
        clash = [
            o
            for o, v in (
                ("--n", args.n),
                ("--slopes", args.slopes),
                ("--content", args.content),
                ("--lam", args.lam),
                ("--depth", args.depth),
                ("--lambdas", args.lambdas),
            )
            if v is not None
        ]
        if clash:
            raise UsageError(f"--model cannot be combined with {', '.join(clash)}")
        variant = args.variant or "residual"
        if args.model not in measured.models():
            raise UsageError(
                f"unknown --model {args.model!r}; choose one of {', '.join(measured.models())}"
            )
        if variant == "residual_content":
            cfg = measured.config(args.model, "all_content", args.dataset)
            ks, lam = cfg.kernels(), cfg.lambdas
        else:
            cfg = measured.config(args.model, "no_content", "fineweb-edu")
            lam = np.ones(cfg.num_layers) if variant == "attention_only" else cfg.lambdas
            ks = kernels.alibi_kernel(cfg.n, cfg.slopes)
        title = (
            f"{args.model}, {variant.replace('_', ' ')}, {args.dataset}, "
            f"n = {cfg.n}, T = {lam.size}"
        )
        return ks, lam, title
    if args.variant is not None:
        raise UsageError("--variant needs --model")
    if args.n is None:
        raise UsageError("give either --model NAME or --n N with a schedule")
    if args.n < 1:
        raise UsageError(f"--n must be at least 1; got {args.n}")
    slopes = args.slopes or ["0"]
    if len(slopes) == 1 and slopes[0].startswith("alibi:"):
        try:
            m = kernels.alibi_slopes(int(slopes[0].split(":", 1)[1]))
        except ValueError as exc:
            raise UsageError(f"--slopes alibi:H needs an integer H >= 1; got {slopes[0]}") from exc
    else:
        m = _floats(" ".join(slopes), "--slopes")
    content = _floats(" ".join(args.content), "--content") if args.content else [0.0]
    K = kernels.alibi_kernel(args.n, m, content)
    if args.lambdas is not None:
        if args.lam is not None or args.depth is not None:
            raise UsageError("--lambdas FILE cannot be combined with --lam/--depth")
        path = Path(args.lambdas)
        if not path.is_file():
            raise UsageError(f"--lambdas: no such file {args.lambdas!r}")
        text = path.read_text(encoding="utf-8")
        try:
            lam = json.loads(text)
        except json.JSONDecodeError:
            lam = _floats(text, "--lambdas file")
    else:
        if args.lam is None or args.depth is None:
            raise UsageError("give --lam X --depth T, or --lambdas FILE")
        lam = (
            rollout.power_decay(args.lam, args.beta, args.depth)
            if args.beta is not None
            else rollout.constant(args.lam, args.depth)
        )
    lam = np.asarray(lam, dtype=float)
    heads = f"{K.num_heads} head{'s' if K.num_heads > 1 else ''}"
    title = f"n = {args.n}, T = {lam.size}, {heads}"
    return K, lam, title


def cmd_rollout(args) -> int:
    from posflow.simulate import rollout

    ks, lam, title = _rollout_inputs(args)
    s = rollout.rollout_summary(ks, lam)
    p = s.pop("profile")
    if args.plot:
        from posflow.proofs_checks.figures import plot_profile

        s["plot"] = str(plot_profile(p, title, args.plot))
    if args.json:
        out = dict(s, title=title, profile=p.tolist())
        print(json.dumps(out))
    else:
        print(title)
        rows = [
            ("p(0)", f"{s['p_first']:.6g}"),
            (f"p(n-1) = p({s['n'] - 1})", f"{s['p_last']:.6g}"),
            ("argmin_j p(j)", f"{s['argmin']}  (p = {s['p_min']:.6g})"),
            ("min_i P_ii", f"{s['min_diag']:.6g}"),
            ("sum_t lambda_t delta_t", f"{s['sum_lambda_delta']:.6g}"),
            ("sum_t lambda_t", f"{s['sum_lambda']:.6g}"),
        ]
        for k, v in rows:
            print(f"  {k:<24} {v}")
        if args.plot:
            print(f"  plot written to {s['plot']}")
    return 0


# ------------------------------------------------------------------------------------------
# verify


def cmd_verify(args) -> int:
    from posflow.proofs_checks import registry
    from posflow.proofs_checks.report import jsonable, write_report

    claims = registry.select(args.ids)
    if not claims:
        msg = "no claims are registered yet"
        print("[]" if args.json else msg)
        return 0
    size = "full" if args.full else "quick"
    ctx = registry.Context(size=size, out=Path(args.out) if args.out else None, seed=args.seed)
    results = []
    from rich.console import Console
    from rich.progress import Progress

    err = Console(stderr=True)
    with Progress(console=err, transient=True, disable=args.json and not err.is_terminal) as bar:
        task = bar.add_task("verifying", total=len(claims))
        for c in claims:
            bar.update(task, description=f"verifying {c.id}")
            results.append(registry.run_claim(c, ctx))
            bar.advance(task)
    if args.out:
        index = write_report(results, args.out, size=size)
    if args.json:
        print(json.dumps([jsonable(r.as_json()) for r in results], indent=1))
    else:
        _print_table(results, size)
        if args.out:
            print(f"report: {index}")
    return 1 if any(r.status == registry.ERROR for r in results) else 0


def _print_table(results, size):
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    colour = {"HOLDS": "green", "FAILS": "red", "INCONCLUSIVE": "yellow", "ERROR": "magenta"}
    t = Table(title=f"posflow verify ({size})")
    for col in ("ID", "status", "statement", "s"):
        t.add_column(col, overflow="fold")
    for r in results:
        note = r.error or (r.evidence.summary if r.evidence else "")
        stmt = escape(r.claim.statement) + (f"\n[dim]{escape(note)}[/dim]" if note else "")
        t.add_row(r.claim.id, f"[{colour[r.status]}]{r.status}[/]", stmt, f"{r.seconds:.1f}")
    Console().print(t)


# ------------------------------------------------------------------------------------------
# parser


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="posflow",
        description="Check the claims of [A] position bias and [B] "
        "length extrapolation; run rollouts; search for counterexamples.",
    )
    sub = p.add_subparsers(dest="command", parser_class=_Parser)

    v = sub.add_parser("verify", help="check claims and report measured verdicts")
    v.add_argument("ids", nargs="*", metavar="ID", help="claim IDs or prefixes (PB, AT)")
    g = v.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="small sizes (default)")
    g.add_argument("--full", action="store_true", help="large sizes (depth 1e5, n = 1e4)")
    v.add_argument("--out", metavar="DIR", help="write index.md, figures and results.json")
    v.add_argument("--json", action="store_true", help="print a JSON list of results")
    v.add_argument("--seed", type=int, default=0, help="seed of random inputs (default 0)")
    v.set_defaults(func=cmd_verify)

    r = sub.add_parser("rollout", help="influence profile of a residual-aware rollout")
    r.add_argument(
        "--model", help="measured model (falcon-rw-7b, mpt-7b, mpt-30b, bloom-7b1, bloom)"
    )
    r.add_argument("--variant", choices=("attention_only", "residual", "residual_content"))
    r.add_argument("--dataset", default="fineweb-edu", choices=("fineweb-edu", "dclm", "wikipedia"))
    r.add_argument("--n", type=int, help="number of tokens")
    r.add_argument("--slopes", nargs="+", help="ALiBi slopes, or alibi:H for 2^(-8(h+1)/H)")
    r.add_argument("--content", nargs="+", help="diagonal content per head (default 0)")
    r.add_argument("--lam", type=float, help="mixing coefficient λ (constant, or λ0 with --beta)")
    r.add_argument("--beta", type=float, help="power decay λ_t = λ0/(t+1)^β")
    r.add_argument("--depth", type=int, help="number of layers T")
    r.add_argument("--lambdas", metavar="FILE", help="schedule file: JSON list or numbers")
    r.add_argument("--plot", metavar="PATH", help="write a PNG of the profile")
    r.add_argument("--json", action="store_true", help="print the numbers as JSON")
    r.set_defaults(func=cmd_rollout)

    for name in _SUBCOMMAND_MODULES:  # each provides add_parser(subparsers)
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        mod.add_parser(sub)
    return p


def main(argv=None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "command", None):
            parser.print_help()
            return 2
        return args.func(args)
    except UsageError as exc:
        msg = str(exc)
        print(msg if msg.startswith("posflow") else f"posflow: error: {msg}", file=sys.stderr)
        return 2
    except (ValueError, TypeError) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"posflow: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
