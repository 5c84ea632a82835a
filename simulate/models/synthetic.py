"""Synthetic train-short/test-long tasks with an exact error metric (claim AT20, issue 25).

A natural-text LM at 64 tokens barely needs position; these tasks do. Each task is a small
strategy object: :meth:`Task.sample` draws a batch of sequences from a
:class:`numpy.random.Generator` (vectorised), and :meth:`Task.error` counts the scored
positions whose argmax next-token prediction is wrong, so that an exact (Clopper–Pearson)
binomial interval follows (:func:`error_interval`).

A batch (:class:`TaskBatch`) holds, for B sequences of n tokens,

* ``tokens`` (B, n) int64 — the input ids, in [0, V);
* ``mask`` (B, n) bool — the scored positions t (the model's logits at t predict token t + 1);
* ``targets`` (B, n) int64 — the answer at every scored position (:data:`IGNORE` elsewhere).

Every answer is the next token of the sequence, ``targets[b, t] = tokens[b, t + 1]`` where
``mask[b, t]``, so a model trained on all next tokens and one trained on the answers alone are
scored alike. The error of a batch is

.. math:: \\hat e = \\frac{1}{N}\\sum_{(b,t):\\,m_{bt}} \\mathbf 1\\big[\\arg\\max_v
          \\mathrm{logits}_{btv} \\ne y_{bt}\\big],\\qquad N = \\sum_{b,t} m_{bt},

with ties broken toward the smaller id (NumPy's and torch's ``argmax``).

Tasks
-----
:class:`FlipFlop` — flip-flop language modelling (Liu, Ash, Goel, Krishnamurthy & Zhang 2023,
"Exposing Attention Glitches with Flip-Flop Language Modeling"). A sequence of T instruction/
bit pairs ``σ_1 x_1 σ_2 x_2 …``, σ ∈ {w, r, i}: the first instruction is always ``w``, the last
always ``r``, the others i.i.d. with probabilities (p_w, p_r, p_i); the bit after ``w`` or ``i``
is uniform, the bit after ``r`` is the last written bit. Their FFL(p) convention:
p = p_i, p_w = p_r = (1 − p)/2; the released data trains on FFL(0.8) with T = 256
(512 tokens) and tests out of distribution on the dense FFL(0.1) and the sparse FFL(0.98), where
the last write before a read lies far back (a mean gap of 1/p_w = 100 instructions; at short T
the forced first write is usually the only one). Token ids w, r, i, 0, 1 = 0 … 4 (their
mapping). Chance level 1/2: without the write, the read bit is a fair coin.

:class:`AssociativeRecall` — in-context associative recall: per sequence a random map
f : keys → values (f(k) i.i.d. uniform over V values), and a stream of m = n/2 pairs
``k_1 f(k_1) k_2 f(k_2) …`` with keys i.i.d. uniform over K keys. Every key that occurred
before in the sequence is a query; its answer is f(k). Chance accuracy 1/V, so chance error
1 − 1/V: without an earlier occurrence, f(k) is uniform and independent of the rest.

``Task.chance`` is the chance-level *error* (1/2 for flip-flop, 1 − 1/V for recall).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = [
    "IGNORE",
    "TASKS",
    "AssociativeRecall",
    "FlipFlop",
    "Task",
    "TaskBatch",
    "error_interval",
    "make_task",
]

IGNORE = -100
"""The target id of an unscored position (torch's ``cross_entropy`` ``ignore_index``)."""

TASKS: dict[str, type[Task]] = {}


def _register(cls):
    TASKS[cls.name] = cls
    return cls


def _pos_int(v, name: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
        raise ValueError(f"{name} must be a positive integer; got {v!r}")
    return int(v)


def _generator(rng) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, int | np.integer) and not isinstance(rng, bool) and rng >= 0:
        return np.random.default_rng(int(rng))
    raise TypeError(f"rng must be a numpy.random.Generator or a nonnegative int seed; got {rng!r}")


@dataclass(frozen=True)
class TaskBatch:
    """B sequences of n tokens with their scored positions and answers (see the module doc).

    ``tokens``, ``targets``: int64 arrays of shape (B, n); ``mask``: bool (B, n). Slicing
    (``batch[a:b]``) selects sequences.
    """

    tokens: np.ndarray
    targets: np.ndarray
    mask: np.ndarray

    def __post_init__(self):
        shapes = {a.shape for a in (self.tokens, self.targets, self.mask)}
        if len(shapes) != 1 or self.tokens.ndim != 2:
            raise ValueError(
                "tokens, targets and mask must share one shape (B, n); got "
                f"{self.tokens.shape}, {self.targets.shape}, {self.mask.shape}"
            )

    def __getitem__(self, rows) -> TaskBatch:
        if not isinstance(rows, slice):
            raise TypeError(f"rows must be a slice; got {type(rows).__name__}")
        return TaskBatch(self.tokens[rows], self.targets[rows], self.mask[rows])

    def __len__(self) -> int:
        return self.tokens.shape[0]

    @property
    def length(self) -> int:
        return self.tokens.shape[1]

    @property
    def count(self) -> int:
        """N, the number of scored positions."""
        return int(self.mask.sum())


class Task:
    """A synthetic sequence task: ``sample``, ``error``, ``vocab_size``, ``chance``, ``spec``.

    Subclasses set ``name`` and implement :meth:`_draw` (and :meth:`check_length` when lengths
    are restricted); :meth:`spec` returns the constructor arguments, so
    ``make_task(task.spec())`` rebuilds an equal task.
    """

    name = "base"
    vocab_size: int

    @property
    def chance(self) -> float:
        """The error rate of a predictor that lacks the answer's source (guessing uniformly)."""
        raise NotImplementedError

    def spec(self) -> dict:
        raise NotImplementedError

    @property
    def label(self) -> str:
        """A file-name-safe identifier of the task and its parameters, e.g. ``flipflop-p0.8``."""
        raise NotImplementedError

    def check_length(self, length) -> int:
        return _pos_int(length, "length")

    def _draw(self, batch_size: int, length: int, rng: np.random.Generator) -> TaskBatch:
        raise NotImplementedError

    def sample(self, batch_size, length, rng) -> TaskBatch:
        """Draw ``batch_size`` sequences of ``length`` tokens (claim AT20).

        Parameters
        ----------
        batch_size : int ≥ 1
        length : int
            Tokens per sequence n (each task states its valid lengths).
        rng : numpy.random.Generator or int
            The random source (an int seeds ``numpy.random.default_rng``).

        Returns
        -------
        TaskBatch with arrays of shape (batch_size, length). Cost O(B·n) time and memory
        (:class:`AssociativeRecall`: O(B·n log n)).
        Raises ValueError naming ``batch_size`` or ``length``, TypeError naming ``rng``.
        """
        b = _pos_int(batch_size, "batch_size")
        n = self.check_length(length)
        return self._draw(b, n, _generator(rng))

    def error(self, logits, batch: TaskBatch) -> tuple[int, int]:
        """(errors, N): scored positions whose argmax prediction differs from the answer.

        ê = errors / N (module doc). ``logits``: array or tensor of shape (B, n, V) with
        V = ``vocab_size``, finite. Exact binomial intervals: :func:`error_interval`.
        Raises ValueError naming ``logits`` (shape or non-finite values) or ``batch``.
        """
        if not isinstance(batch, TaskBatch):
            raise ValueError(f"batch must be a TaskBatch; got {type(batch).__name__}")
        if hasattr(logits, "detach"):  # a torch tensor: argmax where it lives
            shape = tuple(logits.shape)
            finite = bool(logits.isfinite().all())
            pred = logits.detach().argmax(-1).cpu().numpy() if finite else None
        else:
            arr = np.asarray(logits)
            shape = arr.shape
            finite = bool(np.isfinite(arr).all()) if arr.dtype.kind in "fc" else True
            pred = arr.argmax(-1) if finite and arr.ndim == 3 else None
        want = (*batch.tokens.shape, self.vocab_size)
        if shape != want:
            raise ValueError(f"logits must have shape (B, n, V) = {want}; got {shape}")
        if not finite:
            raise ValueError("logits must be finite (no NaN or inf)")
        wrong = batch.mask & (pred != batch.targets)
        return int(wrong.sum()), batch.count

    def __eq__(self, other):
        return type(other) is type(self) and other.spec() == self.spec()

    def __hash__(self):
        return hash((type(self).__name__, tuple(sorted(self.spec().items()))))

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.spec().items() if k != "name")
        return f"{type(self).__name__}({args})"


