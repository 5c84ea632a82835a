"""``posflow measure MODEL``: measure a causal LM and compare [A]'s predictions with it (PB15).

torch (and, for Hugging Face checkpoints, transformers) are imported only when the command
runs, so ``posflow`` works without them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from posflow.proofs_checks.cli._common import (
    UsageError,
    add_threads_option,
    bad_input,
    integer,
    print_json,
    torch_device,
)
from posflow.proofs_checks.cli._output import console, figure_file, show

__all__ = ["add_parser", "cmd_measure", "load_model", "measurement_figure"]

NEEDS_TORCH = (
    "posflow measure needs torch: pip install torch==2.13.0 'transformers>=5' "
    "(or pip install 'posflow[torch]')"
)

CONVENTIONS = """\
MODEL is a posflow checkpoint (.pt, from `posflow measure --train` or simulate.models.train),
an installed model (`posflow models list`; e.g. smollm2-135m), a Hugging Face checkpoint
directory (config.json) or a .gguf file (families gpt2, bloom, falcon, mpt, llama, run with eager
attention in float32), or omitted with --train (train the default small ALiBi LM on the Python
standard library, cached in the per-user cache, <user cache>/models).

Measured on N held-out sequences of n tokens (bytes for posflow models and for Hugging Face
checkpoints without a tokenizer):
  lambda_t   per token ||a_t|| / (||x_t|| + ||a_t||), x_t = input of decoder block t, a_t =
             attention output after its output projection, before the residual add; mean over
             positions, then mean (and std, ddof 0) over sequences.
  kernels    dataset-mean attention probabilities per layer and head; A_t = head average
             (rows renormalised to 1).
  content    dataset-mean raw q.k (unscaled, rotary included, no ALiBi); b = mean strictly-
             lower entry, c = mean diagonal - b; --content-scale sqrt_d (default) divides by
             sqrt(d_head), the model's logit units; raw keeps [A]'s released convention.
  influence  ||d p*/d e_j||_2 over the embedding dimension, p* = probability of the argmax
             next token at the last position, e_j = output of the input-embedding layer;
             mean over sequences, normalised to sum 1 (the measured profile).
Predictions (last row of P = R_{L-1}...R_0, R_t = (1-lambda_t) I + lambda_t K_t):
  (a) attention_only    lambda = 1, K_t = measured A_t
  (b) residual          measured lambda_t, K_t = measured A_t
  (c) residual_content  measured lambda_t, K_t = ALiBi(slopes in logit units; 0 without
                        ALiBi) + diagonal content c_{t,h}, head-averaged
  (d) value_norm        measured lambda_t, K_t = value-norm kernels (when value norms exist)
  (e) sink_aware        measured lambda_t, K_t = A_t with token 0's share kept in place
Nulls (dashed): geometric and linear fitted to the measured mean position, uniform kernels
  with measured lambda_t, shuffled (lambda_t moved to other layers, seeded derangement).
Profiles, names and colours: posflow.simulate.models.profiles (shared with PB15 and the study).
Distances to the measured profile: W1 = scipy.stats.wasserstein_distance over positions /
  (n - 1); Spearman rho.
