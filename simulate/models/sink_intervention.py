"""A StreamingLLM-style causal test of the sink-aware kernel (e) (issue 41, item 7).

Kernel (e) (:func:`posflow.simulate.models.sinks.sink_aware_kernels`) assumes that the
attention a query puts on token 0 (the *sink*) carries no information: the rollout moves it onto
the query's own state. :func:`sink_intervention` tests that assumption in the forward pass
itself. In the intervened layers, for every head and every query row i ≥ 1 that sees token 0,
the mass ``m_i = p[i, 0]`` is moved (:func:`~posflow.simulate.models._sink_edit.move_sink`)

* ``"diagonal"`` — onto the query's own key, ``p'[i, i] = p[i, i] + m_i`` (what (e) assumes);
* ``"uniform"`` — evenly onto the row's other visible keys ``1 ≤ j ≤ i`` inside the layer's
  window (the control: the same mass moved without a preferred place);
* ``"drop"`` (optional) — nowhere: the sink's value term ``m_i v_0`` is removed, the row sums
  to 1 − m_i,

then ``out = p' v``. The edit runs inside the attention function the model calls through
transformers' attention interface (the project's eager re-implementation, softmax in float32,
:mod:`~posflow.simulate.models._interface`; posflow's LM: a hook on its probabilities), in the
model's own dtype. The unintervened baseline runs through the same function without an edit.

Measured per window s (N windows of n tokens), for the baseline and for every condition c
(one layer alone, or all layers together) and target k:

* **next-token loss** — ``NLL_s = −(1/(n−1)) Σ_{i<n−1} log softmax(logits_i)[x_{i+1}]`` in nats
  (log-softmax in float32 or better); ``ΔNLL = mean_s (NLL_s^{c,k} − NLL_s^0)`` with a two-sided
  Student t interval over the N paired window differences (df = N − 1);
* **gradient influence** — ``‖∂p*/∂e_j‖`` per window exactly as
  :func:`posflow.simulate.models.measure.measure` defines it (p* the top next-token probability
  at the last position, each model its own argmax), pooled over windows and normalised to sum 1;
  ``W1/(n−1)`` between the intervened and the baseline profile (positions 0 … n−1) and the change
  of the profile's mass on token 0, each with a percentile bootstrap over windows (windows
  resampled with replacement, the same resample for both profiles; seeded).

Cost: one no-grad forward and one forward + backward pass of the N windows per (condition,
target) and for the baseline: (C·K + 1) of each, C = L + 1 conditions for ``layers="each"``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from posflow.simulate.models._layouts import LAYOUTS
from posflow.simulate.models._sink_edit import TARGETS, Intervention

__all__ = ["INTERVENABLE", "TARGETS", "SinkIntervention", "architecture_of", "sink_intervention",
           "t_interval", "w1_positions"]  # fmt: skip

# model types whose attention probabilities the intervention can edit: posflow's LM and the
# families on transformers' attention interface (GPT-2, BLOOM, Falcon, MPT compute theirs inline)
INTERVENABLE = ("posflow", *LAYOUTS)


def architecture_of(spec) -> str:
    """The ``model_type`` of an installed model name, a Hugging Face checkpoint folder
    (config.json) or a ``.gguf`` file (its header), read without loading weights; "posflow"
    for any other existing file (a posflow checkpoint). ValueError naming ``spec`` when it
    names nothing readable (an installed name that is not installed: the install command)."""
    import json
    from pathlib import Path

    from posflow.simulate.models._install import GGUF_MODEL_TYPES, gguf_architecture
    from posflow.simulate.models.hub import KNOWN_MODELS, model_path

    path = model_path(spec) if spec in KNOWN_MODELS else Path(spec)
    if path.is_dir():
        try:
            return str(json.loads((path / "config.json").read_text(encoding="utf-8"))["model_type"])
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{str(spec)!r} has no readable config.json with a model_type "
                             f"({type(exc).__name__})") from None  # fmt: skip
    if path.suffix == ".gguf":
        arch = gguf_architecture(path)
        return GGUF_MODEL_TYPES.get(arch, arch)
    if not path.is_file():
        raise ValueError(f"{str(spec)!r} is neither an installed model, a folder nor a file")
    return "posflow"


def w1_positions(p, q) -> np.ndarray:
    """``W1/(n−1)`` between profiles over positions 0 … n−1 (last axis; rows sum to 1):
    ``Σ_j |P_j − Q_j| / (n − 1)`` with P, Q the cumulative sums (the Wasserstein-1 distance of
    scipy.stats.wasserstein_distance on the positions, divided by n − 1)."""
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    n = p.shape[-1]
    return np.abs(np.cumsum(p - q, axis=-1))[..., :-1].sum(axis=-1) / (n - 1)


def t_interval(d, confidence: float) -> np.ndarray:
    """Two-sided Student t interval of the mean of ``d`` over its last axis (N ≥ 2 samples),
    shape ``d.shape[:-1] + (2,)``: mean ± t_{(1+c)/2, N−1} · sd / √N."""
    from scipy.stats import t as student_t

    d = np.asarray(d, dtype=np.float64)
    N = d.shape[-1]
    half = student_t.ppf(0.5 + confidence / 2, N - 1) * d.std(axis=-1, ddof=1) / np.sqrt(N)
    mean = d.mean(axis=-1)
    return np.stack([mean - half, mean + half], axis=-1)


@dataclass(frozen=True)
class SinkIntervention:
    """What :func:`sink_intervention` measured (NumPy float64 arrays; C conditions, K targets,
    N windows, L layers, n tokens).

    Attributes
    ----------
    architecture : str
    n, num_sequences, num_layers : int
    targets : tuple of K str
    conditions : tuple of C tuple of int
        The intervened layers of each condition (one layer, or all L).
    fraction : float
        Share of the token-0 mass moved.
    confidence : float
        Level of every interval.
    resamples, seed : int
        Bootstrap resamples over windows and their seed.
    attention_on_0 : ndarray, shape (N, L)
        Baseline attention on token 0 per window and layer: the mean over heads and over the
        rows i ≥ 1 that see token 0 of p[i, 0] (the mass a full intervention moves).
    nll_base : ndarray, shape (N,)
    nll : ndarray, shape (C, K, N)
        Mean next-token loss per window (nats).
    influence_base : ndarray, shape (N, n)
    influence : ndarray, shape (C, K, N, n)
        Raw gradient influence ``‖∂p*/∂e_j‖`` per window.
    dnll, w1, dmass0 : ndarray, shape (C, K)
        ΔNLL (mean over windows), W1/(n−1) of the pooled profiles, Δ mass on token 0.
    dnll_interval, w1_interval, dmass0_interval : ndarray, shape (C, K, 2)
        t interval (ΔNLL) and bootstrap percentile intervals (W1, Δ mass on token 0).
    """

    architecture: str
    n: int
    num_sequences: int
    num_layers: int
    targets: tuple
    conditions: tuple
    fraction: float
    confidence: float
    resamples: int
    seed: int
    attention_on_0: np.ndarray
    nll_base: np.ndarray
    nll: np.ndarray
    influence_base: np.ndarray
    influence: np.ndarray
    dnll: np.ndarray
    dnll_interval: np.ndarray
    w1: np.ndarray
    w1_interval: np.ndarray
    dmass0: np.ndarray
    dmass0_interval: np.ndarray

    @property
    def labels(self) -> tuple:
        """One label per condition: the layer index, or "all"."""
        L = self.num_layers
        return tuple("all" if len(c) == L and L > 1 else ",".join(map(str, c))
                     for c in self.conditions)  # fmt: skip

    def profile(self, c=None, target=None) -> np.ndarray:
        """The pooled, normalised influence profile (n,) of condition ``c`` and ``target`` (the
        baseline when both are None)."""
        G = self.influence_base if c is None else self.influence[c, self.targets.index(target)]
        p = G.mean(axis=0)
        return p / p.sum()

    def contrast(self, a: str = "diagonal", b: str = "uniform") -> dict:
        """Target ``a`` against target ``b`` per condition, paired over windows: ``nll`` (C,)
        = mean_s (NLL_s^a − NLL_s^b) with its t interval ``nll_interval`` (C, 2), and ``w1``
        (C,) = W1_a − W1_b (distances to the baseline) with a bootstrap percentile interval
        ``w1_interval`` (C, 2) from the same resamples as the W1 intervals. Upper ends below 0
        say that moving the sink to ``a`` changes the loss (the influence) less than to ``b``.
        """
        for name, v in (("a", a), ("b", b)):
            if v not in self.targets:
                raise ValueError(f"{name} must be one of the measured targets "
                                 f"{', '.join(self.targets)}; got {v!r}")  # fmt: skip
        ia, ib = self.targets.index(a), self.targets.index(b)
        d = self.nll[:, ia] - self.nll[:, ib]
        boot = _boot_w1(self.influence_base, self.influence[:, [ia, ib]], self.resamples,
                        self.seed)  # (C, 2, R)  # fmt: skip
        diff = boot[:, 0] - boot[:, 1]
        return {
            "nll": d.mean(axis=-1),
            "nll_interval": t_interval(d, self.confidence),
            "w1": self.w1[:, ia] - self.w1[:, ib],
            "w1_interval": _interval(diff, self.confidence),
        }

    def table(self) -> list[dict]:
        """One row per (condition, target): layers, target, moved attention (mean attention on
        token 0 at the intervened layers × fraction), ΔNLL, W1/(n−1), Δ mass on token 0, each
        with its interval as (low, high)."""
        moved = self.attention_on_0.mean(axis=0)  # (L,)
        rows = []
        for c, layers in enumerate(self.conditions):
            for k, target in enumerate(self.targets):
                rows.append({
                    "layers": self.labels[c], "target": target,
                    "moved": float(self.fraction * moved[list(layers)].mean()),
                    "dnll": float(self.dnll[c, k]),
                    "dnll_interval": _pair(self.dnll_interval[c, k]),
                    "w1": float(self.w1[c, k]), "w1_interval": _pair(self.w1_interval[c, k]),
                    "dmass0": float(self.dmass0[c, k]),
                    "dmass0_interval": _pair(self.dmass0_interval[c, k]),
                })  # fmt: skip
        return rows

    def to_dict(self) -> dict:
        """JSON-ready summary: the setting, the conventions, the table and the contrasts."""
        out = {
            "architecture": self.architecture, "n": self.n, "windows": self.num_sequences,
            "layers": self.num_layers, "targets": list(self.targets),
            "fraction": self.fraction, "confidence": self.confidence,
            "resamples": self.resamples, "seed": self.seed,
            "intervals": "ΔNLL: Student t over windows (paired, df = N - 1); W1/(n-1) and Δ mass "
            "on token 0: percentile bootstrap over windows (paired resamples)",
            "nll_base": float(self.nll_base.mean()),
            "attention_on_0": self.attention_on_0.mean(axis=0).tolist(),
            "rows": self.table(),
        }  # fmt: skip
        if {"diagonal", "uniform"} <= set(self.targets):
            con = self.contrast("diagonal", "uniform")
            out["diagonal_minus_uniform"] = [
                {"layers": lab, "dnll": float(con["nll"][c]),
                 "dnll_interval": _pair(con["nll_interval"][c]), "w1": float(con["w1"][c]),
                 "w1_interval": _pair(con["w1_interval"][c])}
                for c, lab in enumerate(self.labels)
            ]  # fmt: skip
        return out


def _pair(x) -> list:
    return [float(x[0]), float(x[1])]


def _boot_w1(base, infl, resamples: int, seed: int, mass0: bool = False):
    """Bootstrap over windows: (..., R) W1/(n−1) (or Δ mass on token 0) of the pooled profiles
    of ``infl`` (..., N, n) against ``base`` (N, n), both from the same resampled windows."""
    N = base.shape[0]
    idx = np.random.default_rng(seed).integers(0, N, size=(resamples, N))
    counts = np.zeros((resamples, N))  # how often each window is drawn: pooled = counts @ G
    np.add.at(counts, (np.arange(resamples)[:, None], idx), 1.0)
    pb = counts @ base  # (R, n)
    pb /= pb.sum(axis=-1, keepdims=True)
    pc = np.einsum("rs,...sj->...rj", counts, infl)  # (..., R, n)
    pc /= pc.sum(axis=-1, keepdims=True)
    return pc[..., 0] - pb[..., 0] if mass0 else w1_positions(pc, pb)


def _interval(boot, confidence: float) -> np.ndarray:
    lo, hi = (1 - confidence) / 2, (1 + confidence) / 2
    return np.stack([np.quantile(boot, lo, axis=-1), np.quantile(boot, hi, axis=-1)], axis=-1)


def _conditions(layers, L: int) -> tuple:
    if isinstance(layers, str):
        if layers not in ("each", "all"):
            raise ValueError(f"layers must be 'each', 'all' or a sequence of layer indices; "
                             f"got {layers!r}")  # fmt: skip
        each = range(L) if layers == "each" else ()
    else:
        try:
            each = list(layers)
        except TypeError:
            raise TypeError(f"layers must be 'each', 'all' or a sequence of layer indices; "
                            f"got {layers!r}") from None  # fmt: skip
        bad = [t for t in each if isinstance(t, bool) or not isinstance(t, int | np.integer)
               or not 0 <= t < L]  # fmt: skip
        if bad or not each or len(set(each)) != len(each):
            raise ValueError(f"layers must be distinct integers in [0, {L - 1}] (at least one); "
                             f"got {layers!r}")  # fmt: skip
    conds = [(int(t),) for t in each]
    if L > 1 or not conds:
        conds.append(tuple(range(L)))
    return tuple(conds)


def _targets(target) -> tuple:
    names = (target,) if isinstance(target, str) else target
    try:
        names = tuple(names)
    except TypeError:
        raise TypeError(f"target must be a name or a sequence of names from "
                        f"{', '.join(TARGETS)}; got {target!r}") from None  # fmt: skip
    if not names or any(t not in TARGETS for t in names) or len(set(names)) != len(names):
        raise ValueError(f"target must be distinct names from {', '.join(TARGETS)}; "
                         f"got {target!r}")  # fmt: skip
    return names


def _number(x, name: str, lo: float, hi: float, open_lo: bool = False) -> float:
    ok = not isinstance(x, bool) and isinstance(x, int | float | np.integer | np.floating)
    if not ok or not np.isfinite(x) or not (lo < x if open_lo else lo <= x) or not x <= hi:
        left = "(" if open_lo else "["
        raise ValueError(f"{name} must be a number in {left}{lo:g}, {hi:g}]; got {x!r}")
    return float(x)


def _count(x, name: str, least: int) -> int:
    if isinstance(x, bool) or not isinstance(x, int | np.integer) or x < least:
        raise ValueError(f"{name} must be an integer >= {least}; got {x!r}")
    return int(x)


def _nll(model, batch) -> torch.Tensor:
    """Mean next-token loss (B,) of the windows ``batch`` (B, n), in nats."""
    logits = model(batch) if hasattr(model, "tok_emb") else model(
        input_ids=batch, use_cache=False).logits  # fmt: skip
    logp = torch.log_softmax(logits[:, :-1].to(torch.promote_types(logits.dtype, torch.float32)),
                             dim=-1)  # fmt: skip
    return -logp.gather(-1, batch[:, 1:, None])[..., 0].double().mean(dim=1)


def sink_intervention(
    model,
    ids,
    *,
    layers="each",
    target=("diagonal", "uniform"),
    fraction: float = 1.0,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    batch_size=None,
    progress=None,
) -> SinkIntervention:
    """Move the attention on token 0 in the forward pass; measure loss and influence changes.

    See the module docstring for the edit and every quantity. Tests the assumption of kernel
    (e) (claims PB15 and its posflow sibling): if the sink's mass carried no information, moving
    it to the diagonal would change the loss and the influence profile little — less than the
    same mass spread uniformly.

    Parameters
    ----------
    model : posflow LM or Hugging Face causal LM of a family on the attention interface
        (``_layouts.LAYOUTS``: Llama, Gemma, Qwen, …); any attention implementation (the pass
        is switched to the intervening function and back). GPT-2, BLOOM, Falcon and MPT (hand
        adapters: attention computed inline) are refused.
    ids : array_like or LongTensor, shape (N, n), N >= 2, n >= 2
        Token windows in [0, vocab).
    layers : "each", "all" or sequence of int
        "each": every layer alone, then all L layers together (C = L + 1 conditions); "all":
        all layers together only; a sequence: those layers each alone, then all together.
    target : str or sequence of str from ("diagonal", "uniform", "drop")
    fraction : float in [0, 1]
        Share of each row's token-0 mass moved (0: the identity, bitwise).
    confidence : float in (0, 1)
    resamples : int >= 1
        Bootstrap resamples over windows (seeded by ``seed``).
    batch_size : int >= 1, optional
        Windows per pass (default: all for the influence pass; the loss pass keeps its logits
        near 256 MiB).
    progress : bool or None
        Progress over the passes on stderr (a bar on a terminal, plain lines otherwise).

    Returns
    -------
    SinkIntervention
        Cost: 2·(C·K + 1) passes over the N windows (one of each with a backward pass).
        Raises ValueError/TypeError naming the argument before any forward pass.
    """
    from posflow.simulate._progress import progress as progress_of
    from posflow.simulate.models._adapters import adapter_for
    from posflow.simulate.models._hooks import _as_ids, _embeddings
    from posflow.simulate.models.measure import measure

    adapter = adapter_for(model, probabilities=False)
    if adapter.name not in INTERVENABLE:
        raise ValueError(
            f"model: the sink intervention edits attention probabilities through transformers' "
            f"attention interface or posflow's LM; the {adapter.name} adapter computes its "
            "attention inline"
        )
    emb = _embeddings(model)
    x = _as_ids(ids, None, emb.num_embeddings)
    N, n = x.shape
    if N < 2:
        raise ValueError(f"ids must hold N >= 2 windows (intervals over windows); got {N}")
    top = adapter.max_length(model)
    if top is not None and n > top:
        raise ValueError(f"ids: n = {n} exceeds the model's maximum sequence length {top}")
    blocks = adapter.blocks(model)
    L = len(blocks)
    conds, targets = _conditions(layers, L), _targets(target)
    fraction = _number(fraction, "fraction", 0.0, 1.0)
    confidence = _number(confidence, "confidence", 0.0, 1.0 - 1e-12, open_lo=True)
    resamples, seed = _count(resamples, "resamples", 1), _count(seed, "seed", 0)
    if batch_size is not None:
        batch_size = _count(batch_size, "batch_size", 1)
    if progress not in (None, True, False):
        raise TypeError(f"progress must be True, False or None; got {progress!r}")
    vocab = int(getattr(getattr(model, "config", None), "vocab_size", 0) or emb.num_embeddings)
    B_loss = batch_size or max(1, min(N, (1 << 28) // (4 * n * vocab)))
    device = next(model.parameters()).device
    K = len(targets)
    att0 = np.zeros((N, L))

    def tally_at(s0):
        def tally(t, p, visible):
            rows = visible[..., 1:, 0].to(p.dtype)  # (B or 1, 1, n-1): rows i >= 1 that see 0
            share = (p[..., 1:, 0].detach() * rows).sum(-1) / rows.sum(-1).clamp_min(1)
            att0[s0 : s0 + p.shape[0], t] = share.mean(dim=1).double().cpu().numpy()

        return tally

    def run(edit, plan, with_tally=False):
        """(NLL (N,), raw influence (N, n)) of the passes with ``plan`` (layers, target)."""
        nll = torch.empty(N, dtype=torch.float64)
        with torch.no_grad():
            for s in range(0, N, B_loss):
                edit.set(plan[0], plan[1], plan[2], tally_at(s) if with_tally else None)
                nll[s : s + B_loss] = _nll(model, x[s : s + B_loss].to(device)).cpu()
        edit.set(plan[0], plan[1], plan[2])
        m = measure(model, x, lambdas=False, attention=False, qk=False, influence=True,
                    batch_size=batch_size)  # fmt: skip
        return nll.numpy(), m.influence_per_sequence

    was_training = model.training
    model.eval()
    nll = np.empty((len(conds), K, N))
    infl = np.empty((len(conds), K, N, n))
    try:
        with Intervention(model, adapter, blocks) as edit, progress_of(
            len(conds) * K + 1, "sink intervention", enabled=bool(progress), every=10.0
        ) as bar:  # fmt: skip
            nll0, infl0 = run(edit, (range(L), targets[0], 0.0), with_tally=True)  # identity
            bar.advance(detail="baseline")
            for c, layers_c in enumerate(conds):
                for k, tgt in enumerate(targets):
                    nll[c, k], infl[c, k] = run(edit, (layers_c, tgt, fraction))
                    bar.advance(detail=f"layers {layers_c[0] if len(layers_c) == 1 else 'all'}"
                                f" {tgt}")  # fmt: skip
    finally:
        model.train(was_training)
    d = nll - nll0
    boot_w1 = _boot_w1(infl0, infl, resamples, seed)
    boot_m0 = _boot_w1(infl0, infl, resamples, seed, mass0=True)
    p0 = infl0.mean(axis=0) / infl0.mean(axis=0).sum()
    pc = infl.mean(axis=2)
    pc /= pc.sum(axis=-1, keepdims=True)
    return SinkIntervention(
        architecture=adapter.name, n=n, num_sequences=N, num_layers=L, targets=targets,
        conditions=conds, fraction=fraction, confidence=confidence, resamples=resamples,
        seed=seed, attention_on_0=att0, nll_base=nll0, nll=nll, influence_base=infl0,
        influence=infl, dnll=d.mean(axis=-1), dnll_interval=t_interval(d, confidence),
        w1=w1_positions(pc, p0), w1_interval=_interval(boot_w1, confidence),
        dmass0=pc[..., 0] - p0[0], dmass0_interval=_interval(boot_m0, confidence),
    )  # fmt: skip
