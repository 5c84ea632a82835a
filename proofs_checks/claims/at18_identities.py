"""Claim AT18 of [B]: the implementation identities of accumulated transport.

Every fast path is compared with a dense route product P_{j→i} built step by step
(:mod:`posflow.simulate.identities`: block rotations written out entry by entry, a plain loop of
route products), independently of the routines under test:

* the NumPy reference (:mod:`posflow.simulate.transport`): suffix-sum angles, ``so2_scores``,
  the inverse output rotation of values and ``so2_value_output``, zero-initialised learned angles
  against RoPE, the PaTH key-cache update and ``householder_scores``, the chunked (compact-WY /
  UT-transform) ``householder_route_scores`` on both routes and ``path_attention`` against the
  softmax of the dense Householder scores, absolute frames and ``orthogonal_scores`` on both
  route conventions, and ``route_product`` itself
  (:func:`posflow.simulate.identities.numpy_identity_errors`);
* the torch schemes that claim AT20 trains (:mod:`posflow.simulate.models.schemes` and
  ``lm.RoPE``): RoPE, random Q/K and Q/K/V, learned Q/K and Q/K/V (with random, non-zero angle
  embeddings, and at zero initialisation against RoPE), and PaTH, run through their
  ``qkv``/``scores``/``output`` hooks exactly as ``lm.Attention`` calls them, in float64
  (:func:`posflow.simulate.models.scheme_identities.torch_identity_errors`).

Without torch the torch part is undecided (the verdict is then INCONCLUSIVE).
"""

from __future__ import annotations

import functools

import array_api_compat as aac
import numpy as np

from posflow.proofs_checks.claims import at18_identities_refs as R
from posflow.proofs_checks.kit import (
    Context,
    Evidence,
    Table,
    add_mutant,
    at_most,
    cite,
    claim_rng,
    fp_tol,
    info,
    register,
    scaled_argument,
    undecided,
)
from posflow.simulate.identities import numpy_identity_errors

_U = 1.1102230246251565e-16  # float64 unit roundoff
_CHUNK = 6  # chunk length of the chunked PaTH checks: n = 40 and 64 are not multiples of it


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


_T = "posflow.simulate.transport"
_M = "posflow.simulate.models"
_S = f"{_M}.schemes"
_LOOP = "the 2×2-matrix route product written as a loop in the check (at18_identities_refs)"
_DENSE = ("the dense route products of simulate.identities (plain loops; dense_scores is itself "
          "compared with the check's 2×2 loop)")
_CITES = (
    cite(f"{_T}:suffix_angles", _LOOP, "explicit_suffix_sum_scores"),
    cite("posflow.simulate.orthogonal:rotate_blocks", _LOOP, "explicit_suffix_sum_scores",
         "explicit_value_inverse_rotation"),
    cite(f"{_T}:so2_scores", _LOOP + "; RoPE as (R(i f)q_i)·(R(j f)k_j) for zero-initialised "
         "learned angles", "explicit_so2_scores", "explicit_zero_init_learned_vs_rope"),
    cite(f"{_T}:so2_value_output", _LOOP, "explicit_so2_value_output"),
    cite(f"{_T}:householder_step", "the dense matrix (I − β w wᵀ) times k",
         "explicit_householder_step_vs_matrix"),
    cite(f"{_T}:householder_scores", "q_iᵀ H_i ⋯ H_{j+1} k_j, dense matrices one at a time",
         "explicit_householder_scores"),
    cite(f"{_T}:route_product", _LOOP + " as a d×d matrix", "explicit_route_product"),
    cite("posflow.simulate.identities:dense_scores", _LOOP, "explicit_vs_identities_dense_scores"),
    cite(f"{_T}:householder_route_scores", _DENSE, "householder_route_scores_path",
         "householder_route_scores_from_source"),
    cite(f"{_T}:path_attention", _DENSE + " and a causal softmax", "path_attention"),
    cite(f"{_T}:frame_prefix", _DENSE, "frames_from_source", "frames_path"),
    cite(f"{_T}:orthogonal_scores", _DENSE, "orthogonal_scores_from_source",
         "orthogonal_scores_path"),
    # torch (simulate.models): the scheme's own angles or Householder steps through dense
    # route products (simulate.identities) and lm.Attention's hooks, in float64
    cite(f"{_S}:suffix_sum", _DENSE + " of the scheme's angles",
         "torch_random_qk_scores", "torch_learned_qk_scores"),
    cite(f"{_S}:rotate_half", _DENSE + " of the scheme's angles",
         "torch_random_qk_scores", "torch_random_qkv_output"),
    cite(f"{_S}:path_scores", "q_iᵀ H_i ⋯ H_{j+1} k_j, dense matrices of the scheme's steps",
         "torch_path_scores"),
    cite(f"{_M}.lm:RoPE._rotate",
         "dense rotations R(i f) of simulate.identities; learned angles at zero initialisation",
         "torch_rope_scores", "torch_zero_init_learned_vs_rope"),
)  # fmt: skip
_TORCH_KEYS = sorted({k for c in _CITES if c.routine.startswith(_M) for k in c.keys})

_TORCH_SCHEMES = ("rope", "random_qk", "random_qkv", "learned_qk", "learned_qkv", "path")


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


