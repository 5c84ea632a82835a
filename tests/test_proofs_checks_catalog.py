"""proofs_checks.catalog: the claim catalog generated from the registry, and CLAIMS.md."""

import re
from pathlib import Path

from posflow.proofs_checks.kit import _catalog as catalog
from posflow.proofs_checks.kit import _registry as registry

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [ROOT / d for d in ("theory", "simulate", "proofs_checks", "src")]


def test_claims_md_is_exactly_the_generated_catalog():
    committed = (ROOT / "CLAIMS.md").read_text(encoding="utf-8")
    assert committed == catalog.to_markdown(), (
        "CLAIMS.md differs from the registry: regenerate it with "
        "`posflow claims --markdown > CLAIMS.md`"
    )


def test_every_claim_has_one_record_and_one_heading():
    recs = catalog.records()
    ids = [c.id for c in registry.all_claims()]
    assert [r["id"] for r in recs] == ids and len(set(ids)) == len(ids)
    text = catalog.to_markdown(recs)
    for r in recs:
        assert text.count(f"\n### {r['id']}\n") == 1
        assert f"](#{catalog.anchor(r['id'])})" in text
        mod, func = r["check"].rsplit(".", 1)
        assert getattr(__import__(mod, fromlist=[func]), func) is registry.get_claim(r["id"]).check


def test_relaxations_and_assumptions_are_listed():
    pb8 = next(r for r in catalog.records() if r["id"] == "PB8")
    claim = registry.get_claim("PB8")
    assert pb8["assumptions"] == list(claim.assumptions)
    assert [x["name"] for x in pb8["relaxations"]] == list(claim.relaxations)
    entry = catalog.to_markdown().split("### PB8\n", 1)[1].split("###", 1)[0]
    assert "`nonnegative_slope` (drops: ALiBi slopes m_h ≥ 0)" in entry


def test_every_source_tag_is_explained():
    tags = {t.strip() for r in catalog.records() for t in r["source"].strip("[]").split(",")}
    assert tags <= set(catalog.SOURCES)


def test_no_source_file_names_a_path_outside_the_repository():
    pattern = re.compile(r"(?<![\w.])/(?:work|home|root|tmp|Users|mnt|opt|srv)/|[A-Z]:\\\\")
    bad = [
        f"{p.relative_to(ROOT)}:{i}"
        for d in SOURCES
        for p in sorted(d.rglob("*.py"))
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert not bad, f"absolute filesystem paths in the package sources: {bad}"
