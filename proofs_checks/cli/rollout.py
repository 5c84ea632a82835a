"""``posflow rollout``: the influence profile of a residual-aware rollout (claims PB1–PB14).

Either a measured model (``--model NAME [--variant V]``) or a parametric ALiBi + content kernel
(``--n N [--slopes …] [--content …]``) with a schedule (``--lam X --depth T [--beta B]`` or
``--lambdas FILE``). Sizes are checked against the available memory before anything is built,
and a result that is not finite is refused rather than printed.
"""

from __future__ import annotations

import numpy as np

from posflow.proofs_checks.cli._common import (
    UsageError,
    bad_input,
    ensure_memory,
    finite_float,
    first_nonfinite,
    integer,
    json_error,
    number_list,
    print_json,
    read_text_file,
)
from posflow.proofs_checks.cli._output import figure_file

__all__ = ["add_parser", "cmd_rollout", "read_lambdas"]

KERNEL_ARGS = "--slopes/--content"
SCHEDULE_ARGS = "--lam/--beta/--depth/--lambdas"


def add_parser(sub) -> None:
    """Register ``posflow rollout``."""
    r = sub.add_parser("rollout", help="influence profile of a residual-aware rollout")
    r.add_argument(
        "--model", help="measured model (falcon-rw-7b, mpt-7b, mpt-30b, bloom-7b1, bloom)"
    )
    r.add_argument("--variant", choices=("attention_only", "residual", "residual_content"))
    r.add_argument("--dataset", default="fineweb-edu", choices=("fineweb-edu", "dclm", "wikipedia"))
    r.add_argument("--n", type=integer(1), help="number of tokens")
    r.add_argument("--slopes", nargs="+", help="ALiBi slopes, or alibi:H for 2^(-8(h+1)/H)")
    r.add_argument("--content", nargs="+", help="diagonal content per head (default 0)")
    r.add_argument(
        "--lam", type=finite_float, help="mixing coefficient λ (constant, or λ0 with --beta)"
    )
    r.add_argument("--beta", type=finite_float, help="power decay λ_t = λ0/(t+1)^β")
    r.add_argument("--depth", type=integer(0), help="number of layers T")
    r.add_argument("--lambdas", metavar="FILE", help="schedule file: JSON list or numbers")
    r.add_argument("--plot", metavar="PATH",
                   help="write a figure of the profile (.png, .pdf, .svg, … by suffix)")
    r.add_argument("--json", action="store_true", help="print the numbers as JSON")
    r.set_defaults(func=cmd_rollout)


# memory per byte of a schedule file, at most: each number (>= 2 bytes with its separator)
# becomes a Python float in a list (32 bytes) and then a float64 (8 bytes)
_MEMORY_PER_FILE_BYTE = 24


def read_lambdas(path) -> np.ndarray:
    """The schedule in file ``path`` (``--lambdas``): a flat JSON list of numbers, or numbers
    separated by spaces, commas or newlines. NaN, infinities, strings, objects, nesting and
    non-text files are refused in one line."""
    import json

    from posflow.simulate import runtime

    limit = int(0.8 * runtime.available_memory() / _MEMORY_PER_FILE_BYTE)
    text = read_text_file("--lambdas", path, max_bytes=max(limit, 1))

    def refuse(name):
        raise UsageError(f"--lambdas: {str(path)!r} holds {name}; λ_t must be finite numbers")

    stripped = text.strip()
    if stripped[:1] in ("[", "{", '"') or stripped in ("true", "false", "null"):
        try:
            data = json.loads(text, parse_constant=refuse)
        except RecursionError:
            raise UsageError(f"--lambdas: {str(path)!r} is nested too deeply") from None
        except json.JSONDecodeError as exc:
            raise UsageError(json_error("--lambdas", path, text, exc, "a JSON list")) from None
        if not isinstance(data, list):
            kind = {dict: "a JSON object", str: "a JSON string"}.get(type(data), "JSON data")
            raise UsageError(f"--lambdas: {str(path)!r} holds {kind}; give a list of numbers")
        for k, v in enumerate(data):
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise UsageError(
                    f"--lambdas: {str(path)!r} entry {k} is {json.dumps(v)[:40]}, not a number"
                )
        values = [float(v) for v in data]
        if not values:
            raise UsageError(f"--lambdas: {str(path)!r} holds an empty list; give at least one λ_t")
    else:
        values = number_list([text], "--lambdas")
    with bad_input("--lambdas"):
        from posflow.simulate.runtime import as_lambdas

        return as_lambdas(values)


