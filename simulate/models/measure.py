"""Measuring a causal LM with forward hooks: λ_t, mean attention, mean q·k, gradient influence.

Conventions of [A] (§2.2, §2.6, §4.3), claims PB15 and PB16:

* **mixing coefficient** — for decoder block t with input hidden state x_t and attention
  sub-layer output a_t (after the output projection, before the residual add), per token
  ``r = ‖a_t‖₂ / (‖x_t‖₂ + ‖a_t‖₂)`` (norms over the hidden dimension, in float32 or better);
  averaged over positions, giving one value per sequence; λ_t is the mean over sequences and
  ``lambdas_std`` the standard deviation over sequences (ddof = 0);
* **mixing coefficient with the MLP** (``lambdas="both"``; not [A]'s) — the same with the MLP
  update m_t of block t (its output after the output projection and any post norm, before the
  residual add; x_{t+1} = x_t + a_t + m_t) counted in the denominator, per token
  ``r = ‖a_t‖₂ / (‖x_t‖₂ + ‖a_t‖₂ + ‖m_t‖₂)`` ≤ [A]'s ratio, averaged in the same way
  (``lambdas_mlp``, ``lambdas_mlp_std``, ``lambda_mlp_per_sequence``);
* **attention** — dataset-mean post-softmax probabilities per layer and head, (L, H, n, n);
  the kernel A_t is the head average;
* **raw q·k** — dataset-mean q·kᵀ per layer and head, (L, H, n, n), *unscaled* (no 1/√d_head
  or other model scaling, no ALiBi; rotary transforms and QK-norms included); content ``b`` =
  mean strictly-lower entry, ``c`` = mean diagonal − b, in raw units or divided by √d_head
  (``scale="sqrt_d"``);
* **gradient influence** — ``‖∂p*/∂e_j‖₂`` over the embedding dimension, p* the probability of
  the argmax next token at the last position (softmax in float32 or better), e_j the output of
  the input-embedding layer; averaged over sequences and normalised to sum 1.

Families on transformers' attention interface (``_layouts.LAYOUTS``: Llama, Qwen, Mistral,
Gemma, GPT-NeoX, Phi, OLMo, …) are recorded by a registered attention function that replaces
the loaded implementation during the measurement (``_interface``); it also reports each
layer's mask, whose band gives ``windows`` (keys a query sees, itself included; None where a
query sees every earlier key at this n). Hugging Face models are loaded with the "eager"
attention when probabilities are wanted; where the eager path computes something else than the
model's default path, the adapter's ``prepare`` hooks restore the model's computation (Falcon
with ALiBi in transformers 5.0–5.24 adds the bias twice in eager mode; checked against sdpa;
from 5.25 its eager pass adds it once, with the softmax in float32).

Memory: sequences run in batches (``batch_size``), the (L, H, n, n) sums are accumulated in
float64 in query-position chunks (``chunk`` rows at a time), one layer at a time, so the peak
is the model's own activations for one batch plus 2·L·H·n² float64 accumulators (2.4 GB for a
125M-parameter GPT-2 at n = 1024; ``attention=False``/``qk=False`` drop them).

Per sequence (``per_sequence=True``): the same batched passes also keep every sequence's own
head-mean attention and value-norm weights (N, L, n, n), q·k sums (N, L, H, 2) and block-input
gradient norms (N, L, n), each equal to what a one-sequence measurement of that sequence gives
(2·N·L·n² float64 more; 16 MB each for SmolLM2-135M at N = 16, n = 64). This is how
:func:`~posflow.simulate.models.profiles_bootstrap.measure_per_sequence` measures a window set
in one call instead of one call per window.
"""

from __future__ import annotations

import numpy as np
import torch