def _prob(v, name: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float | np.floating | np.integer):
        raise ValueError(f"{name} must be a number in [0, 1]; got {v!r}")
    v = float(v)
    if not 0.0 <= v <= 1.0:  # NaN fails too
        raise ValueError(f"{name} must be a number in [0, 1]; got {v!r}")
    return v


@_register
class FlipFlop(Task):
    """Flip-flop language FFL(p_i) of Liu et al. (2023) over n = 2T tokens (claim AT20).

    Parameters
    ----------
    p_ignore : float in [0, 1)
        p_i; 0.8 is their training distribution, 0.1 dense, 0.98 sparse (:meth:`sparse`).
    p_write, p_read : float, optional
        Default (1 − p_i)/2 each (their FFL(p) convention); given, the three must sum to 1
        (within 1e-12) and p_write must be > 0.

    Tokens: ``W, R, I, ZERO, ONE = 0, 1, 2, 3, 4`` (vocabulary 5); instruction t sits at token
    2t, its bit at 2t + 1. Scored positions: the tokens ``r`` (the model, at ``r``, predicts
    the bit that follows, which is the last written bit). ``length`` must be even and ≥ 4
    (at least the forced ``w`` and ``r``). Chance 1/2.
    """

    name = "flipflop"
    W, R, I, ZERO, ONE = 0, 1, 2, 3, 4
    vocab_size = 5

    def __init__(self, p_ignore: float = 0.8, p_write: float | None = None,
                 p_read: float | None = None):  # fmt: skip
        p_i = _prob(p_ignore, "p_ignore")
        if p_i == 1.0:
            raise ValueError("p_ignore must be < 1 (writes and reads need probability)")
        if (p_write is None) != (p_read is None):
            raise ValueError("p_write and p_read must be given together (or neither)")
        if p_write is None:
            p_w = p_r = (1.0 - p_i) / 2.0
        else:
            p_w, p_r = _prob(p_write, "p_write"), _prob(p_read, "p_read")
            if abs(p_w + p_r + p_i - 1.0) > 1e-12:
                raise ValueError(
                    f"p_write + p_read + p_ignore must equal 1; got {p_w} + {p_r} + {p_i}"
                )
            if p_w == 0.0:
                raise ValueError("p_write must be > 0")
        self.p_write, self.p_read, self.p_ignore = p_w, p_r, p_i
        self._explicit = p_write is not None

    @classmethod
    def sparse(cls) -> FlipFlop:
        """FFL(0.98): writes and reads 1 % each, so the last write before a read lies far back."""
        return cls(0.98)

    @classmethod
    def dense(cls) -> FlipFlop:
        """FFL(0.1): writes and reads 45 % each."""
        return cls(0.1)

    @property
    def chance(self) -> float:
        return 0.5

    def spec(self) -> dict:
        out = {"name": self.name, "p_ignore": self.p_ignore}
        if self._explicit:
            out.update(p_write=self.p_write, p_read=self.p_read)
        return out

    @property
    def label(self) -> str:
        s = f"flipflop-p{self.p_ignore:g}"
        if self._explicit:
            s += f"-w{self.p_write:g}-r{self.p_read:g}"
        return s

    def check_length(self, length) -> int:
        n = _pos_int(length, "length")
        if n % 2 or n < 4:
            raise ValueError(f"length must be even and >= 4 (instruction/bit pairs); got {n}")
        return n

    def _draw(self, B, n, rng):
        T = n // 2
        instr = rng.choice(3, size=(B, T), p=[self.p_write, self.p_read, self.p_ignore])
        instr[:, 0], instr[:, -1] = self.W, self.R
        bits = rng.integers(0, 2, size=(B, T))
        pos = np.arange(T)
        last_write = np.maximum.accumulate(np.where(instr == self.W, pos, 0), axis=1)  # (B, T)
        stored = np.take_along_axis(bits, last_write, axis=1)  # the register after step t
        is_read = instr == self.R
        data = np.where(is_read, stored, bits)
        tokens = np.empty((B, n), dtype=np.int64)
        tokens[:, 0::2] = instr
        tokens[:, 1::2] = self.ZERO + data
        mask = np.zeros((B, n), dtype=bool)
        mask[:, 0::2] = is_read
        targets = np.full((B, n), IGNORE, dtype=np.int64)
        targets[:, 0::2] = np.where(is_read, self.ZERO + stored, IGNORE)
        return TaskBatch(tokens, targets, mask)


