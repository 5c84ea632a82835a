"""PB20's sink evidence: the stored intervention read back, its summary against a direct loop
over the file, and a missing file failing with its name."""

import json
from importlib import resources

import numpy as np

from posflow.proofs_checks.claims import pb20_sinks as S
from posflow.proofs_checks.kit import Evidence


def test_the_summary_is_the_files_numbers():
    d = json.loads(resources.files("posflow.simulate").joinpath(S.SINK_FILE).read_text())
    iv, sk = d["intervention"], d["sinks"]
    ms, tables, scope = S.sink_evidence()
    got = {m.key: m for m in ms}
    assert got["smollm2_sinks.readable"].passed
    sinks = [t for t in range(iv["layers"]) if sk["heads_above"][t] >= S.SINK_SHARE]
    rows = {(r["layers"], r["target"]): r["dnll"] for r in iv["rows"]}
    for x in iv["targets"]:
        direct = np.mean([rows[(str(t), x)] for t in sinks])
        assert f"{x} {direct:+.3f}" in got["smollm2_sinks.dnll_sink_layers"].value
    assert f"{100 * sk['rate']:.1f} %" in got["smollm2_sinks.sink_eps"].value
    assert f"{100 * sk['rate_per_sequence']:.1f} %" in got["smollm2_sinks.sink_eps"].value
    assert len(tables[0].rows) == iv["layers"] + 1  # every layer, then all layers at once
    assert scope.n == iv["n"] and f"{iv['windows']} windows" == scope.samples


def test_a_missing_file_fails_naming_it(monkeypatch):
    monkeypatch.setattr(S, "SINK_FILE", "data/smollm2/nosuch.json")
    ms, tables, scope = S.sink_evidence()
    assert Evidence(ms).status == "FAILS" and "nosuch.json" in ms[0].note
    assert tables == [] and scope is None
