"""simulate.models.seed_store: the torch-free reader and the paired statistics of AT20, against
hand computations."""

import json
import math

import numpy as np
import pytest

from posflow.simulate.models import seed_store as SS


def store(tmp_path, runs, lengths=(4, 8), W=2):
    tmp_path.mkdir(parents=True, exist_ok=True)
    meta = {
        "format": SS.FORMAT,
        "eval_lengths": list(lengths),
        "windows": W,
        "config": {"train_len": lengths[0]},
    }
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    for (s, k), nats in runs.items():
        blob = {"scheme": s, "seed": k, "nats": nats}
        (tmp_path / SS.run_file(s, k)).write_text(json.dumps(blob))
    return SS.load_seed_store(tmp_path)


def test_t_interval_and_sign_test_match_hand_computations():
    m, lo, hi = SS.t_interval([0.1, 0.3, 0.2], 0.05)
    half = 4.302652729749464 * 0.1 / math.sqrt(3)  # t_{0.975, 2} · s / √n, s = 0.1
    assert m == pytest.approx(0.2, abs=1e-15)
    assert (lo, hi) == (pytest.approx(0.2 - half, rel=1e-12), pytest.approx(0.2 + half, rel=1e-12))
    assert SS.sign_test([1, 2, 3]) == 0.25  # 2 · (1/2)^3
    assert SS.sign_test([1, -1, 2, 3, 4]) == pytest.approx(2 * 6 / 32)  # 2 · P(Bin(5,½) ≤ 1)
    assert SS.sign_test([0, 0]) == 1.0 and SS.sign_test([1, -1]) == 1.0


@pytest.mark.parametrize("n", [1, 2, 5, 8, 13, 40])
def test_sign_test_is_the_exact_binomial_formula_for_every_split(n):
    """scipy's binomtest against min(1, 2·Σ_{i ≤ k} C(n, i)/2ⁿ), k = min(n₊, n₋), in exact
    rationals."""
    from fractions import Fraction
    from math import comb

    for plus in range(n + 1):
        k = min(plus, n - plus)
        want = min(Fraction(1), 2 * Fraction(sum(comb(n, i) for i in range(k + 1)), 2**n))
        got = SS.sign_test([1.0] * plus + [-1.0] * (n - plus) + [0.0])
        assert got == pytest.approx(float(want), rel=1e-12, abs=0)  # scipy sums in float64
    with pytest.raises(ValueError, match="at least 2"):
        SS.t_interval([1.0], 0.05)
    with pytest.raises(ValueError, match="alpha"):
        SS.t_interval([1.0, 2.0], 1.5)


def test_log_ratios_pair_by_seed_and_windows_are_shared(tmp_path):
    runs = {
        ("a", 0): [[1.0, 1.5], [2.0, 2.1]],
        ("a", 1): [[1.0, 1.2], [1.0, 1.4]],
        ("b", 1): [[3.0, 3.0], [3.0, 3.2]],
    }
    st = store(tmp_path, runs)
    assert st.schemes == ["a", "b"] and st.seeds("a") == [0, 1]
    la, lb = SS.log_ratios(st, "a", 8), SS.log_ratios(st, "b", 8)
    assert la == {0: pytest.approx(0.3), 1: pytest.approx(0.3)}  # (1.5+2.1)/2 − (1+2)/2
    assert lb == {1: pytest.approx(0.1)}
    np.testing.assert_allclose(SS.paired_differences(la, lb), [0.2])  # seed 1 only
    np.testing.assert_allclose(st.ppl("a", 0), np.exp([1.5, 1.8]))
    lo, hi = SS.window_bootstrap(st, "a", 8, reps=500)
    # window 0 gives ratios e^{0.5}, e^{0.2} (mean 0.35); window 1 gives e^{0.1}, e^{0.4} (0.25)
    assert math.exp(0.25) - 1e-12 <= lo <= hi <= math.exp(0.35) + 1e-12