@_register
class AssociativeRecall(Task):
    """In-context associative recall over K keys and V values (claim AT20; module doc).

    Tokens: keys 0 … K − 1, values K … K + V − 1 (vocabulary K + V); pair t sits at tokens
    2t (key) and 2t + 1 (its value). Scored positions: keys that occurred at an earlier pair;
    the answer is the value token K + f(k). ``length`` must be even and ≥ 2. Chance error
    1 − 1/V (chance accuracy 1/V).
    """

    name = "recall"

    def __init__(self, n_keys: int = 8, n_values: int = 8):
        self.n_keys = _pos_int(n_keys, "n_keys")
        self.n_values = _pos_int(n_values, "n_values")
        if self.n_values < 2:
            raise ValueError(f"n_values must be >= 2; got {self.n_values}")
        self.vocab_size = self.n_keys + self.n_values

    @property
    def chance(self) -> float:
        return 1.0 - 1.0 / self.n_values

    def spec(self) -> dict:
        return {"name": self.name, "n_keys": self.n_keys, "n_values": self.n_values}

    @property
    def label(self) -> str:
        return f"recall-k{self.n_keys}-v{self.n_values}"

    def check_length(self, length) -> int:
        n = _pos_int(length, "length")
        if n % 2:
            raise ValueError(f"length must be even (key/value pairs); got {n}")
        return n

    def _draw(self, B, n, rng):
        K, m = self.n_keys, n // 2
        keys = rng.integers(0, K, size=(B, m))
        table = rng.integers(0, self.n_values, size=(B, K))  # f, one map per sequence
        vals = np.take_along_axis(table, keys, axis=1)
        # seen[b, t]: key t occurred at an earlier pair — every pair but the first of its key
        order = np.argsort(keys, axis=1, kind="stable")
        sk = np.take_along_axis(keys, order, axis=1)
        repeat_sorted = np.zeros((B, m), dtype=bool)
        repeat_sorted[:, 1:] = sk[:, 1:] == sk[:, :-1]
        seen = np.empty_like(repeat_sorted)
        np.put_along_axis(seen, order, repeat_sorted, axis=1)
        tokens = np.empty((B, n), dtype=np.int64)
        tokens[:, 0::2] = keys
        tokens[:, 1::2] = K + vals
        mask = np.zeros((B, n), dtype=bool)
        mask[:, 0::2] = seen
        targets = np.full((B, n), IGNORE, dtype=np.int64)
        targets[:, 0::2] = np.where(seen, K + vals, IGNORE)
        return TaskBatch(tokens, targets, mask)


