"""Attention sinks of the stored models with the field's metric (issue 24, item 5).

    python docs/sinks_study.py [--model smollm2-135m gemma3-270m] [--n 128] [--sequences 16]
                               [--eps 0.3] [--threads T] [--seed 0] [--figure] [--table]

Needs ``posflow models install MODEL``. For each model, N windows of n tokens of English text
(``pydoc_data.topics``, the model's own tokenizer; seeded, disjoint;
:func:`posflow.simulate.models.corpus.windows`) go through
:func:`posflow.simulate.models.sinks_report.sink_report`: per layer the share of heads with
Sink_ε > ε (Gu et al., ICLR 2025), the first-token attention share and the value-norm share of
token 0, on the text and on the repeated-token control (N sequences of the windows' most
frequent token). Window conventions as in ``docs/smollm2_study.py`` (``study.BOS``): SmolLM2's
tokenizer adds nothing ("none": windows cut from the token stream); Gemma's adds <bos>, and
both are measured ("prepend": <bos>, then the window's first n − 1 tokens; and "none").

Writes the package data ``simulate/data/<model>/sinks.json`` (read by
:func:`~posflow.simulate.models.sinks_report.load_sinks`) with the setup, and the figure
``docs/figures/sinks.png`` from what is stored (``--figure`` redraws it without measuring;
``--table`` prints the stored numbers).
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIGURE = ROOT / "docs" / "figures" / "sinks.png"
# the window conventions measured per model (the model's own first)
CONVENTIONS = {"smollm2-135m": ("none",), "gemma3-270m": ("prepend", "none")}
TITLES = {"smollm2-135m": "SmolLM2-135M", "gemma3-270m": "Gemma 3 270M"}
BOS_TEXT = {"prepend": "<bos> first", "none": "no <bos>"}
# quantity -> (legend name, Okabe–Ito colour; value-norm as profile (d) of profiles.COLORS)
QUANTITIES = {
    "heads_above": ("share of heads with sink score > {eps}", "#D55E00"),
    "first_token_share": ("attention on token 0", "#0072B2"),
    "value_share": ("value-norm share of token 0", "#CC79A7"),
}


def store_path(model: str) -> Path:
    from posflow.simulate.models.sinks_report import SINK_STORES

    return ROOT / "simulate" / SINK_STORES[model]


def measure_model(name: str, args) -> dict:
    """Load ``name`` once, run every convention, return the store (setup + runs)."""
    import numpy as np
    import torch

    from posflow.simulate.models.corpus import windows
    from posflow.simulate.models.english import english_text
    from posflow.simulate.models.hub import KNOWN_MODELS, load_pretrained
    from posflow.simulate.models.sinks_report import sink_report

    t0 = time.perf_counter()
    model, _, tok = load_pretrained(name, attention="eager")
    print(f"{name}: loaded in {time.perf_counter() - t0:.0f} s")
    tokens = np.asarray(tok(english_text(), add_special_tokens=False)["input_ids"])
    spec = KNOWN_MODELS[name]
    store = {
        "setup": {
            "model": f"{spec.description} ({spec.requirement}, GGUF dequantised, float32, "
            "eager attention)",
            "text": f"pydoc_data.topics (Python {platform.python_version()}), "
            f"{tokens.size} tokens",
            "command": f"nice -n 10 python docs/sinks_study.py --model {name} --n {args.n} "
            f"--sequences {args.sequences} --eps {args.eps} --seed {args.seed}",
            "n": args.n,
            "sequences": args.sequences,
            "eps": args.eps,
            "seed": args.seed,
            "metric": "Sink_ε of Gu et al. (ICLR 2025): per head, the attention token 0 "
            "receives averaged over the queries that see it; heads above ε",
            "control": "repeated-token control: N sequences of n copies of the windows' most "
            "frequent token",
            "date": datetime.date.today().isoformat(),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
        },
        "runs": {},
    }
    for bos in CONVENTIONS[name]:
        ids = windows(tokens, args.n, args.sequences, seed=args.seed)
        if bos == "prepend":  # <bos>, then the window's first n − 1 tokens
            ids = np.concatenate([np.full((len(ids), 1), tok.bos_token_id), ids[:, :-1]], 1)
        t1 = time.perf_counter()
        rep = sink_report(model, ids, eps=args.eps)
        what = (f"<bos> = token {tok.bos_token_id} first in every window" if bos == "prepend"
                else "windows cut from the token stream")  # fmt: skip
        store["runs"][bos] = {
            "convention": what,
            "control_text": tok.decode([rep.control_token]),
            "seconds": time.perf_counter() - t1,
            "report": rep.to_dict(),
        }
        print(f"{name}, {bos}: {store['runs'][bos]['seconds']:.0f} s, Sink_ε text "
              f"{rep.text.rate:.3f}, control {rep.control.rate:.3f} "
              f"(token {rep.control_token} {store['runs'][bos]['control_text']!r})")  # fmt: skip
    return store


def panels() -> list:
    """(title, report, control text) for every stored model and convention."""
    from posflow.simulate.models.sinks_report import SINK_STORES, load_sinks

    out = []
    for name in SINK_STORES:
        if not store_path(name).is_file():
            print(f"{name}: no stored report, not drawn")
            continue
        stored = load_sinks(name, path=store_path(name))
        raw = json.loads(store_path(name).read_text())["runs"]
        for bos in CONVENTIONS[name]:
            if bos in stored["runs"]:
                title = f"{TITLES[name]}, {BOS_TEXT[bos]}"
                out.append((title, stored["runs"][bos]["report"], raw[bos]["control_text"]))
    return out


def _uniform(n: int, w) -> float:
    """Attention on token 0 of uniform causal rows, 1/(i + 1), averaged over 1 <= i < min(n, w)."""
    top = n if w is None else min(n, w)
    return sum(1 / (i + 1) for i in range(1, top)) / (top - 1)


def draw(path: Path = FIGURE) -> None:
    """Per layer: the three sink quantities, text solid, repeated-token control dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    got = panels()
    if not got:
        return
    fig, axes = plt.subplots(1, len(got), figsize=(5.2 * len(got), 4.8), squeeze=False)
    for ax, (title, rep, ctrl) in zip(axes[0], got, strict=True):
        layers = range(len(rep.text.heads_above))
        ax.plot(layers, [_uniform(rep.n, w) for w in rep.windows], ":", color="0.45", lw=1.2)
        for key, (_, colour) in QUANTITIES.items():
            ax.plot(layers, getattr(rep.text, key), "-", color=colour, marker="o", ms=3, lw=1.6)
            ax.plot(layers, getattr(rep.control, key), "--", color=colour, lw=1.4)
        ax.set_title(f"{title}\nSink_ε, share of all heads > ε: text {rep.text.rate:.2f}, "
                     f"control {rep.control.rate:.2f}\ncontrol: {ctrl!r} repeated {rep.n} times",
                     fontsize=10)  # fmt: skip
        ax.set_xlabel("layer t")
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlim(-0.5, len(layers) - 0.5)
        ax.grid(alpha=0.3)
    axes[0, 0].set_ylabel("share")
    rep = got[0][1]
    handles = [Line2D([], [], color=c, lw=2, label=label.format(eps=f"{rep.eps:g}"))
               for label, c in QUANTITIES.values()]
    for ls, grey, label in (("-", "0.3", "text windows"), ("--", "0.3", "repeated-token control"),
                            (":", "0.45", "uniform attention on token 0")):  # fmt: skip
        handles.append(Line2D([], [], color=grey, ls=ls, label=label))
    fig.legend(handles=handles, loc="lower center", ncol=3, frameon=False, fontsize=9)
    fig.suptitle(f"Attention sinks per layer (n = {rep.n}, N = {rep.num_sequences} windows "
                 f"of English text, ε = {rep.eps:g})", fontsize=12)  # fmt: skip
    fig.tight_layout(rect=(0, 0.1, 1, 0.96))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=150)
    plt.close(fig)
    print(f"wrote {path.relative_to(ROOT)}")


