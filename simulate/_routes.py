"""Route angles, dense route products and absolute frames (paper [B], claims AT2, AT18).

Re-exported by :mod:`posflow.simulate.transport`, whose docstring states the conventions (routes
``"from_source"`` and ``"path"``, P_{j→i} with the later step on the left). Every function takes
NumPy arrays, array_like or one other backend's arrays and returns arrays of that backend.
"""

from __future__ import annotations

from posflow.simulate._arrays import as_float, namespace_of, worst_above, wrap

__all__ = [
    "ROUTES",
    "absolute_angles",
    "check_route",
    "frame_prefix",
    "orthogonal_steps",
    "route_angles",
    "route_product",
    "suffix_angles",
    "wrap_angle",
]

ROUTES = ("from_source", "path")


def check_route(route: str) -> int:
    """The shift of a route: 0 for from_source (steps j … i−1), 1 for path (steps j+1 … i)."""
    if route not in ROUTES:
        raise ValueError(f"route must be one of {ROUTES}; got {route!r}")
    return 0 if route == "from_source" else 1


def wrap_angle(x):
    """Wrap angles to (−π, π]: π − ((π − x) mod 2π). Shape preserved (claim AT18)."""
    at = namespace_of(x)
    return wrap(at.xp, as_float(at, x, "x", finite=False))


def absolute_angles(theta, route: str = "from_source"):
    """Prefix (absolute) angles Φ, shape (n, d/2), wrapped to (−π, π] (claims AT18, AT19).

    from_source: Φ_t = Σ_{s<t} θ_s;  path: Φ_t = Σ_{s≤t} θ_s;  route angle of j→i = Φ_i − Φ_j.
    Float64 cumulative sums, absolute error ≲ n·ε·max_t|Σ_{s≤t} θ_s|. Cost O(n·d).
    """
    shift = check_route(route)
    at = namespace_of(theta)
    xp = at.xp
    theta = as_float(at, theta, "theta", 2)
    c = xp.cumulative_sum(theta, axis=0)
    if shift == 0:
        zero = xp.zeros((1, theta.shape[1]), dtype=xp.float64, device=at.device)
        c = xp.concat([zero, c[:-1, ...]], axis=0)
    return wrap(xp, c)


def suffix_angles(theta, route: str = "from_source"):
    """Suffix angles φ of [B]'s code (flip → cumsum → flip), shape (n, d/2) (claim AT18).

    from_source: φ_t = Σ_{s≥t} θ_s;  path: φ_t = Σ_{s>t} θ_s;  route angle of j→i = φ_j − φ_i,
    so (R(φ_i) q)·(R(φ_j) k) = qᵀ R(φ_j − φ_i) k. Wrapped to (−π, π]. Cost O(n·d).
    """
    shift = check_route(route)
    at = namespace_of(theta)
    xp = at.xp
    theta = as_float(at, theta, "theta", 2)
    c = xp.flip(xp.cumulative_sum(xp.flip(theta, axis=0), axis=0), axis=0)
    if shift == 1:
        zero = xp.zeros((1, theta.shape[1]), dtype=xp.float64, device=at.device)
        c = xp.concat([c[1:, ...], zero], axis=0)
    return wrap(xp, c)


def route_angles(theta, j: int, i: int, route: str = "from_source"):
    """Direct route angle Σ_{s∈route(j→i)} θ_s, shape (d/2,), wrapped; a reference (claim AT18).

    from_source: Σ_{s=j}^{i−1} θ_s;  path: Σ_{s=j+1}^{i} θ_s. Requires 0 ≤ j ≤ i < n.
    """
    shift = check_route(route)
    at = namespace_of(theta)
    theta = as_float(at, theta, "theta", 2)
    if not 0 <= j <= i < theta.shape[0]:
        raise ValueError(f"need 0 <= j <= i < n = {theta.shape[0]}; got j={j}, i={i}")
    return wrap(at.xp, at.xp.sum(theta[j + shift : i + shift, ...], axis=0))


def route_product(steps, j: int, i: int, route: str = "from_source"):
    """Dense route product P_{j→i}, shape (d, d); the reference for every fast path.

    from_source: M_{i−1} ⋯ M_j;  path: M_i ⋯ M_{j+1} (later steps on the left; P_{i→i} = I).
    steps: shape (n, d, d), any matrices. Cost O((i − j)·d³). Claims AT2, AT18.
    """
    shift = check_route(route)
    at = namespace_of(steps)
    steps = as_float(at, steps, "steps", 3)
    if not 0 <= j <= i < steps.shape[0]:
        raise ValueError(f"need 0 <= j <= i < n = {steps.shape[0]}; got j={j}, i={i}")
    p = at.xp.eye(steps.shape[1], dtype=at.xp.float64, device=at.device)
    for s in range(j + shift, i + shift):
        p = steps[s, ...] @ p
    return p


def orthogonal_steps(at, steps, atol: float):
    """Validate steps (n, d, d), n ≥ 1, with max|M Mᵀ − I| ≤ atol for every step; on ``at``."""
    xp = at.xp
    steps = as_float(at, steps, "steps", 3)
    n, d, d2 = steps.shape
    if d != d2 or n < 1:
        raise ValueError(f"steps must have shape (n, d, d) with n >= 1; got {tuple(steps.shape)}")
    eye = xp.eye(d, dtype=xp.float64, device=at.device)
    gram = steps @ xp.matrix_transpose(steps)
    err = xp.max(xp.reshape(xp.abs(gram - eye), (n, d * d)), axis=1)
    t = worst_above(xp, err, atol)
    if t is not None:
        raise ValueError(
            f"steps must be orthogonal to atol={atol}; step {t} has max|M Mᵀ − I| = "
            f"{float(err[t]):.3g}"
        )
    return steps


def frame_prefix(steps, route: str = "from_source", atol: float = 1e-8):
    """Absolute frames G_t with P_{j→i} = G_i G_jᵀ for orthogonal steps, shape (n, d, d).

    F_t = M_t ⋯ M_0; G_t = F_{t−1} (from_source, G_0 = I) or G_t = F_t (path).
    Cost n d×d products, O(n·d³), once. Raises ValueError if a step is not orthogonal to atol.
    Claims AT2, AT18.
    """
    shift = check_route(route)
    at = namespace_of(steps)
    steps = orthogonal_steps(at, steps, atol)
    f = at.xp.eye(steps.shape[1], dtype=at.xp.float64, device=at.device)
    frames = []
    for t in range(steps.shape[0]):
        if shift == 0:
            frames.append(f)
        f = steps[t, ...] @ f
        if shift == 1:
            frames.append(f)
    return at.xp.stack(frames, axis=0)
