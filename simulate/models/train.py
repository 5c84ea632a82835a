"""Training posflow's small LMs on an offline byte corpus; checkpoints; a user cache (PB15).

The default model is a 4-layer, 4-head, d = 128 ALiBi LM (about 0.8M parameters) trained on
the Python standard library read as bytes (:mod:`posflow.simulate.models.corpus`); the default run
takes a few minutes on 2 CPU cores. Training is deterministic for a seed (``torch.manual_seed``
for the weights, a ``numpy.random.Generator`` for the batches) on a fixed thread count.

Checkpoints are ``torch.save`` dictionaries ``{"format": "posflow-lm", "version": 1,
"config": {...}, "state_dict": {...}, "train": {...}}``, read back with
``torch.load(weights_only=True)``. :func:`cached_model` trains a named preset once and keeps
it in the per-user cache (:func:`cache_dir`), keyed by the code that trains it.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from posflow.simulate._paths import user_cache_dir
from posflow.simulate.models._store import package_version, sources_hash
from posflow.simulate.models.corpus import Corpus, load_corpus, training_batch
from posflow.simulate.models.lm import LM, LMConfig

__all__ = [
    "PRESETS",
    "TrainConfig",
    "TrainResult",
    "cache_dir",
    "cached_model",
    "evaluate",
    "load_checkpoint",
    "save_checkpoint",
    "train",
]

FORMAT = "posflow-lm"


@dataclass
class TrainConfig:
    """Optimisation settings: AdamW, linear warm-up then cosine decay to ``lr/10``."""

    steps: int = 1500
    batch_size: int = 16
    seq_len: int = 128
    lr: float = 3e-3
    warmup: int = 50
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    seed: int = 0
    max_bytes: int = 4_000_000
    valid_fraction: float = 0.05

    def __post_init__(self):
        for name in ("steps", "batch_size", "seq_len", "max_bytes"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
                raise ValueError(f"{name} must be a positive integer; got {v!r}")
        if isinstance(self.warmup, bool) or not isinstance(self.warmup, int) or self.warmup < 0:
            raise ValueError(f"warmup must be a nonnegative integer; got {self.warmup!r}")
        for name in ("lr", "weight_decay", "grad_clip"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and np.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be a finite number >= 0; got {v!r}")
        if not self.lr > 0:
            raise ValueError(f"lr must be positive; got {self.lr}")
        if not (0 < self.valid_fraction < 1):
            raise ValueError(f"valid_fraction must lie in (0, 1); got {self.valid_fraction}")


@dataclass
class _Preset:
    model: LMConfig
    train: TrainConfig
    note: str = ""
    extra: dict = field(default_factory=dict)


PRESETS = {
    # the default of `posflow measure --train` and of `posflow verify --full` (minutes)
    "default": _Preset(LMConfig(), TrainConfig(), "4 layers, 4 heads, d = 128, ALiBi"),
    # `posflow verify --quick`: trains in ~15 s on 2 cores
    "quick": _Preset(
        LMConfig(n_layer=3, n_head=4, d_model=64),
        TrainConfig(steps=300, batch_size=16, seq_len=64, lr=4e-3, warmup=20, max_bytes=1_000_000),
        "3 layers, 4 heads, d = 64, ALiBi",
    ),
    # tests and smoke runs: about a second
    "tiny": _Preset(
        LMConfig(n_layer=2, n_head=2, d_model=32),
        TrainConfig(steps=30, batch_size=8, seq_len=32, lr=5e-3, warmup=5, max_bytes=200_000),
        "2 layers, 2 heads, d = 32, ALiBi",
    ),
}


@dataclass
class TrainResult:
    """The trained model, its loss history (nats per byte) and the wall time."""

    model: LM
    history: list[float]
    valid_loss: float
    seconds: float
    corpus: str


def _lr(cfg: TrainConfig, step: int) -> float:
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    frac = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * min(1.0, frac))))


@torch.no_grad()
def evaluate(model: LM, tokens, *, seq_len: int = 128, batches: int = 8, seed: int = 1) -> float:
    """Mean next-byte cross-entropy (nats) on ``batches`` × 16 random windows of ``tokens``."""
    rng = np.random.default_rng(seed)
    was = model.training
    model.eval()
    losses = []
    for _ in range(batches):
        x, y = training_batch(tokens, 16, seq_len, rng)
        losses.append(float(model.loss(torch.from_numpy(x), torch.from_numpy(y))))
    model.train(was)
    return float(np.mean(losses))


def train(
    model_config: LMConfig | None = None,
    train_config: TrainConfig | None = None,
    *,
    corpus=None,
    checkpoint=None,
    progress: bool = True,
) -> TrainResult:
    """Train an :class:`LM` on a byte corpus (claims PB15, PB16).

    Minimises the next-byte cross-entropy ``-(1/Bn) Σ log p(x_{i+1} | x_{≤i})`` with AdamW on
    random windows of ``seq_len + 1`` bytes from the training split (the last
    ``valid_fraction`` is held out and reported as ``valid_loss``).

    Parameters
    ----------
    model_config : LMConfig, optional
        Default: ``PRESETS["default"].model`` (4-layer ALiBi); ``vocab_size`` must be 256.
    train_config : TrainConfig, optional
        Default: ``PRESETS["default"].train``.
    corpus : None, Corpus, path or sequence of paths
        None: the standard library (:func:`posflow.simulate.models.corpus.load_corpus`).
    checkpoint : path, optional
        Where to save the trained model (see :func:`save_checkpoint`).
    progress : bool
        A rich progress bar with the running loss.

    Returns
    -------
    TrainResult
        Cost: ``steps × batch_size × seq_len`` tokens forward and backward.
    """
    mc = model_config or PRESETS["default"].model
    tc = train_config or PRESETS["default"].train
    if mc.vocab_size != 256:
        raise ValueError(
            f"model_config.vocab_size must be 256 for a byte corpus; got {mc.vocab_size}"
        )
    if not isinstance(corpus, Corpus):
        corpus = load_corpus(corpus, max_bytes=tc.max_bytes, seed=tc.seed)
    data_train, data_valid = corpus.split(tc.valid_fraction)
    for name, part in (("training", data_train), ("validation", data_valid)):
        if part.size < tc.seq_len + 1:
            raise ValueError(
                f"corpus has too little text: the {name} split holds {part.size} bytes, "
                f"windows need seq_len + 1 = {tc.seq_len + 1}"
            )
    torch.manual_seed(tc.seed)
    model = LM(mc, seed=tc.seed)
    model.train()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": tc.weight_decay}, {"params": rest, "weight_decay": 0.0}],
        lr=tc.lr,
        betas=(0.9, 0.95),
    )
    rng = np.random.default_rng(tc.seed)
    history: list[float] = []
    t0 = time.perf_counter()
    from rich.progress import BarColumn, TextColumn, TimeRemainingColumn

    from posflow.simulate._progress import progress as progress_of

    cols = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[loss]}"),
        TimeRemainingColumn(),
    )
    with progress_of(tc.steps, "training", enabled=bool(progress), every=10.0, columns=cols,
                     loss="") as bar:  # fmt: skip
        for step in range(tc.steps):
            for g in opt.param_groups:
                g["lr"] = _lr(tc, step)
            x, y = training_batch(data_train, tc.batch_size, tc.seq_len, rng)
            loss = model.loss(torch.from_numpy(x), torch.from_numpy(y))
            if not torch.isfinite(loss):
                raise ValueError(f"training diverged at step {step} (loss {loss.item()}); lower lr")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if tc.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), tc.grad_clip)
            opt.step()
            history.append(loss.item())
            bar.advance(loss=f"loss {np.mean(history[-20:]):.3f} nats/byte")
    model.eval()
    seconds = time.perf_counter() - t0
    valid = evaluate(model, data_valid, seq_len=min(tc.seq_len, data_valid.size - 1))
    result = TrainResult(model, history, valid, seconds, corpus.description)
    if checkpoint is not None:
        save_checkpoint(checkpoint, model, train_config=tc, result=result)
    return result


def save_checkpoint(
    path, model: LM, *, train_config: TrainConfig | None = None, result: TrainResult | None = None
) -> Path:
    """Save ``model`` (config, weights, training record) atomically to ``path``."""
    if not isinstance(model, LM):
        raise TypeError(f"model must be a posflow LM; got {type(model).__name__}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {}
    if train_config is not None:
        record["config"] = asdict(train_config)
    if result is not None:
        record.update(
            history=list(map(float, result.history)),
            valid_loss=float(result.valid_loss),
            seconds=float(result.seconds),
            corpus=result.corpus,
        )
    blob = {
        "format": FORMAT,
        "version": 1,
        "config": model.config.as_dict(),
        "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "train": record,
    }
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    torch.save(blob, tmp)
    os.replace(tmp, path)
    return path


def load_checkpoint(path) -> tuple[LM, dict]:
    """Load a posflow checkpoint; returns (model in eval mode, training record).

    Raises ValueError when ``path`` is missing or is not a posflow checkpoint.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"checkpoint {str(path)!r} is not a file")
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise ValueError(
            f"{str(path)!r} is not a posflow checkpoint ({type(exc).__name__})"
        ) from exc
    if not isinstance(blob, dict) or blob.get("format") != FORMAT:
        raise ValueError(f"{str(path)!r} is not a posflow checkpoint (no format {FORMAT!r})")
    model = LM(LMConfig(**blob["config"]))
    model.load_state_dict(blob["state_dict"])
    model.eval()
    return model, dict(blob.get("train", {}))


