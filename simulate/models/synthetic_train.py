"""Train short, test long on synthetic tasks: exact error at 1×–16× the training length (AT20).

One *run* is (task, scheme, seed) (tasks: :mod:`posflow.simulate.models.synthetic`):

1. **Training** posflow's LM (:class:`~posflow.simulate.models.lm.LM`) for exactly ``steps``
   optimiser steps, the same for every scheme (never wall time): AdamW (β = 0.9, 0.95; weight
   decay 0.1 on matrices), linear warm-up for ``warmup`` steps then cosine decay to lr/10,
   gradient norm clipped at 1, batches of ``batch_size`` fresh sequences of ``train_len`` tokens
   drawn by ``numpy.random.default_rng(seed)``. The loss is the mean cross-entropy over the
   scored positions (``loss="targets"``) or over every next token (``loss="all"``).
2. **Evaluation** at L = f · ``train_len`` for f in ``factors`` (1, 2, 4, 8, 16): the exact
   error count of :meth:`~posflow.simulate.models.synthetic.Task.error` on fixed test batches of
   ``test_tokens // L`` sequences, drawn by ``numpy.random.default_rng([test_seed, L])`` — the
   same batches for every scheme and seed. Each run is also scored on the ``probes`` of its task
   (e.g. the sparse flip-flop FFL(0.98) for a model trained on FFL(0.8)), on their own fixed
   batches. Long sequences go through the query-chunked forward pass
   :func:`~posflow.simulate.models.extrapolate.chunked_logits` (``eval_chunk`` queries at a
   time, at most ``eval_batch_tokens`` tokens per forward pass), so memory stays
   O(eval_batch_tokens · eval_chunk · H) floats. Random-angle schemes are scored in ``eval()``
   mode: one angle draw, seeded by (eval_seed = 1234, layer, L), as in
   :mod:`~posflow.simulate.models.schemes`.
3. **Angle bases**: RoPE keeps its own base ``rope_base`` (10⁴); the rotation schemes
   (``random_*``, ``learned_*``, ``random_qk_alibi``) use ``base``, by default
   :func:`~posflow.simulate.models.extrapolate_seeds.mixing_base` (d_head, train_len) — [B]'s
   fraction 10/48 of the frequency blocks mixing within the training length (d_head 32,
   train_len 64: base 170, 3 of 16 blocks). ALiBi's slopes (``alibi``, ``random_qk_alibi``)
   are ``alibi_slopes``, by default :func:`steep_slopes` (1/2, 1/4 for two heads; the pilot in
   :class:`SyntheticRunConfig`). Each run file records its scheme options.

Threads: every run sets ``torch.set_num_threads(threads)`` (1 by default; restored after), so
its CPU seconds count one core and two processes with ``part=(0, 2)``, ``(1, 2)`` share two
cores without oversubscription.

Store: a folder with ``meta.json`` (the shared configuration; another configuration raises
ValueError) and one ``<task label>__<scheme>__s<seed>.json`` per finished run (config, scheme
options, steps, CPU seconds, per-length errors and counts), written atomically; a run whose
file exists is skipped, so a killed :func:`run_store` resumes at the first missing run. Runs
are ordered seed-major (every task and scheme at the first seed first).

Command (the default configuration, resumable; m processes with ``--part 0/m`` … ``(m−1)/m``
share the runs)::

    python -m posflow.simulate.models.synthetic_train --store DIR [--part k/m]
        [--seeds 0 1 2 3 4] [--schemes rope alibi …] [--threads 1] [--device cuda]
        [--train-len L --steps N --batch-size B --n-layer K --n-head H --d-model D]
        [--tasks flipflop-p0.8 …]
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

from posflow.simulate.models import schemes_alibi as _schemes_alibi  # noqa: F401  (registers)
from posflow.simulate.models._store import check_meta, code_identity, write_json
from posflow.simulate.models._store import parse_part as _part
from posflow.simulate.models.extrapolate import chunked_logits
from posflow.simulate.models.extrapolate_seeds import adamw, cosine_lr, mixing_base
from posflow.simulate.models.lm import LM, SCHEMES, LMConfig
from posflow.simulate.models.synthetic import (
    IGNORE,
    AssociativeRecall,
    FlipFlop,
    Task,
    TaskBatch,
    make_task,
)

__all__ = [
    "ALIBI_SCHEMES",
    "DEFAULT_SCHEMES",
    "FORMAT",
    "VERSION",
    "SyntheticRunConfig",
    "build_model",
    "eval_batches",
    "evaluate_errors",
    "load_store",
    "main",
    "print_progress",
    "run_file",
    "run_store",
    "scheme_options",
    "steep_slopes",
    "train_run",
]

FORMAT = "posflow-synthetic-extrapolation"
VERSION = 1
# The sources that decide a run's numbers, recorded in every run file (code_identity): this
# trainer, the tasks, the model and its position schemes, the optimiser and schedule, and the
# chunked PaTH scores the Path scheme trains through.
TRAINING_SOURCES = (
    "models/synthetic_train.py", "models/synthetic.py", "models/lm.py", "models/schemes.py",
    "models/schemes_alibi.py", "models/_scheme.py", "models/extrapolate.py",
    "models/extrapolate_seeds.py", "_householder.py",
)  # fmt: skip
DEFAULT_SCHEMES = (
    "nope",
    "rope",
    "alibi",
    "random_qk",
    "random_qkv",
    "learned_qk",
    "learned_qkv",
    "random_qk_alibi",
    "path",
)
ROTATION_PREFIXES = ("random", "learned")
ALIBI_SCHEMES = ("alibi", "random_qk_alibi")


def steep_slopes(n_head: int) -> tuple[float, ...]:
    """The default ALiBi slopes of a synthetic store: m_h = 2^{-(h+1)}, h = 0 … H − 1 (AT20).

    For H ≤ 8 these are the steepest H of the textbook 8-head slopes 2^{-8(h+1)/8}; the
    textbook H-head slopes 2^{-8(h+1)/H} are much shallower for small H (1/16, 1/256 at
    H = 2), too shallow for the flip-flop task (see :class:`SyntheticRunConfig`).
    """
    return tuple(2.0 ** -(h + 1) for h in range(_pos_int(n_head, "n_head")))


def _pos_int(v, name):
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
        raise ValueError(f"{name} must be a positive integer; got {v!r}")
    return int(v)


def _pos_float(v, name, lo=0.0):
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= lo:
        raise ValueError(f"{name} must be a finite number > {lo:g}; got {v!r}")
    return float(v)


def print_progress(line: str) -> None:
    """Write one progress line to stderr and flush (seen at once also when piped)."""
    print(line, file=sys.stderr, flush=True)


def _default_tasks():
    return (FlipFlop(0.8), AssociativeRecall(2, 4))


def _default_probes():
    return {"flipflop-p0.8": (FlipFlop.sparse(),)}


@dataclass
class SyntheticRunConfig:
    """Tasks, model size, equal step budget and evaluation of a synthetic AT20 store.

    ``tasks``: :class:`~posflow.simulate.models.synthetic.Task` objects or their spec dicts.
    ``probes``: {task label: tasks also scored with that task's model} (same vocabulary).
    ``base`` None means :func:`mixing_base` (d_head, train_len). ``factors``: evaluation
    lengths in units of ``train_len``. ``alibi_slopes`` (H values > 0, used by ``alibi`` and
    ``random_qk_alibi``; recorded in ``meta.json``) None means :func:`steep_slopes`. ``threads``:
    torch threads per run; ``device``: where runs train and are scored (not in the store's
    identity, like ``threads``). Raises ValueError naming the field for a bad value.

    The defaults are the pilots' (one seed, 3000 steps, L = 64, 2 layers × 2 heads × 64):

    * FFL(0.8): RoPE and learned_qkv reach 0 errors at 1× (of 2038 reads).
    * ALiBi slopes: the textbook 2-head slopes (1/16, 1/256) did not learn FFL(0.8) (24 %
      error at 1×); the steep slopes (1/2, 1/4) did: 0 / 0.3 / 0.9 / 0.5 / 0.7 % error at
      1×–16× (random_qk_alibi 0 / 0 / 0 / 0 / 0.1 %); (1/4, 1/16) learned too but erred more
      beyond 1× (0 / 1.2 / 1.3 / 1.2 / 1.7 %). A steep slope separates the last write from an
      earlier one a few tokens before it (weights e^{−mΔ}); a shallow one averages them.
    * Associative recall (K keys, V values): RoPE at (8, 8) stayed on its plateau (66.7 %
      error at 1×, chance 87.5 %), (3, 4) too (43.8 %), (4, 4) left it late (11.8 %); (2, 4)
      left it by step ≈ 1500 and reached 0 / 0.1 / 1.5 / 2.5 / 3.4 % at 1×–16×, so the
      default is AssociativeRecall(2, 4) (chance 75 %). Whether a run leaves the plateau
      depends on its seed; the AT20 judge blocks a scheme whose error at 1× stays high.
    """

    tasks: tuple = field(default_factory=_default_tasks)
    probes: dict = field(default_factory=_default_probes)
    train_len: int = 64
    factors: tuple = (1, 2, 4, 8, 16)
    steps: int = 3000
    batch_size: int = 32
    lr: float = 3e-3
    warmup: int = 100
    n_layer: int = 2
    n_head: int = 2
    d_model: int = 64
    mlp_ratio: int = 4
    rope_base: float = 10000.0
    base: float | None = None
    alibi_slopes: tuple | None = None
    loss: str = "targets"
    test_tokens: int = 32768
    test_seed: int = 2025
    eval_chunk: int = 256
    eval_batch_tokens: int = 8192
    threads: int = 1
    device: str = "cpu"
    progress_seconds: float = 30.0

    def __post_init__(self):
        for name in ("train_len", "steps", "batch_size", "n_layer", "n_head", "d_model",
                     "mlp_ratio", "test_tokens", "eval_chunk", "eval_batch_tokens",
                     "threads"):  # fmt: skip
            setattr(self, name, _pos_int(getattr(self, name), name))
        if isinstance(self.warmup, bool) or not isinstance(self.warmup, int) or self.warmup < 0:
            raise ValueError(f"warmup must be a nonnegative integer; got {self.warmup!r}")
        if (isinstance(self.test_seed, bool) or not isinstance(self.test_seed, int)
                or self.test_seed < 0):  # fmt: skip
            raise ValueError(f"test_seed must be a nonnegative integer; got {self.test_seed!r}")
        self.lr = _pos_float(self.lr, "lr")
        self.rope_base = _pos_float(self.rope_base, "rope_base", 1.0)
        if not isinstance(self.device, str) or not self.device:
            raise ValueError(f"device must be a torch device name; got {self.device!r}")
        self.progress_seconds = float(self.progress_seconds)
        if not self.progress_seconds >= 0:
            raise ValueError(f"progress_seconds must be >= 0; got {self.progress_seconds!r}")
        if self.d_model % self.n_head or (self.d_model // self.n_head) % 2:
            raise ValueError(
                f"d_model / n_head must be an even integer; got d_model = {self.d_model}, "
                f"n_head = {self.n_head}"
            )
        if self.loss not in ("targets", "all"):
            raise ValueError(f"loss must be 'targets' or 'all'; got {self.loss!r}")
        self.factors = tuple(self.factors)
        if not self.factors or any(
            isinstance(f, bool) or not isinstance(f, int | np.integer) or f < 1
            for f in self.factors
        ) or list(self.factors) != sorted(set(self.factors)):  # fmt: skip
            raise ValueError(f"factors must be increasing positive integers; got {self.factors}")
        self.factors = tuple(int(f) for f in self.factors)
        if isinstance(self.tasks, Task | dict):
            self.tasks = (self.tasks,)
        self.tasks = tuple(make_task(t) for t in self.tasks)
        labels = [t.label for t in self.tasks]
        if not self.tasks or len(set(labels)) != len(labels):
            raise ValueError(f"tasks must be distinct and at least one; got {labels}")
        if not isinstance(self.probes, dict):
            raise ValueError(f"probes must be a dict {{task label: tasks}}; got {self.probes!r}")
        probes = {}
        for key, ts in self.probes.items():
            ts = (ts,) if isinstance(ts, Task | dict) else tuple(ts)
            probes[key] = tuple(make_task(t) for t in ts)
            owner = next((t for t in self.tasks if t.label == key), None)
            for p in probes[key]:
                if owner is not None and p.vocab_size != owner.vocab_size:
                    raise ValueError(
                        f"probes: {p.label} has vocabulary {p.vocab_size}, the task {key} "
                        f"{owner.vocab_size}"
                    )
        self.probes = probes
        for t in (*self.tasks, *(p for ps in probes.values() for p in ps)):
            for L in self.lengths:
                try:
                    t.check_length(L)
                except ValueError as exc:
                    raise ValueError(f"train_len × factors: {t.label}: {exc}") from None
        if self.test_tokens < self.lengths[-1]:
            raise ValueError(
                f"test_tokens must be >= the longest length {self.lengths[-1]}; "
                f"got {self.test_tokens}"
            )
        if self.base is None:
            try:
                self.base = mixing_base(self.d_head, self.train_len)
            except ValueError as exc:
                raise ValueError(f"base: give it explicitly ({exc})") from None
        self.base = _pos_float(self.base, "base", 1.0)
        m = self.alibi_slopes
        m = steep_slopes(self.n_head) if m is None else m
        m = tuple(m) if isinstance(m, list | tuple | np.ndarray) else ()
        if len(m) != self.n_head or not all(
            not isinstance(x, bool) and isinstance(x, int | float | np.integer | np.floating)
            and 0 < x < math.inf for x in m
        ):  # fmt: skip
            raise ValueError(f"alibi_slopes must be n_head = {self.n_head} finite numbers > 0; "
                             f"got {self.alibi_slopes!r}")  # fmt: skip
        self.alibi_slopes = tuple(float(x) for x in m)

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_head

    @property
    def lengths(self) -> list[int]:
        return [self.train_len * f for f in self.factors]

    def identity(self) -> dict:
        """The shared settings that decide the numbers (not tasks, probes, chunking, threads,
        progress), as stored in ``meta.json``."""
        keep = ("train_len", "factors", "steps", "batch_size", "lr", "warmup", "n_layer",
                "n_head", "d_model", "mlp_ratio", "rope_base", "base", "alibi_slopes", "loss",
                "test_tokens", "test_seed")  # fmt: skip
        out = {k: getattr(self, k) for k in keep}
        out["factors"] = list(self.factors)
        out["alibi_slopes"] = list(self.alibi_slopes)
        return out

    def key(self) -> str:
        return hashlib.sha256(json.dumps(self.identity(), sort_keys=True).encode()).hexdigest()[:16]


def run_file(task: Task, scheme: str, seed: int) -> str:
    """The file name of run (task, scheme, seed): ``<task label>__<scheme>__s<seed>.json``."""
    return f"{make_task(task).label}__{scheme}__s{int(seed)}.json"


def scheme_options(scheme: str, cfg: SyntheticRunConfig, seed: int, vocab_size: int) -> dict:
    """The ``scheme_options`` of ``scheme`` (claim AT20): RoPE ``base = cfg.rope_base``; rotation
    schemes ``base = cfg.base`` (random ones also ``seed``, learned ones ``vocab_size``);
    ``path`` ``d_model``; none for NoPE and ALiBi. Raises ValueError for an unknown scheme."""
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {', '.join(sorted(SCHEMES))}; got {scheme!r}")
    opts: dict = {}
    if scheme == "rope":
        opts["base"] = cfg.rope_base
    if scheme.startswith(ROTATION_PREFIXES):
        opts["base"] = cfg.base
    if scheme.startswith("random"):
        opts["seed"] = int(seed)
    if scheme.startswith("learned"):
        opts["vocab_size"] = int(vocab_size)
    if scheme == "path":
        opts["d_model"] = cfg.d_model
    if scheme in ALIBI_SCHEMES:
        opts["slopes"] = list(cfg.alibi_slopes)
    return opts


def build_model(scheme: str, cfg: SyntheticRunConfig, seed: int, vocab_size: int) -> LM:
    """A fresh LM of ``cfg``'s size with ``scheme`` (options: :func:`scheme_options`), initial
    weights from ``seed`` (``torch.manual_seed(seed)``, ``LM(seed=seed)``)."""
    mc = LMConfig(
        vocab_size=int(vocab_size),
        n_layer=cfg.n_layer,
        n_head=cfg.n_head,
        d_model=cfg.d_model,
        mlp_ratio=cfg.mlp_ratio,
        scheme=scheme,
        scheme_options=scheme_options(scheme, cfg, seed, vocab_size),
    )
    torch.manual_seed(int(seed))
    return LM(mc, seed=int(seed))


def eval_batches(task, cfg: SyntheticRunConfig) -> dict[int, TaskBatch]:
    """{L: the fixed test batch at length L}: ``test_tokens // L`` sequences drawn by
    ``numpy.random.default_rng([test_seed, L])`` — the same for every scheme and seed (AT20)."""
    task = make_task(task)
    return {
        L: task.sample(cfg.test_tokens // L, L, np.random.default_rng([cfg.test_seed, L]))
        for L in cfg.lengths
    }


@torch.no_grad()
def evaluate_errors(model: LM, task, batch: TaskBatch, *, chunk: int = 256,
                    batch_tokens: int = 8192) -> tuple[int, int]:  # fmt: skip
    """(errors, N) of ``model`` on ``batch`` under :meth:`Task.error` (claim AT20).

    Sequences go ``max(1, batch_tokens // n)`` at a time through
    :func:`~posflow.simulate.models.extrapolate.chunked_logits` (``min(chunk, n)`` queries at a
    time); the model is put in ``eval()`` mode. Cost O(L·(B·n·D² + B·H·n²·d)); memory
    O(batch_tokens·(V + D) + (batch_tokens/n)·H·chunk·n) floats.
    """
    if not isinstance(model, LM):
        raise TypeError(f"model must be a posflow LM; got {type(model).__name__}")
    task = make_task(task)
    if not isinstance(batch, TaskBatch):
        raise ValueError(f"batch must be a TaskBatch; got {type(batch).__name__}")
    chunk, batch_tokens = _pos_int(chunk, "chunk"), _pos_int(batch_tokens, "batch_tokens")
    if model.config.vocab_size != task.vocab_size:
        raise ValueError(
            f"task vocabulary {task.vocab_size} differs from the model's "
            f"{model.config.vocab_size}"
        )
    model.eval()
    n = batch.length
    rows = max(1, batch_tokens // n)
    dev = next(model.parameters()).device
    errors = count = 0
    for a in range(0, len(batch), rows):
        part = batch[a : a + rows]
        logits = chunked_logits(model, torch.from_numpy(part.tokens).to(dev), min(chunk, n))
        e, c = task.error(logits, part)
        errors, count = errors + e, count + c
    return errors, count


def _loss(logits, batch: TaskBatch, mode: str):
    V = logits.shape[-1]
    if mode == "targets":
        y = torch.from_numpy(batch.targets)
    else:  # every next token; the last position has none
        y = torch.full(batch.tokens.shape, IGNORE, dtype=torch.int64)
        y[:, :-1] = torch.from_numpy(batch.tokens[:, 1:])
    y = y.to(logits.device)
    total = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1), ignore_index=IGNORE,
                            reduction="sum")  # fmt: skip
    return total / max(1, int((y != IGNORE).sum()))


def train_run(task, scheme: str, seed: int, cfg: SyntheticRunConfig, *, log=None,
              label: str = "") -> tuple[LM, dict]:  # fmt: skip
    """Train (task, scheme, seed) for exactly ``cfg.steps`` optimiser steps (claim AT20).

    Parameters
    ----------
    task : Task or spec dict
    scheme : str
        A registered position scheme.
    seed : int ≥ 0
        Initial weights, the training batches (``numpy.random.default_rng(seed)``) and the
        random schemes' training angles.
    cfg : SyntheticRunConfig
    log : callable, optional
        Receives a progress line at most every ``cfg.progress_seconds`` seconds and at the
        last step.

    Returns
    -------
    (model in eval mode, record) — record: ``steps``, ``losses`` (per step),
    ``final_loss`` (mean of the last 50), ``cpu_seconds`` (process CPU time),
    ``wall_seconds``, ``parameters``. Cost: steps × batch_size × train_len tokens forward and
    backward. Raises ValueError when the loss turns non-finite.
    """
    task = make_task(task)
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a nonnegative integer; got {seed!r}")
    model = build_model(scheme, cfg, seed, task.vocab_size).to(cfg.device)
    model.train()
    opt = adamw(model, cfg.lr)
    rng = np.random.default_rng(int(seed))
    losses: list[float] = []
    name = label or f"{task.label} {scheme} s{seed}"
    c0, t0 = time.process_time(), time.perf_counter()
    last_line = t0
    for step in range(cfg.steps):
        for g in opt.param_groups:
            g["lr"] = cosine_lr(cfg, step)
        batch = task.sample(cfg.batch_size, cfg.train_len, rng)
        loss = _loss(model(torch.from_numpy(batch.tokens).to(cfg.device)), batch, cfg.loss)
        if not torch.isfinite(loss):
            raise ValueError(f"training {name} diverged at step {step}; lower lr")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        now = time.perf_counter()
        if log is not None and (now - last_line >= cfg.progress_seconds or step + 1 == cfg.steps):
            last_line = now
            log(f"{name}: step {step + 1}/{cfg.steps} loss {np.mean(losses[-50:]):.4f} "
                f"({now - t0:.0f} s)")  # fmt: skip
    model.eval()
    return model, {
        "steps": cfg.steps,
        "losses": losses,
        "final_loss": float(np.mean(losses[-50:])),
        "cpu_seconds": time.process_time() - c0,
        "wall_seconds": time.perf_counter() - t0,
        "parameters": model.num_parameters(),
    }


def _check_meta(store: Path, cfg: SyntheticRunConfig) -> None:
    want = {"format": FORMAT, "version": VERSION, "config": cfg.identity(), "key": cfg.key()}
    check_meta(store, want, ("format", "version", "config"))


def _one_run(cfg, task, scheme, seed, batches, path, log) -> dict:
    threads = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        model, rec = train_run(task, scheme, seed, cfg, log=log)
        eval_seed = getattr(model.blocks[0].attn.scheme, "eval_seed", None)
        c0 = time.process_time()
        evals = {}
        for t in (task, *cfg.probes.get(task.label, ())):
            errs, counts = [], []
            for L in cfg.lengths:
                e, c = evaluate_errors(model, t, batches[t.label][L], chunk=cfg.eval_chunk,
                                       batch_tokens=cfg.eval_batch_tokens)  # fmt: skip
                errs.append(e)
                counts.append(c)
            evals[t.label] = {
                "task": t.spec(),
                "lengths": cfg.lengths,
                "sequences": [len(batches[t.label][L]) for L in cfg.lengths],
                "errors": errs,
                "counts": counts,
                "chance": t.chance,
            }
        eval_cpu = time.process_time() - c0
    finally:
        torch.set_num_threads(threads)
    losses = rec.pop("losses")
    rec["loss_every_100"] = [
        float(np.mean(losses[i : i + 100])) for i in range(0, len(losses), 100)
    ]
    blob = {
        "format": FORMAT,
        "version": VERSION,
        "task": task.spec(),
        "task_label": task.label,
        "scheme": scheme,
        "seed": int(seed),
        "scheme_options": scheme_options(scheme, cfg, seed, task.vocab_size),
        "eval_seed": eval_seed,
        "config": cfg.identity(),
        "key": cfg.key(),
        "train": rec,
        "eval": evals,
        "eval_cpu_seconds": eval_cpu,
        "threads": cfg.threads,
        "torch": torch.__version__,
        "code": code_identity(TRAINING_SOURCES),
    }
    write_json(path, blob)
    return blob


def run_store(cfg: SyntheticRunConfig, store, schemes=DEFAULT_SCHEMES, seeds=(0, 1, 2, 3, 4), *,
              log=print_progress, part=None) -> list[Path]:  # fmt: skip
    """Train and score every (task, scheme, seed) not yet in ``store`` (claim AT20).

    Parameters
    ----------
    cfg : SyntheticRunConfig
    store : path
        The store folder (created). Its ``meta.json`` must match ``cfg.identity()``.
    schemes : sequence of str
        Registered position schemes (default :data:`DEFAULT_SCHEMES`).
    seeds : sequence of int ≥ 0, distinct
    log : callable or None
        Progress lines: one per run (its errors at every length, CPU seconds), throttled
        lines during training (every ``cfg.progress_seconds``) and "already in the store"
        lines; default :func:`print_progress` (stderr, flushed), None for silence.
    part : (k, m), optional
        Take runs k, k + m, k + 2m, … of the seed-major list (to share the runs among m
        processes).

    Returns the run files written by this call. A store of another configuration raises
    ValueError; so do unknown schemes, repeated seeds and a bad ``part``.
    """
    if not isinstance(cfg, SyntheticRunConfig):
        raise TypeError(f"cfg must be a SyntheticRunConfig; got {type(cfg).__name__}")
    schemes = (schemes,) if isinstance(schemes, str) else tuple(schemes)
    if not schemes or len(set(schemes)) != len(schemes):
        raise ValueError(f"schemes must name distinct schemes; got {list(schemes)}")
    for s in schemes:
        if s not in SCHEMES:
            raise ValueError(f"schemes: unknown scheme {s!r}; known: {', '.join(sorted(SCHEMES))}")
    seeds = tuple(seeds)
    if not seeds or len(set(seeds)) != len(seeds) or any(
        isinstance(s, bool) or not isinstance(s, int | np.integer) or s < 0 for s in seeds
    ):  # fmt: skip
        raise ValueError(f"seeds must be distinct nonnegative integers; got {list(seeds)}")
    k, m = (0, 1) if part is None else part
    if not (isinstance(m, int) and m >= 1 and isinstance(k, int) and 0 <= k < m):
        raise ValueError(f"part must be (k, m) with 0 <= k < m; got {part!r}")
    say = log or (lambda s: None)
    store = Path(store)
    _check_meta(store, cfg)
    jobs = [(t, s, seed) for seed in seeds for t in cfg.tasks for s in schemes][k::m]
    batches: dict = {}
    written = []
    for i, (task, scheme, seed) in enumerate(jobs, 1):
        path = store / run_file(task, scheme, seed)
        head = f"[{i}/{len(jobs)}] {task.label} {scheme} s{seed}"
        if path.is_file():
            say(f"{head}: already in the store")
            continue
        for t in (task, *cfg.probes.get(task.label, ())):
            if t.label not in batches:
                batches[t.label] = eval_batches(t, cfg)
        blob = _one_run(cfg, task, scheme, seed, batches, path, log)
        rates = "; ".join(
            f"{lab}: " + " ".join(f"{e / max(c, 1):.3f}" for e, c in
                                  zip(ev["errors"], ev["counts"], strict=True))
            for lab, ev in blob["eval"].items()
        )  # fmt: skip
        say(f"{head}: error at {'/'.join(map(str, cfg.factors))}× = {rates} "
            f"(train {blob['train']['cpu_seconds']:.0f} CPU s, "
            f"eval {blob['eval_cpu_seconds']:.0f} CPU s)")  # fmt: skip
        written.append(path)
    return written


def load_store(store) -> dict:
    """``{"meta": meta.json, "runs": {(task label, scheme, seed): run record}}`` of a store.
    Raises ValueError when ``store`` has no ``meta.json``."""
    store = Path(store)
    meta = store / "meta.json"
    if not meta.is_file():
        raise ValueError(f"store {str(store)!r} has no meta.json")
    runs = {}
    for p in sorted(store.glob("*__*__s*.json")):
        r = json.loads(p.read_text())
        runs[(r["task_label"], r["scheme"], int(r["seed"]))] = r
    return {"meta": json.loads(meta.read_text()), "runs": runs}


def main(argv=None, cfg: SyntheticRunConfig | None = None) -> int:
    """``python -m posflow.simulate.models.synthetic_train --store DIR [--part k/m]
    [--seeds 0 1 2 3 4] [--schemes …] [--threads N]``: train the missing runs of a store
    (:func:`run_store`, resumable; ``--part k/m`` in m processes shares the runs). ``cfg``
    (tests) replaces the default :class:`SyntheticRunConfig`. Returns 0, or 2 with one line on
    stderr for bad input."""
    import argparse

    ap = argparse.ArgumentParser(
        prog="python -m posflow.simulate.models.synthetic_train",
        description="Train the synthetic AT20 store (flip-flop, associative recall) resumably.",
    )
    ap.add_argument("--store", required=True, help="store folder (created; resumed if present)")
    ap.add_argument("--part", default=None, help="k/m: runs k, k + m, … of the run list")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--schemes", nargs="+", default=list(DEFAULT_SCHEMES))
    ap.add_argument("--threads", type=int, default=1, help="torch threads per run")
    ap.add_argument("--device", default="cpu", help="torch device (default cpu)")
    ap.add_argument("--tasks", nargs="+", default=None, metavar="LABEL",
                    help="train only these tasks of the configuration (e.g. flipflop-p0.8)")
    for name, kind, what in (("train-len", int, "training length L_0"), ("steps", int,
                             "optimiser steps of every run"), ("batch-size", int, "batch size"),
                             ("n-layer", int, "layers"), ("n-head", int, "heads"),
                             ("d-model", int, "model width"), ("lr", float, "peak learning rate"),
                             ("warmup", int, "warm-up steps")):  # fmt: skip
        ap.add_argument(f"--{name}", type=kind, default=None, help=f"{what} (default: the "
                        "committed store's)")  # fmt: skip
    args = ap.parse_args(argv)
    try:
        part = None if args.part is None else _part(args.part)
        if cfg is None:
            kw = {k: getattr(args, k) for k in ("train_len", "steps", "batch_size", "n_layer",
                                                "n_head", "d_model", "lr", "warmup")}  # fmt: skip
            cfg = SyntheticRunConfig(threads=args.threads, device=args.device,
                                     **{k: v for k, v in kw.items() if v is not None})
        if args.tasks:  # tasks are not in the store's identity: a subset trains the same runs
            known = {t.label: t for t in cfg.tasks}
            bad = [t for t in args.tasks if t not in known]
            if bad:
                raise ValueError(f"--tasks: unknown task {bad[0]!r}; known: {', '.join(known)}")
            cfg = dataclasses.replace(cfg, tasks=tuple(known[t] for t in args.tasks))
        run_store(cfg, args.store, args.schemes, args.seeds, part=part)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
