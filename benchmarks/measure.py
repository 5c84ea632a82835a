"""Measurement benchmark: ``measure`` against plain forward + backward passes, in one run.

    python benchmarks/measure.py [--quick] [--tiny] [--threads T]
    python benchmarks/measure.py --per-sequence [--tiny] [--threads T] [--repeat R]

``--per-sequence`` (issue 24, item 7) times PB15 ``--quick``'s SmolLM2 measurement — n = 64,
16 windows of the stored study's text (``pb20_like_for_like._smollm2``, seed 0) — in one process
that loads the model once: (i) one plain forward + backward of Σ p* over the 16 windows in one
batch (eager attention, as measured; p* from the last position's logits only, parameters frozen,
gradient to the input embeddings), also with sdpa attention for reference; (ii) the per-window
loop PB15 ran before (one ``measure`` call per window); (iii) ``measure_per_sequence`` (one
batched call), without and with ``layer_influence``. Phases alternate, each timed best of
``--repeat`` after an untimed warm-up; reported with the ratios (ii)/(i) and (iii)/(i) (goal
(iii)/(i) ≤ 3), the largest gap between (ii) and (iii)'s outputs, the time of each
``load_pretrained`` call, the date, the load average and the thread count, in
``results/measure_per_sequence.json`` and a section of ``results/measure.md``.

The default mode:

On SmolLM2-135M (``posflow models install smollm2-135m``; ``--tiny``: a randomly initialised
2-layer GQA Llama, for CI) over English windows of ``pydoc_data.topics``:

1. baseline  plain passes over the same batches: forward, p* = max softmax of the last
   position, backward to the input embeddings (what any gradient-influence measurement needs);
2. measure   ``measure(..., value_norms=True, layer_influence=True, heads=False,
   qk="summary")``: λ_t, head-mean attention, the q·k sums of the content fit, value-norm
   weights, gradient influence at the embeddings and at every block input (``--per-head``: the
   per-head attention and full q·k accumulators instead).

Reported: seconds of each (best of ``--repeat``), their ratio (goal ≤ 3× at n = 512, N = 64),
and the peak resident memory of each, measured in its own child process. Both use the eager
attention (the one that returns probabilities) and the same batch size. Results go to
``benchmarks/results/measure.json`` and a section of ``measure.md``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import resource
import time
from datetime import date


def _model(tiny: bool, attention: str = "eager"):
    import torch
    import transformers

    from posflow.simulate.models import hub

    if tiny:
        torch.manual_seed(0)
        cfg = transformers.LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=128,
                                       num_hidden_layers=2, num_attention_heads=4,
                                       num_key_value_heads=2, max_position_embeddings=1024,
                                       attn_implementation=attention)  # fmt: skip
        return transformers.LlamaForCausalLM(cfg).eval(), None, "tiny random Llama (2 layers)"
    model, _, tok = hub.load_pretrained("smollm2-135m", attention=attention)
    return model, tok, f"SmolLM2-135M (float32, {attention})"


def _ids(tok, vocab: int, n: int, N: int):
    from posflow.simulate.models.corpus import windows
    from posflow.simulate.models.english import english_text

    text = english_text()
    tokens = tok(text)["input_ids"] if tok is not None else [b % vocab for b in text.encode()]
    return windows(tokens, n, N, seed=0)


def _baseline(model, ids, batch):
    import torch

    emb = model.get_input_embeddings()
    for p in model.parameters():
        p.requires_grad_(False)
    for s in range(0, ids.shape[0], batch):
        x = emb(torch.as_tensor(ids[s : s + batch])).detach().requires_grad_(True)
        logits = model(inputs_embeds=x, use_cache=False).logits
        torch.softmax(logits[:, -1].float(), dim=-1).max(dim=-1).values.sum().backward()


def _child(kind, tiny, n, N, batch, repeat, threads, per_head, queue):
    import torch

    torch.set_num_threads(threads)
    from posflow.simulate.models.measure import measure

    model, tok, name = _model(tiny)
    ids = _ids(tok, model.config.vocab_size, n, N)

    def once(x):
        if kind == "baseline":
            _baseline(model, x, batch)
        else:
            lean = {} if per_head else {"heads": False, "qk": "summary"}
            measure(model, x, batch_size=batch, value_norms=True, layer_influence=True, **lean)

    once(ids[:1])  # warm-up (lazy initialisation), not timed
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        once(ids)
        times.append(time.perf_counter() - t0)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    queue.put({"seconds": min(times), "peak_rss_mb": peak_mb, "model": name})


def run(kind, **kw) -> dict:
    """One phase in a fresh (spawned) process, so its peak memory is its own."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(kind, *kw.values(), q))
    p.start()
    out = q.get()
    p.join()
    return out


# ----------------------------------------------------------------------------------------------
# --per-sequence: PB15 --quick's SmolLM2 measurement, one batched call against the per-window loop


