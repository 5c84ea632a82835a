"""The forward hooks behind :func:`posflow.simulate.models.measure.measure` (claims PB15, PB16).

:class:`_Recorder` installs, per decoder block, a pre-hook keeping the block input x_t, a hook
on the attention output a_t (per-token ratios; with ``lambdas="both"`` also hooks for the MLP
update m_t), and either hooks on the attention probabilities, values and q·k (hand adapters)
or one route from the recording attention function (adapters on transformers' attention
interface, which also reports each layer's mask, hence its sliding window); it accumulates
float64 running sums in query-position chunks. With ``want["per_sequence"] = N`` it also keeps
each sequence's own head-mean attention, value-norm weights, q·k sums and block-input gradient
norms (the batch's rows written at ``at``, the index of its first sequence).
"""

from __future__ import annotations

import numpy as np
import torch

from posflow.simulate.models._adapter_base import _hidden


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
        self.heads = want.get("heads", True)  # False: accumulate the head mean only
        Ha = H if self.heads else 1
        self.attn = torch.zeros(L, Ha, n, n, **acc) if want["attention"] else None
        full_qk = want["qk"] and want["qk"] != "summary"
        self.qk = torch.zeros(L, H, n, n, **acc) if full_qk else None
        # Σ_batch Σ_i q_i·k_i and Σ_batch Σ_{j<i} q_i·k_j per layer and head (content b, c)
        self.qk_sums = torch.zeros(L, H, 2, **acc) if want["qk"] else None
        self.vnk = torch.zeros(L, n, n, **acc) if want.get("value_norms") else None
        self.vn: list[torch.Tensor | None] = [None] * L  # (B, H, n) ‖W_O^h v_j^h‖ of the batch
        self.layer_grad = torch.zeros(L, n, **acc) if want.get("layer_influence") else None
        Ns = want.get("per_sequence") or 0  # per-sequence stores, sequence first; None when off
        self.attn_seq = torch.zeros(Ns, L, n, n, **acc) if Ns and want["attention"] else None
        self.vnk_seq = torch.zeros(Ns, L, n, n, **acc) if Ns and self.vnk is not None else None
        self.qk_seq = torch.zeros(Ns, L, H, 2, **acc) if Ns and want["qk"] else None
        grads = Ns and self.layer_grad is not None
        self.grad_seq = torch.zeros(Ns, L, n, **acc) if grads else None
        self.at = 0  # index of the current batch's first sequence in the per-sequence stores
        self.live: list[torch.Tensor | None] = [None] * L  # block inputs kept for their gradient
        self.ratios: list[list[torch.Tensor]] = [[] for _ in range(L)]
        self.mlp_ratios: list[list[torch.Tensor]] = [[] for _ in range(L)]
        self.na: list[torch.Tensor | None] = [None] * L  # ‖a_t‖ per token, for the MLP ratio
        self.W: list[torch.Tensor | None] = [None] * L  # W_O per layer (interface value norms)
        self.windows: list[int | None] = [None] * L  # keys a query sees; None: all earlier
        self.masks_seen = False
        self.x: list[torch.Tensor | None] = [None] * L
        self.handles = []

    def _add(self, acc, t, scores_rows, mean_heads=False, each=None):
        """acc[t, :, i0:i1] += Σ_batch rows(i0, i1) (rows (B, H, c, n)); with ``mean_heads``
        the head mean is taken first (in the rows' precision, float32 or better); ``each``
        (N, L, n, n) receives every sequence's head mean rows."""
        for i0 in range(0, self.n, self.chunk):
            i1 = min(self.n, i0 + self.chunk)
            r = scores_rows(i0, i1)
            if mean_heads or each is not None:
                hm = r.to(torch.promote_types(r.dtype, torch.float32)).mean(1, keepdim=True)
                r = hm if mean_heads else r
            acc[t, :, i0:i1] += r.to(torch.float64).sum(0)
            if each is not None:
                each[self.at : self.at + r.shape[0], t, i0:i1] = hm[:, 0].to(torch.float64)

    def _qk_sums_from_vectors(self, t, q, k):
        """Diagonal and strictly-lower sums of q kᵀ from q, k (B, H, n, d) in O(n·d)."""
        q, k = q.double(), k.double()
        below = torch.cumsum(k, dim=2) - k  # Σ_{j<i} k_j
        if self.qk_seq is not None:
            self._qk_sums_each(t, (q * k).sum(dim=(2, 3)), (q * below).sum(dim=(2, 3)))
            return
        self.qk_sums[t, :, 0] += (q * k).sum(dim=(0, 2, 3))
        self.qk_sums[t, :, 1] += (q * below).sum(dim=(0, 2, 3))

    def _qk_sums_each(self, t, diag, lower):
        """Store each sequence's sums (B, H) and add them to the batch total."""
        B = diag.shape[0]
        self.qk_seq[self.at : self.at + B, t, :, 0] = diag
        self.qk_seq[self.at : self.at + B, t, :, 1] = lower
        self.qk_sums[t, :, 0] += diag.sum(0)
        self.qk_sums[t, :, 1] += lower.sum(0)

    def _qk_sums_from_scores(self, t, s):
        """The same sums from a score tensor s (B, H, n, n)."""
        s = s.double()
        if self.qk_seq is not None:
            diag = torch.diagonal(s, dim1=-2, dim2=-1).sum(dim=2)
            self._qk_sums_each(t, diag, torch.tril(s, -1).sum(dim=(2, 3)))
            return
        self.qk_sums[t, :, 0] += torch.diagonal(s, dim1=-2, dim2=-1).sum(dim=(0, 2))
        self.qk_sums[t, :, 1] += torch.tril(s, -1).sum(dim=(0, 2, 3))

    def install(self, blocks, model=None):
        probes = self.attn is not None or self.vnk is not None or self.qk_sums is not None
        if self.adapter.interface and probes:
            if self.vnk is not None:
                self.W = [self.adapter.out_weight(b) for b in blocks]
            self.handles.append(self.adapter.route(model, blocks, self._on_attention))
        for t, block in enumerate(blocks):
            self.handles.append(
                block.register_forward_pre_hook(self._block_in(t), with_kwargs=True)
            )
            if self.want["lambdas"]:
                mod, idx = self.adapter.attn_output(block)
                self.handles.append(mod.register_forward_hook(self._attn_out(t, idx)))
            if self.want["lambdas"] == "both":
                mod, idx = self.adapter.attn_output(block)
                self.handles.append(mod.register_forward_hook(self._attn_norm(t, idx)))
                mod, idx = self.adapter.mlp_output(block)
                self.handles.append(mod.register_forward_hook(self._mlp_out(t, idx)))
            if self.adapter.interface:
                continue
            if self.attn is not None or self.vnk is not None:
                mod, idx = self.adapter.probs(block)
                self.handles.append(mod.register_forward_hook(self._probs(t, idx)))
            if self.vnk is not None:
                src = self.adapter.value_source(block)
                if src is None:
                    raise ValueError(
                        f"value-norm kernels: the {self.adapter.name} adapter has no value "
                        "source for this model (its values are transformed after averaging, or "
                        "the architecture has no value-norm adapter)"
                    )
                mod, fn = src
                W = self.adapter.out_weight(block)
                self.handles.append(mod.register_forward_hook(self._values(t, fn, W)))
            if self.qk_sums is not None:
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
            x = _hidden(args, kwargs)
            self.x[t] = x.detach()
            if self.layer_grad is not None and x.requires_grad:
                if x.grad_fn is not None:
                    x.retain_grad()
                self.live[t] = x

        return hook

    def collect_layer_grads(self):
        """After the backward pass: add Σ_batch ‖∂p*/∂x_t[j]‖ to ``layer_grad[t, j]``."""
        for t, x in enumerate(self.live):
            if x is None or x.grad is None:
                raise ValueError(f"layer {t}: no gradient reached the block input")
            g = x.grad.double().norm(dim=-1)  # (B, n)
            self.layer_grad[t] += g.sum(0)
            if self.grad_seq is not None:
                self.grad_seq[self.at : self.at + g.shape[0], t] = g
        self.live = [None] * len(self.live)

    def _value_norms(self, t, v, W):
        """``vn[t] = ‖W_O^h v_j^h‖`` (B, H, n) from the values v (B, H, n, d)."""
        v = v.detach()
        B, H, n, d = v.shape
        Wh = W.detach().reshape(W.shape[0], H, d)  # (D, H, d)
        norms = torch.empty(B, H, n, dtype=torch.float64, device=v.device)
        dt = torch.promote_types(v.dtype, torch.float32)  # float32 or better
        for h in range(H):  # one head at a time: (B, n, d) @ (d, D), then ‖·‖ over D
            f = v[:, h].to(dt) @ Wh[:, h].to(dt).T
            norms[:, h] = f.double().norm(dim=-1)
        self.vn[t] = norms

    def _values(self, t, fn, W):
        def hook(mod, args, out):
            with torch.no_grad():
                self._value_norms(t, fn(mod, args, out), W)

        return hook

    def _on_attention(self, t, q, k, v, p, mask):
        """What the recording attention function reports for layer t (interface adapters)."""
        with torch.no_grad():
            if not self.masks_seen:
                self._window(t, mask, p.shape[-1])
            if self.vnk is not None:
                self._value_norms(t, v, self.W[t])
            if self.attn is not None or self.vnk is not None:
                self._take_probs(t, p)
            if self.qk_sums is not None:
                self._take_qk(t, q, k)

    def _window(self, t, mask, n):
        """Record layer t's window from its mask; refuse anything but a causal band."""
        if mask is None:
            raise ValueError(f"layer {t}: the model passed no attention mask")
        m = mask[0, 0, :, :n]
        allowed = m if m.dtype == torch.bool else m > torch.finfo(m.dtype).min / 2
        w = int(allowed.sum(-1).max())
        ones = torch.ones(n, n, dtype=torch.bool, device=allowed.device)
        if not torch.equal(allowed, ones.tril() & ones.triu(1 - w)):
            raise ValueError(f"layer {t}: the attention mask is not a causal band")
        self.windows[t] = w if w < n else None
        self.masks_seen = t == len(self.windows) - 1

    def _attn_norm(self, t, idx):
        def hook(mod, args, out):
            a = (out if idx is None else out[idx]).detach()
            self.na[t] = a.to(torch.promote_types(a.dtype, torch.float32)).norm(dim=-1)

        return hook

    def _mlp_out(self, t, idx):
        """Per token ‖a_t‖/(‖x_t‖ + ‖a_t‖ + ‖m_t‖), averaged over positions (λ_t with the MLP);
        the norm of m_t is taken at once (Falcon adds a_t to it in place afterwards)."""

        def hook(mod, args, out):
            m = (out if idx is None else out[idx]).detach()
            x, na = self.x[t], self.na[t]
            if x is None or na is None or x.shape != m.shape:
                raise ValueError(f"layer {t}: MLP update, attention update and input differ")
            nm, nx = m.to(na.dtype).norm(dim=-1), x.to(na.dtype).norm(dim=-1)
            den = nx.double() + na.double() + nm.double()
            r = torch.where(den > 0, na.double() / den.clamp_min(1e-300), 0.0)  # (B, n)
            self.mlp_ratios[t].append(r.mean(dim=1).cpu())
            self.na[t] = None

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
            self._take_probs(t, p.detach())

        return hook

    def _take_probs(self, t, p):
        """Accumulate probabilities p (B, H, n, n) and, with value norms, Σ_h α_ij^h ‖W_O v‖."""
        if self.attn is not None:
            self._add(self.attn, t, lambda i0, i1: p[:, :, i0:i1], not self.heads, self.attn_seq)
        if self.vnk is not None:
            vn = self.vn[t]
            if vn is None or vn.shape != p.shape[:3]:
                raise ValueError(f"layer {t}: value norms and probabilities do not match")
            dt = torch.promote_types(p.dtype, torch.float32)
            vf = vn.to(dt)
            for i0 in range(0, self.n, self.chunk):  # Σ_b Σ_h α_ij^h ‖W_O^h v_j^h‖
                i1 = min(self.n, i0 + self.chunk)
                if self.vnk_seq is None:
                    w = torch.einsum("bhij,bhj->ij", p[:, :, i0:i1].to(dt), vf)
                    self.vnk[t, i0:i1] += w.to(torch.float64)
                    continue
                w = torch.einsum("bhij,bhj->bij", p[:, :, i0:i1].to(dt), vf).to(torch.float64)
                self.vnk_seq[self.at : self.at + w.shape[0], t, i0:i1] = w
                self.vnk[t, i0:i1] += w.sum(0)
            self.vn[t] = None

    def _qk_pre(self, t, fn):
        def hook(mod, args, kwargs):
            with torch.no_grad():
                self._take_qk(t, *fn(mod, args, kwargs))

        return hook

    def _take_qk(self, t, q, k):
        """Accumulate the q·k sums (and the full q kᵀ) from q, k (B, H, n, d)."""
        self._qk_sums_from_vectors(t, q, k)
        if self.qk is not None:
            q, k = q.double(), k.double().transpose(-2, -1)
            self._add(self.qk, t, lambda i0, i1: q[:, :, i0:i1] @ k)

    def _qk_out(self, t):
        def hook(mod, args, out):
            s = out.detach()
            self._qk_sums_from_scores(t, s)
            if self.qk is not None:
                self._add(self.qk, t, lambda i0, i1: s[:, :, i0:i1])

        return hook


def _forward_logits(model, ids):
    """Logits of the forward pass; only the last position's where the model can skip the rest
    (``logits_to_keep=1``: the LM head of a 262k-token vocabulary costs more than the blocks)."""
    if hasattr(model, "tok_emb"):
        return model(ids)
    import inspect

    kw = {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(
        model.forward).parameters else {}  # fmt: skip
    return model(input_ids=ids, use_cache=False, **kw).logits