def table() -> str:
    """The stored numbers as Markdown: per run the overall rates and the per-layer arrays."""
    lines = []
    for title, rep, ctrl in panels():
        lines += [f"### {title} (control token {ctrl!r}); Sink_ε share of all heads: text "
                  f"{rep.text.rate:.3f}, control {rep.control.rate:.3f}", "",
                  "| layer | heads > ε (text / ctrl) | attention on 0 (text / ctrl) | "
                  "value-norm share of 0 (text / ctrl) |", "|---|---|---|---|"]  # fmt: skip
        for t in range(len(rep.text.heads_above)):
            cells = [f"{getattr(rep.text, k)[t]:.2f} / {getattr(rep.control, k)[t]:.2f}"
                     for k in QUANTITIES]  # fmt: skip
            lines.append(f"| {t} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", nargs="+", default=list(CONVENTIONS), choices=list(CONVENTIONS))
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--sequences", type=int, default=16)
    ap.add_argument("--eps", type=float, default=0.3)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--figure", action="store_true", help="only redraw the figure from the store")
    ap.add_argument("--table", action="store_true", help="print the stored numbers as Markdown")
    args = ap.parse_args(argv)
    if args.table:
        print(table())
        return 0
    if not args.figure:
        import torch

        if args.threads:
            torch.set_num_threads(args.threads)
        for name in args.model:
            store = measure_model(name, args)
            out = store_path(name)
            out.parent.mkdir(parents=True, exist_ok=True)
            tmp = out.with_suffix(".tmp")
            tmp.write_text(json.dumps(store, indent=1))
            tmp.replace(out)
            print(f"wrote {out.relative_to(ROOT)}")
    draw()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
