"""Longer test lengths for runs already in a synthetic store, by exact retraining (claim AT20).

A synthetic store (:mod:`posflow.simulate.models.synthetic_train`) keeps each run's error
counts, not its weights (a run file is a few kilobytes; 110 sets of weights would not fit in
package data). To score a run at lengths beyond the store's ``factors`` the run is trained again
from its seed: with the same configuration, seed, torch version, one thread and the same
numerical code (a change at the rounding level, e.g. in PaTH's chunked transport, moves the
trajectory), training is deterministic, and :func:`extend_run` *proves* it for every run it
extends by re-scoring every stored length and requiring the same error count at each (otherwise
ValueError, nothing written). The new lengths f·L_0 (f in ``factors``) are scored on fixed
batches drawn exactly as the store's (``test_tokens // L`` sequences from
``numpy.random.default_rng([test_seed, L])``), for the run's task and its probes, and appended
to the run's ``eval`` lists; the run file also records ``extended`` (the added factors, their
CPU seconds, the reproduced lengths). The store's ``meta.json`` (its identity) does not change:
the extension is per run, so a judge reads the lengths each run has.

New seeds of a store that also need the longer lengths are trained once with them
(:func:`train_new`, ``--new``): the run is trained and scored exactly as
:mod:`~posflow.simulate.models.synthetic_train` would (the same steps, batches and test
batches), at the store's lengths and at ``factors``; its file carries the store's identity and
``extended`` (with ``"trained_with_them": true``: there is nothing earlier to reproduce).

Command (resumable: a run that already has every requested length is skipped; m processes with
``--part k/m`` share the runs)::

    python -m posflow.simulate.models.synthetic_extend --store DIR --factors 32 64
        [--schemes path …] [--tasks flipflop-p0.8 …] [--seeds 0 1 …] [--part k/m] [--new]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from posflow.simulate.models._store import parse_part, write_json
from posflow.simulate.models.synthetic import make_task

# synthetic_train (and torch) is imported inside the functions, so that the command checks its
# arguments before anything slow loads


def _st():
    from posflow.simulate.models import synthetic_train

    return synthetic_train


__all__ = ["extend_run", "extend_store", "main", "run_config", "train_new"]


def run_config(meta: dict, run: dict, factors=()):
    """The :class:`SyntheticRunConfig` that trained ``run`` (its task, the store's identity
    ``meta["config"]``), scoring at the store's factors and ``factors`` besides."""
    ident = dict(meta["config"])
    old = list(ident.pop("factors"))
    new = sorted(set(old) | {int(f) for f in factors})
    task = make_task(run["task"])
    probes = {}
    for lab, ev in run["eval"].items():
        if lab != run["task_label"]:
            probes.setdefault(run["task_label"], []).append(make_task(ev["task"]))
    return _st().SyntheticRunConfig(tasks=(task,), probes=probes, factors=tuple(new),
                                    threads=1, progress_seconds=60.0, **ident)  # fmt: skip


def _check_factors(factors) -> tuple[int, ...]:
    fs = tuple(factors)
    if not fs or any(isinstance(f, bool) or not isinstance(f, int) or f < 1 for f in fs):
        raise ValueError(f"factors must be positive integers; got {list(fs)}")
    return tuple(sorted(set(fs)))


