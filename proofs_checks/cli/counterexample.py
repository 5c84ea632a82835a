"""``posflow counterexample ID [--list | --relax NAME | --replay FILE] [--seed S] [--out FILE]
[--export PATH] [--json]``: list, search, replay or export counterexamples
(:mod:`posflow.proofs_checks.kit._counterexamples`).

A ``--replay`` record is read from a file, so its sizes are bounded before anything is built:
:data:`REPLAY_COSTS` estimates, per relaxation, the float64 values a replay holds at once and the
operations it runs (from the costs its violation states), and a record whose example would not
fit in the available memory, or would run longer than :data:`MAX_REPLAY_OPERATIONS`, is refused
in one line.
"""

from __future__ import annotations

import json

from posflow.proofs_checks.cli._common import (
    UsageError,
    bad_input,
    ensure_memory,
    export_target,
    integer,
    output_file,
    print_json,
    read_json_file,
)

__all__ = ["MAX_REPLAY_OPERATIONS", "REPLAY_COSTS", "add_parser", "cmd_counterexample"]

MAX_RECORD_BYTES = 16 * 2**20  # a record holds one shrunk example: small
MAX_REPLAY_OPERATIONS = 2e10  # about a minute of numpy work; shrunk examples need far less
MAX_UNKNOWN_SIZE = 2**16  # the largest integer any relaxation's strategy draws


def _size(ex: dict, key: str) -> int:
    """``ex[key]`` when it is a positive integer, else 0 (the relaxation refuses it itself)."""
    v = ex.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0


def _len(ex: dict, key: str) -> int:
    v = ex.get(key)
    return len(v) if isinstance(v, list) else 0


def _max_int(ex: dict, key: str) -> int:
    v = ex.get(key)
    if not isinstance(v, list):
        return 0
    return max((x for x in v if isinstance(x, int) and not isinstance(x, bool)), default=0)


def _alibi_heads(ex: dict) -> int:
    return max(_len(ex, "slopes"), _len(ex, "content"), 1)


# (claim, relaxation) -> example -> (sizes shown in messages, float64 values held, operations);
# from the cost each violation states in proofs_checks/relaxations*.py
REPLAY_COSTS = {
    ("PB8", "nonnegative_slope"): lambda ex: (
        {"n": _size(ex, "n"), "heads": _alibi_heads(ex)},
        6 * _size(ex, "n") ** 2 + 4 * _size(ex, "n") * _alibi_heads(ex),
        _size(ex, "n") ** 2 * _alibi_heads(ex),
    ),
    ("PB2", "causal"): lambda ex: (
        {"n": _size(ex, "n"), "T": _len(ex, "lambdas")},
        4 * _size(ex, "n") ** 2,
        max(_len(ex, "lambdas"), 1) * _size(ex, "n") ** 3,
    ),
    ("PB6", "reachability"): lambda ex: (
        {"n": _size(ex, "n"), "T": _size(ex, "T")},
        4 * _size(ex, "n") ** 2 + _size(ex, "T"),
        _size(ex, "T") * _size(ex, "n") ** 2 + _size(ex, "n") * _len(ex, "self_rows"),
    ),
    ("PB11", "residual"): lambda ex: (
        {"n": _size(ex, "n"), "T": _size(ex, "T"), "heads": _alibi_heads(ex)},
        4 * _size(ex, "n") * _alibi_heads(ex) + 2 * _size(ex, "n") + _size(ex, "T"),
        _size(ex, "T") * _size(ex, "n") * _alibi_heads(ex),
    ),
    ("AT10", "bounded_logits"): lambda ex: (
        {"K": _len(ex, "near_logits"), "M": _len(ex, "far_logits")},
        _len(ex, "near_logits") + _len(ex, "far_logits"),
        _len(ex, "near_logits") + _len(ex, "far_logits"),
    ),
    ("AT2", "spectral_gap"): lambda ex: (
        {"blocks": _len(ex, "params")},
        4 * _len(ex, "params"),
        4 * _len(ex, "params"),
    ),
    ("AT17", "zero_mean"): lambda ex: ({}, 1, 1),
    ("AT14", "commuting"): lambda ex: (
        {"d": _size(ex, "d"), "samples": _size(ex, "samples"), "L": _max_int(ex, "distances")},
        2 * _size(ex, "samples") * _max_int(ex, "distances") * _size(ex, "d") ** 2
        + _len(ex, "weights") * (_size(ex, "d") + _len(ex, "weights")),
        _size(ex, "samples") * _max_int(ex, "distances") * _size(ex, "d") ** 3
        + _len(ex, "weights") ** 2 * _size(ex, "d"),
    ),
}


