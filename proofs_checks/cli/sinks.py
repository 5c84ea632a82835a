"""``posflow sinks MODEL``: attention sinks stated two ways, and moved in the forward pass
(issue 41, item 7).

Prints, per layer, the Sink_ε share of heads under both conventions
(:data:`posflow.simulate.models.sinks_report.SINK_CONVENTIONS`) with the attention and
value-norm share of token 0, then the sink intervention of
:func:`posflow.simulate.models.sink_intervention.sink_intervention`: the change of the
next-token loss and of the gradient-influence profile when each query's attention on token 0 is
moved to the diagonal (kernel (e)'s assumption) or spread uniformly (the control), one layer at
a time and at all layers. torch and transformers are imported only when the command runs;
every argument, MODEL's architecture included, is checked before a model is loaded.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from posflow.proofs_checks.cli._common import (
    UsageError,
    add_threads_option,
    bad_input,
    ensure_memory,
    integer,
    print_json,
    torch_device,
)
from posflow.proofs_checks.cli._output import console, figure_file, show

__all__ = ["add_parser", "cmd_sinks", "sinks_figure"]

TARGETS = ("diagonal", "uniform", "drop")

EPILOG = """\
MODEL: an installed model (smollm2-135m, gemma3-270m), a Hugging Face checkpoint folder or a
.gguf file of a family on transformers' attention interface (Llama, Gemma, Qwen, Mistral, ...),
or a posflow checkpoint (.pt). GPT-2, BLOOM, Falcon and MPT compute their attention inline and
are refused.

Windows: N disjoint windows of n tokens of pydoc_data.topics (the model's tokenizer, or UTF-8
bytes where MODEL has none; seeded); where the tokenizer puts <bos> first (Gemma), <bos> then
n - 1 tokens.

Sink_eps (Gu et al. 2025; eps = --eps): per head, alpha = attention on token 0 averaged over
the queries that see it; a head is a sink when alpha > eps. Two conventions:
  mean, then threshold     alpha of the attention averaged over the N windows (posflow's
                           stored numbers)
  per window, then mean    1[alpha > eps] of each window's attention, averaged over the
                           windows (Gu et al.'s released code)

Intervention, in every head of the intervened layers, rows i >= 1 that see token 0:
  diagonal   p'[i,i] += p[i,0], p'[i,0] = 0   (what the sink-aware kernel (e) assumes)
  uniform    p[i,0] spread evenly over the row's other visible keys (the control)
  drop       p'[i,0] = 0, nothing added (the sink's value term removed)
then out = p' v. Conditions: each layer alone, and all layers together.
  dNLL       change of the mean next-token loss (nats), 95 % Student t interval over the
             windows (paired)
  W1/(n-1)   distance between the intervened and the unintervened gradient-influence profile
             (||dp*/de_j||, pooled over windows), 95 % percentile bootstrap over windows
  dmass0     change of that profile's mass on token 0, same bootstrap
"""


def _architecture(spec: str) -> str:
    """MODEL's model_type, read without loading weights; UsageError naming MODEL."""
    from posflow.proofs_checks.cli.measure import _check_model_spec
    from posflow.simulate.models.sink_intervention import architecture_of

    _check_model_spec(spec)
    with bad_input("MODEL"):
        return architecture_of(spec)


