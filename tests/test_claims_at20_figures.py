"""claims.at20_figures: AT20's figure refuses a store without runs."""

import pytest

from posflow.proofs_checks.claims import at20_figures as AT


def test_plot_refuses_an_empty_store(tmp_path):
    with pytest.raises(ValueError, match="no results"):
        AT.plot_extrapolation(None, tmp_path / "x.png")