"""


def _torch_available() -> bool:
    """Whether torch is installed (found, not imported: the arguments are checked first)."""
    import importlib.util

    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


def load_model(spec: str):
    """(model, kind, tokenizer, training record) for a posflow checkpoint file, an installed
    model name, a Hugging Face checkpoint folder or a ``.gguf`` file."""
    from posflow.simulate.models.hub import KNOWN_MODELS

    path = Path(spec)
    if spec not in KNOWN_MODELS and path.is_file() and path.suffix != ".gguf":
        from posflow.simulate.models.train import load_checkpoint

        model, record = load_checkpoint(path)
        return model, "posflow", None, record
    try:
        import transformers  # noqa: F401
    except ImportError as exc:
        raise ValueError(
            "reading a Hugging Face model needs transformers: pip install 'posflow[torch]'"
        ) from exc
    from posflow.simulate.models.hub import load_pretrained

    if spec not in KNOWN_MODELS and not path.exists():
        raise ValueError(
            f"MODEL must be a posflow checkpoint file, an installed model "
            f"({', '.join(KNOWN_MODELS)}), a Hugging Face checkpoint folder or a .gguf file; "
            f"got {spec!r}"
        )
    model, kind, tok = load_pretrained(spec)
    return model, kind, tok, {}


def _sequences(args, model, tokenizer, record):
    from posflow.simulate.models.corpus import load_corpus, windows

    if args.text == "english":
        from posflow.simulate.models.english import english_text

        text = english_text()
        if tokenizer is not None:
            tokens = tokenizer(text)["input_ids"]
        else:
            tokens = list(text.encode("utf-8"))
        desc = f"English: pydoc_data.topics ({len(text)} characters, {len(tokens)} tokens)"
        return windows(tokens, args.n, args.num_seqs, seed=args.seed), desc
    cfg = record.get("config", {})
    max_bytes = args.max_bytes or cfg.get("max_bytes", 4_000_000)
    corpus = load_corpus(args.corpus or None, max_bytes=max_bytes, seed=cfg.get("seed", 0))
    data = corpus.data
    if not args.corpus and cfg:  # the held-out part of the model's own training corpus
        data = corpus.split(cfg.get("valid_fraction", 0.05))[1]
    if tokenizer is not None:
        text = bytes(data[: 16 * args.n * args.num_seqs]).decode("utf-8", errors="replace")
        tokens = tokenizer(text)["input_ids"]
    else:
        vocab = model.tok_emb if hasattr(model, "tok_emb") else model.get_input_embeddings()
        if vocab.num_embeddings < 256:
            raise ValueError(
                f"the model has no tokenizer and a vocabulary of {vocab.num_embeddings} < 256, "
                "so byte tokens do not fit"
            )
        tokens = data
    return windows(tokens, args.n, args.num_seqs, seed=args.seed), corpus.description


def measurement_figure(out: dict, title: str):
    """Three panels of a measurement: λ_t by layer, the predicted and measured profiles (log
    scale), and the per-layer sink table (a Figure spec, drawn by figures.render)."""
    from posflow.proofs_checks.kit import Figure, Panel, Series
    from posflow.simulate.models.profiles import color, line_style

    L = out["num_layers"]
    layers = list(range(L))
    lam = np.asarray(out["lambdas"])
    sd = np.asarray(out["lambdas_std"])
    p_lam = Panel("mixing coefficient λ_t", "layer t", "λ_t",
                  [Series("λ_t ± sd over sequences", layers, lam, kind="errorbar", yerr=sd,
                          color="residual")])  # fmt: skip
    prof = [
        Series(k.replace("_", " "), list(range(len(v))), v, color=color(k), style=line_style(k))
        for k, v in out["profiles"].items()
    ]
    floor = float(np.min(out["profiles"]["measured"])) / 30  # keep the measured scale in view
    p_prof = Panel("influence on the last token", "token position j", "p(j)", prof, logy=True,
                   ylim=(floor, 1.0), legend="shared")  # fmt: skip
    names = {"attention_on_0": "attention on 0", "value_share_of_0": "value-norm share of 0",
             "gradient_influence_of_0": "gradient influence of 0"}  # fmt: skip
    sink = [Series(names[k], layers, v, kind="line") for k, v in out["sinks"].items()]
    p_sink = Panel("attention sink (token 0)", "layer t", "share", sink, ylim=(0, 1))
    return Figure("measurement", title, [p_lam, p_prof, p_sink])


def _print(out, name):
    from posflow.proofs_checks.cli._output import table as Table

    con = console()
    lam = ", ".join(f"{x:.3f}" for x in out["lambdas"])
    con.print(
        f"{name}: {out['architecture']}, L = {out['num_layers']}, H = {out['num_heads']}, "
        f"n = {out['n']}, N = {out['num_sequences']}"
    )
    con.print(f"  lambda_t = [{lam}]  (sum {sum(out['lambdas']):.3f})")
    con.print(f"  {out['threads']} CPU thread(s), device {out['device']}")
    t = Table(title="predicted vs measured gradient influence (95 % bootstrap over sequences)")
    t.add_column("profile", no_wrap=True)
    for col in ("W1/(n-1)", "Spearman", "mean position", "shape"):
        t.add_column(col)

    def iv(v, key, fmt):
        lo_hi = v.get(key)
        return "" if lo_hi is None else f" [{lo_hi[0]:{fmt}}, {lo_hi[1]:{fmt}}]"

    for k, v in out["comparison"].items():
        t.add_row(
            k,
            f"{v['w1']:.4f}" + iv(v, "w1_interval", ".4f"),
            f"{v['spearman']:.3f}" + iv(v, "spearman_interval", ".3f"),
            f"{v['mean_position']:.1f}",
            v["shape"],
        )
    show(t)
    s = Table(title="attention sink: token 0, per layer")
    cols = [("attention_on_0", "attention on 0"), ("value_share_of_0", "value-norm share"),
            ("gradient_influence_of_0", "gradient influence of 0 at the layer input")]  # fmt: skip
    cols = [(k, label) for k, label in cols if k in out["sinks"]]
    s.add_column("layer")
    for _, label in cols:
        s.add_column(label)
    for t_ in range(out["num_layers"]):
        s.add_row(str(t_), *(f"{out['sinks'][k][t_]:.3f}" for k, _ in cols))
    con.print(s)
    if "plot" in out:
        con.print(f"  plot written to {out['plot']}")


def _check_model_spec(spec: str) -> None:
    """Refuse a MODEL that names nothing loadable (no torch, nothing read but file names)."""
    from posflow.simulate.models.hub import KNOWN_MODELS, model_path

    if spec in KNOWN_MODELS:
        with bad_input("MODEL"):
            model_path(spec)  # not installed: names the install command
        return
    if not Path(spec).exists():
        raise UsageError(
            f"MODEL must be a posflow checkpoint file, an installed model "
            f"({', '.join(KNOWN_MODELS)}), a Hugging Face checkpoint folder or a .gguf file; "
            f"got {spec!r} (it does not exist)"
        )


def _check_inputs(args) -> None:
    """The checks of ``posflow measure`` that need no model: MODEL names something, the
    --corpus paths exist, one n × n attention matrix fits in memory and the corpus can hold
    N windows of n tokens (a generous bound: at most 3 tokens per byte, since an undecodable
    byte becomes U+FFFD, 3 bytes, plus BOS/EOS)."""
    from posflow.proofs_checks.cli._common import ensure_memory

    if args.model is not None:
        _check_model_spec(args.model)
    for raw in args.corpus or ():
        p = Path(raw)
        if not (p.is_file() or p.is_dir()):
            why = "does not exist" if not p.exists() else "is neither a file nor a folder"
            raise UsageError(f"--corpus {raw!r} {why}")
    n, count = args.n, args.num_seqs
    ensure_memory("--n", 4.0 * n * n, f"one n × n attention matrix with n = {n}")
    if args.text == "english":
        from posflow.simulate.models.english import english_text

        size, where = len(english_text().encode("utf-8")), "the English text"
    elif args.max_bytes is not None or (args.model is not None and not _posflow_file(args.model)):
        from posflow.simulate.models.corpus import DEFAULT_MAX_BYTES

        top = args.max_bytes or DEFAULT_MAX_BYTES
        opt = "--max-bytes" if args.max_bytes else "the default --max-bytes"
        size, where = top, f"{opt} {top} bytes of corpus"
    else:  # a posflow model: its own corpus size is known once its record is read
        return
    if n * count > 3 * size + 2:
        raise UsageError(
            f"--n/--num-seqs: {count} sequences of n = {n} tokens need {n * count} tokens, "
            f"more than {where} can hold"
        )


def _posflow_file(spec: str) -> bool:
    from posflow.simulate.models.hub import KNOWN_MODELS

    p = Path(spec)
    return spec not in KNOWN_MODELS and p.is_file() and p.suffix != ".gguf"


def cmd_measure(args) -> int:
    """Measure a checkpoint (or the cached ``--train`` model) and compare predictions (PB15)."""
    if not _torch_available():
        raise UsageError(NEEDS_TORCH)
    if args.model_option is not None:
        if args.model is not None:
            raise UsageError("give MODEL or --model MODEL, not both")
        args.model = args.model_option
    if (args.model is None) == (not args.train):
        raise UsageError("give either MODEL (a checkpoint) or --train, not both or neither")
    if args.n < 2:
        raise UsageError(f"--n must be at least 2; got {args.n}")
    if args.text == "english" and args.corpus:
        raise UsageError("--text english: cannot be combined with --corpus")
    if args.num_seqs < 1:
        raise UsageError(f"--num-seqs must be at least 1; got {args.num_seqs}")
    _check_inputs(args)  # every argument, before torch, a model or a corpus is loaded
    plot = figure_file("--plot", args.plot) if args.plot else None
    device = torch_device("--device", args.device)  # before loading or training anything
    from posflow.simulate.runtime import set_threads

    threads = set_threads(args.threads, torch=True)
    if args.train:
        from posflow.simulate.models.train import cached_model

        model, record, path = cached_model(args.preset, progress=not args.json)
        tok, short = None, f"posflow {args.preset} ALiBi LM"
        name = f"{short} ({path})"
    else:
        with bad_input("MODEL"):
            model, kind, tok, record = load_model(args.model)
        name, short = args.model, f"{Path(args.model).name} ({kind})"
    if device.type != "cpu":
        model = model.to(device)
    ids, corpus = _sequences(args, model, tok, record)
    from posflow.simulate.models.profiles import run_measure

    out = run_measure(
        model,
        ids,
        content_scale=args.content_scale,
        batch_size=args.batch_size,
        progress=not args.json,
        bootstrap=args.bootstrap,
        seed=args.seed,
    )
    out.update(model=name, corpus=corpus, device=str(device), threads=threads)
    if plot is not None:
        from posflow.proofs_checks.kit import render

        title = f"{short}, n = {out['n']}, N = {out['num_sequences']}, L = {out['num_layers']}"
        out["plot"] = str(render(measurement_figure(out, title), plot))
    if args.json:
        from posflow.proofs_checks.kit import jsonable

        print_json(jsonable(out), inputs="MODEL")
    else:
        _print(out, name)
    return 0


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``posflow measure`` on the CLI's subparsers."""
    p = subparsers.add_parser(
        "measure",
        help="measure λ_t, kernels, content and influence of a causal LM; compare predictions",
        description="Measure a causal LM and compare [A]'s rollout predictions with its "
        "gradient influence (claim PB15).",
        epilog=CONVENTIONS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "model",
        nargs="?",
        metavar="MODEL",
        help="posflow checkpoint, installed model name, HF checkpoint folder or .gguf file",
    )
    p.add_argument("--model", dest="model_option", metavar="MODEL", help="the same as MODEL")
    p.add_argument(
        "--train",
        action="store_true",
        help="train (once, cached) the default small ALiBi model and measure it",
    )
    p.add_argument(
        "--preset",
        default="default",
        choices=("default", "quick", "tiny"),
        help="which small model --train trains (default: default)",
    )
    p.add_argument("--n", type=int, default=256, help="tokens per sequence, >= 2 (default 256)")
    p.add_argument("--num-seqs", type=int, default=32, help="number of sequences N (default 32)")
    p.add_argument(
        "--corpus",
        nargs="+",
        metavar="PATH",
        help="text files or folders (default: the Python standard library)",
    )
    p.add_argument(
        "--text",
        choices=("code", "english"),
        default="code",
        help="code: Python standard library (or --corpus); english: pydoc_data.topics",
    )
    p.add_argument(
        "--bootstrap",
        type=integer(0),
        default=200,
        help="bootstrap resamples over sequences for the intervals (0: none; default 200)",
    )
    p.add_argument("--max-bytes", type=integer(1), help="read at most this many corpus bytes")
    p.add_argument(
        "--seed", type=integer(0), default=0, help="which sequences are drawn (default 0)"
    )
    p.add_argument("--device", default="cpu", help="torch device, e.g. cuda (default cpu)")
    p.add_argument(
        "--batch-size", type=integer(1), help="sequences per forward pass (default: auto)"
    )
    add_threads_option(p)
    p.add_argument(
        "--content-scale",
        choices=("sqrt_d", "raw"),
        default="sqrt_d",
        help="content in logit units (sqrt_d) or raw q.k as in [A]'s configs",
    )
    p.add_argument("--plot", metavar="PATH",
                   help="write a figure: λ_t, the profiles, the sink table (.png, .pdf, …)")
    p.add_argument("--json", action="store_true", help="print the numbers as JSON")
    p.set_defaults(func=cmd_measure)
    return p
