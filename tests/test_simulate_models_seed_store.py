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