def _check_size(n: int, heads: int, T: int, as_json: bool) -> None:
    """Refuse a rollout whose kernel tables, schedule and output would not fit in memory."""
    block = min(T * n, 2**22)  # the log-diagonal is summed in blocks of about 2^22 values
    values = 4 * n * heads + 8 * n + 2 * T + 3 * block + (8 * n if as_json else 0)
    ensure_memory("--n/--depth", 8.0 * values, f"a rollout with n = {n}, T = {T}, H = {heads}")


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
    slopes = args.slopes or ["0"]
    if len(slopes) == 1 and slopes[0].startswith("alibi:"):
        h = slopes[0].split(":", 1)[1]
        if not (h.isdigit() and 1 <= int(h) <= 4096):
            raise UsageError(f"--slopes alibi:H needs an integer H in [1, 4096]; got {slopes[0]}")
        m = kernels.alibi_slopes(int(h)).tolist()
    else:
        m = number_list(slopes, "--slopes")
    content = number_list(args.content, "--content") if args.content else [0.0]
    heads = max(len(m), len(content))
    if args.lambdas is not None:
        if args.lam is not None or args.depth is not None or args.beta is not None:
            raise UsageError("--lambdas FILE cannot be combined with --lam/--beta/--depth")
        lam = read_lambdas(args.lambdas)
        depth = lam.size
    else:
        if args.lam is None or args.depth is None:
            raise UsageError("give --lam X --depth T, or --lambdas FILE")
        depth = args.depth
    _check_size(args.n, heads, depth, args.json)
    with bad_input(KERNEL_ARGS):
        K = kernels.alibi_kernel(args.n, m, content)
    if args.lambdas is None:
        with bad_input("--lam/--beta/--depth"):
            lam = (
                rollout.power_decay(args.lam, args.beta, args.depth)
                if args.beta is not None
                else rollout.constant(args.lam, args.depth)
            )
    if not np.isfinite(K.diagonal()).all():
        raise UsageError(
            f"{KERNEL_ARGS}: the kernel of these slopes and content is not finite "
            f"(slopes {m[:4]}, content {content[:4]})"
        )
    heads_txt = f"{K.num_heads} head{'s' if K.num_heads > 1 else ''}"
    title = f"n = {args.n}, T = {lam.size}, {heads_txt}"
    return K, lam, title


def cmd_rollout(args) -> int:
    """Print (or ``--json``) the headline numbers of a rollout; ``--plot`` writes a PNG."""
    from posflow.simulate import rollout

    plot = figure_file("--plot", args.plot) if args.plot else None
    # floating-point warnings of extreme inputs are not printed: a result that is not finite
    # is refused below in one line instead
    with np.errstate(all="ignore"):
        ks, lam, title = _rollout_inputs(args)
        with bad_input(f"{KERNEL_ARGS} with {SCHEDULE_ARGS}"):
            s = rollout.rollout_summary(ks, lam)
        p = np.asarray(s.pop("profile"), dtype=float)
    bad = first_nonfinite(s) or (
        None if np.isfinite(p).all() else ("profile", float(p[~np.isfinite(p)][0]))
    )
    if bad is not None:
        raise UsageError(
            f"{KERNEL_ARGS} with {SCHEDULE_ARGS}: the rollout's {bad[0]} is {bad[1]} for these "
            "inputs; refusing a non-finite result"
        )
    if plot is not None:
        from posflow.proofs_checks.kit import plot_profile

        s["plot"] = str(plot_profile(p, title, plot))
    if args.json:
        print_json(dict(s, title=title, profile=p.tolist()), inputs=KERNEL_ARGS)
        return 0
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
    if plot is not None:
        print(f"  plot written to {s['plot']}")
    return 0
