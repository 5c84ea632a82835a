"""Every registered mutant is killed: under it the claim FAILS, with a comparison failing that
passes on the unmutated code, and the summary names that comparison."""

import pytest
from claim_runs import baseline as _baseline

from posflow.proofs_checks.kit import _mutants as mut
from posflow.proofs_checks.kit._registry import Context, Evidence, get_claim

PAIRS = [(cid, m.name) for cid, ms in mut.all_mutants().items() for m in ms]


def test_every_claim_has_two_mutants():
    missing = {cid: len(ms) for cid, ms in mut.all_mutants().items() if len(ms) < 2}
    assert PAIRS and not missing, f"claims with fewer than two mutants: {missing}"


def test_mutants_cover_the_breaks_the_issue_names():
    """A reversed layer product, a leaking kernel and a zero detector each fail some claim."""
    targets = {m.target for ms in mut.all_mutants().values() for m in ms}
    names = {m.name for ms in mut.all_mutants().values() for m in ms}
    assert "posflow.simulate.rollout:_chain" in targets  # the layer order
    assert "posflow.simulate._kernel:Kernel._residual_step" in targets  # mass leaking
    assert any("zero" in n or "returns-0" in n for n in names), sorted(names)


@pytest.mark.parametrize(("cid", "name"), PAIRS, ids=[f"{c}-{n}" for c, n in PAIRS])
def test_mutant_is_killed(cid, name, monkeypatch):
    claim = get_claim(cid)
    base = _baseline(cid)
    if cid in ("PB15", "PB19", "PB20"):
        # PB15's and PB19's SmolLM2 sub-verdicts run the same routines as their toy LM (the
        # unmutated run above measures both); under a mutant only the toy is re-measured, to
        # keep the suite inside its time budget. The kill must then come from a toy comparison.
        from posflow.proofs_checks.claims import pb15_published, pb19_layerwise, pb20_like_for_like

        module = {"PB15": pb15_published, "PB19": pb19_layerwise, "PB20": pb20_like_for_like}[cid]
        monkeypatch.setattr(module, "_smollm2_installed", lambda: False)
    assert base.status != "ERROR", base.error
    (m,) = [m for m in mut.mutants_of(cid) if m.name == name]
    kill = mut.run_mutant(claim, m, Context(), base)
    assert kill.status == "FAILS", f"{cid} under {name}: {kill.status} {kill.error}"
    assert kill.killed, f"{cid} under {name} fails only comparisons that already failed"
    res = kill.result
    assert isinstance(res.evidence, Evidence)
    for key in kill.newly_failed:  # the summary names every comparison the mutant broke
        assert res.evidence[key].label in res.evidence.summary


def test_mutated_restores_every_binding():
    import posflow.proofs_checks.claims.pb01_02_diagonal_identity as pb
    import posflow.simulate.rollout as ro

    original = ro.diagonal
    (m,) = [m for m in mut.mutants_of("PB2") if m.name == "lambda-off-by-0.1%"]
    with mut.mutated(m) as replacement:
        assert ro.diagonal is replacement and pb.diagonal is replacement
    assert ro.diagonal is original and pb.diagonal is original


def test_bad_target_is_rejected():
    with pytest.raises(ValueError, match="target"):
        mut.Mutant("x", "no-colon", lambda f: f, "d")
    bad = mut.Mutant("x", "posflow.simulate.rollout:no_such_routine", lambda f: f, "d")
    with pytest.raises(ValueError, match="does not exist"), mut.mutated(bad):
        pass
