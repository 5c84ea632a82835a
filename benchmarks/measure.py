"""Measurement benchmark: ``measure`` against plain forward + backward passes, in one run.

    python benchmarks/measure.py [--quick] [--tiny] [--threads T]

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
``benchmarks/results/measure.json`` and ``measure.md``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import platform
import resource
import time


def _model(tiny: bool):
    import torch
    import transformers

    from posflow.simulate.models import hub

    if tiny:
        torch.manual_seed(0)
        cfg = transformers.LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=128,
                                       num_hidden_layers=2, num_attention_heads=4,
                                       num_key_value_heads=2, max_position_embeddings=1024,
                                       attn_implementation="eager")  # fmt: skip
        return transformers.LlamaForCausalLM(cfg).eval(), None, "tiny random Llama (2 layers)"
    model, _, tok = hub.load_pretrained("smollm2-135m")
    return model, tok, "SmolLM2-135M (float32, eager)"


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
    args = ap.parse_args()
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
    _bench.write_results("measure", res, text)
    print(text)


if __name__ == "__main__":
    main()