def _check(args) -> None:
    """Every check that needs no model (torch is found, not imported)."""
    from posflow.proofs_checks.cli.measure import _torch_available

    if not _torch_available():
        raise UsageError("posflow sinks needs torch: pip install 'posflow[torch]'")
    if args.n < 2:
        raise UsageError(f"--n must be at least 2; got {args.n}")
    if args.windows < 2:
        raise UsageError(
            f"--windows must be at least 2 (intervals over windows); got {args.windows}"
        )
    if not 0 < args.eps < 1:
        raise UsageError(f"--eps must be in (0, 1); got {args.eps}")
    if not 0 <= args.fraction <= 1:
        raise UsageError(f"--fraction must be in [0, 1]; got {args.fraction}")
    if len(set(args.target)) != len(args.target):
        raise UsageError(f"--target must name each target once; got {' '.join(args.target)}")
    kind = _architecture(args.model)
    from posflow.simulate.models.sink_intervention import INTERVENABLE

    if kind not in INTERVENABLE:
        raise UsageError(
            f"MODEL: the sink intervention edits attention through transformers' attention "
            f"interface; {args.model!r} is {kind!r}, which computes its attention inline "
            f"(supported: {', '.join(INTERVENABLE)})"
        )
    ensure_memory("--n", 4.0 * args.n * args.n, f"one n × n attention matrix with n = {args.n}")
    from posflow.simulate.models.english import english_text

    if args.n * args.windows > len(english_text().encode("utf-8")):  # tokens <= bytes
        raise UsageError(
            f"--n/--windows: {args.windows} windows of n = {args.n} tokens "
            f"need more text than the English text holds"
        )


def _windows(args, model, tok):
    """(ids (N, n), one line naming the text) for the loaded model."""
    from posflow.simulate.models.corpus import windows
    from posflow.simulate.models.english import english_text

    if tok is None:  # no tokenizer (posflow checkpoints, bare HF folders): UTF-8 bytes
        vocab = model.tok_emb if hasattr(model, "tok_emb") else model.get_input_embeddings()
        if vocab.num_embeddings < 256:
            size = vocab.num_embeddings
            raise UsageError(f"MODEL has no tokenizer and a vocabulary of {size} < 256")
        tokens = np.frombuffer(english_text().encode("utf-8"), dtype=np.uint8)
        return windows(tokens, args.n, args.windows, seed=args.seed), "pydoc_data.topics, bytes"
    tokens = np.asarray(tok(english_text(), add_special_tokens=False)["input_ids"])
    ids = windows(tokens, args.n, args.windows, seed=args.seed)
    bos = getattr(tok, "bos_token_id", None)
    if bos is not None and tok("a")["input_ids"][:1] == [bos]:  # its tokenizer puts <bos> first
        ids = np.concatenate([np.full((len(ids), 1), bos), ids[:, :-1]], axis=1)
        return ids, "pydoc_data.topics, <bos> then n - 1 tokens"
    return ids, "pydoc_data.topics"


def _cell(row: dict, key: str) -> str:
    """``+0.0123 [lo, hi]``: a value of a result row with its interval."""
    lo, hi = row[f"{key}_interval"]
    return f"{row[key]:+.4f} [{lo:+.4f}, {hi:+.4f}]"


def _print(out: dict) -> None:
    from posflow.proofs_checks.cli._output import table as Table

    con = console()
    s, iv = out["sinks"], out["intervention"]
    con.print(f"{out['model']}: {iv['architecture']}, L = {iv['layers']}, n = {iv['n']}, "
              f"N = {iv['windows']} windows ({out['text']}), seed {out['seed']}")  # fmt: skip
    for key in ("rate", "rate_per_sequence"):
        con.print(f"  Sink_eps (eps = {s['eps']}): {100 * s[key]:.1f} % of heads, "
                  f"{s['conventions'][key]}")  # fmt: skip
    t = Table(title="attention sinks per layer (text windows)")
    cols = {"heads_above": "sinks: mean, then threshold",
            "heads_above_per_sequence": "sinks: per window, then mean",
            "first_token_share": "attention on 0",
            "value_share": "value-norm share of 0"}  # fmt: skip
    for col in ("layer", *cols.values()):
        t.add_column(col)
    for i in range(iv["layers"]):
        t.add_row(str(i), *(f"{s[k][i]:.3f}" for k in cols))
    show(t)
    t = Table(title=f"sink intervention (fraction {iv['fraction']:g}; baseline NLL "
              f"{iv['nll_base']:.4f} nats; {iv['intervals']})")  # fmt: skip
    for col in ("layers", "target", "moved", "dNLL (nats)", "W1/(n-1)", "dmass0"):
        t.add_column(col)
    for r in iv["rows"]:
        t.add_row(r["layers"], r["target"], f"{r['moved']:.3f}",
                  *(_cell(r, k) for k in ("dnll", "w1", "dmass0")))  # fmt: skip
    show(t)
    if "diagonal_minus_uniform" in iv:
        t = Table(title="diagonal minus uniform (upper end below 0: moving the sink to the "
                  "diagonal changes less than spreading it)")  # fmt: skip
        for col in ("layers", "dNLL diag - dNLL unif", "W1 diag - W1 unif"):
            t.add_column(col)
        for r in iv["diagonal_minus_uniform"]:
            t.add_row(r["layers"], _cell(r, "dnll"), _cell(r, "w1"))
        show(t)
    if "plot" in out:
        con.print(f"  plot written to {out['plot']}")