def _integers(obj):
    if isinstance(obj, bool):
        return
    if isinstance(obj, int):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _integers(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _integers(v)


def check_replay_size(rec: dict) -> None:
    """Refuse (one line naming ``--replay``) a record whose example is too large to replay."""
    cid, rel = str(rec.get("id", "")).upper(), rec.get("relaxed")
    ex = rec.get("example")
    if not isinstance(ex, dict):
        return  # the library names what is missing
    cost = REPLAY_COSTS.get((cid, rel))
    if cost is None:  # a relaxation without a stated cost: bound every integer it holds
        big = max(_integers(ex), default=0)
        if big > MAX_UNKNOWN_SIZE:
            raise UsageError(
                f"--replay: the example of {cid} without {rel} holds the integer {big}; at most "
                f"{MAX_UNKNOWN_SIZE} is replayed"
            )
        return
    sizes, values, ops = cost(ex)
    where = ", ".join(f"{k} = {v}" for k, v in sizes.items())
    what = f"replaying {cid} without {rel}" + (f" at {where}" if where else "")
    ensure_memory("--replay", 8.0 * values, what)
    if ops > MAX_REPLAY_OPERATIONS:
        raise UsageError(
            f"--replay: {what} takes about {ops:.2g} operations; at most "
            f"{MAX_REPLAY_OPERATIONS:.0e} are replayed (a shrunk counterexample is small)"
        )


def _load_replay(path) -> dict:
    rec = read_json_file("--replay", path, MAX_RECORD_BYTES)
    if not isinstance(rec, dict):
        raise UsageError(f"--replay: {str(path)!r} must hold a JSON object (a search record)")
    missing = [k for k in ("id", "relaxed", "example") if k not in rec]
    if missing:
        raise UsageError(
            f"--replay: {str(path)!r} is not a search record: it has no "
            f"{', '.join(repr(k) for k in missing)} (posflow counterexample ID --relax NAME "
            "--out FILE writes one)"
        )
    check_replay_size(rec)
    return rec


def _print_example(example: dict) -> None:
    width = max(len(k) for k in example) if example else 0
    for k, v in example.items():
        print(f"  {k:<{width}}  {json.dumps(v)}")


def _write_export(rec, target, is_folder: bool):
    from posflow.proofs_checks.kit import write_test

    if is_folder:
        target.mkdir(parents=True, exist_ok=True)  # the folder the user named
    return write_test(rec, target)


def cmd_counterexample(args) -> int:
    """``posflow counterexample``: list, search, replay or export (exit 0; 2 on bad input)."""
    from posflow.proofs_checks.kit import describe, relaxations_of, replay, save_record, search

    modes = [m for m in ("list", "relax", "replay") if getattr(args, m)]
    if not modes:
        raise UsageError("give --list, --relax NAME or --replay FILE")
    if args.list:
        if args.out or args.export:
            raise UsageError("--out and --export need --relax or --replay")
        cid, rels = relaxations_of(args.id)
        if args.json:
            items = [{"name": k, "drops": r.drops} for k, r in sorted(rels.items())]
            print_json({"id": cid, "relaxations": items}, inputs="ID")
        elif not rels:
            print(f"{cid} has no relaxations")
        else:
            print(f"relaxations of {cid}:")
            width = max(len(k) for k in rels)
            for k, r in sorted(rels.items()):
                print(f"  {k:<{width}}  drops {r.drops}")
        return 0
    out = output_file("--out", args.out) if args.out else None
    export = export_target("--export", args.export) if args.export else None
    if args.replay:
        if out is not None:
            raise UsageError("--out saves a search record; --replay re-checks one")
        rec = _load_replay(args.replay)
        if str(rec.get("id", "")).upper() != args.id.upper():
            raise UsageError(f"--replay: the record is for claim {rec.get('id')!r}, not {args.id}")
        with bad_input("--replay"):
            v = replay(rec)
        if export is not None:
            with bad_input("--replay"):
                _write_export(rec, *export)
        if args.json:
            res = {"id": rec["id"], "relaxed": rec["relaxed"], "violates": v > 0, "violation": v}
            print_json(res, inputs="--replay")
        else:
            state = "still violates" if v > 0 else "no longer violates"
            print(f"{rec['id']} without {rec['relaxed']}: {state} (violation {v:.6g})")
        return 0
    res = search(args.id, args.relax, seed=args.seed, max_examples=args.max_examples)
    if out is not None:
        save_record(res, out)
    test_path = _write_export(res, *export) if export is not None and res.found else None
    if args.json:
        print_json(res.as_record(), inputs="--relax")
        return 0
    print(f"{res.claim_id} without {res.relaxed} (drops {res.drops})")
    if not res.found:
        print(f"no counterexample in {res.max_examples} examples (seed {res.seed})")
        if export is not None:
            print("nothing to export")
        return 0
    print(f"counterexample after {res.tried} examples (seed {res.seed}), shrunk:")
    _print_example(res.example)
    print(f"violation {res.violation:.6g} > 0")
    text = describe(res)
    if text:
        print(text)
    if out is not None:
        print(f"record written to {out}")
    if test_path is not None:
        print(f"regression test written to {test_path}")
    return 0


def add_parser(subparsers) -> None:
    """Add ``posflow counterexample ID [--list | --relax NAME | --replay FILE] ...``."""
    c = subparsers.add_parser(
        "counterexample",
        help="search a shrunk counterexample when an assumption is dropped",
        description="List a claim's relaxations, search a shrunk counterexample with one "
        "assumption dropped, or replay a saved one. Exit 0; 2 on bad arguments.",
    )
    c.add_argument("id", metavar="ID", help="claim ID, e.g. PB8")
    mode = c.add_mutually_exclusive_group()
    mode.add_argument("--list", action="store_true", help="name the claim's relaxations")
    mode.add_argument("--relax", metavar="NAME", help="search with this assumption dropped")
    mode.add_argument("--replay", metavar="FILE", help="re-check a saved JSON record")
    c.add_argument(
        "--seed", type=integer(0), default=0, help="seed of the search, >= 0 (default 0)"
    )
    c.add_argument(
        "--max-examples",
        type=int,
        default=200,
        metavar="N",
        help="examples to generate (default 200)",
    )
    c.add_argument("--json", action="store_true", help="print the record as JSON")
    c.add_argument("--out", metavar="FILE", help="save the JSON record")
    c.add_argument(
        "--export",
        metavar="PATH",
        help="write a pytest regression test: a .py file, or a folder (ending in /) to write into",
    )
    c.set_defaults(func=cmd_counterexample)
