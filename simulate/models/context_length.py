"""A real RoPE model beyond its training context: next-token loss by position (claim AT20).

[B]'s premise is that position-indexed rotations (RoPE) degrade past the length they were trained
at. This module measures it on a pretrained model with English text that ships with CPython
(:func:`~posflow.simulate.models.english.english_text`): the training context L is read from the
model's own config (``max_position_embeddings``), the text is cut into disjoint windows of
F·L tokens (F the largest factor asked for), and one causal forward pass per window gives the
loss of every next-token prediction,

.. math:: \\ell_i = -\\ln p_\\theta(x_{i+1} \\mid x_{0..i}), \\quad i = 0, …, F L - 2.

By causality the first f·L − 1 losses of a window are exactly those of a forward pass over its
first f·L tokens, so one pass gives the perplexity at every factor f ≤ F:
PPL(f) = exp(mean of ℓ_0 … ℓ_{fL−2}). The store keeps per-block sums of ℓ indexed by the
position of the *predicted* token, t = i + 1: block j sums t ∈ [jB, (j+1)B) (block 0 holds
B − 1 predictions), so any window of f·L tokens (f·L a multiple of B) is a whole number of
blocks.

The lm head is applied to the final hidden states in row chunks, so the F·L × vocabulary
logits never exist at once (32768 × 49152 float32 would be 6.4 GB).

``python -m posflow.simulate.models.context_length --store DIR --factor 2`` measures the
missing windows of a store (resumable: one JSON file per window, written atomically).
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from posflow.simulate.models._store import check_meta, write_json

__all__ = ["FORMAT", "ContextConfig", "block_sums", "measure_store", "next_token_nll",
           "read_context_store", "training_context", "window_statistics"]  # fmt: skip

FORMAT = "posflow-context-length"


@dataclass(frozen=True)
class ContextConfig:
    """One window set: ``model`` (an installed name or a checkpoint folder), windows of
    ``factor`` × the model's training context, at most ``windows`` of them (None: every
    disjoint window the text holds), per-block sums over ``block`` predictions, ``threads``
    torch threads (the numbers are reproducible for a fixed thread count)."""

    model: str = "smollm2-135m"
    factor: int = 2
    windows: int | None = None
    block: int = 256
    threads: int = 1

    def __post_init__(self):
        if not isinstance(self.model, str) or not self.model:
            raise TypeError(f"model must be a non-empty string; got {self.model!r}")
        for name in ("factor", "block", "threads"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive integer; got {v!r}")
        if self.windows is not None and (isinstance(self.windows, bool) or not isinstance(
                self.windows, int) or self.windows < 1):  # fmt: skip
            raise ValueError(f"windows must be a positive integer or None; got {self.windows!r}")


def training_context(config) -> int:
    """The training context of a transformers config: ``max_position_embeddings``."""
    n = getattr(config, "max_position_embeddings", None)
    if not isinstance(n, int) or n < 2:
        raise ValueError(f"the model config has no usable max_position_embeddings ({n!r})")
    return n


def next_token_nll(model, ids, *, chunk: int = 2048):
    """ℓ_i = −ln p(x_{i+1} | x_{0..i}) for one window, shape (N − 1,), float64.

    Parameters
    ----------
    model : transformers causal LM (``model.model`` the decoder, ``model.lm_head`` the head)
    ids : torch.LongTensor, shape (N,)
    chunk : int
        Rows of hidden states sent through the lm head at once (memory N·V avoided).
    """
    import torch

    if ids.ndim != 1 or ids.numel() < 2:
        raise ValueError(f"ids must be one window of ≥ 2 tokens; got shape {tuple(ids.shape)}")
    with torch.inference_mode():
        h = model.model(ids[None]).last_hidden_state[0]  # (N, d)
        out = torch.empty(ids.numel() - 1, dtype=torch.float64)
        for a in range(0, ids.numel() - 1, chunk):
            b = min(a + chunk, ids.numel() - 1)
            logits = model.lm_head(h[a:b]).double()  # (b − a, V)
            logp = torch.log_softmax(logits, dim=-1)
            out[a:b] = -logp.gather(1, ids[a + 1 : b + 1, None])[:, 0]
    return out.numpy()


def block_sums(nll: np.ndarray, block: int) -> list[float]:
    """Sums of ℓ_i over predicted positions t = i + 1 in blocks [jB, (j+1)B), B = ``block``:
    block 0 holds B − 1 losses, the last may be shorter (correctly rounded sums)."""
    t = np.concatenate([[0.0], np.asarray(nll, dtype=np.float64)])  # t = 0 predicts nothing
    return [float(math.fsum(t[a : a + block])) for a in range(0, len(t), block)]


def _meta(cfg: ContextConfig, L: int, n_tokens: int) -> dict:
    return {"format": FORMAT, "model": cfg.model, "train_context": L, "factor": cfg.factor,
            "window_len": cfg.factor * L, "block": cfg.block, "text": "pydoc_data.topics",
            "text_tokens": n_tokens, "threads": cfg.threads}  # fmt: skip


def measure_store(cfg: ContextConfig, store, *, log=None) -> list[Path]:
    """Measure every window of ``cfg`` missing from ``store`` (one JSON file per window).

    The arguments are checked before the model is loaded. Returns the files written."""
    if not isinstance(cfg, ContextConfig):
        raise TypeError(f"cfg must be a ContextConfig; got {type(cfg).__name__}")
    store = Path(store)
    if store.exists() and not store.is_dir():
        raise ValueError(f"store {str(store)!r} exists and is not a folder")
    log = log or (lambda s: print(s, file=sys.stderr, flush=True))
    import torch

    from posflow.simulate._threads import set_threads
    from posflow.simulate.models.english import english_text
    from posflow.simulate.models.hub import load_pretrained

    set_threads(cfg.threads, torch=True)
    model, _, tok = load_pretrained(cfg.model, attention="sdpa")
    if tok is None:
        raise ValueError(f"model {cfg.model!r} has no tokenizer")
    L = training_context(model.config)
    ids = torch.tensor(tok(english_text())["input_ids"], dtype=torch.long)
    W = cfg.factor * L
    count = len(ids) // W if cfg.windows is None else min(cfg.windows, len(ids) // W)
    if count < 1:
        raise ValueError(f"the text has {len(ids)} tokens, fewer than one window of {W}")
    check_meta(store, _meta(cfg, L, len(ids)), ("format", "model", "window_len", "block",
                                                "text_tokens"))  # fmt: skip
    written = []
    for k in range(count):
        path = store / f"w{W}_{k:03d}.json"
        if path.is_file():
            log(f"[{k + 1}/{count}] window {k}: already in the store")
            continue
        c0, t0 = time.process_time(), time.perf_counter()
        nll = next_token_nll(model, ids[k * W : (k + 1) * W])
        write_json(path, {"format": FORMAT, "window": k, "start": k * W, "window_len": W,
                          "block": cfg.block, "sums": block_sums(nll, cfg.block),
                          "cpu_seconds": time.process_time() - c0})  # fmt: skip
        written.append(path)
        log(f"[{k + 1}/{count}] window {k} ({W} tokens): PPL(1×) "
            f"{math.exp(nll[: L - 1].mean()):.2f}, PPL({cfg.factor}×) {math.exp(nll.mean()):.2f} "
            f"({time.perf_counter() - t0:.0f} s)")  # fmt: skip
    return written


def read_context_store(store) -> dict | None:
    """``{"meta", "windows": [{"start", "window_len", "block", "sums"}]}`` of a store (a path
    or a traversable), or None without ``meta.json``. ValueError for another format."""
    store = Path(store) if isinstance(store, str) else store
    if not store.is_dir() or not store.joinpath("meta.json").is_file():
        return None
    meta = json.loads(store.joinpath("meta.json").read_text(encoding="utf-8"))
    if meta.get("format") != FORMAT:
        raise ValueError(f"{str(store)!r} is not a {FORMAT} store")
    wins = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(
        store.iterdir(), key=lambda q: q.name) if p.name.startswith("w") and p.name.endswith(
        ".json")]  # fmt: skip
    return {"meta": meta, "windows": wins}


def window_statistics(st: dict) -> dict:
    """Per-window statistics of a store (:func:`read_context_store`), keyed by factor f:
    ``{"ppl": {f: array (W,)}, "excess": {f: array (W,)}}`` with

    .. math:: \\mathrm{PPL}_w(f) = \\exp\\Big(\\frac{1}{fL-1}\\sum_{t=1}^{fL-1} \\ell_{t-1}\\Big),
              \\quad \\Delta_w(f) = \\bar\\ell_w[fL/2, fL) - \\bar\\ell_w[L/2, L)

    for f = 1, 2, 4, … ≤ the window's factor (Δ for f ≥ 2): the mean loss on the predicted
    positions of the last half of an f·L window minus that on the last half of the training
    window, paired within the window (more context lowers the loss of a model that
    extrapolates, so Δ > 0 is degradation)."""
    meta = st["meta"]
    L, F, B = meta["train_context"], meta["factor"], meta["block"]
    if L % B:
        raise ValueError(f"training context {L} is not a multiple of the block {B}")
    ppl, excess = {}, {}
    for f in (2**k for k in range(int(math.log2(F)) + 1)):
        p, d = [], []
        for w in st["windows"]:
            s = np.asarray(w["sums"], dtype=np.float64)
            nb = f * L // B  # blocks of an f·L window; block 0 has B − 1 predictions
            p.append(math.exp(math.fsum(s[:nb]) / (f * L - 1)))
            if f >= 2:
                tail = math.fsum(s[nb // 2 : nb]) / (f * L // 2)
                ref = math.fsum(s[L // B // 2 : L // B]) / (L // 2)
                d.append(tail - ref)
        ppl[f] = np.array(p)
        if f >= 2:
            excess[f] = np.array(d)
    return {"ppl": ppl, "excess": excess, "train_context": L, "factor": F}


def main(argv=None) -> int:
    """``python -m posflow.simulate.models.context_length --store DIR [--factor F]
    [--windows N] [--model NAME]``: measure the missing windows; 2 with one line on bad input."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m posflow.simulate.models.context_length",
                                 description="Next-token loss of a pretrained RoPE model on "
                                 "windows of F × its training context (resumable).")
    ap.add_argument("--store", required=True, help="store folder (created; resumed if present)")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--factor", type=int, default=2, help="window = factor × training context")
    ap.add_argument("--windows", type=int, default=None, help="at most this many windows")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    try:
        cfg = ContextConfig(model=args.model, factor=args.factor, windows=args.windows,
                            threads=args.threads)  # fmt: skip
        measure_store(cfg, args.store)
    except (ValueError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
