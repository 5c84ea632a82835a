"""``posflow verify [IDS] [--quick|--full] [--out DIR] [--json] [--seed S] [--threads N]``.

Checks claims and reports measured verdicts; every record carries its provenance
(:func:`posflow.proofs_checks.kit.provenance`). Exit status by the verdict lock
(``proofs_checks/kit/expected.toml``): 0 when every verdict equals its recorded expectation, 1 when
any differs or a check crashed (each difference is named on stderr), 2 on bad input.
"""

from __future__ import annotations

import json
import subprocess
import sys

from posflow.proofs_checks.cli._common import (
    UsageError,
    add_threads_option,
    integer,
    one_line,
    output_dir,
    print_json,
)
from posflow.proofs_checks.cli._output import show

__all__ = ["add_parser", "cmd_verify"]


def add_parser(sub) -> None:
    """Register ``posflow verify``."""
    v = sub.add_parser("verify", help="check claims and report measured verdicts")
    v.add_argument("ids", nargs="*", metavar="ID", help="claim IDs or prefixes (PB, AT)")
    g = v.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="small sizes (default)")
    g.add_argument("--full", action="store_true", help="large sizes (depth 1e5, n = 1e4)")
    v.add_argument("--out", metavar="DIR", help="write index.md, figures and results.json")
    v.add_argument("--json", action="store_true", help="print a JSON list of results")
    v.add_argument(
        "--seed", type=integer(0), default=0, help="seed of random inputs, >= 0 (default 0)"
    )
    add_threads_option(v)
    v.add_argument(
        "--isolate",
        action="store_true",
        help="run each check in its own process, so its seconds are measured alone",
    )
    v.add_argument(
        "--mutants",
        action="store_true",
        help="run each selected claim under each of its registered mutants and print the kill "
        "table (exit 1 when a mutant survives)",
    )
    v.set_defaults(func=cmd_verify)


def _isolated(claim, args, size, threads):
    """Run one check in a new ``python -m posflow verify ID --json`` process."""
    from posflow.proofs_checks import kit

    cmd = [sys.executable, "-m", "posflow", "verify", claim.id, "--json", f"--{size}",
           "--seed", str(args.seed), "--threads", str(threads)]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)
    try:
        rec = json.loads(r.stdout)[0]
    except (json.JSONDecodeError, IndexError, KeyError, TypeError):
        tail = r.stderr.strip().splitlines()
        why = one_line(tail[-1]) if tail else f"exit code {r.returncode}"
        exp = kit.expectation(claim.id)
        return kit.Result(claim, kit.ERROR, None, 0.0, why, "alone (own process)",
                          exp.at(size), exp.reason)  # fmt: skip
    ev = None if rec["status"] == kit.ERROR else kit.Evidence.from_json(rec)
    return kit.Result(
        claim, rec["status"], ev, rec["seconds"], rec.get("error", ""), "alone (own process)",
        rec.get("expected", ""), rec.get("expected_reason", ""),
    )  # fmt: skip