from posflow.simulate._validate import ensure_fits
from posflow.simulate.models._adapters import SUPPORTED, adapter_for
from posflow.simulate.models._hooks import (
    _as_ids,
    _auto_batch,
    _embeddings,
    _forward_logits,
    _Recorder,
)
from posflow.simulate.models._measurement import (
    Measurement,
    content_scores,
    measured_kernels,
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
    per_sequence=False,
) -> Measurement:
    """Measure λ_t, mean attention, mean raw q·k and gradient influence (claims PB15, PB16).

    See the module docstring for the definitions. One forward pass per batch records
    everything; with ``influence`` it runs with gradients (parameters frozen) and one backward
    pass of Σ_batch p* gives every sequence's ∂p*/∂e (sequences do not interact).

    Parameters
    ----------
    model : posflow LM or Hugging Face causal LM of a supported family (``SUPPORTED``)
        Hugging Face models must use ``attn_implementation="eager"`` when ``attention`` or
        ``value_norms`` is asked for; λ_t, q·k and influence work with any implementation.
    input_ids : array_like or LongTensor, shape (N, n_in)
        Token ids in ``[0, vocab)``; with ``n`` given, ``n_in >= n`` and the first n are used.
    n : int, optional
        Sequence length; ValueError when the sequences are shorter.
    lambdas, attention, qk, influence : bool
        Which quantities to record. ``lambdas="both"`` also records λ_t with the MLP update
        in the denominator (``lambdas_mlp``; [A]'s ``lambdas`` unchanged). ``qk="summary"``
        keeps only the diagonal and strictly-lower sums of q·kᵀ per layer and head (all that
        the content fit uses; O(n·d) per head from q and k by a prefix sum, no (L, H, n, n)
        accumulator).
    heads : bool
        False: accumulate the head-mean attention only, ``attention`` of shape (L, 1, n, n)
        (H times less memory and work; the kernels are head averages anyway).
    batch_size : int, optional
        Sequences per forward pass; default sized to keep score tensors near 1 GiB.
    chunk : int
        Query positions per accumulation step of the (L, H, n, n) sums.
    progress : bool
        Show progress over batches on stderr (a bar on a terminal, a line every 10 s
        otherwise).
    value_norms : bool
        Also accumulate the value-norm weights ``Σ_h α_ij^h ‖W_O^h v_j^h‖`` per layer (L, n, n)
        (Kobayashi et al. 2020; rows normalised by
        :func:`posflow.simulate.models.sinks.value_norm_kernels`); ValueError for an
        architecture without a value-norm adapter.
    layer_influence : bool
        With ``influence``: also the gradient norm at every block input,
        ``‖∂p*/∂x_t[j]‖`` (L, n), averaged over sequences and normalised per layer.
    per_sequence : bool
        Also keep each sequence's own statistics (``*_per_sequence`` fields of
        :class:`Measurement`): head-mean attention (N, L, n, n) with ``attention``, value-norm
        weights (N, L, n, n) with ``value_norms``, q·k sums (N, L, H, 2) with ``qk`` (content
        per sequence by :meth:`Measurement.content_per_sequence`), raw gradient norms at the
        block inputs (N, L, n) with ``layer_influence``. Row s equals the corresponding field
        of ``measure(model, input_ids[s:s+1])`` (for the attention, its head mean); the
        dataset means are unchanged. ValueError when they would not fit in memory.

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
    if not isinstance(per_sequence, bool):
        raise TypeError(f"per_sequence must be True or False; got {per_sequence!r}")
    want = {
        "lambdas": lambdas,
        "attention": attention,
        "qk": qk,
        "value_norms": value_norms,
        "layer_influence": layer_influence,
        "heads": bool(heads),
        "per_sequence": N if per_sequence else 0,
    }
    if not (isinstance(lambdas, bool) or lambdas == "both"):
        raise ValueError(f"lambdas must be True, False or 'both'; got {lambdas!r}")
    if qk not in (True, False, "summary"):
        raise ValueError(f"qk must be True, False or 'summary'; got {qk!r}")
    copies = (int(bool(attention)) if heads else 0) + int(qk is True)
    if device.type == "cpu" and copies:
        ensure_fits((L, H, n, n), "the attention/q·k accumulators", copies=copies)
    each = int(bool(attention)) + int(bool(value_norms))
    if per_sequence and each:  # the results end up in host memory whatever the device
        ensure_fits((N, L, n, n), "the per-sequence attention/value-norm weights", copies=each)
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
    rec.install(blocks, model)
    handle = emb.register_forward_hook(emb_hook) if influence else None
    from posflow.simulate._progress import progress as progress_of

    try:
        with progress_of(N, "measuring sequences", enabled=bool(progress), every=10.0) as bar:
            for s in range(0, N, B):
                batch = ids[s : s + B].to(device)
                rec.at = s
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
                bar.advance(batch.shape[0])
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
    mlp = [None] * 3
    if lambdas == "both":
        seq = torch.stack([torch.cat(r) for r in rec.mlp_ratios], dim=1).numpy()  # (N, L)
        mlp = [seq.mean(axis=0), seq.std(axis=0), seq]
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
        lambdas_mlp=mlp[0],
        lambdas_mlp_std=mlp[1],
        lambda_mlp_per_sequence=mlp[2],
        windows=tuple(rec.windows) if rec.masks_seen or not adapter.interface else None,
        attention_per_sequence=_numpy(rec.attn_seq),
        value_weights_per_sequence=_numpy(rec.vnk_seq),
        qk_sums_per_sequence=_numpy(rec.qk_seq),
        layer_influence_per_sequence=_numpy(rec.grad_seq),
    )


def _numpy(x):
    return None if x is None else x.cpu().numpy()


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
