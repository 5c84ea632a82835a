"""Measuring a causal LM with forward hooks: λ_t, mean attention, mean q·k, gradient influence.

Conventions of [A] (§2.2, §2.6, §4.3), claims PB15 and PB16:

* **mixing coefficient** — for decoder block t with input hidden state x_t and attention
  sub-layer output a_t (after the output projection, before the residual add), per token
  ``r = ‖a_t‖₂ / (‖x_t‖₂ + ‖a_t‖₂)`` (norms over the hidden dimension, in float32 or better);
  averaged over positions, giving one value per sequence; λ_t is the mean over sequences and
  ``lambdas_std`` the standard deviation over sequences (ddof = 0);
* **attention** — dataset-mean post-softmax probabilities per layer and head, (L, H, n, n);
  the kernel A_t is the head average;
* **raw q·k** — dataset-mean q·kᵀ per layer and head, (L, H, n, n), *unscaled* (no 1/√d_head,
  no ALiBi; rotary transforms included); content ``b`` = mean strictly-lower entry,
  ``c`` = mean diagonal − b, in raw units or divided by √d_head (``scale="sqrt_d"``);
* **gradient influence** — ``‖∂p*/∂e_j‖₂`` over the embedding dimension, p* the probability of
  the argmax next token at the last position (softmax in float32 or better), e_j the output of
  the input-embedding layer; averaged over sequences and normalised to sum 1.

Hugging Face models run the "eager" attention (the only one that returns probabilities);
where its eager path computes something else than the model's default path, the adapter's
``prepare`` hooks restore the model's computation (Falcon with ALiBi in transformers 5.x adds the
bias twice in eager mode; checked against sdpa in the tests).

Memory: sequences run in batches (``batch_size``), the (L, H, n, n) sums are accumulated in
float64 in query-position chunks (``chunk`` rows at a time), one layer at a time, so the peak
is the model's own activations for one batch plus 2·L·H·n² float64 accumulators (2.4 GB for a
125M-parameter GPT-2 at n = 1024; ``attention=False``/``qk=False`` drop them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from posflow.simulate._validate import ensure_fits
from posflow.simulate.kernels import DenseKernel, dense_kernel
from posflow.simulate.models._adapters import SUPPORTED, adapter_for
from posflow.simulate.models._hooks import (
    _as_ids,
    _auto_batch,
    _embeddings,
    _forward_logits,
    _Recorder,
)

__all__ = [
    "SUPPORTED",
    "Measurement",
    "content_scores",
    "gradient_influence",
    "mean_attention",
    "mean_qk",
    "measure",
    "measured_kernels",
    "mixing_coefficients",
]

ROW_TOL = 1e-4  # float32 softmax rows sum to 1 within ~1e-6; anything worse is not a softmax


@dataclass
class Measurement:
    """What :func:`measure` recorded (NumPy float64 arrays; None when not requested)."""

    architecture: str
    n: int
    num_sequences: int
    num_heads: int
    d_head: int
    lambdas: np.ndarray | None  # (L,)
    lambdas_std: np.ndarray | None  # (L,)
    lambda_per_sequence: np.ndarray | None  # (N, L)
    attention: np.ndarray | None  # (L, H, n, n)
    qk: np.ndarray | None  # (L, H, n, n), raw
    influence: np.ndarray | None  # (n,), sums to 1
    influence_raw: np.ndarray | None  # (n,), mean ‖∂p*/∂e_j‖
    slopes: np.ndarray | None  # (H,) ALiBi slopes in logit units, or None
    num_layers: int = 0
    value_weights: np.ndarray | None = None  # (L, n, n) mean Σ_h α_ij^h ‖W_O^h v_j^h‖
    layer_influence: np.ndarray | None = None  # (L, n) mean ‖∂p*/∂x_t[j]‖, rows sum to 1
    influence_per_sequence: np.ndarray | None = None  # (N, n) ‖∂p*/∂e_j‖ of each sequence
    qk_sums: np.ndarray | None = None  # (L, H, 2) mean Σ_i q_i·k_i and Σ_{j<i} q_i·k_j

    def bootstrap_influence(self, reps: int = 1000, seed: int = 0) -> np.ndarray:
        """Influence profiles of ``reps`` bootstrap resamples of the sequences, (reps, n).

        Each resample draws N sequences with replacement and normalises the mean of their
        ``‖∂p*/∂e_j‖`` to sum 1, as :attr:`influence` does for the sample (seeded; the same
        ``seed`` gives the same resamples on every run and thread count).
        """
        if self.influence_per_sequence is None:
            raise ValueError("influence was not measured; call measure(..., influence=True)")
        if isinstance(reps, bool) or not isinstance(reps, int) or reps < 1:
            raise ValueError(f"reps must be a positive integer; got {reps!r}")
        G = self.influence_per_sequence
        idx = np.random.default_rng(seed).integers(0, G.shape[0], size=(reps, G.shape[0]))
        out = G[idx].mean(axis=1)
        return out / out.sum(axis=1, keepdims=True)

    def kernels(self) -> list[DenseKernel]:
        """Head-averaged measured kernels A_t (see :func:`measured_kernels`)."""
        if self.attention is None:
            raise ValueError("attention was not measured; call measure(..., attention=True)")
        return measured_kernels(self.attention)

    def content(self, scale: str = "sqrt_d") -> tuple[np.ndarray, np.ndarray]:
        """Content (b, c), each (L, H), from the mean raw q·k (see :func:`content_scores`).

        With only the sums recorded (``measure(..., qk="summary")``) the same b and c follow
        from them: b = Σ_{j<i} S_ij / (n(n−1)/2), c = Σ_i S_ii / n − b.
        """
        if scale not in ("sqrt_d", "raw"):
            raise ValueError(f"scale must be 'sqrt_d' or 'raw'; got {scale!r}")
        if self.qk is not None:
            return content_scores(self.qk, d_head=self.d_head if scale == "sqrt_d" else None)
        if self.qk_sums is None:
            raise ValueError("q·k was not measured; call measure(..., qk=True)")
        s = np.sqrt(self.d_head) if scale == "sqrt_d" else 1.0
        n = self.n
        b = self.qk_sums[..., 1] / (n * (n - 1) / 2) / s
        return b, self.qk_sums[..., 0] / n / s - b


def content_scores(qk_mean, *, d_head: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """[A]'s content model ``C = b 11ᵀ + c I`` fitted to mean q·k matrices (claim PB15).

    .. math::
        b = \\frac{2}{n(n-1)} \\sum_{j<i} S_{ij}, \\qquad c = \\frac1n \\sum_i S_{ii} - b,
        \\qquad S = \\overline{q k^\\top} / s

    with ``s = √d_head`` when ``d_head`` is given (logit units of a model that scales q·k by
    1/√d_head) and ``s = 1`` otherwise ([A]'s released configs use the raw scores).

    Parameters
    ----------
    qk_mean : array_like, shape (..., n, n), n >= 2
    d_head : int, optional

    Returns
    -------
    b, c : ndarray, shape (...)
    """
    S = np.asarray(qk_mean, dtype=np.float64)
    if S.ndim < 2 or S.shape[-1] != S.shape[-2] or S.shape[-1] < 2:
        raise ValueError(f"qk_mean must have shape (..., n, n) with n >= 2; got {S.shape}")
    if not np.isfinite(S).all():
        raise ValueError("qk_mean must be finite")
    if d_head is not None:
        if isinstance(d_head, bool) or not isinstance(d_head, int | np.integer) or d_head < 1:
            raise ValueError(f"d_head must be a positive integer; got {d_head!r}")
        S = S / np.sqrt(d_head)
    n = S.shape[-1]
    i, j = np.tril_indices(n, -1)
    b = S[..., i, j].mean(axis=-1)
    c = np.diagonal(S, axis1=-2, axis2=-1).mean(axis=-1) - b
    return b, c


def measured_kernels(attention) -> list[DenseKernel]:
    """Head-averaged kernels ``A_t = (1/H) Σ_h Ā_{t,h}`` as validated dense kernels (PB15).

    Rows of float32 softmaxes sum to 1 within ~1e-6; rows within ``ROW_TOL`` = 1e-4 of 1 and
    entries above the diagonal at most 1e-6 are accepted, cleaned (upper part zeroed) and
    renormalised to sum 1 within 1e-12. Anything worse raises ValueError (not a causal softmax).

    Parameters
    ----------
    attention : array_like, shape (L, H, n, n) or (L, n, n)

    Returns
    -------
    list of L DenseKernel
    """
    A = np.asarray(attention, dtype=np.float64)
    if A.ndim == 4:
        A = A.mean(axis=1)
    if A.ndim != 3 or A.shape[1] != A.shape[2]:
        raise ValueError(f"attention must have shape (L, H, n, n) or (L, n, n); got {A.shape}")
    if not np.isfinite(A).all():
        raise ValueError("attention must be finite")
    out = []
    for t, M in enumerate(A):
        upper = np.abs(np.triu(M, 1)).max(initial=0.0)
        if upper > 1e-6:
            raise ValueError(
                f"attention of layer {t} is not causal: an entry above the diagonal is {upper:.3g}"
            )
        M = np.tril(M)
        dev = np.abs(M.sum(axis=1) - 1).max()
        if dev > ROW_TOL:
            raise ValueError(
                f"attention of layer {t} is not row-stochastic: a row sum is off by "
                f"{dev:.3g} (tolerance {ROW_TOL:g})"
            )
        out.append(dense_kernel(M / M.sum(axis=1, keepdims=True)))
    return out


def measure(
    model,
    input_ids,
    *,
    n=None,
    lambdas=True,
    attention=True,
    qk=True,
    influence=True,
    batch_size=None,
    chunk=256,
    progress=False,
    value_norms=False,
    layer_influence=False,
    heads=True,
) -> Measurement:
    """Measure λ_t, mean attention, mean raw q·k and gradient influence (claims PB15, PB16).

    See the module docstring for the definitions. One forward pass per batch records
    everything; with ``influence`` it runs with gradients (parameters frozen) and one backward
    pass of Σ_batch p* gives every sequence's ∂p*/∂e (sequences do not interact).

    Parameters
    ----------
    model : posflow LM or Hugging Face GPT-2 / BLOOM / Falcon / MPT / Llama causal LM
        Hugging Face models must use ``attn_implementation="eager"`` when ``attention`` or
        ``value_norms`` is asked for; λ_t, q·k and influence work with any implementation.
    input_ids : array_like or LongTensor, shape (N, n_in)
        Token ids in ``[0, vocab)``; with ``n`` given, ``n_in >= n`` and the first n are used.
    n : int, optional
        Sequence length; ValueError when the sequences are shorter.
    lambdas, attention, qk, influence : bool
        Which quantities to record. ``qk="summary"`` keeps only the diagonal and strictly-lower
        sums of q·kᵀ per layer and head (all that the content fit uses; O(n·d) per head from q
        and k by a prefix sum, no (L, H, n, n) accumulator).
    heads : bool
        False: accumulate the head-mean attention only, ``attention`` of shape (L, 1, n, n)
        (H times less memory and work; the kernels are head averages anyway).
    batch_size : int, optional
        Sequences per forward pass; default sized to keep score tensors near 1 GiB.
    chunk : int
        Query positions per accumulation step of the (L, H, n, n) sums.
    progress : bool
        Show a progress bar (rich) over batches.
    value_norms : bool
        Also accumulate the value-norm weights ``Σ_h α_ij^h ‖W_O^h v_j^h‖`` per layer (L, n, n)
        (Kobayashi et al. 2020; rows normalised by
        :func:`posflow.simulate.models.sinks.value_norm_kernels`); ValueError for an
        architecture without a value-norm adapter.
    layer_influence : bool
        With ``influence``: also the gradient norm at every block input,
        ``‖∂p*/∂x_t[j]‖`` (L, n), averaged over sequences and normalised per layer.

    Returns
    -------
    Measurement
        Cost: one forward (+ one backward) pass per sequence, plus O(L·H·n²·d) for q·k.
    """
    adapter = adapter_for(model, probabilities=bool(attention or value_norms))
    emb = _embeddings(model)
    ids = _as_ids(input_ids, n, emb.num_embeddings)
    N, n = ids.shape
    top = adapter.max_length(model)
    if top is not None and n > top:
        raise ValueError(f"n = {n} exceeds the model's maximum sequence length {top}")
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"chunk must be a positive integer; got {chunk!r}")
    blocks = adapter.blocks(model)
    L, H = len(blocks), adapter.num_heads(model)
    device = next(model.parameters()).device
    if layer_influence and not influence:
        raise ValueError("layer_influence needs influence=True (it is a gradient)")
    want = {
        "lambdas": lambdas,
        "attention": attention,
        "qk": qk,
        "value_norms": value_norms,
        "layer_influence": layer_influence,
        "heads": bool(heads),
    }
    if qk not in (True, False, "summary"):
        raise ValueError(f"qk must be True, False or 'summary'; got {qk!r}")
    copies = (int(bool(attention)) if heads else 0) + int(qk is True)
    if device.type == "cpu" and copies:
        ensure_fits((L, H, n, n), "the attention/q·k accumulators", copies=copies)
    B = _auto_batch(N, L, H, n, influence) if batch_size is None else batch_size
    if isinstance(B, bool) or not isinstance(B, int) or B < 1:
        raise ValueError(f"batch_size must be a positive integer; got {batch_size!r}")
    rec = _Recorder(adapter, L, H, n, chunk, want, device)
    infl = torch.zeros(n, dtype=torch.float64, device=device)
    per_seq_infl = []
    leaf = {}

    def emb_hook(mod, args, out):  # make the embedding output a leaf that collects ∂p*/∂e
        leaf["e"] = out.detach().requires_grad_(True)
        return leaf["e"]

    was_training = model.training
    flags = [p.requires_grad for p in model.parameters()]
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    fixes = adapter.prepare(model)
    rec.install(blocks)
    handle = emb.register_forward_hook(emb_hook) if influence else None
    from rich.console import Console
    from rich.progress import Progress

    try:
        with Progress(console=Console(stderr=True), disable=not progress, transient=True) as bar:
            task = bar.add_task("measuring", total=N)
            for s in range(0, N, B):
                batch = ids[s : s + B].to(device)
                with torch.set_grad_enabled(bool(influence)):
                    logits = _forward_logits(model, batch)
                    if influence:
                        p_top = (
                            torch.softmax(
                                logits[:, -1].to(torch.promote_types(logits.dtype, torch.float32)),
                                dim=-1,
                            )
                            .max(dim=-1)
                            .values
                        )
                        p_top.sum().backward()
                        g = leaf["e"].grad.double().norm(dim=-1)  # (B, n)
                        per_seq_infl.append(g.cpu())
                        infl += g.sum(0)
                        if layer_influence:
                            rec.collect_layer_grads()
                rec.x = [None] * L
                bar.advance(task, batch.shape[0])
    finally:
        rec.remove()
        for h in fixes:
            h.remove()
        if handle is not None:
            handle.remove()
        for p, f in zip(model.parameters(), flags, strict=True):
            p.requires_grad_(f)
        model.train(was_training)

    lam = lam_std = per_seq = None
    if lambdas:
        per_seq = torch.stack([torch.cat(r) for r in rec.ratios], dim=1).numpy()  # (N, L)
        lam, lam_std = per_seq.mean(axis=0), per_seq.std(axis=0)
    infl_raw = infl_norm = None
    if influence:
        infl_raw = (infl / N).cpu().numpy()
        total = infl_raw.sum()
        if not (np.isfinite(total) and total > 0):
            raise ValueError(
                "gradient influence is zero or not finite: p* does not depend on "
                "the input embeddings"
            )
        infl_norm = infl_raw / total
    slopes = adapter.slopes(model)
    layer_infl = None
    if layer_influence:
        g = rec.layer_grad / N
        layer_infl = (g / g.sum(dim=1, keepdim=True)).cpu().numpy()
    return Measurement(
        architecture=adapter.name,
        n=n,
        num_sequences=N,
        num_heads=H,
        d_head=adapter.d_head(model),
        lambdas=lam,
        lambdas_std=lam_std,
        lambda_per_sequence=per_seq,
        attention=None if rec.attn is None else rec.attn.div_(N).cpu().numpy(),  # in place:
        qk=None if rec.qk is None else rec.qk.div_(N).cpu().numpy(),  # no extra copy on CPU
        influence=infl_norm,
        influence_raw=infl_raw,
        slopes=None if slopes is None else np.asarray(slopes, dtype=np.float64),
        num_layers=L,
        value_weights=None if rec.vnk is None else rec.vnk.div_(N).cpu().numpy(),
        layer_influence=layer_infl,
        influence_per_sequence=torch.cat(per_seq_infl).numpy() if influence else None,
        qk_sums=None if rec.qk_sums is None else (rec.qk_sums / N).cpu().numpy(),
    )


def _only(model, input_ids, what, **kw) -> Measurement:
    flags = {k: k == what for k in ("lambdas", "attention", "qk", "influence")}
    return measure(model, input_ids, **flags, **kw)


def mixing_coefficients(model, input_ids, **kw) -> tuple[np.ndarray, np.ndarray]:
    """λ_t = mean over sequences of mean over positions of ‖a_t‖/(‖x_t‖+‖a_t‖) (claim PB16).

    Returns (mean, std), each of shape (L,), std over sequences (ddof = 0). Keyword arguments
    as in :func:`measure` (``n``, ``batch_size``, ``chunk``, ``progress``).
    """
    m = _only(model, input_ids, "lambdas", **kw)
    return m.lambdas, m.lambdas_std


def mean_attention(model, input_ids, **kw) -> np.ndarray:
    """Dataset-mean attention probabilities per layer and head, shape (L, H, n, n) (PB15)."""
    return _only(model, input_ids, "attention", **kw).attention


def mean_qk(model, input_ids, **kw) -> np.ndarray:
    """Dataset-mean raw (unscaled) q·kᵀ per layer and head, shape (L, H, n, n) (PB15)."""
    return _only(model, input_ids, "qk", **kw).qk


def gradient_influence(model, input_ids, **kw) -> np.ndarray:
    """Input-token influence ``mean_s ‖∂p*/∂e_j‖₂``, normalised to sum 1, shape (n,) (PB15).

    p* = max softmax(logits at the last position); e_j = embedding-layer output of token j.
    """
    return _only(model, input_ids, "influence", **kw).influence
