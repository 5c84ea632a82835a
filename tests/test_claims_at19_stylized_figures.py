"""Claim AT19's figure and tables (proofs_checks.claims.at19_stylized_figures)."""

import math

import numpy as np
import pytest

from posflow.proofs_checks.claims import at19_stylized_figures as F
from posflow.simulate.transport import planted_sweep, value_ratio_reference


def test_value_blocks_rows_are_the_square_roots_of_the_reference():
    rows = F.value_blocks([512, 2048])
    assert [r[0] for r in rows] == [512, 2048, 65536]
    for L, _, fast, every, slow in rows:
        assert every == pytest.approx(math.sqrt(value_ratio_reference(L)), rel=1e-15)
        assert fast < every < slow


def test_figure_has_the_three_panels_and_the_tables_their_names():
    sw = {s: planted_sweep(s, 0, only=(512,)) for s in ("rope", "random_qk", "alibi")}
    rows = [[512, 0.9, 0.01, 0.9, 1.0, 0.9, 0.5]]
    blk = F.value_blocks([512])
    fig = F.figure_at19(sw, [512], rows, blk, 0, 0.5)
    assert len(fig.panels) == 3 and len(fig.panels[0].series) == 5
    names = [t.key for t in F.tables_at19(rows, [], blk, 3.0, 512)]
    assert names == ["value_side", "tau_sensitivity", "value_blocks"]
    assert np.all(np.asarray(fig.panels[0].series[0].x) == 512)
