"""Claim AT18 of [B]: the implementation identities of accumulated transport.

Every fast path is compared with a dense route product P_{j→i} built step by step in this module
(:func:`_dense_route`, block rotations written out entry by entry), independently of the routines
under test:

* the NumPy reference (:mod:`posflow.simulate.transport`): suffix-sum angles, ``so2_scores``,
  the inverse output rotation of values and ``so2_value_output``, zero-initialised learned angles
  against RoPE, the PaTH key-cache update and ``householder_scores``, the chunked (compact-WY /
  UT-transform) ``householder_route_scores`` on both routes and ``path_attention`` against the
  softmax of the dense Householder scores, absolute frames and ``orthogonal_scores`` on both
  route conventions, and ``route_product`` itself;
* the torch schemes that claim AT20 trains (:mod:`posflow.simulate.models.schemes` and
  ``lm.RoPE``): RoPE, random Q/K and Q/K/V, learned Q/K and Q/K/V (with random, non-zero angle
  embeddings, and at zero initialisation against RoPE), and PaTH, run through their
  ``qkv``/``scores``/``output`` hooks exactly as ``lm.Attention`` calls them, in float64.

Without torch the torch part is undecided (the verdict is then INCONCLUSIVE).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from posflow.proofs_checks.kit import (
    Context,
    Evidence,
    Table,
    add_mutant,
    at_most,
    claim_rng,
    fp_tol,
    info,
    register,
    scaled_argument,
    undecided,
)
from posflow.simulate.orthogonal import rope_frequencies, rotate_blocks
from posflow.simulate.transport import (
    ROUTES,
    frame_prefix,
    householder_route_scores,
    householder_scores,
    householder_step,
    orthogonal_scores,
    path_attention,
    route_product,
    so2_scores,
    so2_value_output,
    suffix_angles,
)

_U = 1.1102230246251565e-16  # float64 unit roundoff
_CHUNK = 6  # chunk length of the chunked PaTH checks: n = 40 and 64 are not multiples of it


def _so2_dense(theta) -> np.ndarray:
    """blockdiag_b R(θ_b) with the half-split pairing (b, b + d/2), entry by entry: (n, d, d)."""
    theta = np.asarray(theta, dtype=float)
    n, half = theta.shape
    m = np.zeros((n, 2 * half, 2 * half))
    for b in range(half):
        c, s = np.cos(theta[:, b]), np.sin(theta[:, b])
        m[:, b, b], m[:, b, b + half] = c, -s
        m[:, b + half, b], m[:, b + half, b + half] = s, c
    return m


def _dense_route(steps, j: int, i: int, shift: int = 0) -> np.ndarray:
    """M_{i−1+shift} ⋯ M_{j+shift} (shift 0: from_source; 1: path), a plain loop."""
    p = np.eye(steps.shape[1])
    for s in range(j + shift, i + shift):
        p = steps[s] @ p
    return p


def _dense_scores(q, k, steps, shift: int = 0) -> np.ndarray:
    """s_ij = q_iᵀ P_{j→i} k_j for j ≤ i (NaN above the diagonal)."""
    n = k.shape[0]
    s = np.full((n, n), np.nan)
    for i in range(n):
        for j in range(i + 1):
            s[i, j] = q[i] @ _dense_route(steps, j, i, shift) @ k[j]
    return s


def _dense_values(a, v, steps) -> np.ndarray:
    """o_i = Σ_{j ≤ i} a_ij P_{j→i} v_j (from_source routes)."""
    n = v.shape[0]
    return np.array(
        [sum(a[i, j] * _dense_route(steps, j, i) @ v[j] for j in range(i + 1)) for i in range(n)]
    )


def _fp(n: int, d: int, scale: float) -> tuple[float, str]:
    """Rounding bound of a dense route product against a fast path: (value, reason)."""
    prod = n * d * _U * scale  # n steps of d-term dot products, values up to ``scale``
    phase = n * n * _U * scale  # suffix sums of n angles ≤ n in size, each ≤ n·u off
    bound = 16 * (prod + phase)
    return bound, (
        f"route products of ≤ n = {n} steps with d = {d} terms (≤ n·d·u·‖q‖‖k‖ = "
        f"{n}·{d}·1.1e-16·{scale:.3g} = {prod:.1e}) plus suffix-sum angles off by ≤ n·u·n "
        f"(≤ {phase:.1e} after ‖q‖‖k‖), times 16 for the sin/cos and softmax roundings: "
        f"{bound:.1e}"
    )


def _fp_chunked(n: int, d: int, chunk: int, scale: float) -> tuple[float, str]:
    """Rounding bound of the chunked Householder scores against the dense product."""
    depth = -(-n // chunk) + 1  # inter-chunk carries plus the local (intra-chunk) terms
    per = 2 * d + 4 * chunk * chunk  # two d-term sums and C-term sums with |L_sr| ≤ β_s β_r ≤ 4
    chunked, dense = depth * per * _U * scale, n * d * _U * scale
    bound = 16 * (chunked + dense)
    return bound, (
        f"≤ ⌈n/C⌉ + 1 = {depth} carries by norm-≤1 chunk products (C = {chunk}), each with "
        f"2d + 4C² = {per} terms of size ≤ ‖q‖‖k‖ (|L_sr| ≤ 4): {depth}·{per}·1.1e-16·"
        f"{scale:.3g} = {chunked:.1e}, plus the dense reference's n·d·u·‖q‖‖k‖ = {dense:.1e}, "
        f"times 16 for the softmax and second-order terms: {bound:.1e}"
    )


def _softmax_rows(s, scale: float, bias) -> np.ndarray:
    """Causal softmax rows of scale·s + bias (s is NaN above the diagonal)."""
    z = np.where(np.isnan(s), -np.inf, scale * s + bias)
    a = np.exp(z - z.max(axis=1, keepdims=True))
    return a / a.sum(axis=1, keepdims=True)


def _numpy_identities(rng, n: int, d: int) -> tuple[dict, dict]:
    """Errors of the NumPy fast paths against dense route products, and the setup scale."""
    q, k, v = rng.standard_normal((3, n, d))
    theta = rng.uniform(-1, 1, (n, d // 2))
    steps = _so2_dense(theta)
    low = np.tril_indices(n)
    err = {}
    dense = _dense_scores(q, k, steps)
    err["route_product"] = max(
        float(np.abs(route_product(steps, j, i) - _dense_route(steps, j, i)).max())
        for i, j in zip(*low, strict=True)
    )
    # (1) suffix sums: (R(φ_i) q_i)·(R(φ_j) k_j) = q_iᵀ M_{i-1}⋯M_j k_j
    phi = suffix_angles(theta)
    suffix = rotate_blocks(q, phi) @ rotate_blocks(k, phi).T
    err["suffix_sum_scores"] = float(np.abs(suffix - dense)[low].max())
    err["so2_scores"] = float(np.abs(so2_scores(q, k, theta) - dense)[low].max())
    # (2) values: R(-φ_i) Σ_j a_ij R(φ_j) v_j = Σ_j a_ij P_{j→i} v_j
    a = np.tril(rng.exponential(size=(n, n)))
    a /= a.sum(axis=1, keepdims=True)
    dense_out = _dense_values(a, v, steps)
    inverse_out = rotate_blocks(a @ rotate_blocks(v, phi), -phi)
    err["value_inverse_rotation"] = float(np.abs(inverse_out - dense_out).max())
    err["so2_value_output"] = float(np.abs(so2_value_output(a, v, theta) - dense_out).max())
    # (3) zero-initialised learned angles θ = π tanh(0) − f_b give RoPE's relative rotation
    f = rope_frequencies(d)
    learned = np.broadcast_to(np.pi * np.tanh(0.0) - f, (n, d // 2))
    rope_dense = _dense_scores(q, k, _so2_dense(np.broadcast_to(-f, (n, d // 2))))
    err["zero_init_learned_vs_rope"] = float(
        np.abs(so2_scores(q, k, learned) - rope_dense)[low].max()
    )
    # (4) PaTH: k ← k − β (k·w) w is H k; iterated over t = j+1 … i it gives the path route
    w = rng.standard_normal((n, d))
    w /= np.linalg.norm(w, axis=1, keepdims=True)
    beta = rng.uniform(0, 2, n)
    H = np.eye(d) - beta[:, None, None] * w[:, :, None] * w[:, None, :]
    err["householder_step_vs_matrix"] = float(
        np.abs(
            np.stack([householder_step(k[t], w[t], beta[t]) for t in range(n)])
            - np.einsum("tab,tb->ta", H, k)
        ).max()
    )
    i = n - 1
    cache = k.copy()
    for t in range(1, n):  # token t arrives: every earlier cached key is updated
        cache[:t] = householder_step(cache[:t], w[t], beta[t])
    dense_h = {route: _dense_scores(q, k, H, shift) for shift, route in enumerate(ROUTES)}
    dense_path = dense_h["path"][i]
    err["path_cache_scores"] = float(np.abs(cache @ q[i] - dense_path).max())
    err["householder_scores"] = float(
        np.abs(householder_scores(q[i], k, w, beta, i) - dense_path).max()
    )
    # (4b) the chunked compact-WY / UT-transform scores (all queries) and PaTH attention outputs
    chunked = {}
    for route in ROUTES:
        got = householder_route_scores(q, k, w, beta, route, _CHUNK)
        chunked[f"householder_route_scores_{route}"] = float(
            np.abs(got - dense_h[route])[low].max()
        )
    alibi = -0.1 * np.abs(np.subtract.outer(np.arange(n), np.arange(n)))
    ref_out = _softmax_rows(dense_h["path"], 1 / math.sqrt(d), alibi) @ v
    out = path_attention(q, k, v, w, beta, "path", _CHUNK, bias=alibi)
    chunked["path_attention"] = float(np.abs(out - ref_out).max())
    # (5) absolute frames for orthogonal steps: P_{j→i} = G_i G_jᵀ on both route conventions
    for shift, route in enumerate(("from_source", "path")):
        G = frame_prefix(steps, route)
        err[f"frames_{route}"] = max(
            float(np.abs(G[i] @ G[j].T - _dense_route(steps, j, i, shift)).max())
            for i, j in zip(*low, strict=True)
        )
        err[f"orthogonal_scores_{route}"] = float(
            np.abs(orthogonal_scores(q, k, steps, route) - _dense_scores(q, k, steps, shift))[
                low
            ].max()
        )
    scale = float(np.max(np.linalg.norm(q, axis=1)) * np.max(np.linalg.norm(k, axis=1)))
    return err, {"scale": scale, "chunked": chunked}


_TORCH_SCHEMES = ("rope", "random_qk", "random_qkv", "learned_qk", "learned_qkv", "path")


def _torch_identities(seed: int, n: int, H: int, d: int) -> tuple[dict, float]:
    """Errors of the torch schemes' hooks against dense route products (float64)."""
    import torch

    from posflow.simulate.models import lm  # registers the schemes
    from posflow.simulate.models._scheme import SCHEMES

    gen = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64)

    q, k, v = randn(1, H, n, d), randn(1, H, n, d), randn(1, H, n, d)
    x = randn(1, n, H * d)
    idx = torch.randint(0, 256, (1, n), generator=gen)
    low = np.tril_indices(n)
    future = torch.ones(n, n, dtype=torch.bool).triu(1)

    def run(scheme):
        """The hooks in lm.Attention's order; returns (angles, scores, weights, output)."""
        qr, kr, vr = scheme.qkv(q, k, v, x)
        s = scheme.scores(qr, kr, x)
        att = torch.softmax((s / math.sqrt(d)).masked_fill(future, float("-inf")), dim=-1)
        y = scheme.output(att @ vr, x)
        return (t[0].detach().numpy() for t in (s, att, y))

    def theta_of(scheme):
        """The angles the scheme draws (eval mode: deterministic), (H, n, d/2), and V's."""
        if scheme.name == "rope":
            t = -np.broadcast_to(scheme.freq.numpy(), (H, n, d // 2))
            return t, None
        t = scheme.angles(x)
        tv = scheme.value_angles(x, t) if scheme.rotate_v else None
        t = np.broadcast_to(t.detach().numpy().reshape(-1, n, d // 2)[-H:], (H, n, d // 2))
        if tv is not None:
            tv = np.broadcast_to(tv.detach().numpy().reshape(-1, n, d // 2)[-H:], (H, n, d // 2))
        return t, tv

    err = {}
    qn, kn, vn = q[0].numpy(), k[0].numpy(), v[0].numpy()
    for name in _TORCH_SCHEMES:
        opts = {"d_model": H * d} if name == "path" else {}
        scheme = SCHEMES[name](H, d, 0, **opts).double().eval()
        if name.startswith("learned"):
            with torch.no_grad():
                scheme.angle_emb.copy_(randn(*scheme.angle_emb.shape))
            scheme.see_tokens(idx)
        if name == "path":
            s, _, _ = run(scheme)
            w, beta = (t[0].detach().numpy() for t in scheme.steps(x))
            e = 0.0
            for h in range(H):
                Hs = np.eye(d) - beta[h][:, None, None] * w[h][:, :, None] * w[h][:, None, :]
                e = max(e, float(np.abs(s[h] - _dense_scores(qn[h], kn[h], Hs, 1))[low].max()))
            err["torch_path_scores"] = e
            continue
        theta, theta_v = theta_of(scheme)
        s, att, y = run(scheme)
        e_s = e_o = 0.0
        for h in range(H):
            steps = _so2_dense(theta[h])
            e_s = max(e_s, float(np.abs(s[h] - _dense_scores(qn[h], kn[h], steps))[low].max()))
            steps_v = (
                _so2_dense(theta_v[h])
                if theta_v is not None
                else np.broadcast_to(np.eye(d), (n, d, d))
            )
            e_o = max(e_o, float(np.abs(y[h] - _dense_values(att[h], vn[h], steps_v)).max()))
        err[f"torch_{name}_scores"] = e_s
        err[f"torch_{name}_output"] = e_o
    # zero-initialised learned angles reproduce lm.RoPE's scores exactly
    zero = SCHEMES["learned_qk"](H, d, 0).double().eval()
    zero.see_tokens(idx)
    s_zero, _, _ = run(zero)
    s_rope, _, _ = run(lm.RoPE(H, d, 0))
    err["torch_zero_init_learned_vs_rope"] = float(np.abs(s_zero - s_rope)[:, low[0], low[1]].max())
    norms = np.linalg.norm(qn, axis=-1).max() * np.linalg.norm(kn, axis=-1).max()
    return err, float(norms)


_LABELS = {
    "route_product": "simulate.route_product vs the dense loop",
    "suffix_sum_scores": "(R(φ_i)q_i)·(R(φ_j)k_j) with suffix sums vs q_iᵀ P_{j→i} k_j",
    "so2_scores": "so2_scores vs q_iᵀ P_{j→i} k_j",
    "value_inverse_rotation": "R(−φ_i) Σ_j a_ij R(φ_j) v_j vs Σ_j a_ij P_{j→i} v_j",
    "so2_value_output": "so2_value_output vs Σ_j a_ij P_{j→i} v_j",
    "zero_init_learned_vs_rope": "zero-initialised learned angles vs RoPE (dense)",
    "householder_step_vs_matrix": "k − β(k·w)w vs H k",
    "path_cache_scores": "PaTH key-cache update vs q_iᵀ H_i⋯H_{j+1} k_j",
    "householder_scores": "householder_scores vs q_iᵀ H_i⋯H_{j+1} k_j",
    "householder_route_scores_path": "chunked householder_route_scores vs q_iᵀ H_i⋯H_{j+1} k_j",
    "householder_route_scores_from_source": (
        "chunked householder_route_scores vs q_iᵀ H_{i−1}⋯H_j k_j"
    ),
    "path_attention": "chunked path_attention vs softmax(dense/√d + ALiBi) V",
    "frames_from_source": "G_i G_jᵀ vs P_{j→i} (from_source)",
    "frames_path": "G_i G_jᵀ vs P_{j→i} (path)",
    "orthogonal_scores_from_source": "orthogonal_scores vs dense (from_source)",
    "orthogonal_scores_path": "orthogonal_scores vs dense (path)",
    "torch_zero_init_learned_vs_rope": "torch learned_qk at zero init vs lm.RoPE scores",
    "torch_path_scores": "torch path_scores vs q_iᵀ H_i⋯H_{j+1} k_j",
}


def _label(key: str) -> str:
    if key in _LABELS:
        return "max |" + _LABELS[key] + "|"
    name, what = key.removeprefix("torch_").rsplit("_", 1)
    ref = "q_iᵀ P_{j→i} k_j" if what == "scores" else "Σ_j a_ij P^V_{j→i} v_j"
    return f"max |torch {name} {what} vs {ref}|"


@register(
    "AT18",
    "[B]",
    "implementation identities: suffix-sum rotation of q, k equals the explicit route product; "
    "value rotation with the inverse output rotation equals Σ a_ij R(φ_j - φ_i) v_j; "
    "zero-initialised learned angles reproduce RoPE; the PaTH update k ← k - β(k·w)w equals H k",
    assumptions=("float64",),
)
def at18(ctx: Context) -> Evidence:
    """Claim AT18: the fast implementations, NumPy and torch, equal dense route products.

    NumPy (n = 40, d = 8; full n = 64): every fast path of :mod:`posflow.simulate.transport`
    against :func:`_dense_route`, the chunked PaTH scores (both routes) and outputs with chunks of
    C = 6 steps (n not a multiple of C) included. Torch (n = 24, H = 2, d_h = 8, float64, eval
    mode): RoPE, random_qk/qkv, learned_qk/qkv with random angle embeddings, and path, through
    the hooks ``qkv → scores → softmax → output`` of ``lm.Attention``, against dense route
    products of the angles (or Householder steps) the scheme itself produced; learned_qk at zero
    initialisation against lm.RoPE. Each error is held to a rounding bound computed from n, d
    (and C) and ‖q‖‖k‖.
    """
    rng = claim_rng(ctx, 18)
    n, d = (64, 8) if ctx.full else (40, 8)
    err, setup = _numpy_identities(rng, n, d)
    tol_np, why_np = _fp(n, d, max(setup["scale"], 1.0))
    ms = [
        at_most(key, val, 0.0, fp_tol(tol_np, why_np), label=_label(key))
        for key, val in err.items()
    ]
    rows = [["numpy", key, val, tol_np] for key, val in err.items()]
    tol_c, why_c = _fp_chunked(n, d, _CHUNK, max(setup["scale"], 1.0))
    ms += [
        at_most(key, val, 0.0, fp_tol(tol_c, why_c), label=_label(key))
        for key, val in setup["chunked"].items()
    ]
    rows += [["numpy", key, val, tol_c] for key, val in setup["chunked"].items()]
    n_t, H, d_t = 24, 2, 8
    try:
        import torch  # noqa: F401
    except ImportError as exc:  # pragma: no cover - torch is a dependency of the LM
        ms.append(
            undecided(
                "torch_schemes",
                float("nan"),
                f"torch is not importable ({exc})",
                label="torch schemes vs dense route products",
            )
        )
    else:
        terr, scale = _torch_identities(int(rng.integers(2**31)), n_t, H, d_t)
        tol_t, why_t = _fp(n_t, d_t, max(scale, 1.0))
        ms += [
            at_most(key, val, 0.0, fp_tol(tol_t, why_t), label=_label(key))
            for key, val in terr.items()
        ]
        rows += [["torch", key, val, tol_t] for key, val in terr.items()]
    ms.append(info("identities", len(rows)))
    return Evidence(
        ms,
        tables=[
            Table(
                "errors",
                "max |fast path − dense| per identity",
                ["backend", "identity", "max abs error", "rounding bound"],
                rows,
            )
        ],
        setup=f"NumPy: n = {n}, d = {d}, q, k, v ~ N(0, 1), θ ~ Unif[−1, 1], β ~ Unif[0, 2], "
        f"chunked PaTH with C = {_CHUNK}; "
        f"torch: n = {n_t}, H = {H}, d_h = {d_t}, float64, eval mode, schemes "
        f"{', '.join(_TORCH_SCHEMES)}.",
    )


# ------------------------------------------------------------------------------------------
# mutants: NumPy reference and torch schemes


def _suffix_off_by_one(original):
    @functools.wraps(original)
    def suffix(theta, route="from_source"):
        return original(theta, "path" if route == "from_source" else "from_source")

    return suffix


def _torch_suffix_exclusive(original):
    @functools.wraps(original)
    def suffix_sum(theta):
        import torch

        s = original(theta)
        return torch.cat([s[..., 1:, :], torch.zeros_like(s[..., :1, :])], dim=-2)

    return suffix_sum


def _torch_rotate_inverse(original):
    @functools.wraps(original)
    def rotate_half(t, phi):
        return original(t, -phi)

    return rotate_half


def _output_not_undone(original):
    @functools.wraps(original)
    def output(self, y, x):
        self._psi = None
        return y

    return output


def _rope_sin_cos_swapped(original):
    @functools.wraps(original)
    def _rotate(self, t):
        import torch

        n, half = t.shape[-2], self.d_head // 2
        ang = torch.arange(n, dtype=torch.float64)[:, None] * self.freq.to(t.device)
        cos, sin = ang.sin().to(t.dtype), ang.cos().to(t.dtype)
        t1, t2 = t[..., :half], t[..., half:]
        return torch.cat([t1 * cos - t2 * sin, t1 * sin + t2 * cos], dim=-1)

    return _rotate


def _inverse_transposed(original):
    @functools.wraps(original)
    def inverse(xp, a):
        return xp.matrix_transpose(original(xp, a))

    return inverse


def _carry_skips_last_step(original):
    @functools.wraps(original)
    def carry(xp, x, w, lw):
        # L is lower triangular, so the first C − 1 rows of L·W are the WY factor of the chunk
        # without its last step: the query skips H_{e} at every chunk boundary
        return original(xp, x, w[..., :-1, :], lw[..., :-1, :])

    return carry


_S = "posflow.simulate.models.schemes"
_HH = "posflow.simulate._householder"
add_mutant(
    "AT18",
    "suffix-angles-off-by-one",
    "posflow.simulate.transport:suffix_angles",
    _suffix_off_by_one,
    "NumPy suffix sums start one step late (Σ_{s>t} for Σ_{s≥t})",
)
add_mutant(
    "AT18",
    "rotate-blocks-inverse",
    "posflow.simulate.orthogonal:rotate_blocks",
    scaled_argument(1, -1.0, "angles"),
    "NumPy block rotation by −φ (sin sign flipped)",
)
add_mutant(
    "AT18",
    "householder-beta-half",
    "posflow.simulate.transport:householder_step",
    scaled_argument(2, 0.5, "beta"),
    "the PaTH update uses β/2",
)
add_mutant(
    "AT18",
    "householder-ut-inverse-transposed",
    f"{_HH}:_unit_lower_inverse",
    _inverse_transposed,
    "the chunked PaTH UT transform uses (I + A)⁻ᵀ B for (I + A)⁻¹ B",
)
add_mutant(
    "AT18",
    "householder-carry-skips-a-step",
    f"{_HH}:_carry",
    _carry_skips_last_step,
    "the chunked PaTH inter-chunk carry skips the last step of each chunk",
)
add_mutant(
    "AT18",
    "torch-suffix-sum-exclusive",
    f"{_S}:suffix_sum",
    _torch_suffix_exclusive,
    "torch suffix sums exclude the current step (Σ_{s>t} for Σ_{s≥t})",
)
add_mutant(
    "AT18",
    "torch-rotate-half-inverse",
    f"{_S}:rotate_half",
    _torch_rotate_inverse,
    "torch rotate_half rotates by −φ (sin sign flipped)",
)
add_mutant(
    "AT18",
    "torch-value-output-not-undone",
    f"{_S}:_Accumulated.output",
    _output_not_undone,
    "torch Q/K/V schemes skip the inverse output rotation",
)
add_mutant(
    "AT18",
    "torch-rope-sin-cos-swapped",
    "posflow.simulate.models.lm:RoPE._rotate",
    _rope_sin_cos_swapped,
    "lm.RoPE takes sin for cos and cos for sin",
)
add_mutant(
    "AT18",
    "torch-path-beta-half",
    f"{_S}:path_scores",
    scaled_argument(3, 0.5, "beta"),
    "torch path_scores uses β/2",
)
