"""Claims PB8–PB14 (proofs_checks.position_bias_shape, position_bias_profiles,
position_bias_real): measured numbers against independent references (closed forms, dense
products, entry-by-entry softmax kernels)."""

import math

import numpy as np
import pytest
from scipy import integrate

from posflow.proofs_checks.claims import _relaxations_pb as rx
from posflow.proofs_checks.claims import pb11_12_profiles as pbp
from posflow.proofs_checks.kit._registry import Context, get_claim, run_claim

IDS = ["PB8", "PB9", "PB10", "PB11", "PB12", "PB13", "PB14"]


@pytest.fixture(scope="module")
def results():
    ctx = Context(size="quick", seed=0)
    return {cid: run_claim(get_claim(cid), ctx) for cid in IDS}


def softmax_kernel(n, slopes, content):
    """Head average of softmax_{j<=i}(c [i=j] - m (i-j)), vectorised over rows."""
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    d = (i - j).astype(float)
    A = np.zeros((n, n))
    for m, c in zip(slopes, content, strict=True):
        logit = np.where(d == 0, c, -m * d)
        logit = np.where(d < 0, -np.inf, logit)
        w = np.exp(logit - logit.max(axis=1, keepdims=True))
        A += w / w.sum(axis=1, keepdims=True)
    return A / len(slopes)


def dense_last_row(A, lam, T):
    R = (1 - lam) * np.eye(A.shape[0]) + lam * A
    return np.linalg.matrix_power(R, T)[-1]


def test_every_claim_holds(results):
    for cid in IDS:
        assert results[cid].status == "HOLDS", (cid, results[cid].evidence.summary)


def test_pb8_control_is_in_the_verdict(results):
    ev = results["PB8"].evidence
    ctl = ev["negative_slope_deficit"]
    assert ctl.role == "control" and ctl.judged
    A = softmax_kernel(8, [-1.0], [5.0])
    F = np.cumsum(A, axis=1)
    brute = max(F[b, k] - F[a, k] for a in range(8) for b in range(a + 1, 8) for k in range(8))
    assert ctl.value == pytest.approx(brute, abs=1e-13) and brute > 0.1
    assert ev["max_deficit_single_head"].value <= 1e-12


def test_pb9_figure_marks_the_limits(results):
    fig = results["PB9"].evidence.figures[0]
    levels = sorted(y for y, _ in fig.panels[0].hlines)
    q = math.exp(-0.1)
    ref = sorted(q / ((1 - q) * (math.exp(c) * (1 - q) + q)) for c in (0.0, 3.0, -3.0))
    assert levels == pytest.approx(ref, rel=1e-12)
    assert ref[1] == pytest.approx(1 / (math.exp(0.1) - 1), rel=1e-12)


def test_pb10_edge_mass_formula_by_hand():
    rng = np.random.default_rng(1)
    n, T = 9, 5
    As = [softmax_kernel(n, rng.uniform(0, 2, 2), rng.uniform(-3, 3, 2)) for _ in range(T)]
    lam = rng.uniform(0, 1, T)
    P = np.eye(n)
    for A, lt in zip(As, lam, strict=True):
        P = ((1 - lt) * np.eye(n) + lt * A) @ P
    prod = np.prod([1 - lt * (1 - A[-1, -1]) for A, lt in zip(As, lam, strict=True)])
    assert P[-1, -1] == pytest.approx(prod, rel=1e-13)


def test_pb11_stored_references_from_a_dense_rollout():
    slopes32 = [2.0 ** (-8.0 * (h + 1) / 32) for h in range(32)]
    cases = {
        "bloom-7b1 slopes (32 heads), c = 0": (slopes32, [0.0] * 32),
        "bloom-7b1 slopes, c = 2": (slopes32, [2.0] * 32),
        "single head m = 0.05, c = 0": ([0.05], [0.0]),
    }
    for name, (m, c) in cases.items():
        p = dense_last_row(softmax_kernel(256, m, c), 0.1, 32)
        p0, k, plast = pbp.PB11_REFERENCE[name]
        assert p[0] == pytest.approx(p0, abs=1e-13)
        assert int(np.argmin(p)) == k and p[-1] == pytest.approx(plast, abs=1e-13)


def test_valley_rejects_minima_at_the_ends():
    n = 256
    j = np.arange(n, dtype=float)
    v = np.abs(j - 128) + 10  # a symmetric V: a U
    assert pbp.is_u(v)
    near_start = np.abs(j - 3) + 10  # argmin at j = 3: within the 13-token margin
    k, depth, away = pbp.valley(near_start)
    assert k == 3 and depth > 0.2 and not away and not pbp.is_u(near_start)
    near_end = np.abs(j - 254) + 10
    assert not pbp.is_u(near_end)
    shallow = 1.0 - 0.01 * np.exp(-((j - 128) ** 2) / 50)  # dip 1 %: below U_MIN_DEPTH
    assert pbp.valley(shallow)[0] == 128 and not pbp.is_u(shallow)


