"""Attention sinks of one model with the field's metric, beside a repeated-token control (issue 24,
item 5).

Per layer t, from one :func:`posflow.simulate.models.measure.measure` of N windows of n tokens
(per-head mean attention A_t^h, value-norm weights W_t, each layer's sliding window w_t):

* **heads above ε** — the share of heads h with Sink_ε score α_0^{t,h} > ε, where
  α_0^{t,h} = mean over the queries that see token 0 (``i < w_t``, query 0 included) of
  A_t^h[i, 0] (Gu et al., ICLR 2025, "When attention sink emerges in language models";
  :func:`posflow.simulate.models.sinks.sink_scores`); the model-level ``rate`` is the share of
  all (layer, head) pairs above ε (:func:`~posflow.simulate.models.sinks.sink_rate`);
* **two conventions of Sink_ε** (issue 41, item 7), both reported:

  - *mean, then threshold* (``heads_above``, ``rate``; posflow's stored numbers): α is taken of
    the attention averaged over the N sequences, then compared with ε once;
  - *threshold per sequence, then mean* (``heads_above_per_sequence``, ``rate_per_sequence``;
    what Gu et al.'s released code computes: ``compute_attention_sink`` in
    sail-sg/Attention-Sink thresholds every sample's scores and averages the indicators over
    samples, layers and heads): α of each sequence's own attention, 1[α > ε] averaged over the
    sequences (and the heads, and for the rate the layers).

  α is linear in A, so the mean of the per-sequence α is the α of the mean; the two conventions
  differ only by the threshold: a head that is a sink in most sequences but not in the mean
  (or the reverse) counts fractionally in the second. (SmolLM2-135M, n = 128, 16 windows,
  ε = 0.3: 68.5 % mean-then-threshold, 65.1 % per sequence);
* **first-token attention share** — the mean over heads and over the queries 1 ≤ i < min(n, w_t)
  (those that see token 0, without query 0, which sees only itself) of A_t^h[i, 0];
* **value-norm share of token 0** — the same mean of Ã_t[i, 0], Ã_t the value-norm kernel
  (rows of W_t normalised to sum 1, as :func:`~posflow.simulate.models.sinks.value_norm_kernels`
  does; Kobayashi et al. 2020).

For a global layer the two shares are the ``attention_on_0`` and ``value_share_of_0`` of
:func:`~posflow.simulate.models.sinks.sink_table`. The control (Gu et al., §3): the same N and n,
every token one identical id — by default the most frequent id of the windows (the smallest
such id on a tie). A sink that persists on identical tokens is positional, not lexical.

:func:`load_sinks` reads the per-model store that ``docs/sinks_study.py`` writes (package data,
``data/<model>/sinks.json``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = [
    "SINK_CONVENTIONS",
    "SINK_STORES",
    "SinkProfile",
    "SinkReport",
    "load_sinks",
    "repeated_token_control",
    "sink_profile",
    "sink_report",
]

# the two Sink_ε conventions, by the SinkProfile field that holds each (named in every output)
SINK_CONVENTIONS = {
    "rate": "mean, then threshold: Sink_ε of the attention averaged over the sequences",
    "rate_per_sequence": "threshold per sequence, then mean: Sink_ε of each sequence's "
    "attention, averaged over the sequences (Gu et al.'s released code)",
}
# the stored reports (package data of posflow.simulate, written by docs/sinks_study.py)
SINK_STORES = {"smollm2-135m": "data/smollm2/sinks.json", "gemma3-270m": "data/gemma3/sinks.json"}


@dataclass(frozen=True)
class SinkProfile:
    """Per-layer sink numbers of one input set (see the module docstring).

    Attributes
    ----------
    heads_above : ndarray, shape (L,)
        Share of heads with Sink_ε score > ε, in [0, 1].
    first_token_share : ndarray, shape (L,)
        Mean attention on token 0 (over heads and the queries i ≥ 1 that see it).
    value_share : ndarray, shape (L,)
        Mean value-norm-kernel weight of token 0 over the same queries.
    scores : ndarray, shape (L, H)
        The Sink_ε scores α_0^{t,h} of the mean attention.
    rate : float
        Share of all (layer, head) pairs above ε (the model-level Sink_ε), convention *mean,
        then threshold*.
    heads_above_per_sequence : ndarray, shape (L,), or None
        Convention *threshold per sequence, then mean*: the share of heads above ε in each
        sequence's own attention, averaged over the sequences (None: not measured per sequence).
    rate_per_sequence : float or None
        The same for all (layer, head) pairs: Gu et al.'s released convention.
    """

    heads_above: np.ndarray
    first_token_share: np.ndarray
    value_share: np.ndarray
    scores: np.ndarray
    rate: float
    heads_above_per_sequence: np.ndarray | None = None
    rate_per_sequence: float | None = None

    def to_dict(self) -> dict:
        """JSON-ready: lists of floats (the per-sequence convention only when measured)."""
        out = {k: np.asarray(getattr(self, k)).tolist() for k in _ARRAYS}
        out["rate"] = float(self.rate)
        if self.rate_per_sequence is not None:
            out["heads_above_per_sequence"] = np.asarray(self.heads_above_per_sequence).tolist()
            out["rate_per_sequence"] = float(self.rate_per_sequence)
        return out

    @classmethod
    def from_dict(cls, d: dict) -> SinkProfile:
        """Inverse of :meth:`to_dict` (KeyError/TypeError/ValueError on a malformed dict);
        a stored profile without the per-sequence convention reads it as None."""
        arrays = {k: np.asarray(d[k], dtype=np.float64) for k in _ARRAYS}
        each = d.get("rate_per_sequence")
        return cls(**arrays, rate=float(d["rate"]),
                   heads_above_per_sequence=None if each is None else np.asarray(
                       d["heads_above_per_sequence"], dtype=np.float64),
                   rate_per_sequence=None if each is None else float(each))  # fmt: skip


_ARRAYS = ("heads_above", "first_token_share", "value_share", "scores")


@dataclass(frozen=True)
class SinkReport:
    """Sink numbers of a model on text windows and on the repeated-token control.

    Attributes
    ----------
    architecture : str
        ``Measurement.architecture``.
    n, num_sequences : int
        Sequence length and number of sequences N (the same for text and control).
    eps : float
        The Sink_ε threshold ε.
    control_token : int
        The token id repeated in every control sequence.
    windows : tuple of L (int or None)
        Keys a query sees per layer (None: every earlier key at this n).
    text, control : SinkProfile
        Per-layer arrays (L,) and scores (L, H) of the windows and of the control.
    """

    architecture: str
    n: int
    num_sequences: int
    eps: float
    control_token: int
    windows: tuple
    text: SinkProfile
    control: SinkProfile

    @property
    def rate(self) -> float:
        """Model-level Sink_ε on the text, mean then threshold: share of (layer, head) pairs
        whose score of the sequence-mean attention exceeds ε."""
        return self.text.rate

    @property
    def rate_per_sequence(self) -> float | None:
        """Model-level Sink_ε on the text, threshold per sequence then mean (Gu et al.'s
        released code); None for a stored report measured before it was kept."""
        return self.text.rate_per_sequence

    def to_dict(self) -> dict:
        """JSON-ready dict (:meth:`from_dict` reads it back)."""
        return {
            "architecture": self.architecture,
            "n": int(self.n),
            "num_sequences": int(self.num_sequences),
            "eps": float(self.eps),
            "control_token": int(self.control_token),
            "windows": [None if w is None else int(w) for w in self.windows],
            "text": self.text.to_dict(),
            "control": self.control.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: dict) -> SinkReport:
        """Inverse of :meth:`to_dict` (KeyError/TypeError/ValueError on a malformed dict)."""
        return cls(
            architecture=str(d["architecture"]),
            n=int(d["n"]),
            num_sequences=int(d["num_sequences"]),
            eps=float(d["eps"]),
            control_token=int(d["control_token"]),
            windows=tuple(None if w is None else int(w) for w in d["windows"]),
            text=SinkProfile.from_dict(d["text"]),
            control=SinkProfile.from_dict(d["control"]),
        )


def _check_eps(eps) -> float:
    if isinstance(eps, bool) or not isinstance(eps, int | float | np.floating) or not 0 < eps < 1:
        raise ValueError(f"eps must be a number in (0, 1); got {eps!r}")
    return float(eps)


def sink_profile(
    attention, value_weights, *, eps: float = 0.3, windows=None, scores_per_sequence=None
) -> SinkProfile:
    """Per-layer Sink_ε share, first-token attention share and value-norm share of token 0.

    .. math::
        h_t = \\frac1H\\sum_h \\mathbb 1[\\alpha_0^{t,h} > \\epsilon],\\quad
        a_t = \\frac{1}{H|Q'_t|}\\sum_h\\sum_{i\\in Q'_t} A_t^h[i, 0],\\quad
        v_t = \\frac{1}{|Q'_t|}\\sum_{i\\in Q'_t} \\tilde A_t[i, 0],\\quad
        Q'_t = \\{1 \\le i < \\min(n, w_t)\\}

    Parameters
    ----------
    attention : array_like, shape (L, H, n, n), n >= 2
        Per-head mean attention (``Measurement.attention`` of ``measure(..., heads=True)``).
    value_weights : array_like, shape (L, n, n)
        ``Measurement.value_weights``.
    eps : float
        Threshold in (0, 1).
    windows : sequence of L (int or None), optional
        ``Measurement.windows``; None: every layer global. A window must be >= 2 (some query
        besides token 0 sees token 0).
    scores_per_sequence : array_like, shape (N, L, H), optional
        Each sequence's own Sink_ε scores (:func:`~posflow.simulate.models.sinks.sink_scores`
        of its attention); given, the profile also holds the convention *threshold per
        sequence, then mean*: ``heads_above_per_sequence[t] = mean_{s,h} 1[α_s^{t,h} > ε]`` and
        ``rate_per_sequence = mean_{s,t,h} 1[α_s^{t,h} > ε]``.

    Returns
    -------
    SinkProfile
        Cost O(L·H·n + L·n²). Raises ValueError naming the argument for bad shapes, values,
        windows or eps.
    """
    from posflow.simulate.models.sinks import sink_rate, sink_scores, value_norm_kernels

    eps = _check_eps(eps)
    A = np.asarray(attention, dtype=np.float64)
    if A.ndim != 4 or A.shape[-1] != A.shape[-2] or A.shape[-1] < 2:
        raise ValueError(f"attention must have shape (L, H, n, n) with n >= 2; got {A.shape}")
    L, _, n, _ = A.shape
    V = np.asarray(value_weights, dtype=np.float64)
    if V.shape != (L, n, n):
        raise ValueError(f"value_weights must have shape {(L, n, n)}; got {V.shape}")
    scores = sink_scores(A, windows=windows)  # validates attention and windows
    wins = [None] * L if windows is None else list(windows)
    if any(w is not None and w < 2 for w in wins):
        raise ValueError(f"windows must be >= 2 (a query i >= 1 must see token 0); got {wins}")
    K = np.stack([k.dense() for k in value_norm_kernels(V)])  # (L, n, n), rows sum to 1
    first, value = np.empty(L), np.empty(L)
    for t, w in enumerate(wins):
        q = slice(1, n if w is None else min(n, w))
        first[t] = A[t, :, q, 0].mean()
        value[t] = K[t, q, 0].mean()
    rate = float(sink_rate(A, eps=eps, windows=windows))
    each = each_rate = None
    if scores_per_sequence is not None:
        S = np.asarray(scores_per_sequence, dtype=np.float64)
        if S.ndim != 3 or S.shape[1:] != scores.shape or S.shape[0] < 1:
            raise ValueError(f"scores_per_sequence must have shape (N, {L}, {scores.shape[1]}) "
                             f"with N >= 1; got {S.shape}")  # fmt: skip
        if not np.isfinite(S).all():
            raise ValueError("scores_per_sequence must be finite")
        above = S > eps
        each, each_rate = above.mean(axis=(0, 2)), float(above.mean())
    return SinkProfile((scores > eps).mean(axis=1), first, value, scores, rate, each, each_rate)


def repeated_token_control(ids, control_token=None) -> np.ndarray:
    """Gu et al.'s repeated-token control: N sequences of n copies of one token id.

    Parameters
    ----------
    ids : array_like, shape (N, n)
        Non-negative integer token ids (the windows the control matches).
    control_token : int, optional
        The id to repeat; default the most frequent id of ``ids`` (the smallest on a tie).

    Returns
    -------
    ndarray, shape (N, n), int64, every entry the control token.
    """
    x = _ids(ids)
    tok = int(np.bincount(x.ravel()).argmax()) if control_token is None else control_token
    if isinstance(tok, bool) or not isinstance(tok, int | np.integer) or tok < 0:
        raise ValueError(f"control_token must be a non-negative integer; got {control_token!r}")
    return np.full(x.shape, int(tok), dtype=np.int64)


def _ids(ids) -> np.ndarray:
    if hasattr(ids, "detach"):  # a torch tensor
        ids = ids.detach().cpu().numpy()
    x = np.asarray(ids)
    if x.dtype.kind not in "iu" or x.ndim != 2 or x.shape[0] < 1 or x.shape[1] < 2:
        raise ValueError(
            f"ids must be an integer array of shape (N, n) with N >= 1, n >= 2; got "
            f"dtype {x.dtype}, shape {x.shape}"
        )
    if (x < 0).any():
        raise ValueError(f"ids must be non-negative token ids; got minimum {int(x.min())}")
    return x.astype(np.int64)


def sink_report(model, ids, *, eps: float = 0.3, control_token=None) -> SinkReport:
    """Per-layer sinks of ``model`` on ``ids`` and on the repeated-token control (issue 24).

    Per sequence s of x = ``ids`` and of x = :func:`repeated_token_control`, one measurement
    ``measure(model, x[s:s+1], heads=True, value_norms=True, influence=False, lambdas=False,
    qk=False)``; its Sink_ε scores give the convention *threshold per sequence, then mean*, and
    the mean of the N measurements (the dataset-mean attention and value-norm weights) is
    summarised by :func:`sink_profile` with the windows the measurement recorded (convention
    *mean, then threshold*). Both conventions are in each :class:`SinkProfile`.

    Parameters
    ----------
    model : Hugging Face causal LM of a supported family or posflow LM
        Eager attention (``load_pretrained(..., attention="eager")``): probabilities are needed.
    ids : array_like or LongTensor, shape (N, n), n >= 2
        Token ids in [0, vocab).
    eps : float
        Sink_ε threshold in (0, 1); Gu et al. use 0.3.
    control_token : int, optional
        The control's repeated id in [0, vocab); default the most frequent id of ``ids``.

    Returns
    -------
    SinkReport
        Cost: two forward passes over N sequences plus 2·L·H·n² float64 accumulators.
        Raises ValueError naming ``ids``, ``eps`` or ``control_token`` before any forward pass.
    """
    from posflow.simulate.models._hooks import _embeddings
    from posflow.simulate.models.measure import measure

    eps = _check_eps(eps)
    x = _ids(ids)
    vocab = _embeddings(model).num_embeddings
    if x.max() >= vocab:
        raise ValueError(f"ids must lie in [0, {vocab}); got maximum {int(x.max())}")
    control = repeated_token_control(x, control_token)
    tok = int(control[0, 0])
    if tok >= vocab:
        raise ValueError(f"control_token must lie in [0, {vocab}); got {control_token!r}")

    from posflow.simulate.models.sinks import sink_scores

    def profile(inputs):
        A, V, scores = 0.0, 0.0, []
        for s in range(len(inputs)):  # one sequence at a time: its own scores, then the means
            m = measure(model, inputs[s : s + 1], heads=True, value_norms=True,
                        influence=False, lambdas=False, qk=False)  # fmt: skip
            scores.append(sink_scores(m.attention, windows=m.windows))
            A, V = A + m.attention, V + m.value_weights
        N = len(inputs)
        return m, sink_profile(A / N, V / N, eps=eps, windows=m.windows,
                               scores_per_sequence=np.stack(scores))  # fmt: skip

    m, text = profile(x)
    _, ctrl = profile(control)
    windows = m.windows if m.windows is not None else (None,) * m.num_layers
    return SinkReport(m.architecture, m.n, len(x), eps, tok, tuple(windows), text, ctrl)


def load_sinks(model_key: str, *, path=None) -> dict:
    """The stored sink reports of ``model_key`` (written by ``docs/sinks_study.py``).

    Parameters
    ----------
    model_key : {"smollm2-135m", "gemma3-270m"}
    path : str or Path, optional
        Read this file instead of the package data ``SINK_STORES[model_key]``.

    Returns
    -------
    dict
        ``{"setup": {...}, "runs": {bos: {"convention": str, "seconds": float,
        "report": SinkReport}}}``; ``bos`` is the window convention, "prepend" (<bos> first)
        or "none" (windows cut from the token stream).

    Raises ValueError for an unknown ``model_key``, and naming the path for a missing or
    unreadable file.
    """
    if model_key not in SINK_STORES:
        raise ValueError(f"model_key must be one of {', '.join(SINK_STORES)}; got {model_key!r}")
    if path is None:
        from importlib import resources

        path = resources.files("posflow.simulate").joinpath(SINK_STORES[model_key])
    where = str(path)
    if not Path(where).is_file():
        raise ValueError(f"no stored sink report at {where} (run docs/sinks_study.py)")
    try:
        raw = json.loads(Path(where).read_text(encoding="utf-8"))
        runs = {
            bos: {
                "convention": str(r["convention"]),
                "seconds": float(r["seconds"]),
                "report": SinkReport.from_dict(r["report"]),
            }
            for bos, r in raw["runs"].items()
        }
        return {"setup": dict(raw["setup"]), "runs": runs}
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"unreadable sink report at {where}: {exc!r}") from None
