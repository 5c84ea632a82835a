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


def test_measured_is_shared_and_cleared_with_the_memos(monkeypatch):
    """One measurement per model, windows and options; a mutant's cache clearing empties it."""
    import functools

    from posflow.proofs_checks.kit import clear_caches
    from posflow.simulate.models import profiles_bootstrap as PB

    calls = []

    def fake(model, ids, **kw):
        calls.append(kw)
        return ("data", ids.sum())

    monkeypatch.setattr(PB, "measure_per_sequence", fake)
    clear_caches()

    def loader(n, count, seed):
        return "model", np.arange(n * count).reshape(count, n) + seed, f"model n = {n}"

    sub = S.Subject("m", "M", functools.partial(loader, 4, 2, 0))
    first = S.measured(sub)
    assert S.measured(sub) is not None and len(calls) == 1  # read again, not measured again
    assert first[3] == ("data", 28) and calls[0] == {"layer_influence": True, "lambdas_mlp": True}
    S.measured(S.Subject("m", "M", functools.partial(loader, 4, 2, 1)))  # other windows
    S.measured(sub, layer_influence=False)  # other options
    assert len(calls) == 3
    clear_caches()
    S.measured(sub)
    assert len(calls) == 4


def test_scope_of_every_model():
    for tag in S.MODEL_FACTS:
        got = S.scope_of(tag, 64, "16 windows", seeds=0)
        assert got["n"] == 64 and got["samples"] == "16 windows" and got["model"]