def _plain_pass(model, ids):
    """(i): one forward + backward of Σ_s p*_s to the input embeddings, parameters frozen."""
    import torch

    flags = [p.requires_grad for p in model.parameters()]
    for p in model.parameters():
        p.requires_grad_(False)
    x = model.get_input_embeddings()(torch.as_tensor(ids)).detach().requires_grad_(True)
    logits = model(inputs_embeds=x, use_cache=False, logits_to_keep=1).logits
    torch.softmax(logits[:, -1].float(), dim=-1).max(dim=-1).values.sum().backward()
    for p, f in zip(model.parameters(), flags, strict=True):
        p.requires_grad_(f)
    return x.grad


def _per_window_loop(model, ids, layer_influence=False):
    """(ii): PB15's loop before issue 24, one ``measure`` call per window (not in the library)."""
    import numpy as np

    from posflow.simulate.models.measure import measure

    out = {"attention": [], "lambdas": [], "content": [], "influence": [], "values": []}
    for s in range(ids.shape[0]):
        m = measure(model, ids[s : s + 1], value_norms=True, heads=False, qk="summary",
                    layer_influence=layer_influence)  # fmt: skip
        out["attention"].append(m.attention.mean(axis=1))
        out["lambdas"].append(m.lambdas)
        out["content"].append(m.content("sqrt_d")[1])
        out["influence"].append(m.influence_raw)
        out["values"].append(m.value_weights)
    return {k: np.stack(v) for k, v in out.items()}


def per_sequence(args) -> dict:
    import numpy as np
    import torch

    torch.set_num_threads(args.threads)
    from posflow.simulate.models.profiles_bootstrap import measure_per_sequence

    n, N = 64, 16  # PB15 --quick's SmolLM2 size (pb20_like_for_like.SMOLLM2_QUICK)
    load0 = os.getloadavg()
    loads = []
    for attention in ("eager", "sdpa", "eager"):  # does a second call reload the checkpoint?
        t0 = time.perf_counter()
        model, tok, name = _model(args.tiny, attention)
        loads.append(time.perf_counter() - t0)
        if attention == "sdpa":
            sdpa = model
    ids = _ids(tok, model.config.vocab_size, n, N)
    phases = {
        "plain": lambda x: _plain_pass(model, x),
        "plain_sdpa": lambda x: _plain_pass(sdpa, x),
        "loop": lambda x: _per_window_loop(model, x),
        "batched": lambda x: measure_per_sequence(model, x),
        "batched_layer_influence": lambda x: measure_per_sequence(model, x, layer_influence=True),
    }
    for fn in phases.values():  # warm-up (lazy initialisation), not timed
        fn(ids[:2])
    times = {k: [] for k in phases}
    outs = {}
    for _ in range(args.repeat):
        for k, fn in phases.items():
            t0 = time.perf_counter()
            outs[k] = fn(ids)
            times[k].append(time.perf_counter() - t0)
    best = {k: min(v) for k, v in times.items()}
    ref, got = outs["loop"], outs["batched"]
    gap = {k: float(np.abs(getattr(got, k) - ref[k]).max() / np.abs(ref[k]).max()) for k in ref}
    return {
        "model": name, "n": n, "N": N, "threads": args.threads, "repeat": args.repeat,
        "date": date.today().isoformat(), "load_average_start": list(load0),
        "load_average_end": list(os.getloadavg()), "platform": platform.platform(),
        "load_pretrained_s": {"eager": loads[0], "sdpa": loads[1], "eager_again": loads[2]},
        "seconds": best,
        "ratios": {k: best[k] / best["plain"] for k in best if k != "plain"},
        "goal_ratio": 3.0,
        "relative_gap_loop_vs_batched": gap,
    }  # fmt: skip


def _per_sequence_text(r) -> str:
    s, q, ld = r["seconds"], r["ratios"], r["load_pretrained_s"]
    la, lb = r["load_average_start"], r["load_average_end"]
    rows = [
        ("(i) plain forward + backward of Σ p*, one batch (eager; the baseline)", "plain"),
        ("(i') the same with sdpa attention (reference)", "plain_sdpa"),
        ("(ii) per-window loop: one `measure` call per window (before)", "loop"),
        ("(iii) `measure_per_sequence`: one batched `measure` call", "batched"),
        ("(iii) the same with `layer_influence=True`", "batched_layer_influence"),
    ]
    table = [f"| {label} | {s[k]:.2f} | {'1' if k == 'plain' else f'{q[k]:.2f}'} |"
             for label, k in rows]  # fmt: skip
    gap = ", ".join(f"{k} {v:.1e}" for k, v in r["relative_gap_loop_vs_batched"].items())
    return "\n".join([
        "## Per-sequence measurement (PB15 --quick, issue 24 item 7)",
        "",
        f"{r['model']}, n = {r['n']}, N = {r['N']} windows of the stored study's text (seed 0), "
        f"{r['threads']} torch thread(s), best of {r['repeat']} (phases alternating), "
        f"{r['date']}, load average {la[0]:.2f} at the start and {lb[0]:.2f} at the end (2 cores "
        f"shared), {r['platform']}.",
        "",
        "| phase | seconds | ratio to (i) |",
        "|---|---|---|",
        *table,
        "",
        f"(iii)/(i) = **{q['batched']:.2f}×** (goal ≤ 3×), with layer influence "
        f"**{q['batched_layer_influence']:.2f}×**; the loop was {q['loop']:.2f}× "
        f"({s['loop'] / s['batched']:.1f}× slower than (iii)).",
        "",
        f"Largest gap between (ii) and (iii), relative to each field's largest value: {gap} "
        "(float32 model, batched against single-window kernels).",
        "",
        "`load_pretrained` keeps no cache: each call reads and builds the model again; in "
        f"this process {ld['eager']:.1f} s (eager), {ld['sdpa']:.1f} s (sdpa), "
        f"{ld['eager_again']:.1f} s (eager, second time).",
    ][: None if "SmolLM2" in r["model"] else -2])  # fmt: skip


