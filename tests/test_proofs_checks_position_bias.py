"""Claims PB1–PB7 (proofs_checks.position_bias): measured numbers against independent
references (the digest's reproduced values, closed forms, direct computations)."""

import math

import numpy as np
import pytest
from claim_runs import baseline

from posflow.simulate.kernels import uniform_kernel
from posflow.simulate.rollout import influence, power_decay


@pytest.fixture(scope="module")
def results():
    class _Runs(dict):
        def __missing__(self, cid):  # each claim's quick seed-0 run, once per test process
            return baseline(cid)

    return _Runs()


def test_pb3_reproduces_the_digest_example(results):
    ev = results["PB3"].evidence
    assert ev.status == "HOLDS"
    # uniform kernel n = 64, λ_t = 0.5/(t+1)², T = 100: min P_ii = 0.3675 (papers/A §6.3)
    exact = ev["uniform_n64_T100_min_Pii_exact"].value
    assert exact == pytest.approx(0.3675, abs=5e-5)
    d = 1 - 1 / np.arange(1, 65)
    direct = np.prod(1 - np.outer(power_decay(0.5, 2.0, 100), d), axis=0).min()
    assert exact == pytest.approx(direct, rel=1e-12)


def test_pb3_exact_sides_match_an_independent_fraction_computation():
    # theory.diagonal_bound's middle/lower against a direct Fraction product on one rollout
    from fractions import Fraction

    from posflow.proofs_checks.kit._inputs import random_layers
    from posflow.theory import rollout as th

    ks, lam = random_layers(np.random.default_rng(5), 6, 7)
    db = th.diagonal_bound([k.diagonal() for k in ks], lam, exact="rational")
    mid = low = Fraction(1)
    for k, lt in zip(ks, lam, strict=True):
        d = max(1 - Fraction(float(a)) for a in k.diagonal())
        mid *= 1 - Fraction(float(lt)) * d
        low *= 1 - Fraction(float(lt))
    assert db.middle == mid and db.lower == low
    assert db.min_diagonal >= db.middle >= db.lower


def test_pb4_bound_is_below_the_measured_minimum_and_euler_product(results):
    ev = results["PB4"].evidence
    assert ev.status == "HOLDS"
    for row in ev.table("cases").rows:
        _, beta, delta, log_inf, min_log, _, p_first, one_minus_inf = row
        assert min_log >= log_inf and math.isfinite(log_inf)
        assert p_first <= one_minus_inf
        if beta == 2.0:
            # Euler: ∏_{s≥1} (1 − c/s²) = sin(π√c)/(π√c), c = λ0 δ; the check's bound is that
            # minus an integral tail ≤ λ0 δ/10^5
            c = 0.5 * delta
            exact = math.log(math.sin(math.pi * math.sqrt(c)) / (math.pi * math.sqrt(c)))
            assert log_inf <= exact <= log_inf + 1e-5
    for key in ("uniform_beta2", "alibi_beta1.5"):
        assert ev[f"{key}_symbolic_no_collapse"].value is True
        assert ev[f"{key}_p_last_is_P_last_last"].passed


def test_pb5_matches_independent_references(results):
    ev = results["PB5"].evidence
    assert ev.status == "HOLDS"
    # e_{n-1} C^10 for the Cesàro matrix by dense powers (digest: 4.4e-2 at T = 10)
    n = 64
    C = np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]
    row = np.linalg.matrix_power(C, 10)[-1]
    assert ev["uniform_lambda1_offmass_vs_exact"].value == pytest.approx(1 - row[0], rel=1e-9)
    assert ev["uniform_lambda1_offmass_vs_exact"].value == pytest.approx(4.4e-2, rel=0.02)
    # λ ≡ 0.2 (digest: 1.2e-3 at T = 100), independent dense power
    R = 0.8 * np.eye(n) + 0.2 * C
    assert 1 - np.linalg.matrix_power(R, 100)[-1, 0] == pytest.approx(1.2e-3, rel=0.05)
    # the exponential rate is the sub-leading eigenvalue 1 − λ/2 of R
    assert ev["exponential_rate_lambda0.2"].value == pytest.approx(math.log(0.9), abs=1e-10)
    # polynomial: fitted exponent ≈ −ελ0 = −0.4 and the closed form behind the bracket
    assert ev["polynomial_exponent_vs_wendel_lower"].value == pytest.approx(-0.4, abs=1e-3)
    from scipy.special import gammaln

    from posflow.proofs_checks.claims.pb04_07_depth import _POLY_A, _POLY_KERNEL, _POLY_V
    from posflow.simulate.kernels import dense_kernel
    from posflow.simulate.rollout import rollout_matrix

    T = 50
    P = rollout_matrix(dense_kernel(np.array(_POLY_KERNEL)), power_decay(1.0, 1.0, T))
    a = _POLY_A
    closed = _POLY_V / a * math.exp(gammaln(T + a) - gammaln(a) - gammaln(T + 1))
    assert 1 - P[2, 0] == pytest.approx(closed, rel=1e-12)


def test_pb6_numeric_split_is_the_p_series_rule(results):
    ev = results["PB6"].evidence
    assert ev.status == "HOLDS"
    for beta, sym, num, depth, _, _ in ev.table("classification").rows:
        want = "collapse" if beta <= 1 else "no collapse"
        assert sym == want and num == want, beta
        assert depth in (10**3, 10**4)
    sens = {row[0]: row[-1] for row in ev.table("sensitivity_ratio_extrapolation_decades").rows}
    assert sens[1] == "HOLDS"
    assert sens[0] == "FAILS"  # the bare ratio test at 10^3 calls β = 1.1 collapse
    (fig,) = ev.figures
    panel = fig.panels[0]
    assert panel.logx and panel.logy and len(panel.series) == 6


def test_pb6_classifier_rule():
    from posflow.proofs_checks.claims.pb04_07_depth import _classify

    assert _classify([1.3, 1.2], 1) == "collapse"
    assert _classify([1.1, 0.9], 1) == "no collapse"
    assert _classify([1.5, 1.1], 1) is None  # 1.1 − 0.4 < 1 ≤ 1.1
    assert _classify([1.5, 1.1], 0) == "collapse"


def test_pb7_rate_and_closed_form(results):
    from fractions import Fraction

    ev = results["PB7"].evidence
    assert ev.status == "HOLDS"
    assert ev["uniform_rate_vs_subdominant_eigenvalue"].value == pytest.approx(
        math.log(0.5), abs=1e-10
    )
    # 1 − P[n−1,0] = Σ_k (−1)^{k+1} C(n−1,k) (k+1)^{−T} for λ ≡ 1 (Hausdorff), n = 64, T = 120
    n, T = 64, 120
    exact = sum(
        (-1) ** (k + 1) * math.comb(n - 1, k) * Fraction(1, (k + 1) ** T) for k in range(1, n)
    )
    p = influence(uniform_kernel(n), np.ones(T))
    assert p[1:].sum() == pytest.approx(float(exact), rel=1e-11)


def test_uniform_influence_sanity():
    # the uniform kernel's one-layer influence is the last row of the Cesàro matrix
    p = influence(uniform_kernel(5), [1.0])
    np.testing.assert_allclose(p, np.full(5, 0.2))