def cmd_verify(args) -> int:
    """Run the selected checks; print a table or JSON; write the report with ``--out``."""
    from posflow.proofs_checks import kit
    from posflow.proofs_checks.kit import (
        code_changes,
        code_state,
        provenance,
        records,
        write_report,
    )
    from posflow.simulate.runtime import set_threads

    out = output_dir("--out", args.out) if args.out else None
    try:
        claims = kit.select(args.ids)
    except ValueError as exc:
        raise UsageError(f"ID: {exc}") from None
    if not claims:
        msg = "no claims are registered yet"
        print("[]" if args.json else msg)
        return 0
    threads = set_threads(args.threads)
    size = "full" if args.full else "quick"
    if args.mutants:
        if args.isolate or args.out:
            raise UsageError("--mutants: cannot be combined with --isolate or --out")
        return _cmd_mutants(args, size)
    ctx = kit.Context(size=size, seed=args.seed)
    prov = provenance(seed=args.seed, size=size, threads=threads, isolated=args.isolate)
    code = code_state()  # compared after the checks: a run must not mix two versions of the code
    from posflow.simulate.runtime import progress

    results = []
    try:
        with progress(len(claims), "posflow verify") as bar:
            for c in claims:
                bar.describe(f"verifying {c.id}")
                if args.isolate:
                    results.append(_isolated(c, args, size, threads))
                else:
                    results.append(kit.run_claim(c, ctx))
                bar.advance(detail=f"{c.id} {results[-1].status}")
    except KeyboardInterrupt:
        # Ctrl-C: keep what finished. With --out the report of the finished claims is written
        # (marked interrupted in its provenance); main prints "interrupted" and exits 130.
        if out is not None and results:
            prov = dict(prov, interrupted=f"after {len(results)} of {len(claims)} claims")
            index = write_report(results, out, size=size, provenance=prov)
            print(f"partial report ({len(results)} of {len(claims)} claims): {index}",
                  file=sys.stderr, flush=True)  # fmt: skip
        raise
    changed = code_changes(code, code_state())
    if changed:
        prov = dict(prov, changed_during_run=changed)
        print(f"posflow verify: warning: {'; '.join(changed)} changed while the checks ran; the "
              "verdicts may mix two versions of the code: run again", file=sys.stderr)  # fmt: skip
    index = write_report(results, out, size=size, provenance=prov) if out is not None else None
    if args.json:
        print_json(records(results, prov), inputs="verify", indent=1)
    else:
        _print_table(results, size, prov)
        if index is not None:
            print(f"report: {index}")
    diff = kit.lock_mismatches(results, size)
    for line in diff:
        print(f"posflow verify: verdict lock: {line}", file=sys.stderr)
    return 1 if diff else 0


def _cmd_mutants(args, size) -> int:
    """``verify --mutants``: the kill table (claims × mutants)."""
    from rich.markup import escape

    from posflow.proofs_checks.cli._output import table as Table
    from posflow.proofs_checks.kit import kill_table
    from posflow.simulate.runtime import progress

    with progress(None, "posflow verify --mutants") as bar:

        def step(cid, name):
            bar.describe(f"{cid} under {name}")
            bar.advance(detail=f"{cid} under {name}")

        rows = kill_table(args.ids, size=size, seed=args.seed, progress=step)
    if args.json:
        print_json([r.as_json() for r in rows], inputs="verify --mutants", indent=1)
    else:
        t = Table(title=f"posflow verify --mutants ({size}): {sum(r.killed for r in rows)} of "
                  f"{len(rows)} mutants killed")  # fmt: skip
        t.add_column("claim", no_wrap=True)
        t.add_column("mutant", no_wrap=True)
        for col in ("unmutated", "mutated", "killed", "comparisons broken"):
            t.add_column(col, overflow="fold")
        for r in rows:
            broken = ", ".join(r.newly_failed) or escape(r.error)
            t.add_row(r.claim, r.mutant, r.baseline, r.status,
                      "yes" if r.killed else "[red]NO[/]", broken)  # fmt: skip
        show(t)
    return 0 if all(r.killed for r in rows) else 1


def _print_table(results, size, prov):
    from rich.markup import escape

    from posflow.proofs_checks.cli._output import table as Table
    from posflow.proofs_checks.kit import scope_line

    colour = {"HOLDS": "green", "FAILS": "red", "INCONCLUSIVE": "yellow", "ERROR": "magenta"}
    commit = prov.get("git_commit", "")[:12]
    t = Table(
        title=f"posflow verify ({size})",
        caption=f"posflow {prov['posflow']}{' @ ' + commit if commit else ''}, seed "
        f"{prov['seed']}, {prov['threads']} thread(s); s = seconds ({prov['timing']})",
    )
    for col in ("ID", "status", "expected", "statement", "s"):
        t.add_column(col, overflow="fold")
    for r in results:
        note = r.error or (r.evidence.summary if r.evidence else "")
        stmt = escape(r.claim.statement) + (f"\n[dim]{escape(note)}[/dim]" if note else "")
        if r.evidence is not None and r.evidence.scopes:  # every empirical verdict's scope
            line = scope_line(r.evidence.scopes)
            stmt += f"\n[dim]scope: {escape(line)}[/dim]"
        if r.expected and r.expected != "HOLDS" and r.expected_reason:
            stmt += f"\n[dim]expected {r.expected}: {escape(r.expected_reason)}[/dim]"
        exp = "= " + r.expected if r.as_expected else f"[bold red]≠ {r.expected}[/]"
        t.add_row(r.claim.id, f"[{colour[r.status]}]{r.status}[/]", exp, stmt, f"{r.seconds:.1f}")
    show(t)
