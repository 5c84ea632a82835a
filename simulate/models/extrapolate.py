"""Train short, test long: per-scheme perplexity at 1×, 2×, 4×, … the training length (AT20).

:func:`run_extrapolation` trains one small LM per position scheme at context ``train_len`` on
the offline byte corpus (:mod:`posflow.simulate.models.corpus`) for a budget of steps or seconds,
then measures PPL(L) = exp(mean next-byte cross-entropy over all positions) on held-out windows of
length L = train_len·2^k (seed 42 + L, as [B]'s ``eval_extrap.py``). Attention is evaluated in
query chunks (:func:`chunked_logits`), so memory is O(chunk·L) per head instead of O(L²).

Results live in a run store, a folder with ``meta.json`` (the configuration that produced them;
a store written by another configuration is refused) and one ``<scheme>.json`` per finished
scheme, written atomically, so an interrupted run keeps what it finished and resumes.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

from posflow.simulate.models.corpus import load_corpus, training_batch, windows
from posflow.simulate.models.lm import LM, SCHEMES, LMConfig, PositionScheme
from posflow.simulate.models.store import load_results, user_store

__all__ = [
    "DEFAULT_SCHEMES",
    "ExtrapolationConfig",
    "build_model",
    "chunked_logits",
    "load_results",
    "perplexity",
    "run_extrapolation",
    "train_scheme",
]

DEFAULT_SCHEMES = (
    "nope",
    "rope",
    "alibi",
    "random_qk",
    "random_qkv",
    "random_pos_qk",
    "learned_qk",
    "learned_qkv",
    "path",
)
FORMAT = "posflow-extrapolation"


def _pos_int(v, name):
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
        raise ValueError(f"{name} must be a positive integer; got {v!r}")
    return int(v)


@dataclass
class ExtrapolationConfig:
    """Model, training budget and evaluation lengths of a train-short/test-long run (AT20).

    ``steps`` (if set) fixes the number of optimiser steps; otherwise training stops after
    ``time_s`` seconds per scheme (the learning-rate schedule follows the elapsed fraction).
    Evaluation lengths are ``train_len · 2^k`` for k = 0 … log2(``max_factor``); each uses
    ``max(min_windows, eval_tokens // L)`` windows.
    """

    train_len: int = 64
    max_factor: int = 64
    steps: int | None = None
    time_s: float = 160.0
    batch_size: int = 16
    lr: float = 3e-3
    warmup: int = 50
    n_layer: int = 3
    n_head: int = 4
    d_model: int = 64
    seed: int = 0
    max_bytes: int = 4_000_000
    eval_tokens: int = 8192
    min_windows: int = 2
    chunk: int = 512
    device: str = "cpu"
    threads: int | None = None
    schemes: tuple = field(default_factory=lambda: DEFAULT_SCHEMES)

    def __post_init__(self):
        for name in (
            "train_len", "max_factor", "batch_size", "n_layer", "n_head", "d_model",
            "max_bytes", "eval_tokens", "min_windows", "chunk",
        ):  # fmt: skip
            _pos_int(getattr(self, name), name)
        if self.max_factor & (self.max_factor - 1):
            raise ValueError(f"max_factor must be a power of two; got {self.max_factor}")
        if self.steps is not None:
            _pos_int(self.steps, "steps")
        if self.threads is not None:
            _pos_int(self.threads, "threads")
        if not (isinstance(self.time_s, int | float) and math.isfinite(self.time_s)):
            raise ValueError(f"time_s must be a finite number > 0; got {self.time_s!r}")
        if self.time_s <= 0:
            raise ValueError(f"time_s must be a finite number > 0; got {self.time_s!r}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"lr must be a finite number > 0; got {self.lr!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be a nonnegative integer; got {self.seed!r}")
        if self.d_model % self.n_head or (self.d_model // self.n_head) % 2:
            raise ValueError(
                f"d_model / n_head must be an even integer; got {self.d_model} / {self.n_head}"
            )
        self.schemes = tuple(self.schemes)
        if not self.schemes:
            raise ValueError("schemes must name at least one scheme")
        for s in self.schemes:
            if s not in SCHEMES:
                raise ValueError(f"schemes: unknown scheme {s!r}; known: {', '.join(SCHEMES)}")
        if len(set(self.schemes)) != len(self.schemes):
            raise ValueError(f"schemes must not repeat; got {list(self.schemes)}")

    @property
    def eval_lengths(self) -> list[int]:
        return [self.train_len * 2**k for k in range(int(math.log2(self.max_factor)) + 1)]

    def identity(self) -> dict:
        """The fields that decide the numbers (not the scheme list, device or chunk size)."""
        d = asdict(self)
        for k in ("schemes", "device", "chunk", "threads"):
            d.pop(k)
        if self.steps is not None:
            d.pop("time_s")
        return d


def build_model(scheme: str, cfg: ExtrapolationConfig) -> LM:
    """A fresh LM of ``cfg``'s size with ``scheme``, prepared for transport schemes (AT20)."""
    opts = {"d_model": cfg.d_model} if scheme == "path" else {}
    if scheme.startswith("random"):
        opts["seed"] = cfg.seed
    mc = LMConfig(
        n_layer=cfg.n_layer, n_head=cfg.n_head, d_model=cfg.d_model, scheme=scheme,
        scheme_options=opts,
    )  # fmt: skip
    torch.manual_seed(cfg.seed)
    return LM(mc, seed=cfg.seed)


def _lr(cfg: ExtrapolationConfig, step: int, frac: float) -> float:
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    return cfg.lr * (0.1 + 0.45 * (1 + math.cos(math.pi * min(1.0, frac))))


def train_scheme(scheme: str, cfg: ExtrapolationConfig, train_tokens, progress=None):
    """Train one scheme at context ``cfg.train_len`` (AdamW, warm-up, cosine to lr/10) (AT20).

    Minimises the next-byte cross-entropy on random windows of ``train_tokens``; stops after
    ``cfg.steps`` steps or ``cfg.time_s`` seconds. ``progress(step, frac, loss)`` is called
    every 10 steps when given. Returns (model in eval mode, record dict).
    Cost: steps × batch_size × train_len tokens forward and backward.
    """
    dev = torch.device(cfg.device)
    model = build_model(scheme, cfg).to(dev)
    model.train()
    decay = [p for p in model.parameters() if p.dim() == 2]
    rest = [p for p in model.parameters() if p.dim() != 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
        lr=cfg.lr,
        betas=(0.9, 0.95),
    )
    rng = np.random.default_rng(cfg.seed)
    losses: list[float] = []
    t0, step = time.perf_counter(), 0
    while True:
        elapsed = time.perf_counter() - t0
        frac = step / cfg.steps if cfg.steps is not None else elapsed / cfg.time_s
        if frac >= 1.0:
            break
        for g in opt.param_groups:
            g["lr"] = _lr(cfg, step, frac)
        x, y = training_batch(train_tokens, cfg.batch_size, cfg.train_len, rng)
        loss = model.loss(torch.from_numpy(x).to(dev), torch.from_numpy(y).to(dev))
        if not torch.isfinite(loss):
            raise ValueError(f"training {scheme!r} diverged at step {step}; lower lr")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        step += 1
        if progress is not None and step % 10 == 0:
            progress(step, frac, float(np.mean(losses[-50:])))
    model.eval()
    record = {
        "steps": step,
        "train_seconds": time.perf_counter() - t0,
        "final_train_loss": float(np.mean(losses[-50:])) if losses else float("nan"),
        "parameters": model.num_parameters(),
    }
    return model, record


def _bias_chunk(scheme: PositionScheme, a: int, b: int, n: int, device, dtype):
    if hasattr(scheme, "bias_chunk"):
        return scheme.bias_chunk(a, b, device, dtype)
    if type(scheme).bias is PositionScheme.bias:
        return None
    m = scheme.slopes()
    if m is not None:  # ALiBi: -m_h (i - j)
        i = torch.arange(a, b, device=device)[:, None]
        j = torch.arange(b, device=device)[None, :]
        mt = torch.as_tensor(m, device=device, dtype=dtype)
        return -mt[:, None, None] * (i - j).to(dtype)
    return scheme.bias(n, device, dtype)[:, a:b, :b]  # generic fallback: O(n²) memory


def _attention(attn, x, chunk: int):
    B, n, D = x.shape
    H, d = attn.n_head, attn.d_head
    scheme = attn.scheme
    q, k, v = attn.qkv_proj(x).split(D, dim=2)
    q, k, v = (t.view(B, n, H, d).transpose(1, 2) for t in (q, k, v))
    q, k, v = scheme.qkv(q, k, v, x)
    custom = type(scheme).scores is not PositionScheme.scores
    if custom and not hasattr(scheme, "scores_chunk"):
        raise ValueError(f"scheme {scheme.name!r} overrides scores() without scores_chunk()")
    ys = []
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        qc = q[:, :, a:b]
        s = scheme.scores_chunk(qc, k, x, a) if custom else qc @ k[:, :, :b].transpose(-2, -1)
        logits = s / math.sqrt(d)
        bias = _bias_chunk(scheme, a, b, n, x.device, logits.dtype)
        if bias is not None:
            logits = logits + bias
        future = (
            torch.arange(b, device=x.device)[None, :] > torch.arange(a, b, device=x.device)[:, None]
        )
        att = F.softmax(logits.masked_fill(future, float("-inf")), dim=-1)
        ys.append(att @ v[:, :, :b])  # (B, H, c, d)
    y = scheme.output(torch.cat(ys, dim=2), x)
    return attn.out_proj(y.transpose(1, 2).reshape(B, n, D))


@torch.no_grad()
def chunked_logits(model: LM, idx: torch.Tensor, chunk: int = 512) -> torch.Tensor:
    """``model(idx)`` with attention computed ``chunk`` queries at a time (claim AT20).

    Same numbers as the plain forward pass (up to float rounding); memory O(B·H·chunk·n) for
    the scores instead of O(B·H·n²). idx: (B, n) LongTensor; returns logits (B, n, V).
    Cost O(L·(B·n·D² + B·H·n²·d)), as the plain forward pass.
    """
    if not isinstance(model, LM):
        raise TypeError(f"model must be a posflow LM; got {type(model).__name__}")
    chunk = _pos_int(chunk, "chunk")
    for blk in model.blocks:
        blk.attn.scheme.see_tokens(idx)
    x = model.tok_emb(idx)
    for blk in model.blocks:
        x = x + _attention(blk.attn, blk.ln1(x), chunk)
        x = x + blk.mlp(blk.ln2(x))
    return model.head(model.ln_f(x))


@torch.no_grad()
def perplexity(model: LM, tokens, length: int, n_windows: int, *, chunk=512, device="cpu"):
    """PPL(L) = exp(mean cross-entropy over all L positions of ``n_windows`` windows) (AT20).

    Windows of L + 1 tokens are drawn from ``tokens`` with seed 42 + L (disjoint, aligned; see
    :func:`posflow.simulate.models.corpus.windows`). Returns (ppl, mean nats per token).
    """
    length, n_windows = _pos_int(length, "length"), _pos_int(n_windows, "n_windows")
    model.eval()
    w = windows(tokens, length + 1, n_windows, seed=42 + length)
    total, count = 0.0, 0
    for row in w:
        t = torch.from_numpy(row).to(device)[None]
        logits = chunked_logits(model, t[:, :-1], chunk)
        nll = F.cross_entropy(logits[0].double(), t[0, 1:], reduction="sum")
        total, count = total + float(nll), count + length
    mean = total / count
    if not math.isfinite(mean):
        raise ValueError(f"perplexity at length {length} is not finite")
    return math.exp(mean), mean


def _write_json(path: Path, obj) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(obj, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def _check_meta(store: Path, cfg: ExtrapolationConfig) -> None:
    meta = store / "meta.json"
    want = {"format": FORMAT, "version": 1, "config": cfg.identity()}
    if meta.is_file():
        have = json.loads(meta.read_text())
        if have.get("config") != want["config"] or have.get("format") != FORMAT:
            diff = sorted(
                k for k in set(want["config"]) | set(have.get("config", {}))
                if want["config"].get(k) != have.get("config", {}).get(k)
            )  # fmt: skip
            raise ValueError(
                f"store {str(store)!r} holds a run with another configuration (differs in "
                f"{', '.join(diff) or 'format'}); choose another store or delete it"
            )
    else:
        store.mkdir(parents=True, exist_ok=True)
        want["torch"] = torch.__version__
        _write_json(meta, want)


def run_extrapolation(cfg: ExtrapolationConfig, store=None, *, log=None) -> list[dict]:
    """Train and evaluate every scheme of ``cfg`` not yet in ``store``; resumable (claim AT20).

    Each finished scheme is saved as ``<store>/<scheme>.json`` with its rows
    ``{"scheme", "train_len", "eval_len", "ppl"}``, the training record and the corpus. A store
    whose ``meta.json`` differs from ``cfg`` raises ValueError. ``log(str)`` receives progress.
    Returns all rows of the store. Cost: per scheme the training budget plus
    Σ_L windows·L forward tokens.
    """
    if not isinstance(cfg, ExtrapolationConfig):
        raise TypeError(f"cfg must be an ExtrapolationConfig; got {type(cfg).__name__}")
    store = user_store() if store is None else Path(store)
    _check_meta(store, cfg)
    log = log or (lambda s: None)
    if cfg.threads is not None:
        torch.set_num_threads(cfg.threads)
    corpus = load_corpus(None, max_bytes=cfg.max_bytes, seed=cfg.seed)
    train_tokens, valid = corpus.split(0.05)
    for scheme in cfg.schemes:
        path = store / f"{scheme}.json"
        if path.is_file():
            log(f"{scheme}: already in the store, skipped")
            continue
        log(f"{scheme}: training at length {cfg.train_len}")

        def prog(step, frac, loss, scheme=scheme):
            if step % 200 == 0:
                log(f"{scheme}: step {step} ({100 * frac:.0f}%) loss {loss:.3f}")

        model, record = train_scheme(scheme, cfg, train_tokens, prog)
        rows, t0 = [], time.perf_counter()
        for L in cfg.eval_lengths:
            nw = max(cfg.min_windows, cfg.eval_tokens // L)
            ppl, nats = perplexity(model, valid, L, nw, chunk=cfg.chunk, device=cfg.device)
            rows.append(
                {"scheme": scheme, "train_len": cfg.train_len, "eval_len": L, "ppl": ppl,
                 "nats": nats, "windows": nw}
            )  # fmt: skip
            log(f"{scheme}: L = {L}: ppl {ppl:.4f}")
        record["eval_seconds"] = time.perf_counter() - t0
        _write_json(path, {"scheme": scheme, "rows": rows, "train": record,
                           "corpus": corpus.description, "device": cfg.device})  # fmt: skip
    return load_results(store)