def extend_run(store, meta: dict, run: dict, factors, *, log="progress") -> dict | None:
    """Retrain ``run`` of ``store`` and score it at ``factors`` × L_0 besides its lengths.

    Parameters
    ----------
    store : path
        The store folder holding the run file.
    meta : dict
        The store's ``meta.json``.
    run : dict
        The run record (as :func:`~posflow.simulate.models.synthetic_train.load_store` reads it).
    factors : sequence of int ≥ 1
        Length factors to add; those the run already has are skipped.
    log : callable, None, or "progress" (``synthetic_train.print_progress``, the default)

    Returns
    -------
    The updated run record (written atomically), or None when the run already has every length.
    Raises ValueError when retraining does not reproduce every stored error count (training is
    then not deterministic on this machine; nothing is written).
    """
    factors = _check_factors(factors)
    L0 = meta["config"]["train_len"]
    have = set(run["eval"][run["task_label"]]["lengths"])
    add = [f for f in factors if f * L0 not in have]
    if not add:
        return None
    cfg = run_config(meta, run, add)
    task, st = cfg.tasks[0], _st()
    torch = st.torch
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model, rec = st.train_run(task, run["scheme"], int(run["seed"]), cfg,
                                  log=st.print_progress if log == "progress" else log)
        c0 = time.process_time()
        evals = {}
        for t in (task, *cfg.probes.get(task.label, ())):
            ev = dict(run["eval"][t.label])
            batches = st.eval_batches(t, cfg)

            def score(L, t=t, batches=batches):
                return st.evaluate_errors(model, t, batches[L], chunk=cfg.eval_chunk,
                                          batch_tokens=cfg.eval_batch_tokens)  # fmt: skip

            for j, L in enumerate(ev["lengths"]):  # the proof of determinism: every count again
                if (got := score(L)) != (ev["errors"][j], ev["counts"][j]):
                    raise ValueError(
                        f"retraining {st.run_file(task, run['scheme'], run['seed'])} gave "
                        f"{got[0]}/{got[1]} errors on {t.label} at L = {L}, the store has "
                        f"{ev['errors'][j]}/{ev['counts'][j]}: training is not reproducible "
                        "here (torch version, threads or posflow's numerics differ); nothing "
                        "written"
                    )
            for f in add:
                e, c = score(f * L0)
                ev["lengths"] = [*ev["lengths"], f * L0]
                ev["sequences"] = [*ev["sequences"], len(batches[f * L0])]
                ev["errors"], ev["counts"] = [*ev["errors"], e], [*ev["counts"], c]
            evals[t.label] = ev
        eval_cpu = time.process_time() - c0
    finally:
        torch.set_num_threads(threads)
    out = dict(run, eval={**run["eval"], **evals})
    out["extended"] = [*run.get("extended", []), {
        "factors": add, "retrain_cpu_seconds": rec["cpu_seconds"], "eval_cpu_seconds": eval_cpu,
        "reproduced_lengths": sorted(have), "torch": torch.__version__}]  # fmt: skip
    write_json(Path(store) / st.run_file(task, run["scheme"], run["seed"]), out)
    return out


def extend_store(store, factors, *, schemes=None, tasks=None, seeds=None, part=None,
                 log="progress") -> list[str]:  # fmt: skip
    """Extend every selected run of ``store`` to ``factors`` (:func:`extend_run`; resumable).

    ``schemes``, ``tasks`` (labels), ``seeds``: None for all in the store. ``part`` (k, m):
    runs k, k + m, … of the sorted selection. Returns the names of the run files written.
    """
    factors = _check_factors(factors)
    st = _st().load_store(store)
    runs = [r for key, r in sorted(st["runs"].items())
            if (schemes is None or key[1] in schemes) and (tasks is None or key[0] in tasks)
            and (seeds is None or key[2] in seeds)]  # fmt: skip
    if not runs:
        raise ValueError("no run of the store matches --schemes/--tasks/--seeds")
    k, m = (0, 1) if part is None else part
    say = _st().print_progress if log == "progress" else log or (lambda s: None)
    done = []
    for i, r in enumerate(runs[k::m], 1):
        head = f"[{i}/{len(runs[k::m])}] {r['task_label']} {r['scheme']} s{r['seed']}"
        c0 = time.process_time()
        out = extend_run(store, st["meta"], r, factors, log=log)
        if out is None:
            say(f"{head}: already has {', '.join(map(str, factors))}×")
            continue
        ev = out["eval"][r["task_label"]]
        say(f"{head}: error at {'/'.join(str(L // ev['lengths'][0]) for L in ev['lengths'])}× = "
            + " ".join(f"{e / max(c, 1):.3f}" for e, c in zip(ev["errors"], ev["counts"],
                                                             strict=True))
            + f" ({time.process_time() - c0:.0f} CPU s; stored lengths reproduced)")
        done.append(_st().run_file(make_task(r["task"]), r["scheme"], r["seed"]))
    return done