def sinks_figure(res, report, title: str):
    """Four panels (a Figure spec, drawn by figures.render): Sink_ε per layer in both
    conventions; ΔNLL and W1/(n−1) per intervened layer, one colour per target, the intervals
    as bands; the influence profiles unintervened and with all layers intervened."""
    from posflow.proofs_checks.kit import Figure, Panel, Series

    colors = {"diagonal": "#0072B2", "uniform": "#D55E00", "drop": "#009E73"}
    L, lay, text = res.num_layers, list(range(res.num_layers)), report.text
    each = [c for c, layers in enumerate(res.conditions) if len(layers) == 1]
    x = [res.conditions[c][0] for c in each]
    sink = [("mean, then threshold", text.heads_above, "#000000", "-"),
            ("per window, then mean", text.heads_above_per_sequence, "#999999", "--"),
            ("attention on token 0", text.first_token_share, "#56B4E9", ":")]  # fmt: skip
    series = [Series(a, lay, y, color=c, style=st) for a, y, c, st in sink]
    p_sink = Panel("Sink_ε share of heads", "layer t", "share", series, ylim=(0, 1))

    def per_layer(arr, iv):
        out = []
        for k, tgt in enumerate(res.targets):
            lo, hi = iv[each, k, 0], iv[each, k, 1]
            out += [Series("", x, arr[each, k], kind="band", lo=lo, hi=hi, color=colors[tgt]),
                    Series(tgt, x, arr[each, k], color=colors[tgt])]  # fmt: skip
        return out

    p_nll = Panel("loss change, one layer intervened", "layer t", "ΔNLL (nats)",
                  per_layer(res.dnll, res.dnll_interval), hlines=[(0.0, "")])  # fmt: skip
    p_w1 = Panel("influence change, one layer intervened", "layer t", "W1/(n−1)",
                 per_layer(res.w1, res.w1_interval))  # fmt: skip
    pos = list(range(res.n))
    prof = [Series("unintervened", pos, res.profile(), color="#000000")]
    for c in [c for c, layers in enumerate(res.conditions) if len(layers) == L and L > 1]:
        prof += [Series(f"all layers, {t}", pos, res.profile(c, t), color=colors[t], style="--")
                 for t in res.targets]  # fmt: skip
    p_prof = Panel("gradient influence profile", "token position j", "p(j)", prof, logy=True)
    return Figure("sinks", title, [p_sink, p_nll, p_w1, p_prof])


