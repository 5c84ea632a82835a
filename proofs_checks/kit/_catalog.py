"""The claim catalog, generated from the registry: ``posflow claims`` and the committed CLAIMS.md.

Every registered :class:`~posflow.proofs_checks.kit.Claim` becomes one record: ID, source
tag, statement, assumptions, relaxations (the assumption each drops), mutants (when registered)
and the module and function that check it. :func:`to_markdown` renders the records as the
repository's ``CLAIMS.md``; a test keeps the file equal to it, so the catalog cannot drift from
the code. Each claim has a heading, so ``CLAIMS.md#pb3`` links to its entry.
"""

from __future__ import annotations

from posflow.proofs_checks.kit._lock import expectation
from posflow.proofs_checks.kit._mutants import mutants_of
from posflow.proofs_checks.kit._registry import Claim, all_claims

__all__ = ["SOURCES", "anchor", "records", "to_markdown"]

SOURCES = {
    "A": '"A Structural Theory of Position Bias in Transformers" (arXiv 2602.16837)',
    "B": '"Why Do Accumulated Transformations Extrapolate?" (arXiv 2606.24975)',
    "W": "Wu et al. 2025 (arXiv 2502.01951)",
    "D": "a statement derived from the papers' definitions (their theorem texts were not "
    "available)",
    "ours": "a result of this project, proved or derived here",
    "convention": "a convention of this code (a definition checked for consistency), not a "
    "claim of either paper",
}

_HEADER = """# The claim catalog

Every claim posflow checks, with a stable ID. `posflow verify ID` runs its check and reports
HOLDS / FAILS / INCONCLUSIVE with the measured numbers; `posflow counterexample ID --relax NAME`
searches for inputs that break it when the named assumption is dropped.

This file is generated from the claim registry (`posflow claims --markdown > CLAIMS.md`); a test
fails when the two differ.

Conventions: tokens are 0-indexed; `A[i, j]` is the weight token i draws from token j (causal:
lower-triangular, row-stochastic); `R_t = (1-λ_t) I + λ_t A_t`, `P = R_{T-1} ⋯ R_0`, influence
profile `p = P[n-1, :]`.
"""

_SECTIONS = {"PB": "Position bias (PB)", "AT": "Accumulated transformations (AT)"}


def anchor(cid: str) -> str:
    """The Markdown anchor of a claim's entry in CLAIMS.md (``"PB3"`` → ``"pb3"``)."""
    return cid.lower()


def _sources(tag: str) -> list[str]:
    return [s.strip() for s in tag.strip("[] ").split(",") if s.strip()]


def records(claims: list[Claim] | None = None) -> list[dict]:
    """One plain-data record per claim, in catalog order.

    Keys: ``id``, ``source`` (one tag, e.g. ``"[A]"``), ``basis`` (where a reconstructed
    statement comes from; may be empty), ``statement``, ``assumptions`` (list),
    ``relaxations`` (list of ``{"name", "drops"}``), ``mutants`` (list of names; empty while a
    claim registers none), ``compares`` (list of ``{"routine", "reference", "keys"}``: the
    routines the check compares with an independent reference), ``expected`` (``{"quick",
    "full", "reason"}``: the verdict lock), ``check`` (``"module.function"``).
    """
    out = []
    for c in all_claims() if claims is None else claims:
        mutants = [m.name for m in mutants_of(c.id)]
        out.append({
            "id": c.id,
            "source": c.source,
            "basis": c.basis,
            "statement": c.statement,
            "assumptions": list(c.assumptions),
            "relaxations": [{"name": r.name, "drops": r.drops} for r in c.relaxations.values()],
            "mutants": sorted(mutants),
            "compares": [x.as_json() for x in c.compares],
            "expected": _expected(c.id),
            "check": f"{c.check.__module__}.{c.check.__qualname__}",
        })  # fmt: skip
    return out


def _expected(cid: str) -> dict:
    e = expectation(cid)
    return {"quick": e.quick, "full": e.full, "reason": e.reason, "scope": e.scope}


def _verdict_line(exp: dict) -> str:
    v = (
        exp["quick"]
        if exp["quick"] == exp["full"]
        else f"{exp['quick']} (quick), {exp['full']} (full)"
    )
    return (f"- expected verdict: {v}" + (f" — {exp['reason']}" if exp["reason"] else "")
            + (f"\n- scope of the locked verdict: {exp['scope']}" if exp.get("scope") else ""))


def _compares_line(x: dict) -> str:
    keys = ", ".join(f"`{k}`" for k in x["keys"])
    return f"  - `{x['routine'].replace(':', '.')}` against {x['reference']} ({keys})"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(recs: list[dict] | None = None) -> str:
    """CLAIMS.md: a header, the source tags used, and one entry per claim under its ID heading."""
    recs = records() if recs is None else recs
    used = sorted({s for r in recs for s in _sources(r["source"])}, key=list(SOURCES).index)
    lines = [_HEADER, "Sources: " + "; ".join(f"`[{s}]` = {SOURCES[s]}" for s in used) + ".", ""]
    lines += ["| ID | source | statement |", "|---|---|---|"]
    lines += [f"| [{r['id']}](#{anchor(r['id'])}) | {r['source']} | {_cell(r['statement'])} |"
              for r in recs]  # fmt: skip
    section = None
    for r in recs:
        prefix = r["id"].rstrip("0123456789")
        if prefix != section:
            section = prefix
            lines += ["", f"## {_SECTIONS.get(prefix, prefix)}"]
        lines += ["", f"### {r['id']}", "", f"**{r['source']}** {r['statement']}", ""]
        if r.get("basis"):
            lines.append(f"- basis: {r['basis']}")
        lines.append("- assumptions: " + ("; ".join(r["assumptions"]) or "none stated"))
        if r["relaxations"]:
            lines.append("- relaxations: " + "; ".join(
                f"`{x['name']}` (drops: {x['drops']})" for x in r["relaxations"]))  # fmt: skip
        else:
            lines.append("- relaxations: none")
        lines.append("- mutants: " + (", ".join(f"`{m}`" for m in r["mutants"]) or "none"))
        comp = r.get("compares", [])
        lines.append("- compares with an independent reference:" + ("" if comp else " none"))
        lines += [_compares_line(x) for x in comp]
        if "expected" in r:
            lines.append(_verdict_line(r["expected"]))
        lines.append(f"- checked by: `{r['check']}` (`posflow verify {r['id']}`)")
    return "\n".join(lines) + "\n"