def make_task(spec) -> Task:
    """The task of ``spec``: a :class:`Task` (returned as is) or a dict ``{"name": …, **args}``
    as :meth:`Task.spec` returns. Raises ValueError naming ``spec`` for an unknown name."""
    if isinstance(spec, Task):
        return spec
    if not isinstance(spec, dict) or spec.get("name") not in TASKS:
        raise ValueError(
            f"spec must be a Task or a dict with name in {sorted(TASKS)}; got {spec!r}"
        )
    args = {k: v for k, v in spec.items() if k != "name"}
    return TASKS[spec["name"]](**args)


def error_interval(errors, count, level: float = 0.95) -> tuple[float, float]:
    """Exact (Clopper–Pearson) interval of the error rate from ``errors`` of ``count`` (AT20).

    ``scipy.stats.binomtest(errors, count).proportion_ci(level, method="exact")``; (0, 1) when
    ``count`` is 0. Raises ValueError for errors outside [0, count] or level outside (0, 1).
    """
    from scipy.stats import binomtest

    if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 0:
        raise ValueError(f"count must be a nonnegative integer; got {count!r}")
    if (isinstance(errors, bool) or not isinstance(errors, int | np.integer)
            or not 0 <= errors <= count):  # fmt: skip
        raise ValueError(f"errors must be an integer in [0, count = {count}]; got {errors!r}")
    if not (isinstance(level, float) and 0.0 < level < 1.0 and math.isfinite(level)):
        raise ValueError(f"level must be a number in (0, 1); got {level!r}")
    if count == 0:
        return 0.0, 1.0
    ci = binomtest(int(errors), int(count)).proportion_ci(level, method="exact")
    return float(ci.low), float(ci.high)