def cmd_sinks(args) -> int:
    """Both Sink_ε conventions and the sink intervention of MODEL."""
    _check(args)
    plot = figure_file("--plot", args.plot) if args.plot else None
    device = torch_device("--device", args.device)
    from posflow.simulate.runtime import set_threads

    set_threads(args.threads, torch=True)
    from posflow.proofs_checks.cli.measure import load_model

    t0 = time.perf_counter()
    with bad_input("MODEL"):
        model, kind, tok, _ = load_model(args.model)
    if device.type != "cpu":
        model = model.to(device)
    ids, text = _windows(args, model, tok)
    from posflow.simulate.models.sink_intervention import sink_intervention
    from posflow.simulate.models.sinks_report import SINK_CONVENTIONS, sink_report

    print(
        f"posflow sinks: {args.model} loaded ({time.perf_counter() - t0:.0f} s); Sink_eps on "
        f"{len(ids)} windows and the repeated-token control",
        file=sys.stderr,
        flush=True,
    )
    t1 = time.perf_counter()
    rep = sink_report(model, ids, eps=args.eps)
    print(
        f"posflow sinks: Sink_eps done ({time.perf_counter() - t1:.0f} s)",
        file=sys.stderr,
        flush=True,
    )
    res = sink_intervention(
        model,
        ids,
        layers=args.layers,
        target=tuple(args.target),
        fraction=args.fraction,
        resamples=args.resamples,
        seed=args.seed,
        progress=True,
    )
    sinks = {
        **rep.text.to_dict(),
        "eps": rep.eps,
        "conventions": SINK_CONVENTIONS,
        "control_rate": rep.control.rate,
        "control_rate_per_sequence": rep.control.rate_per_sequence,
    }
    sinks.pop("scores")
    out = {
        "model": args.model,
        "text": text,
        "seed": args.seed,
        "sinks": sinks,
        "intervention": res.to_dict(),
        "seconds": time.perf_counter() - t0,
    }
    if plot is not None:
        from posflow.proofs_checks.kit import render

        title = (
            f"{Path(args.model).name} ({kind}), n = {res.n}, N = {res.num_sequences} "
            f"windows, L = {res.num_layers}"
        )
        out["plot"] = str(render(sinks_figure(res, rep, title), plot))
    if args.json:
        from posflow.proofs_checks.kit import jsonable

        print_json(jsonable(out), inputs="MODEL/--n/--windows")
    else:
        _print(out)
    return 0


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``posflow sinks`` on the CLI's subparsers."""
    p = subparsers.add_parser(
        "sinks",
        help="attention sinks: Sink_ε in both conventions, and moving the sink in the forward pass",
        description="Attention sinks of a causal LM: Sink_ε per layer in both conventions, and "
        "the change of loss and gradient influence when each query's attention on token 0 is "
        "moved to the diagonal or spread uniformly (issue 41).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "model",
        metavar="MODEL",
        help="installed model name, HF checkpoint folder, .gguf file or posflow .pt",
    )
    p.add_argument("--n", type=int, default=64, help="tokens per window, >= 2 (default 64)")
    p.add_argument("--windows", type=int, default=8, help="number of windows N, >= 2 (default 8)")
    p.add_argument(
        "--seed",
        type=integer(0),
        default=0,
        help="which windows are drawn, and the bootstrap (default 0)",
    )
    p.add_argument("--eps", type=float, default=0.3, help="Sink_ε threshold (default 0.3)")
    p.add_argument(
        "--target",
        nargs="+",
        choices=TARGETS,
        default=["diagonal", "uniform"],
        help="where token 0's mass goes (default: diagonal uniform)",
    )
    p.add_argument(
        "--layers",
        choices=("each", "all"),
        default="each",
        help="each layer alone and all together (each), or all together only",
    )
    p.add_argument(
        "--fraction",
        type=float,
        default=1.0,
        help="share of token 0's mass moved, in [0, 1] (default 1)",
    )
    p.add_argument(
        "--resamples",
        type=integer(1),
        default=2000,
        help="bootstrap resamples over windows (default 2000)",
    )
    p.add_argument("--device", default="cpu", help="torch device, e.g. cuda (default cpu)")
    add_threads_option(p)
    p.add_argument(
        "--plot", metavar="FILE", help="write a figure: Sink_ε, ΔNLL and W1 per layer, the profiles"
    )
    p.add_argument("--json", action="store_true", help="print the numbers as JSON")
    p.set_defaults(func=cmd_sinks)
    return p