def train_new(store, task_label: str, scheme: str, seed: int, factors, *,
              log="progress") -> dict | None:  # fmt: skip
    """Train the missing run (``task_label``, ``scheme``, ``seed``) of ``store`` scored at the
    store's lengths and at ``factors`` × L_0 (module doc); None when its file exists.

    The task and its probes are those of the store's runs of ``task_label`` (:func:`run_config`);
    ValueError when the store has none."""
    factors = _check_factors(factors)
    mod = _st()
    st = mod.load_store(store)
    ref = next((r for (t, _, _), r in sorted(st["runs"].items()) if t == task_label), None)
    if ref is None:
        raise ValueError(f"tasks: the store has no run of {task_label!r} to take the task from")
    cfg = run_config(st["meta"], ref, factors)
    task = cfg.tasks[0]
    path = Path(store) / mod.run_file(task, scheme, seed)
    if path.is_file():
        return None
    batches = {t.label: mod.eval_batches(t, cfg) for t in (task, *cfg.probes.get(task.label, ()))}
    tmp = path.with_name(path.name + ".new")
    threads = mod.torch.get_num_threads()
    try:
        blob = mod._one_run(cfg, task, scheme, int(seed), batches, tmp,
                            mod.print_progress if log == "progress" else log)
    finally:
        mod.torch.set_num_threads(threads)
        tmp.unlink(missing_ok=True)
    add = [f for f in factors if f not in st["meta"]["config"]["factors"]]
    blob = dict(blob, config=st["meta"]["config"], key=st["meta"]["key"], extended=[{
        "factors": add, "trained_with_them": True, "torch": mod.torch.__version__}])  # fmt: skip
    write_json(path, blob)
    return blob


def main(argv=None) -> int:
    """``python -m posflow.simulate.models.synthetic_extend --store DIR --factors F …``
    (:func:`extend_store`). Returns 0, or 2 with one line on stderr for bad input."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m posflow.simulate.models.synthetic_extend",
                                 description="Score stored synthetic runs at longer lengths "
                                 "(retrained exactly; resumable).")  # fmt: skip
    ap.add_argument("--store", required=True)
    ap.add_argument("--factors", type=int, nargs="+", required=True)
    ap.add_argument("--schemes", nargs="+", default=None)
    ap.add_argument("--tasks", nargs="+", default=None)
    ap.add_argument("--seeds", type=int, nargs="+", default=None)
    ap.add_argument("--part", default=None, help="k/m: runs k, k + m, … of the selection")
    ap.add_argument("--new", action="store_true", help="train the missing runs of --schemes × "
                    "--tasks × --seeds with the longer lengths (train_new)")
    args = ap.parse_args(argv)
    try:
        if not Path(args.store, "meta.json").is_file():
            raise ValueError(f"--store: {args.store!r} has no meta.json")
        part = None if args.part is None else parse_part(args.part)
        _check_factors(args.factors)
        if args.new:
            if not (args.schemes and args.tasks and args.seeds):
                raise ValueError("--new needs --schemes, --tasks and --seeds")
            jobs = [(t, s, k) for k in args.seeds for t in args.tasks for s in args.schemes]
            k, m = part or (0, 1)
            for i, (t, s, seed) in enumerate(jobs[k::m], 1):
                out = train_new(args.store, t, s, seed, args.factors)
                ev = out and out["eval"][t]
                _st().print_progress(f"[{i}/{len(jobs[k::m])}] {t} {s} s{seed}: " + (
                    "already in the store" if out is None else "error " + " ".join(
                        f"{e / max(c, 1):.3f}" for e, c in zip(ev["errors"], ev["counts"],
                                                               strict=True))))  # fmt: skip
            return 0
        extend_store(args.store, args.factors, schemes=args.schemes, tasks=args.tasks,
                     seeds=args.seeds, part=part)  # fmt: skip
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