def test_bad_stores_are_refused(tmp_path):
    assert SS.load_seed_store(tmp_path / "none") is None
    st = store(tmp_path / "s", {("a", 0): [[1.0, 1.0], [1.0, 1.0]]})
    assert st.train_len == 4
    (tmp_path / "s" / "b__s0.json").write_text(
        json.dumps({"scheme": "b", "seed": 0, "nats": [[1.0]]})
    )
    with pytest.raises(ValueError, match=r"b__s0\.json"):
        SS.load_seed_store(tmp_path / "s")
    (tmp_path / "s" / "b__s0.json").write_text("[1]")
    with pytest.raises(ValueError, match=r"b__s0\.json"):
        SS.load_seed_store(tmp_path / "s")


def test_ratio_summary_and_seed_means_match_hand_computations(tmp_path):
    runs = {
        ("a", 0): [[1.0, 1.5], [2.0, 2.1]],  # ℓ = 0.3
        ("a", 1): [[1.0, 1.1], [1.0, 1.1]],  # ℓ = 0.1
        ("b", 0): [[3.0, 3.0], [3.0, 3.2]],  # ℓ = 0.1
    }
    st = store(tmp_path, runs)
    assert SS.seed_mean_ppl(st, "a", 8) == pytest.approx(
        (math.exp(1.8) + math.exp(1.1)) / 2, rel=1e-14
    )
    assert SS.seed_mean_ratio(st, "a", 8) == pytest.approx(math.exp(0.2), rel=1e-14)
    summ = SS.ratio_summary(st)
    a8 = summ["a"][8]
    _, lo, hi = SS.t_interval([0.3, 0.1], 0.05)
    assert a8["ratio"] == pytest.approx(math.exp(0.2), rel=1e-14) and a8["seeds"] == 2
    assert (a8["lo"], a8["hi"]) == (pytest.approx(math.exp(lo)), pytest.approx(math.exp(hi)))
    assert summ["a"][4]["ratio"] == 1.0 and summ["a"][8]["ppl"] == SS.seed_mean_ppl(st, "a", 8)
    assert math.isnan(summ["b"][8]["lo"]) and summ["b"][8]["ratio"] == pytest.approx(
        math.exp(0.1)
    )  # one seed: no interval
    # the raw files give the same ratios; a perturbed summary is caught
    blobs = {k: {**json.loads((tmp_path / SS.run_file(*k)).read_text()), "train_len": 4,
                 "eval_lengths": [4, 8]} for k in runs}  # fmt: skip
    for k, blob in blobs.items():
        (tmp_path / SS.run_file(*k)).write_text(json.dumps(blob))
    assert SS.raw_ratio_error(str(tmp_path), st, summ) < 1e-14
    summ["b"][8]["ratio"] *= 1.01
    assert SS.raw_ratio_error(tmp_path, st, summ) == pytest.approx(0.01, rel=1e-9)


def test_paired_log_ratios_and_comparison_statistics(tmp_path):
    runs = {
        ("a", 0): [[1.0, 1.5], [1.0, 1.5]],
        ("a", 1): [[1.0, 1.2], [1.0, 1.2]],
        ("a", 2): [[1.0, 1.4], [1.0, 1.4]],
        ("b", 1): [[1.0, 1.1], [1.0, 1.1]],
        ("b", 2): [[1.0, 1.1], [1.0, 1.1]],
    }
    st = store(tmp_path, runs)
    d = SS.paired_log_ratios(st, "a", "b", 8)
    assert list(d) == [1, 2] and d == {1: pytest.approx(0.1), 2: pytest.approx(0.3)}
    assert SS.paired_log_ratios(st, "a", "missing", 8) == {}
    c = SS.comparison_statistics(d, 0.0, 0.05)
    _, lo, hi = SS.t_interval([d[1], d[2]], 0.05)
    assert c["n"] == 2 and c["mean"] == pytest.approx(0.2) and (c["lo"], c["hi"]) == (lo, hi)
    assert c["p_sign"] == SS.sign_test([0.1, 0.3]) == 0.5
    one = SS.comparison_statistics({0: 0.4}, 0.5, 0.05)
    assert one["n"] == 1 and one["mean"] == 0.4 and one["p_sign"] == 1.0
    assert math.isnan(one["lo"]) and math.isnan(one["hi"])
    none = SS.comparison_statistics({}, 0.5, 0.05)
    assert none["n"] == 0 and all(math.isnan(none[k]) for k in ("mean", "lo", "hi", "p_sign"))
