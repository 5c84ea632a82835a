"""Claims PB8 and PB9 (claims.pb08_09_monotone_drift): measured numbers against independent
references (closed forms, entry-by-entry softmax kernels)."""

import math

import numpy as np
import pytest
from claim_runs import results_fixture
from shape_refs import softmax_kernel

IDS = ["PB8", "PB9"]


results = results_fixture(IDS)


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