def cache_dir() -> Path:
    """Folder of cached preset models: ``<user cache>/models`` (platformdirs; never the package).

    ``POSFLOW_CACHE_DIR`` overrides the user cache (see :mod:`posflow.simulate._paths`).
    """
    return user_cache_dir() / "models"


# The modules whose code decides what a trained preset model is: a change to any of them
# (the trainer, the model, the corpus reader, the position schemes) changes the cache key.
_TRAINING_CODE = ("train.py", "lm.py", "corpus.py", "schemes.py")


def training_code_hash() -> str:
    """sha256 (first 16 hex digits) of the source of the modules that train a model (PB15).

    Read from the installed package (:func:`~posflow.simulate.models._store.sources_hash`), so
    an edited trainer never reuses a model cached by the old one.
    """
    return sources_hash("posflow.simulate.models", _TRAINING_CODE)


def cached_model(preset: str = "quick", *, progress: bool = False) -> tuple[LM, dict, Path]:
    """A preset model trained once and cached (claims PB15, PB16).

    The file name carries a hash of the preset's configs, the posflow version, the source of
    the training code (:func:`training_code_hash`), the Python version (the corpus is its
    standard library) and the torch version, so a change to any of them retrains. Models live
    in :func:`cache_dir` (the per-user cache), never in the package or the checkout.

    Returns
    -------
    (model, training record, path)
    """
    if preset not in PRESETS:
        raise ValueError(f"preset must be one of {', '.join(PRESETS)}; got {preset!r}")
    p = PRESETS[preset]
    key = json.dumps(
        [
            p.model.as_dict(),
            asdict(p.train),
            sys.version_info[:3],
            platform.python_implementation(),
            torch.__version__.split("+")[0],
            package_version(),
            training_code_hash(),
        ],
        sort_keys=True,
    )
    path = cache_dir() / f"{preset}-{hashlib.sha256(key.encode()).hexdigest()[:12]}.pt"
    if path.is_file():
        try:
            model, record = load_checkpoint(path)
            return model, record, path
        except ValueError:
            pass  # a damaged cache entry: train again
    result = train(p.model, p.train, progress=progress)
    try:
        save_checkpoint(path, result.model, train_config=p.train, result=result)
    except OSError:  # an unwritable cache: keep the model in memory only
        pass
    record = {
        "config": asdict(p.train),
        "history": result.history,
        "valid_loss": result.valid_loss,
        "seconds": result.seconds,
        "corpus": result.corpus,
    }
    return result.model, record, path