def _write_section(title: str, text: str) -> None:
    """Replace (or add) the section of ``results/measure.md`` whose first line is ``title``."""
    import _bench

    path = _bench.RESULTS / "measure.md"
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    parts = [p.strip() for p in old.split("\n\n<!-- section -->\n") if p.strip()]
    parts = [p for p in parts if not p.startswith(title)] + [text.strip()]
    parts.sort(key=lambda p: not p.startswith("# "))  # the full-size benchmark first
    path.write_text("\n\n<!-- section -->\n".join(parts) + "\n", encoding="utf-8")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="n = 128, N = 8 instead of 512, 64")
    ap.add_argument("--tiny", action="store_true", help="a tiny random Llama (no weights)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    ap.add_argument("--repeat", type=int, default=1, help="best of this many runs (default 1)")
    ap.add_argument("--batch", type=int, default=8, help="sequences per pass (default 8)")
    ap.add_argument("--per-head", action="store_true",
                    help="per-head attention and full q·k accumulators (default: the head "
                    "mean and the q·k sums, heads=False, qk='summary', as the study)")  # fmt: skip
    ap.add_argument("--per-sequence", action="store_true",
                    help="PB15 --quick's SmolLM2 measurement: one batched "
                    "measure_per_sequence call against the per-window loop and a plain pass "
                    "(n = 64, N = 16)")  # fmt: skip
    args = ap.parse_args()
    if args.per_sequence:
        res = per_sequence(args)
        text = _per_sequence_text(res)
        print(text)
        if not args.tiny:
            import _bench

            (_bench.RESULTS / "measure_per_sequence.json").write_text(
                json.dumps(res, indent=2) + "\n", encoding="utf-8")  # fmt: skip
            _write_section("## Per-sequence", text)
        return
    n, N = (128, 8) if args.quick else (512, 64)
    kw = dict(tiny=args.tiny, n=n, N=N, batch=args.batch, repeat=args.repeat,
              threads=args.threads, per_head=args.per_head)  # fmt: skip
    base = run("baseline", **kw)
    meas = run("measure", **kw)
    ratio = meas["seconds"] / base["seconds"]
    res = {
        "model": base["model"],
        "n": n,
        "N": N,
        "batch": args.batch,
        "threads": args.threads,
        "per_head": args.per_head,
        "platform": platform.platform(),
        "baseline_s": base["seconds"],
        "measure_s": meas["seconds"],
        "ratio": ratio,
        "goal_ratio": 3.0,
        "baseline_peak_rss_mb": base["peak_rss_mb"],
        "measure_peak_rss_mb": meas["peak_rss_mb"],
    }
    what = "per-head attention, full q·k" if args.per_head else "head-mean attention, q·k sums"
    text = "\n".join([
        "# Measurement benchmark",
        "",
        f"{res['model']}, English windows of pydoc_data.topics, n = {n}, N = {N}, batches of "
        f"{args.batch}, {args.threads} torch thread(s), {res['platform']}.",
        "",
        "| phase | seconds | peak RSS (MB) |",
        "|---|---|---|",
        f"| forward + backward to the embeddings (baseline) | {base['seconds']:.1f} | "
        f"{base['peak_rss_mb']:.0f} |",
        f"| measure (λ, {what}, value norms, influence at every layer) | "
        f"{meas['seconds']:.1f} | {meas['peak_rss_mb']:.0f} |",
        "",
        f"Ratio measure / baseline: **{ratio:.2f}×** (goal ≤ 3×).",
    ])  # fmt: skip
    import _bench

    if args.tiny or args.quick:  # keep the committed full-size numbers
        print(text)
        print(json.dumps(res, indent=2))
        return
    (_bench.RESULTS / "measure.json").write_text(json.dumps(res, indent=2) + "\n")
    _write_section("# Measurement benchmark", text)
    print(text)


if __name__ == "__main__":
    main()
