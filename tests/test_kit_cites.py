"""Citations (kit.cite): what a check compares with an independent reference. A cited
comparison missing from the evidence is an ERROR; the counters see every call of a cited routine,
also through ``from … import`` copies; the catalog lists the citations."""

import numpy as np
import pytest

from posflow.proofs_checks import kit
from posflow.proofs_checks.kit import _registry as registry
from posflow.simulate import dense_kernel, rollout

FP = kit.fp_tol(1e-12, "rounding")
ROUTINE = "posflow.simulate.rollout:influence"


def _claim(check, *cites):
    return registry.Claim("ZZ1", "[D]", "a test claim", (), check, compares=tuple(cites))


def _check_calling_influence(ctx):
    K = dense_kernel(kit.random_causal(np.random.default_rng(0), 6))
    p = rollout.influence([K], [0.5])  # through the module attribute
    return kit.Evidence([kit.at_most("mass_error", abs(float(p.sum()) - 1), 0.0, FP)])


def test_a_cited_comparison_present_and_judged_runs_normally():
    c = _claim(_check_calling_influence, kit.cite(ROUTINE, "the mass invariant", "mass_error"))
    r = registry.run_claim(c, registry.Context())
    assert r.status == "HOLDS", r.error


@pytest.mark.parametrize(
    ("keys", "words"), [(("nope",), "influence: nope"), (("mass_error", "x"), "influence: x")]
)
def test_a_missing_cited_comparison_is_an_error(keys, words):
    c = _claim(_check_calling_influence, kit.cite(ROUTINE, "the mass invariant", *keys))
    r = registry.run_claim(c, registry.Context())
    assert r.status == "ERROR" and words in r.error and "cites comparisons" in r.error


def test_an_unjudged_cited_measurement_is_an_error():
    def check(ctx):
        return kit.Evidence([kit.info("mass_error", 0.0), kit.holds("ok", True)])

    c = _claim(check, kit.cite(ROUTINE, "the mass invariant", "mass_error"))
    r = registry.run_claim(c, registry.Context())
    assert r.status == "ERROR" and "not judged" in r.error


def test_counting_sees_calls_through_every_binding():
    import posflow.simulate as sim  # posflow.simulate.influence: a from-import copy

    original = rollout.influence

    def check(ctx):
        K = dense_kernel(kit.random_causal(np.random.default_rng(0), 5))
        sim.influence([K], [0.3])
        rollout.influence([K], [0.3])
        return kit.Evidence([kit.at_most("mass_error", 0.0, 0.0, FP)])

    c = _claim(check, kit.cite(ROUTINE, "the mass invariant", "mass_error"))
    assert kit.cited_calls(c) == {ROUTINE: 2}
    assert rollout.influence is original and sim.influence is original  # restored


def test_a_cited_routine_never_called_counts_zero():
    def check(ctx):
        return kit.Evidence([kit.at_most("mass_error", 0.0, 0.0, FP)])

    c = _claim(check, kit.cite(ROUTINE, "the mass invariant", "mass_error"))
    assert kit.cited_calls(c) == {ROUTINE: 0}


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("influence", "ref", "k"), "pkg.module:name"),
        (("numpy.linalg:norm", "ref", "k"), "posflow.theory or posflow.simulate"),
        ((ROUTINE, " ", "k"), "needs a reference"),
        ((ROUTINE, "ref"), "at least one measurement key"),
    ],
)
def test_bad_citations_are_refused(args, words):
    with pytest.raises(ValueError, match=words):
        kit.cite(*args)


def test_register_refuses_a_routine_cited_twice_or_a_non_citation():
    c = kit.cite(ROUTINE, "ref", "k")
    with pytest.raises(ValueError, match="twice"):
        kit.register("ZZ2", "[D]", "s", compares=(c, c))
    with pytest.raises(TypeError, match="cite"):
        kit.register("ZZ3", "[D]", "s", compares=(ROUTINE,))


def test_the_catalog_lists_citations_and_the_expected_verdict():
    rec = kit.catalog_records([kit.get_claim("AT10")])[0]
    routines = [x["routine"] for x in rec["compares"]]
    assert "posflow.simulate.transport:near_far_mass" in routines
    assert rec["expected"] == {"quick": "HOLDS", "full": "HOLDS", "reason": "", "scope": ""}
    md = kit.to_markdown([rec])
    assert "- compares with an independent reference:" in md
    assert "`posflow.simulate.transport.near_far_mass` against" in md
    assert "- expected verdict: HOLDS" in md