def _judged(backend: str, errors: dict, tol: float, why: str) -> tuple[list, list]:
    """Each error held to the rounding bound ``tol``, and its table rows."""
    ms = [
        at_most(key, val, 0.0, fp_tol(tol, why), label=_label(key)) for key, val in errors.items()
    ]
    return ms, [[backend, key, val, tol] for key, val in errors.items()]


def _torch_part(rng, n: int, H: int, d: int) -> tuple[list, list]:
    """The torch schemes against dense route products, or undecided without torch."""
    try:
        import torch  # noqa: F401
    except ImportError as exc:  # pragma: no cover - torch is a dependency of the LM
        why = f"torch is not importable ({exc})"
        return [undecided(k, float("nan"), why, label=_label(k)) for k in _TORCH_KEYS], []
    from posflow.simulate.models.scheme_identities import torch_identity_errors

    terr, scale = torch_identity_errors(int(rng.integers(2**31)), n, H, d, _TORCH_SCHEMES)
    return _judged("torch", terr, *_fp(n, d, max(scale, 1.0)))


@register(
    "AT18",
    "[B]",
    "implementation identities: suffix-sum rotation of q, k equals the explicit route product; "
    "value rotation with the inverse output rotation equals Σ a_ij R(φ_j - φ_i) v_j; "
    "zero-initialised learned angles reproduce RoPE; the PaTH update k ← k - β(k·w)w equals H k",
    assumptions=("float64",),
    compares=_CITES,
)
def at18(ctx: Context) -> Evidence:
    """Claim AT18: the fast implementations, NumPy and torch, equal dense route products.

    NumPy (n = 40, d = 8; full n = 64): every fast path of :mod:`posflow.simulate.transport`
    against :func:`posflow.simulate.identities.dense_route`, the chunked PaTH scores (both
    routes) and outputs with chunks of C = 6 steps (n not a multiple of C) included. Torch
    (n = 24, H = 2, d_h = 8, float64, eval mode): RoPE, random_qk/qkv, learned_qk/qkv with random
    angle embeddings, and path, through the hooks ``qkv → scores → softmax → output`` of
    ``lm.Attention``, against dense route products of the angles (or Householder steps) the
    scheme itself produced; learned_qk at zero initialisation against lm.RoPE. Each error is held
    to a rounding bound computed from n, d (and C) and ‖q‖‖k‖. The four identities of the
    statement (suffix sums, the inverse output rotation, zero-initialised learned angles, the
    PaTH update) and ``route_product`` are also compared row by row with 2×2-matrix loops
    written in the check (the worst query row judged); negative controls: the row judge rejects
    one wrong row, suffix sums one step late and β/2.
    """
    rng = claim_rng(ctx, 18)
    n, d = (64, 8) if ctx.full else (40, 8)
    err, chunked, scale = numpy_identity_errors(rng, n, d, _CHUNK)
    ms, rows = _judged("numpy", err, *_fp(n, d, max(scale, 1.0)))
    more, more_rows = _judged("numpy", chunked, *_fp_chunked(n, d, _CHUNK, max(scale, 1.0)))
    n_t, H, d_t = 24, 2, 8
    torch_ms, torch_rows = _torch_part(rng, n_t, H, d_t)
    ms += [*more, *torch_ms, *R.explicit_rows(rng, n, d, lambda s: _fp(n, d, s))]
    rows += [*more_rows, *torch_rows]
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
    def solve(xp, a, b):
        # (I + A)⁻ᵀ B = (I + Aᵀ)⁻¹ B: an upper-triangular system, solved densely
        eye = xp.eye(a.shape[-1], dtype=a.dtype, device=aac.device(a))
        return xp.linalg.solve(eye + xp.matrix_transpose(a), b)

    return solve


def _transport_skips_last_step(original):
    @functools.wraps(original)
    def transport(xp, w, lw):
        # L is lower triangular, so the first C − 1 rows of L·W are the WY factor of the chunk
        # without its last step: the chunk transport P skips H_{e} at every chunk boundary
        return original(xp, w[..., :-1, :], lw[..., :-1, :])

    return transport


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
    f"{_HH}:_unit_lower_solve",
    _inverse_transposed,
    "the chunked PaTH UT transform uses (I + A)⁻ᵀ B for (I + A)⁻¹ B",
)
add_mutant(
    "AT18",
    "householder-carry-skips-a-step",
    f"{_HH}:_transport",
    _transport_skips_last_step,
    "the chunked PaTH chunk transport (the inter-chunk carry) skips the last step of each chunk",
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


def _best_row(original):
    @functools.wraps(original)
    def rows_judge(key, got, ref, tol, reason, label):
        m = original(key, got, ref, tol, reason, label)
        best = float(np.min(R.row_errors(got, ref)))
        return at_most(key, best, 0.0, m.tol, label=label)

    return rows_judge


def _relative_rows(original):
    @functools.wraps(original)
    def rows_judge(key, got, ref, tol, reason, label):
        return original(key, got, ref, 100 * tol, reason, label)

    return rows_judge


_REFS = "posflow.proofs_checks.claims.at18_identities_refs"
add_mutant("AT18", "loosened-rows-judge-best-row", f"{_REFS}:rows_judge", _best_row,
           "the row judge takes the best query row for the worst")  # fmt: skip
add_mutant("AT18", "loosened-rows-judge-100x", f"{_REFS}:rows_judge", _relative_rows,
           "the row judge at 100× the rounding bound")  # fmt: skip
