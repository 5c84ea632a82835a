"""The forward hooks behind :func:`posflow.simulate.models.measure.measure` (claims PB15, PB16).

:class:`_Recorder` installs, per decoder block, a pre-hook keeping the block input x_t, a hook
on the attention output a_t (per-token ratios), a hook on the attention probabilities and a
q·k hook, and accumulates float64 running sums in query-position chunks.
"""

from __future__ import annotations

import numpy as np
import torch

from posflow.simulate.models._adapters import _hidden


def _as_ids(input_ids, n, vocab) -> torch.Tensor:
    if isinstance(input_ids, torch.Tensor):
        ids = input_ids.detach().cpu()
    else:
        arr = np.asarray(input_ids)
        if arr.dtype.kind not in "iu":
            raise TypeError(f"input_ids must be integers; got dtype {arr.dtype}")
        ids = torch.from_numpy(arr.astype(np.int64))
    if ids.dtype.is_floating_point or ids.dtype == torch.bool:
        raise TypeError(f"input_ids must be integers; got {ids.dtype}")
    if ids.ndim != 2 or ids.shape[0] < 1 or ids.shape[1] < 2:
        raise ValueError(
            f"input_ids must have shape (N, n) with N >= 1, n >= 2; got {tuple(ids.shape)}"
        )
    if n is not None:
        if ids.shape[1] < n:
            raise ValueError(
                f"input_ids has sequences of length {ids.shape[1]}, shorter than n = {n}"
            )
        ids = ids[:, :n]
    if int(ids.min()) < 0 or int(ids.max()) >= vocab:
        raise ValueError(
            f"input_ids must lie in [0, {vocab}); got values in "
            f"[{int(ids.min())}, {int(ids.max())}]"
        )
    return ids.long()


def _embeddings(model):
    return model.tok_emb if hasattr(model, "tok_emb") else model.get_input_embeddings()


def _auto_batch(N, L, H, n, grad) -> int:
    per_seq = L * H * n * n * 4 * (4 if grad else 2)  # score/prob tensors the model keeps
    return int(max(1, min(N, (1 << 30) // max(per_seq, 1))))


class _Recorder:
    """Holds the hooks and the float64 running sums for one measurement."""

    def __init__(self, adapter, L, H, n, chunk, want, device):
        self.adapter, self.n, self.chunk, self.want = adapter, n, chunk, want
        acc = dict(dtype=torch.float64, device=device)
        self.attn = torch.zeros(L, H, n, n, **acc) if want["attention"] else None
        self.qk = torch.zeros(L, H, n, n, **acc) if want["qk"] else None
        self.ratios: list[list[torch.Tensor]] = [[] for _ in range(L)]
        self.x: list[torch.Tensor | None] = [None] * L
        self.handles = []

    def _add(self, acc, t, scores_rows):  # acc[t, :, i0:i1] += Σ_batch rows(i0, i1)
        for i0 in range(0, self.n, self.chunk):
            i1 = min(self.n, i0 + self.chunk)
            acc[t, :, i0:i1] += scores_rows(i0, i1).to(torch.float64).sum(0)

    def install(self, blocks):
        for t, block in enumerate(blocks):
            self.handles.append(
                block.register_forward_pre_hook(self._block_in(t), with_kwargs=True)
            )
            if self.want["lambdas"]:
                mod, idx = self.adapter.attn_output(block)
                self.handles.append(mod.register_forward_hook(self._attn_out(t, idx)))
            if self.attn is not None:
                mod, idx = self.adapter.probs(block)
                self.handles.append(mod.register_forward_hook(self._probs(t, idx)))
            if self.qk is not None:
                mod, fn, kind = self.adapter.qk_source(block)
                if kind == "pre":
                    hook = self._qk_pre(t, fn)
                    self.handles.append(mod.register_forward_pre_hook(hook, with_kwargs=True))
                else:
                    self.handles.append(mod.register_forward_hook(self._qk_out(t)))

    def remove(self):
        for h in self.handles:
            h.remove()
        self.handles.clear()

    def _block_in(self, t):
        def hook(mod, args, kwargs):
            self.x[t] = _hidden(args, kwargs).detach()

        return hook

    def _attn_out(self, t, idx):
        def hook(mod, args, out):
            a = (out if idx is None else out[idx]).detach()
            x = self.x[t]
            if x is None or x.shape != a.shape:
                raise ValueError(f"layer {t}: attention output and block input shapes differ")
            na = a.to(torch.float64 if a.dtype == torch.float64 else torch.float32).norm(dim=-1)
            nx = x.to(na.dtype).norm(dim=-1)
            den = (na + nx).double()
            r = torch.where(den > 0, na.double() / den.clamp_min(1e-300), 0.0)  # (B, n)
            self.ratios[t].append(r.mean(dim=1).cpu())

        return hook

    def _probs(self, t, idx):
        def hook(mod, args, out):
            p = out if idx is None else out[idx]
            if p is None:
                raise ValueError(
                    "the model returned no attention probabilities; load it with "
                    "attn_implementation='eager'"
                )
            p = p.detach()
            self._add(self.attn, t, lambda i0, i1: p[:, :, i0:i1])

        return hook

    def _qk_pre(self, t, fn):
        def hook(mod, args, kwargs):
            with torch.no_grad():
                q, k = fn(mod, args, kwargs)
                q, k = q.double(), k.double().transpose(-2, -1)
                self._add(self.qk, t, lambda i0, i1: q[:, :, i0:i1] @ k)

        return hook

    def _qk_out(self, t):
        def hook(mod, args, out):
            s = out.detach()
            self._add(self.qk, t, lambda i0, i1: s[:, :, i0:i1])

        return hook


def _forward_logits(model, ids):
    out = model(ids) if hasattr(model, "tok_emb") else model(input_ids=ids, use_cache=False)
    return out if isinstance(out, torch.Tensor) else out.logits
