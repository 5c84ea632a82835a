"""Train short, test long: equal step budgets, seeds, BPE tokens and shared windows (AT20).

Every length is scored with the query-chunked forward pass
:func:`posflow.simulate.models.extrapolate.chunked_logits`. One *run* is (scheme, seed):

1. **Training** for exactly ``steps`` optimiser steps (the same for every scheme; never wall
   time): AdamW (β = 0.9, 0.95; weight decay 0.1 on matrices), linear warm-up for ``warmup``
   steps then cosine decay to lr/10, batches of ``batch_size`` random windows of ``train_len``
   BPE tokens (:mod:`posflow.simulate.models.bpe`). Every ``checkpoint_every`` steps the model,
   the optimiser, every random-number state (the batch generator, each random scheme's angle
   generator, torch's) and the loss history are saved atomically, so a killed run resumes from
   its last checkpoint with bit-identical numbers (on the same thread count).
2. **Evaluation on nested prefixes of the same windows**: ``eval_windows`` disjoint held-out
   windows of L_max + 1 tokens (L_max = train_len · max_factor; the same windows, seed
   :data:`WINDOW_SEED`, for every scheme and seed); length L uses the first L + 1 tokens of each.
   As the model is causal, one forward pass over L_max tokens gives every prefix: the negative
   log-likelihood at position i depends on tokens ≤ i only, so

   .. math:: \\bar\\ell_w(L) = \\frac1L\\sum_{i<L} -\\ln p(x_{w,i+1}\\mid x_{w,\\le i}),
             \\qquad \\mathrm{PPL}(L) = \\exp\\Big(\\frac1W\\sum_w \\bar\\ell_w(L)\\Big),

   with W·L tokens scored at length L. Random schemes are evaluated under ``angle_draws``
   independent angle draws (evaluation seed 1000 + k, drawn for the whole window, so each prefix
   uses the first L angles of the same draw); ℓ̄ is averaged over draws.
3. **[B]'s mixing regime** (:func:`mixing_base`): [B] trains at 512 tokens with d_head = 96 and
   base 10⁴, where 10 of the 48 frequency blocks mix (γ_b^512 < 0.1, γ_b = sin f_b / f_b;
   :func:`mixing_counts`, equal to AT6's ``blocks_mixed``). At the CPU proxy's ``train_len``
   the default ``base`` is chosen so that the same fraction of blocks mixes within the training
   length:
   with d_head = 48 (24 blocks) and train_len = 64, 5 of 24 = 10/48 (base ≈ 63; every rotation
   scheme and RoPE use it).

Results are saved in a store folder: ``meta.json`` (the configuration, tokenizer hash, corpus,
unigram ceiling, windows, mixing counts) and one ``<scheme>__s<seed>.json`` per finished run
(per-window ℓ̄ at every length, per draw, the training record with its CPU seconds, and for
learned schemes the per-block mean angle). Runs are listed in the order seeds-major, so a
partial store holds every scheme at the first seeds. Read it without torch with
:mod:`posflow.simulate.models.seed_store`.
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

from posflow.simulate._paths import user_cache_dir
from posflow.simulate.models import schemes_alibi as _schemes_alibi  # noqa: F401  (registers)
from posflow.simulate.models._store import check_meta, code_identity, write_json
from posflow.simulate.models.bpe import BPEConfig, bpe_streams, unigram_perplexity
from posflow.simulate.models.corpus import training_batch, windows
from posflow.simulate.models.extrapolate import chunked_logits
from posflow.simulate.models.lm import LM, SCHEMES, LMConfig
from posflow.simulate.models.schemes import LearnedAngles, RandomAngles
from posflow.simulate.models.seed_store import FORMAT, VERSION, run_file

__all__ = [
    "DEFAULT_SCHEMES",
    "OWN_BASE",
    "PAPER_MIXED",
    "WINDOW_SEED",
    "SeedRunConfig",
    "build_model",
    "eval_windows",
    "evaluate_nested",
    "learned_angle_means",
    "mixing_base",
    "mixing_counts",
    "nested_prefix_error",
    "run_seeds",
    "train_run",
]

DEFAULT_SCHEMES = (
    "rope",
    "alibi",
    "random_qk",
    "random_qkv",
    "learned_qk",
    "learned_qkv",
    "random_qk_alibi",
)
OWN_BASE = {"rope_own": ("rope", 10000.0)}
"""Store schemes trained at their own base instead of the shared mixing base: ``rope_own`` is
RoPE at base 10⁴ (real RoPE's; its slow frequencies never turn a full period within the
training length, the cause of its failure to extrapolate), beside ``rope`` at the mixing base."""
WINDOW_SEED = 42
# The sources that decide a run's numbers, recorded in every run file (code_identity): this
# trainer, the model and its position schemes, the tokenizer and corpus windows, the chunked
# evaluation and the chunked PaTH scores the Path scheme trains through.
TRAINING_SOURCES = (
    "models/extrapolate_seeds.py", "models/lm.py", "models/schemes.py",
    "models/schemes_alibi.py", "models/_scheme.py", "models/bpe.py", "models/corpus.py",
    "models/extrapolate.py", "_householder.py",
)  # fmt: skip
PAPER_MIXED = {"d_head": 96, "base": 10000.0, "eps": 0.1, 512: 10, 8192: 17, 65536: 23}
"""[B]'s mixing counts (digest §2.4): blocks with (sin f_b / f_b)^n < 0.1 of 48, d_head 96."""


