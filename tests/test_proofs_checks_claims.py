"""Every claim, quick, seed 0: it runs, returns evidence whose every judged comparison carries a
tolerance with a kind and a reason, round-trips through JSON, and its figure specs draw."""

import json

import pytest
from claim_runs import baseline

from posflow.proofs_checks.kit import _registry as registry
from posflow.proofs_checks.kit._evidence import Evidence
from posflow.proofs_checks.kit._figures import render

IDS = [c.id for c in registry.all_claims()]
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("cid", IDS)
def test_claim_evidence_is_well_formed(cid, tmp_path):
    r = baseline(cid)
    assert r.error == "", r.error
    ev = r.evidence
    assert isinstance(ev, Evidence)
    assert r.status == ev.status
    for m in ev.measurements:
        if m.judged and m.test != "true":
            assert m.tol is not None and m.tol.reason, m.key
    d = json.loads(json.dumps(ev.as_json(), allow_nan=False))
    assert Evidence.from_json(d).summary == ev.summary
    for fig in ev.figures:
        path = render(fig, tmp_path / f"{fig.name}.png")
        assert path.read_bytes()[:8] == PNG


def test_checks_are_reproducible_with_a_seed():
    a = registry.run_claim(registry.get_claim("PB1"), registry.Context(seed=3)).evidence
    b = registry.run_claim(registry.get_claim("PB1"), registry.Context(seed=3)).evidence
    assert a.as_json() == b.as_json()


# -- issue 23: what a verdict can see --------------------------------------------------------

_CORE = ("posflow.theory", "posflow.simulate")


def _routines_of(module):
    """``{name: object}`` of the theory/simulate functions a claim module can reach by name:
    imported directly, or as ``alias.name`` of an imported theory/simulate module."""
    import inspect

    out = {}
    for alias, obj in vars(module).items():
        if inspect.ismodule(obj) and obj.__name__.startswith(_CORE):
            for name, fn in vars(obj).items():
                if callable(fn) and not name.startswith("_") and not inspect.isclass(fn):
                    out.setdefault(name, fn)
                    out[f"{alias}.{name}"] = fn
        elif (
            callable(obj)
            and not inspect.isclass(obj)
            and getattr(obj, "__module__", "").startswith(_CORE)
        ):
            out[alias] = obj
    return out


def _cited_objects(claim):
    from posflow.proofs_checks.kit._mutants import _resolve

    return {id(_resolve(c.routine)[2]) for c in claim.compares}


@pytest.mark.parametrize("cid", IDS)
def test_every_claim_cites_what_it_compares_and_runs_it(cid):
    """Every claim cites at least one routine; each cited routine is a function that the check
    calls (counted in the baseline run) and compares by a judged measurement (run_claim makes
    a missing one an ERROR)."""
    import inspect

    from claim_runs import CALLS

    from posflow.proofs_checks.kit._mutants import _resolve

    claim = registry.get_claim(cid)
    assert claim.compares, f"{cid} cites no routine (register(..., compares=(cite(...), ...)))"
    r = baseline(cid)
    assert r.error == "", r.error
    for c in claim.compares:
        obj = _resolve(c.routine)[2]
        assert callable(obj) and not inspect.isclass(obj), c.routine
    never = [routine for routine, n in CALLS[cid].items() if n == 0]
    assert not never, f"{cid} cites routines its check never calls: {never}"


@pytest.mark.parametrize("cid", IDS)
def test_routines_named_in_a_check_docstring_are_cited(cid):
    """A routine of theory/simulate that a check's docstring names (``name`` or ``alias.name``)
    is one the check cites: the docstring may not promise a comparison the check does not make."""
    import re
    import sys

    claim = registry.get_claim(cid)
    reachable = _routines_of(sys.modules[claim.check.__module__])
    cited = _cited_objects(claim)
    named = set(re.findall(r"``([A-Za-z_][\w.]*)``", claim.check.__doc__ or ""))
    uncited = sorted(n for n in named if n in reachable and id(reachable[n]) not in cited)
    assert not uncited, f"{cid}'s docstring names routines it does not cite: {uncited}"


@pytest.mark.parametrize("cid", IDS)
def test_every_verdict_carries_a_negative_control_of_its_judge(cid):
    """Each verdict runs at least one of its judges on a known-wrong input (kit.rejects), and
    every such control rejected it."""
    r = baseline(cid)
    assert r.error == "", r.error
    controls = [m for m in r.evidence.measurements if m.role == "control" and m.test == "true"
                and "negative control" in (m.tol.reason if m.tol else "")]  # fmt: skip
    assert controls, f"{cid} has no negative control of its judges (kit.rejects)"
    assert all(m.passed for m in controls), [m.key for m in controls if not m.passed]


@pytest.mark.parametrize("cid", IDS)
def test_no_tolerance_is_as_large_as_the_quantity(cid):
    r = baseline(cid)
    assert r.error == "", r.error
    vac = [m.key for m in r.evidence.measurements if m.judged and m.vacuous]
    assert not vac, f"{cid}: tolerances as large as the quantity: {vac}"


@pytest.mark.parametrize("cid", IDS)
def test_verdict_equals_the_lock(cid):
    r = baseline(cid)
    assert r.status == r.expected, f"{cid}: {r.expected} expected, got {r.status} ({r.error})"
