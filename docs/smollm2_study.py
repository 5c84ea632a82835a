"""The stored studies of real models (issues 13, 24): which rollout kernel predicts them (PB15).

    python docs/smollm2_study.py [--model smollm2-135m|gemma3-270m] [--bos prepend|none]
                                 [--n 128 256 512 1024] [--sequences 64] [--groups 8]
                                 [--threads T] [--seed 0]

Needs ``posflow models install MODEL``. For each n, N windows of n tokens of English text
(``pydoc_data.topics``, the model's own tokenizer; seeded, disjoint) are measured in G groups
(:func:`posflow.simulate.models.study.measure_groups`) and summarised with delete-one-group
jackknife intervals (:func:`~posflow.simulate.models.study.study_summary`; the profiles, their
names and labels come from :mod:`posflow.simulate.models.profiles`). Window convention
(``--bos``): "prepend" puts the tokenizer's <bos> first (the window's first n − 1 tokens
follow; Gemma's own convention), "none" cuts windows from the token stream (SmolLM2's, whose
tokenizer adds nothing); the default is the model's own (``study.BOS``), and whether a sink
forms on token 0 depends on it. Each finished n is written at once to the model's store
(``study.STORES``, package data read by PB15 and PB17; another convention is stored beside
it), so a killed run resumes with the lengths it has not done. ``--force`` redoes them all,
``--redo`` only the lengths of ``--n``.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "simulate"


def out_file(model: str, bos: str) -> Path:
    from posflow.simulate.models.study import BOS, STORES

    path = STORES[model]
    return DATA / (path if bos == BOS[model] else path.replace(".json", f"_bos-{bos}.json"))


def markdown(store: dict) -> str:
    """The stored study as Markdown tables: W1/(n − 1) and ρ per profile and n, λ_t and sinks."""
    from posflow.simulate.models.study import PROFILES

    runs = {int(k): v for k, v in store["runs"].items()}
    ns = sorted(runs)

    def cell(x, digits=3):
        return f"{x[0]:.{digits}f} [{x[2]:.{digits}f}, {x[3]:.{digits}f}]"

    out = ["| profile | " + " | ".join(f"W1/(n−1), n = {n}" for n in ns) + " | "
           + " | ".join(f"ρ, n = {n}" for n in ns) + " |",
           "|---" * (1 + 2 * len(ns)) + "|"]  # fmt: skip
    for k, what in PROFILES.items():
        w = " | ".join(cell(runs[n]["stats"][f"w1.{k}"]) for n in ns)
        r = " | ".join(cell(runs[n]["stats"][f"spearman.{k}"], 2) for n in ns)
        out.append(f"| {what} | {w} | {r} |")
    top = runs[ns[-1]]
    st = top["stats"]
    out += ["", f"Per layer at n = {ns[-1]} (estimate [jackknife interval]):", "",
            "| layer | λ_t | attention on token 0 | value-norm share of 0 | gradient influence "
            "of 0 |", "|---|---|---|---|---|"]  # fmt: skip
    for t in range(top["layers"]):
        out.append(
            f"| {t} | {cell(st[f'lambda.{t}'])} | {cell(st[f'sink.attention_on_0.{t}'])} | "
            f"{cell(st[f'sink.value_share_of_0.{t}'])} | "
            f"{cell(st[f'sink.gradient_influence_of_0.{t}'])} |"
        )
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m", choices=("smollm2-135m", "gemma3-270m"))
    ap.add_argument("--bos", choices=("prepend", "none"), default=None,
                    help="window convention (default: the model's own)")
    ap.add_argument("--n", type=int, nargs="+", default=[128, 256, 512, 1024])
    ap.add_argument("--sequences", type=int, default=64)
    ap.add_argument("--groups", type=int, default=8)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--redo", action="store_true",
                    help="measure the lengths of --n again, keeping the other stored lengths")
    ap.add_argument("--table", action="store_true", help="print the stored study as Markdown")
    args = ap.parse_args(argv)
    from posflow.simulate.models.study import BOS

    bos = args.bos or BOS[args.model]
    OUT = out_file(args.model, bos)
    if args.table:
        print(markdown(json.loads(OUT.read_text())))
        return 0

    import numpy as np
    import torch
    from rich.progress import Progress

    from posflow.simulate.models.corpus import windows
    from posflow.simulate.models.english import english_text
    from posflow.simulate.models.hub import KNOWN_MODELS, load_pretrained
    from posflow.simulate.models.study import measure_groups, study_summary

    if args.threads:
        torch.set_num_threads(args.threads)
    store = json.loads(OUT.read_text()) if OUT.exists() and not args.force else {"runs": {}}
    if args.redo:  # the listed lengths again; the others stay as stored
        for n in args.n:
            store["runs"].pop(str(n), None)
    model, _, tok = load_pretrained(args.model, attention="eager")
    tokens = np.asarray(tok(english_text(), add_special_tokens=False)["input_ids"])
    spec = KNOWN_MODELS[args.model]
    store["setup"] = {
        "model": f"{spec.description} ({spec.requirement}, GGUF dequantised, float32, eager "
        "attention)",
        "bos": bos + (f" (<bos> = token {tok.bos_token_id} first in every window)"
                      if bos == "prepend" else " (windows cut from the token stream)"),
        "text": f"pydoc_data.topics (Python {platform.python_version()}), {tokens.size} tokens",
        "command": "python docs/smollm2_study.py " + " ".join(
            f"--{k} {v}" for k, v in (("model", args.model), ("bos", bos),
                                      ("sequences", args.sequences), ("groups", args.groups),
                                      ("seed", args.seed))),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }  # fmt: skip
    with Progress() as bar:
        for n in args.n:
            key = str(n)
            if key in store["runs"]:
                print(f"n = {n}: stored, skipped (--force to redo)")
                continue
            ids = windows(tokens, n, args.sequences, seed=args.seed)
            if bos == "prepend":  # <bos>, then the window's first n − 1 tokens
                ids = np.concatenate([np.full((len(ids), 1), tok.bos_token_id), ids[:, :-1]], 1)
            task = bar.add_task(f"n = {n}: groups", total=args.groups)
            t0 = time.perf_counter()

            def tick(done, total, task=task):
                bar.update(task, completed=done)

            st = measure_groups(model, ids, args.groups, seed=args.seed, progress=tick)
            summary = study_summary(st)
            summary["seconds"] = time.perf_counter() - t0
            store["runs"][key] = summary
            OUT.parent.mkdir(parents=True, exist_ok=True)
            tmp = OUT.with_suffix(".tmp")
            tmp.write_text(json.dumps(store, indent=1))
            tmp.replace(OUT)
            s = summary["stats"]
            w1 = ", ".join(f"{k} {s[f'w1.{k}'][0]:.3f}±{s[f'w1.{k}'][1]:.3f}" for k in "abcde")
            print(f"n = {n}: {summary['seconds']:.0f} s, best {summary['best']}; W1 {w1}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