def _pos_int(v, name):
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
        raise ValueError(f"{name} must be a positive integer; got {v!r}")
    return int(v)


def _log_sinc(f: float) -> float:
    """ln(sin f / f) for 0 < f < π in float64 (a series below 1e-3, where sin f / f rounds)."""
    if f < 1e-3:
        f2 = f * f
        return -f2 / 6.0 - f2 * f2 / 180.0 - f2 * f2 * f2 / 2835.0
    return math.log(math.sin(f) / f)


def mixing_counts(d_head: int, base: float, lengths, eps: float = 0.1) -> dict:
    """{n: number of blocks with (sin f_b/f_b)^n < eps} for each n (claim AT20, item 5).

    f_b = base^{−2b/d}, b = 0 … d/2 − 1, decided in float64 as n·ln(sin f_b/f_b) < ln ε (the
    40-digit :func:`posflow.theory.transport.blocks_mixed` of AT6 agrees; tested). simulate
    does not import theory, so the count is computed here.
    """
    d = _pos_int(d_head, "d_head")
    if d % 2:
        raise ValueError(f"d_head must be even; got {d}")
    if not (isinstance(base, int | float) and math.isfinite(base) and base > 1):
        raise ValueError(f"base must be a finite number > 1; got {base!r}")
    if not 0 < eps < 1:
        raise ValueError(f"eps must lie in (0, 1); got {eps!r}")
    logs = [_log_sinc(base ** (-2.0 * b / d)) for b in range(d // 2)]
    le = math.log(eps)
    return {int(n): sum(int(n) * x < le for x in logs) for n in lengths}


def mixing_base(d_head: int, train_len: int, fraction: float = 10 / 48, eps: float = 0.1) -> float:
    """The RoPE/angle base at which round(fraction · d/2) blocks mix within ``train_len`` (AT20).

    Block b mixes within n steps when n·ln(sin f_b / f_b) < ln ε (f_b = base^{−2b/d} decreases
    in b), i.e. when f_b > f*, the root of n·ln(sin f/f) = ln ε. Exactly K blocks (b = 0 … K−1)
    mix when f*^{−d/(2K)} ≤ base < f*^{−d/(2(K−1))}; the geometric midpoint of that interval is
    returned, rounded to 3 significant digits, and checked with
    :func:`mixing_counts`. [B]: d = 96, n = 512, base 10⁴ → 10 of 48.
    Raises ValueError when K = round(fraction · d/2) is not in [2, d/2 − 1].
    """
    d, n = _pos_int(d_head, "d_head"), _pos_int(train_len, "train_len")
    if d % 2:
        raise ValueError(f"d_head must be even; got {d}")
    K = round(fraction * d / 2)
    if not 2 <= K <= d // 2 - 1:
        raise ValueError(f"fraction · d_head/2 must round to 2 … d_head/2 − 1; got K = {K}")
    from scipy.optimize import brentq

    def g(f):
        return n * math.log(math.sin(f) / f) - math.log(eps)

    fstar = brentq(g, 1e-9, math.pi - 1e-9, xtol=1e-15)
    lo = -d / (2 * K) * math.log(fstar)
    hi = -d / (2 * (K - 1)) * math.log(fstar)
    base = float(f"{math.exp((lo + hi) / 2):.3g}")
    got = mixing_counts(d, base, [n], eps)[n]
    if got != K:  # pragma: no cover - rounding moved the base out of the interval
        base = math.exp((lo + hi) / 2)
    return base


@dataclass
class SeedRunConfig:
    """Model, equal step budget, seeds and evaluation of a multi-seed AT20 run.

    ``base`` None means :func:`mixing_base` (d_head, train_len). ``bpe`` sets the vocabulary.
    ``threads`` None leaves torch's thread count alone (the numbers are reproducible for a
    fixed thread count).
    """

    train_len: int = 64
    max_factor: int = 64
    steps: int = 1000
    batch_size: int = 16
    lr: float = 3e-3
    warmup: int = 50
    n_layer: int = 3
    n_head: int = 2
    d_head: int = 48
    base: float | None = None
    eval_windows: int = 10
    angle_draws: int = 3
    checkpoint_every: int = 100
    chunk: int = 1024
    device: str = "cpu"
    threads: int | None = 1
    bpe: BPEConfig = field(default_factory=BPEConfig)
    schemes: tuple = field(default_factory=lambda: DEFAULT_SCHEMES)
    seeds: tuple = (0, 1, 2)

    def __post_init__(self):
        for name in (
            "train_len",
            "max_factor",
            "steps",
            "batch_size",
            "n_layer",
            "n_head",
            "d_head",
            "eval_windows",
            "angle_draws",
            "checkpoint_every",
            "chunk",
        ):
            _pos_int(getattr(self, name), name)
        if self.max_factor & (self.max_factor - 1):
            raise ValueError(f"max_factor must be a power of two; got {self.max_factor}")
        if self.d_head % 2:
            raise ValueError(f"d_head must be even; got {self.d_head}")
        if isinstance(self.warmup, bool) or not isinstance(self.warmup, int) or self.warmup < 0:
            raise ValueError(f"warmup must be a nonnegative integer; got {self.warmup!r}")
        if not (isinstance(self.lr, int | float) and math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"lr must be a finite number > 0; got {self.lr!r}")
        if self.threads is not None:
            _pos_int(self.threads, "threads")
        if self.base is None:
            self.base = mixing_base(self.d_head, self.train_len)
        if not (math.isfinite(self.base) and self.base > 1):
            raise ValueError(f"base must be a finite number > 1; got {self.base!r}")
        if isinstance(self.bpe, dict):
            self.bpe = BPEConfig(**self.bpe)
        self.schemes = tuple(self.schemes)
        if not self.schemes or len(set(self.schemes)) != len(self.schemes):
            raise ValueError(f"schemes must name distinct schemes; got {list(self.schemes)}")
        for s in self.schemes:
            if s not in SCHEMES and s not in OWN_BASE:
                raise ValueError(f"schemes: unknown scheme {s!r}; known: "
                                 f"{', '.join([*SCHEMES, *OWN_BASE])}")
        self.seeds = tuple(self.seeds)
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds must be distinct; got {list(self.seeds)}")
        for s in self.seeds:
            if isinstance(s, bool) or not isinstance(s, int | np.integer) or s < 0:
                raise ValueError(f"seeds must be nonnegative integers; got {s!r}")

    @property
    def d_model(self) -> int:
        return self.n_head * self.d_head

    @property
    def max_len(self) -> int:
        return self.train_len * self.max_factor

    @property
    def eval_lengths(self) -> list[int]:
        return [self.train_len * 2**k for k in range(int(math.log2(self.max_factor)) + 1)]

    def identity(self) -> dict:
        """The fields that decide the numbers (not schemes, seeds, device, chunk, threads)."""
        d = asdict(self)
        for k in ("schemes", "seeds", "device", "chunk", "threads", "checkpoint_every"):
            d.pop(k)
        return d

    def key(self) -> str:
        import hashlib

        return hashlib.sha256(json.dumps(self.identity(), sort_keys=True).encode()).hexdigest()[:16]


def build_model(scheme: str, cfg: SeedRunConfig, seed: int, vocab_size: int) -> LM:
    """A fresh LM of ``cfg``'s size with ``scheme`` and the shared angle ``base`` (AT20); a
    scheme of :data:`OWN_BASE` keeps its own base."""
    opts: dict = {}
    if scheme in OWN_BASE:
        scheme, opts["base"] = OWN_BASE[scheme]
    elif scheme in ("rope",) or scheme.startswith(("random", "learned")):
        opts["base"] = cfg.base
    if scheme.startswith("random"):
        opts["seed"] = int(seed)
    if scheme.startswith("learned"):
        opts["vocab_size"] = int(vocab_size)
    if scheme == "path":
        opts["d_model"] = cfg.d_model
    mc = LMConfig(
        vocab_size=int(vocab_size),
        n_layer=cfg.n_layer,
        n_head=cfg.n_head,
        d_model=cfg.d_model,
        scheme=scheme,
        scheme_options=opts,
    )
    torch.manual_seed(int(seed))
    return LM(mc, seed=int(seed))


def adamw(model, lr: float) -> torch.optim.AdamW:
    """AdamW (β = 0.9, 0.95) with weight decay 0.1 on the matrices and none on the rest — the
    optimiser of every multi-seed run (AT20's LM proxy and its synthetic tasks)."""
    decay = [p for p in model.parameters() if p.dim() == 2]
    rest = [p for p in model.parameters() if p.dim() != 2]
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
        lr=lr,
        betas=(0.9, 0.95),
    )


def cosine_lr(cfg, step: int) -> float:
    """Linear warm-up over ``cfg.warmup`` steps, then cosine decay to ``cfg.lr / 10`` at
    ``cfg.steps`` (any config with ``lr``, ``warmup`` and ``steps``)."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    frac = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * (0.1 + 0.45 * (1 + math.cos(math.pi * min(1.0, frac))))


def _random_layers(model):
    return [b.attn.scheme for b in model.blocks if isinstance(b.attn.scheme, RandomAngles)]


def _save_ckpt(path: Path, model, opt, rng, step, losses, cpu) -> None:
    blob = {
        "step": step,
        "model": model.state_dict(),
        "opt": opt.state_dict(),
        "rng": json.dumps(rng.bit_generator.state),
        "angle_rngs": [json.dumps(s._rng.bit_generator.state) for s in _random_layers(model)],
        "torch_rng": torch.get_rng_state(),
        "losses": torch.tensor(losses, dtype=torch.float64),
        "cpu_seconds": cpu,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    torch.save(blob, tmp)
    os.replace(tmp, path)


def train_run(
    scheme,
    seed,
    cfg: SeedRunConfig,
    train_tokens,
    vocab_size,
    *,
    checkpoint=None,
    stop_after=None,
    log=None,
):
    """Train (scheme, seed) for ``cfg.steps`` steps, resuming from ``checkpoint`` (AT20).

    Parameters
    ----------
    scheme : str
    seed : int
        Initial weights (``LM(seed=seed)``), the batch order
        (``numpy.random.default_rng(seed)``) and the random schemes' training angles.
    cfg : SeedRunConfig
    train_tokens : int array, shape (N,)
    vocab_size : int
    checkpoint : path, optional
        Read when present (training continues from its step), written every
        ``cfg.checkpoint_every`` steps and at the end.
    stop_after : int, optional
        Return after this many steps of this call (simulates a kill; returns model None).

    Returns
    -------
    (model in eval mode or None, record) — record: ``steps``, ``losses`` (per step),
    ``final_train_loss`` (mean of the last 50), ``cpu_seconds`` (process CPU time summed over
    resumptions), ``parameters``, ``resumed_from``. Cost: steps × batch × train_len tokens
    forward and backward.
    """
    dev = torch.device(cfg.device)
    model = build_model(scheme, cfg, seed, vocab_size).to(dev)
    model.train()
    opt = adamw(model, cfg.lr)
    rng = np.random.default_rng(int(seed))
    step, losses, cpu_before, resumed = 0, [], 0.0, 0
    ckpt = None if checkpoint is None else Path(checkpoint)
    if ckpt is not None and ckpt.is_file():
        blob = torch.load(ckpt, map_location=dev, weights_only=True)
        model.load_state_dict(blob["model"])
        opt.load_state_dict(blob["opt"])
        rng.bit_generator.state = json.loads(blob["rng"])
        for s, st in zip(_random_layers(model), blob["angle_rngs"], strict=True):
            s._rng.bit_generator.state = json.loads(st)
        torch.set_rng_state(blob["torch_rng"])
        step = resumed = int(blob["step"])
        losses = [float(x) for x in blob["losses"]]
        cpu_before = float(blob["cpu_seconds"])
    cpu0, done_here = time.process_time(), 0
    while step < cfg.steps:
        if stop_after is not None and done_here >= stop_after:
            return None, {"steps": step, "losses": losses}
        for g in opt.param_groups:
            g["lr"] = cosine_lr(cfg, step)
        x, y = training_batch(train_tokens, cfg.batch_size, cfg.train_len, rng)
        loss = model.loss(torch.from_numpy(x).to(dev), torch.from_numpy(y).to(dev))
        if not torch.isfinite(loss):
            raise ValueError(f"training {scheme!r} seed {seed} diverged at step {step}; lower lr")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        step += 1
        done_here += 1
        if ckpt is not None and (step % cfg.checkpoint_every == 0 or step == cfg.steps):
            _save_ckpt(ckpt, model, opt, rng, step, losses, cpu_before + time.process_time() - cpu0)
        if log is not None and step % 100 == 0:
            log(f"{scheme} s{seed}: step {step}/{cfg.steps} loss {np.mean(losses[-50:]):.3f}")
    model.eval()
    return model, {
        "steps": step,
        "losses": losses,
        "final_train_loss": float(np.mean(losses[-50:])),
        "cpu_seconds": cpu_before + time.process_time() - cpu0,
        "parameters": model.num_parameters(),
        "resumed_from": resumed,
    }


def eval_windows(valid_tokens, cfg: SeedRunConfig) -> np.ndarray:
    """The ``cfg.eval_windows`` held-out windows of L_max + 1 tokens every run is scored on
    (:func:`posflow.simulate.models.corpus.windows`, seed :data:`WINDOW_SEED`), (W, L_max + 1)."""
    return windows(valid_tokens, cfg.max_len + 1, cfg.eval_windows, seed=WINDOW_SEED)


@torch.no_grad()
def evaluate_nested(model: LM, wins, lengths, *, draws: int = 1, chunk: int = 1024, device="cpu"):
    """Mean NLL ℓ̄_w(L) of every window's first L + 1 tokens at every L, per angle draw (AT20).

    One forward pass per (window, draw) over the whole window: position i's NLL depends on
    tokens ≤ i only, so the prefix means are cumulative sums. Random schemes
    (:class:`~posflow.simulate.models.schemes.RandomAngles`) get evaluation seed 1000 + k for
    draw k (angles drawn for the window's full length); other schemes ignore ``draws`` (1 draw).

    Parameters
    ----------
    model : LM
    wins : int array, shape (W, n + 1)
    lengths : sequence of int, each ≤ n

    Returns
    -------
    ndarray, shape (draws, W, len(lengths)), float64 nats per token. Cost: draws · W forward
    passes of n tokens, O(n²) attention each (in query chunks).
    """
    if not isinstance(model, LM):
        raise TypeError(f"model must be a posflow LM; got {type(model).__name__}")
    w = np.asarray(wins)
    if w.ndim != 2 or w.shape[1] < 2:
        raise ValueError(f"wins must have shape (W, n + 1) with n ≥ 1; got {w.shape}")
    n = w.shape[1] - 1
    lens = [_pos_int(L, "lengths") for L in lengths]
    if max(lens) > n:
        raise ValueError(f"lengths must be ≤ the window length {n}; got {max(lens)}")
    rand = _random_layers(model)
    draws = _pos_int(draws, "draws") if rand else 1
    model.eval()
    out = np.empty((draws, w.shape[0], len(lens)))
    saved = [s.eval_seed for s in rand]
    try:
        for k in range(draws):
            for s in rand:
                s.eval_seed = 1000 + k
            for i, row in enumerate(w):
                t = torch.from_numpy(row.astype(np.int64)).to(device)[None]
                logits = chunked_logits(model, t[:, :-1], chunk)
                nll = F.cross_entropy(logits[0].double(), t[0, 1:], reduction="none")
                c = torch.cumsum(nll, 0).cpu().numpy()
                out[k, i] = [c[L - 1] / L for L in lens]
    finally:
        for s, e in zip(rand, saved, strict=True):
            s.eval_seed = e
    if not np.isfinite(out).all():
        raise ValueError("evaluation produced a non-finite NLL")
    return out


def nested_prefix_error() -> float:
    """max |ℓ̄ from nested prefixes − ℓ̄ from a direct forward pass on each prefix| (AT20 control).

    A tiny random-weight LM (2 layers, 2 heads, d_head 8, base 100, vocabulary 40) with RoPE and
    with learned Q/K angles (angle embeddings ~ N(0, 0.5²), generator seed 1), 3 random windows
    (seed 7) of 17 tokens, lengths 4, 8, 16: :func:`evaluate_nested` against the mean
    cross-entropy of ``model`` on each prefix alone. Runs on one torch thread (restored after).
    """
    cfg = SeedRunConfig(n_layer=2, n_head=2, d_head=8, base=100.0, train_len=4, max_factor=4)
    rng = np.random.default_rng(7)
    wins = rng.integers(0, 40, size=(3, 17))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: more threads only spin
    try:
        worst = 0.0
        for scheme in ("rope", "learned_qk"):
            model = build_model(scheme, cfg, 0, 40)
            if scheme == "learned_qk":
                with torch.no_grad():
                    for b in model.blocks:
                        b.attn.scheme.angle_emb.normal_(
                            0, 0.5, generator=torch.Generator().manual_seed(1)
                        )
            model.eval()
            nested = evaluate_nested(model, wins, [4, 8, 16])[0]
            with torch.no_grad():
                for i, w in enumerate(wins):
                    for j, L in enumerate((4, 8, 16)):
                        t = torch.from_numpy(w[: L + 1].astype(np.int64))[None]
                        nll = F.cross_entropy(model(t[:, :-1])[0].double(), t[0, 1:])
                        worst = max(worst, abs(float(nll) - nested[i, j]))
    finally:
        torch.set_num_threads(threads)
    return worst


@torch.no_grad()
def learned_angle_means(model: LM, tokens) -> list | None:
    """Per layer, per block: the mean and standard deviation of the learned angle θ_t,b in units
    of f_b over the tokens t of ``tokens`` and the heads (AT17's positive-mean drift diagnostic).

    θ_t = π·tanh(E_ℓ[x_t]) − f_b: zero-initialised, the mean is −1 (RoPE's constant rotation);
    a zero mean is [B]'s extrapolating regime. Returns ``[{"mean": [d/2], "std": [d/2]}, …]``
    (one per layer), or None for a model without learned angles.
    """
    layers = [b.attn.scheme for b in model.blocks if isinstance(b.attn.scheme, LearnedAngles)]
    if not layers:
        return None
    out = []
    for s in layers:
        H, h = s.n_head, s.d_head // 2
        ids = torch.as_tensor(np.asarray(tokens, dtype=np.int64), device=s.angle_emb.device)
        e = s.angle_emb[0][ids].double().view(-1, H, h)  # (N, H, d/2)
        f = s.freq.to(e.device)
        theta = (math.pi * torch.tanh(e) - f) / f
        out.append({"mean": theta.mean((0, 1)).tolist(), "std": theta.std((0, 1)).tolist()})
    return out


def _meta(cfg: SeedRunConfig, streams, wins) -> dict:
    return {
        "format": FORMAT,
        "version": VERSION,
        "config": cfg.identity(),
        "key": cfg.key(),
        "tokenizer_sha": streams.tokenizer_sha,
        "corpus": streams.description,
        "valid_parts": [list(p) for p in streams.valid_parts],
        "unigram_ppl": unigram_perplexity(streams.train, streams.valid, streams.vocab_size),
        "vocab_size": streams.vocab_size,
        "eval_lengths": cfg.eval_lengths,
        "windows": int(wins.shape[0]),
        "tokens_per_length": {str(L): int(wins.shape[0] * L) for L in cfg.eval_lengths},
        "mixing": {
            "eps": 0.1,
            "blocks": cfg.d_head // 2,
            "counts": {
                str(k): v for k, v in mixing_counts(cfg.d_head, cfg.base, cfg.eval_lengths).items()
            },
            "paper": {"blocks": 48, "counts": {"512": 10, "8192": 17, "65536": 23}},
        },
        "torch": torch.__version__,
    }


def _check_meta(store: Path, want: dict) -> None:
    check_meta(store, want, ("format", "config", "tokenizer_sha"), width=200)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - another user's process
        return True
    return True


def _claim(path: Path) -> bool:
    """Create the claim file ``path`` holding our pid; False when a live process holds it (a
    claim of a process that no longer exists is taken over)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        try:
            pid = int(path.read_text() or 0)
        except (OSError, ValueError):
            return False
        if not pid or pid == os.getpid() or _alive(pid):
            return pid == os.getpid()
        path.unlink(missing_ok=True)  # a stale claim of a killed process
        return _claim(path)
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    return True


def run_seeds(cfg: SeedRunConfig, store, *, part=None, log=None, ckpt_dir=None) -> list[Path]:
    """Train and evaluate every (scheme, seed) of ``cfg`` not yet in ``store`` (claim AT20).

    Runs are ordered seed-major (all schemes at the first seed, then the next). With ``part``
    None, several processes may share one store: each takes the next run nobody has claimed
    (claim files ``<store>/.claims/<run>``, holding the pid; a dead process's claim is taken
    over); ``part = (k, m)`` instead takes runs k, k + m, k + 2m, … of the list. A killed run
    resumes from its checkpoint (``ckpt_dir``, default ``<user cache>/extrapolation_ckpt/
    <config key>``). A store of another configuration raises ValueError. Returns the run files
    written by this call.
    """
    if not isinstance(cfg, SeedRunConfig):
        raise TypeError(f"cfg must be a SeedRunConfig; got {type(cfg).__name__}")
    k, m = (0, 1) if part is None else part
    if not (isinstance(m, int) and m >= 1 and isinstance(k, int) and 0 <= k < m):
        raise ValueError(f"part must be (k, m) with 0 ≤ k < m; got {part!r}")
    log = log or (lambda s: None)
    if cfg.threads is not None:
        from posflow.simulate._threads import set_threads

        set_threads(cfg.threads, torch=True)
    store = Path(store)
    streams = bpe_streams(cfg.bpe)
    wins = eval_windows(streams.valid, cfg)
    _check_meta(store, _meta(cfg, streams, wins))
    ckdir = Path(ckpt_dir) if ckpt_dir else user_cache_dir() / "extrapolation_ckpt" / cfg.key()
    jobs = [(s, seed) for seed in cfg.seeds for s in cfg.schemes][k::m]
    written = []
    for scheme, seed in jobs:
        path = store / run_file(scheme, seed)
        if path.is_file():
            log(f"{scheme} s{seed}: already in the store")
            continue
        claim = store / ".claims" / f"{scheme}__s{seed}"
        if part is None and not _claim(claim):
            log(f"{scheme} s{seed}: claimed by another process")
            continue
        try:
            written.append(_one_run(cfg, scheme, seed, streams, wins, path, ckdir, log))
        finally:
            if part is None:
                claim.unlink(missing_ok=True)
    return written


def _one_run(cfg, scheme, seed, streams, wins, path, ckdir, log) -> Path:
    t0 = time.perf_counter()
    model, rec = train_run(
        scheme, seed, cfg, streams.train, streams.vocab_size,
        checkpoint=ckdir / f"{scheme}__s{seed}.pt", log=log,
    )  # fmt: skip
    c0 = time.process_time()
    nats = evaluate_nested(
        model, wins, cfg.eval_lengths, draws=cfg.angle_draws, chunk=cfg.chunk, device=cfg.device
    )
    eval_cpu = time.process_time() - c0
    losses = rec.pop("losses")
    rec["loss_every_100"] = [
        float(np.mean(losses[i : i + 100])) for i in range(0, len(losses), 100)
    ]
    blob = {
        "scheme": scheme,
        "seed": int(seed),
        "key": cfg.key(),
        "train_len": cfg.train_len,
        "eval_lengths": cfg.eval_lengths,
        "nats": nats.mean(0).tolist(),  # (W, lengths), averaged over draws
        "nats_by_draw": nats.tolist(),
        "draws": int(nats.shape[0]),
        "train": rec,
        "eval_cpu_seconds": eval_cpu,
        "wall_seconds": time.perf_counter() - t0,
        "angle_means": learned_angle_means(model, streams.valid),
        "code": code_identity(TRAINING_SOURCES),
    }
    write_json(path, blob)
    ppl = np.exp(nats.mean((0, 1)))
    log(f"{scheme} s{seed}: PPL " + ", ".join(
        f"{L}: {p:.2f}" for L, p in zip(cfg.eval_lengths, ppl, strict=True)))  # fmt: skip
    return path
