"""simulate.models.subjects: the measured models of PB15 and PB19 with their windows."""

import numpy as np
import pytest

pytest.importorskip("torch")

from posflow.simulate.models import subjects as S


def test_toy_windows_are_held_out_at_the_training_length_and_repeatable():
    _, ids, note = S.toy_windows("quick", 4, seed=0)
    _, again, _ = S.toy_windows("quick", 4, seed=0)
    assert ids.shape == (4, 64) and np.array_equal(ids, again)  # the quick preset's length
    assert "held-out" in note and "sha256" in note and "N = 4" in note
    _, other, _ = S.toy_windows("quick", 4, seed=1)
    assert not np.array_equal(ids, other)


def test_installed_is_false_for_an_unknown_model():
    assert S.installed("no-such-model") is False


def test_subject_defaults_to_no_bootstrap():
    assert S.Subject("t", "name", lambda: None).bootstrap == 0
