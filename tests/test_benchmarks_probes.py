"""benchmarks/probes.py: the probe list is well-formed, a few cheap probes of bad input classify as
clean, and known-good input (no error to report) classifies as unclean (no timing is asserted)."""

import dataclasses
import importlib
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def probes(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module("probes")


def by_name(probes, name):
    (p,) = [p for p in probes.PROBES if p.name == name]
    return p


def test_the_probe_list_is_well_formed_and_covers_every_kind(probes):
    probes.check_probes()
    assert {p.kind for p in probes.PROBES} == set(probes.KINDS)
    assert {p.setup for p in probes.PROBES} - {None} == set(probes.SETUPS)


def test_a_malformed_probe_list_is_refused(probes):
    p = probes.PROBES[0]
    with pytest.raises(ValueError, match="unique"):
        probes.check_probes((p, p))
    with pytest.raises(ValueError, match="kind"):
        probes.check_probes((dataclasses.replace(p, kind="shell"),))
    with pytest.raises(ValueError, match="call and names"):
        probes.check_probes((probes.Probe("x", "api", call="f()"),))


@pytest.mark.parametrize(
    "name",
    [
        "constant(0.1, 10**12)",
        "profile_shape([])",
        "extrapolate --results --store (missing path)",
        "rollout --lambdas: a file holding []",
    ],
)
def test_cheap_probes_classify_as_clean(probes, tmp_path, name):
    out = probes.run_probe(by_name(probes, name), tmp_path)
    assert out.status == "clean", (out.reasons, out.detail)
    assert out.reasons == [] and out.seconds > 0
    assert not any((tmp_path / "cwd").iterdir())  # nothing written in the probe's cwd


def test_input_that_is_not_refused_classifies_as_unclean(probes, tmp_path):
    api = probes.Probe("constant(0.1, 3)", "api", setup_code="from posflow import constant",
                       call="constant(0.1, 3)", names=("T",))  # fmt: skip
    out = probes.run_probe(api, tmp_path / "api")
    assert out.status == "unclean" and out.reasons == ["no exception"]
    cli = probes.Probe("claims --json", "cli", ("claims", "--json"))
    out = probes.run_probe(cli, tmp_path / "cli")
    assert out.status == "unclean" and "exit 0" in out.reasons


def test_the_table_has_one_row_per_outcome_and_the_count(probes):
    p = probes.PROBES[0]
    outs = [probes.Outcome(p, "clean", "exit 2: a | b", 0.5),
            probes.Outcome(p, "unclean", "exit 1: x", 1.0, ["exit 1"])]  # fmt: skip
    text = probes.report(outs, (1.0, 1.0, 1.0), (1.0, 1.0, 1.0), "now")
    rows = [s for s in text.splitlines() if s.startswith("| ") and "---" not in s]
    assert len(rows) == 3 and "a \\| b" in rows[1] and "unclean: exit 1" in rows[2]
    assert "**1 clean of 2 run**" in text