def test_pb11_reports_dips_and_sensitivity(results):
    ev = results["PB11"].evidence
    sens = ev.table("pb11_u_sensitivity")
    row = [r for r in sens.rows if r[0] == pbp.U_MIN_DEPTH and r[1] == pbp.U_END_MARGIN]
    assert len(row) == 1 and row[0][-1] == "HOLDS"
    assert ev["u_cells_bloom_c0"].value == row[0][2]
    val = ev.table("pb11_valleys")
    assert all(0 < r[4] < 255 for r in val.rows)
    # a dip at j = 1-5 or 254 never counts as a U
    assert not any(r[7] for r in val.rows if r[4] <= 5 or r[4] >= 250)
    assert ev["u_in_plane"].tol.kind == "parameter"
    fig = results["PB11"].evidence.figures[0]
    assert all(p.xlabel.startswith("Σλ") for p in fig.panels)


def test_pb11_relaxation_is_not_fooled_by_diagonal_content():
    # diagonal content alone (c = 2, λ ≡ 1) makes a U here: not a counterexample
    ex = {"n": 12, "slopes": [0.2], "content": [2.0], "T": 6}
    assert rx.residual_violation(ex) < 0
    A = softmax_kernel(12, [0.2], [2.0])
    p = np.linalg.matrix_power(A, 6)[-1]
    assert pbp.is_u(p)
    # the same kernel without content has no dip at all: a counterexample
    assert rx.residual_violation(dict(ex, content=[0.0])) > 0


def test_pb12_numbers_and_bound(results):
    ev = results["PB12"].evidence
    assert ev["atom"].value == pytest.approx((2 / 3) * (1 / 2) * (4 / 5) * (1 / 4), rel=1e-15)
    assert ev["max_abs_error_exact_vs_numeric"].value <= 1e-13
    assert ev["monte_carlo_p0"].tol.kind == "statistical"
    assert ev["cdf_gap_n64000"].value < ev["cdf_gap_n4000"].value
    # the closed-form bound dominates the Hoeffding integral ∫ f(y) e^{-2N(x-y)^2} dy
    law = pbp.th.limit_law(["1/3", "1/2", "1/5", "3/4"])
    N = 3999
    for x in (0.1, 0.3, 0.7, 0.95):
        integral = integrate.quad(
            lambda y, x=x: float(law.pdf(y)) * math.exp(-2 * N * (x - y) ** 2), 0, 1, points=[x]
        )[0]
        assert integral <= pbp._hoeffding_bound(law, np.array([x]), N)[0]


def test_pb13_is_a_convention():
    assert get_claim("PB13").source == "[convention]"


def test_pb14_references(results):
    ev = results["PB14"].evidence
    assert ev["b_p0_ref_bloom"].value == pytest.approx(0.0203, abs=1e-4)
    assert abs(ev["b_p0_ref_bloom"].value - 0.020289158843837786) <= 1e-6
    assert ev["b_argmin_bloom"].value == 61
    for model in ("falcon-rw-7b", "mpt-7b", "mpt-30b", "bloom-7b1", "bloom"):
        assert ev[f"a_off_token0_{model}"].tol.parameter == "PB14_A_MAX_OFF"
        assert ev[f"c_recency_{model}_fineweb-edu"].value > 0
    assert ev.table("pb14_a_sensitivity").rows[1][-1] == "HOLDS"  # the 0.01 used
    assert {r[1] for r in ev.table("pb14_c_profiles").rows} == {"fineweb-edu", "dclm", "wikipedia"}


def test_pb14_slope_conventions_from_a_dense_rollout(results):
    import gzip
    import json
    from importlib import resources

    blob = resources.files("posflow.simulate").joinpath("data", "measured_configs.json.gz")
    data = json.loads(gzip.decompress(blob.read_bytes()))["configs"]
    (cfg,) = [
        e
        for e in data
        if (e["model"], e["setting"], e["dataset"]) == ("falcon-rw-7b", "no_content", "fineweb-edu")
    ]
    A = softmax_kernel(256, np.array(cfg["slopes"]) / 8, [0.0] * len(cfg["slopes"]))
    p = np.zeros(256)
    p[-1] = 1.0
    for lam in cfg["lambdas"][::-1]:
        p = (1 - lam) * p + lam * (p @ A)
    rows = results["PB14"].evidence.table("pb14_slope_conventions").rows
    (logit,) = [r for r in rows if r[1].startswith("m_h/8")]
    assert logit[2] == pytest.approx(p[0], abs=1e-12) and logit[3] == int(np.argmin(p)) == 254
    assert logit[5] is False  # in logit units the falcon (b) profile is no U
    (hf,) = [r for r in rows if r[1] == "HF slopes"]
    assert hf[2] == pytest.approx(0.0112, abs=1e-4) and hf[3] == 40  # the digest's numbers
