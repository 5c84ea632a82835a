"""Bad-input and fault probes of the installed posflow, classified clean or unclean (issue 27).

    nice -n 10 python benchmarks/probes.py [--only TEXT ...] [--out PATH] [--list]
                                           [--json PATH [--label TEXT] [--how TEXT]] [--before PATH]

Each probe is data (:data:`PROBES`); one runner executes it in a fresh process with an empty
temporary working folder (inputs are built in a temporary folder too, never in the checkout):

* ``cli`` — ``python -m posflow ARGS`` (the console script's entry point). **Clean**: exit code 2,
  no ``Traceback`` on stderr, stderr is exactly one non-empty line, that line matches the
  probe's ``expect`` pattern when it has one, and the run took less than ``max_seconds`` when
  that is set.
* ``api`` — ``python -c`` builds the inputs, then evaluates one call of the public API inside
  ``try``; the exception's type and message come back as JSON on stdout, so a MemoryError or a
  crash ends the child, not the runner (the child's address space is capped at
  :data:`API_MEMORY_CAP` bytes as a guard). **Clean**: a ValueError or TypeError (or a subclass)
  whose message names every argument in ``names`` as a word.
* ``sigint`` — ``posflow verify`` is started and sent SIGINT (Ctrl-C) after about 3 s (with
  ``--out``: once the first claim has finished, so that there is something to report, or after
  :data:`SIGINT_FALLBACK` seconds when none is reported).
  **Clean**: exit code 130, ``interrupted`` on stderr, no ``Traceback``; with ``--out`` also the
  partial ``index.md``.
* ``clean_cwd`` (rule of a ``cli`` probe) — exit code 0, no ``Traceback``, and no
  ``.hypothesis/`` in the working folder afterwards.

Every probe's wall time is recorded (seconds from start to exit of its process). The "before"
column is the state the issue reported (every listed probe unclean); "after" is measured now.
The table, the date, the load average, posflow's git HEAD and where ``import posflow`` came from
are printed and written to ``benchmarks/results/probes.md`` (``--out`` elsewhere; ``--only``
selects probes by a substring of their name and does not write the default file unless ``--out``
is given). ``--json`` also writes the outcomes; ``--before`` adds such a file's outcomes to the
before column. The state before the fix (3b9edd2) is measured by importing the package of its
parent through PYTHONPATH, ahead of the editable install, under an address-space cap (the old
code allocates before it checks)::

    B=/tmp/posflow-before; mkdir -p $B/src $B/lib/posflow
    git archive 3b9edd2^ src/posflow theory simulate proofs_checks | tar -x -C $B/src
    cp -r $B/src/src/posflow/. $B/lib/posflow/
    for d in theory simulate proofs_checks; do cp -r $B/src/$d $B/lib/posflow/; done
    PYTHONPATH=$B/lib prlimit --as=12884901888 nice -n 10 python benchmarks/probes.py \\
        --out /tmp/before.md --json /tmp/before.json --label 3b9edd2^ --how "..."
    nice -n 10 python benchmarks/probes.py --before /tmp/before.json
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "probes.md"
POSFLOW = (sys.executable, "-m", "posflow")
API_MEMORY_CAP = 8 * 2**30  # address-space cap of an API probe's child (bytes): a guard only
BEFORE = "unclean (issue 27)"
MARK = "@@PROBE@@"
SIGINT_FALLBACK = 20.0  # s: SIGINT even when no finished claim has been reported by then

KINDS = ("cli", "api", "sigint")
RULES = ("usage", "clean_cwd", "interrupt")
SETUPS = (
    "truncated_model", "truncated_store", "random_store", "empty_lambdas", "cache_file",
    "empty_record", "empty_toml", "truncated_lambdas", "truncated_record", "report_dir",
)  # fmt: skip


class Skip(Exception):
    """A probe that cannot run here (e.g. a model that is not installed); the reason is shown."""


@dataclass(frozen=True)
class Probe:
    """One probe: a ``posflow`` command line (``cli``, ``sigint``) or one API call (``api``).

    ``args`` and ``env`` values may hold ``{files}`` (a temporary folder for inputs) and the
    names the ``setup`` returns; ``setup_code`` runs before the timed ``call`` in an API probe.
    """

    name: str
    kind: str
    args: tuple[str, ...] = ()
    setup_code: str = ""
    call: str = ""
    names: tuple[str, ...] = ()
    expect: str | None = None
    setup: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    max_seconds: float | None = None
    rule: str = "usage"
    timeout: float = 180.0
    before: str = BEFORE
    note: str = ""


K64 = "from posflow import alibi_kernel, constant\nK64 = alibi_kernel(64, [0.5])\n"
K64 += "lam = constant(0.2, 4)"

PROBES: tuple[Probe, ...] = (
    # --- faults in stored files -------------------------------------------------------------
    Probe(
        "measure: truncated model.safetensors in the cached smollm2-135m", "cli",
        ("measure", "smollm2-135m", "--n", "16", "--num-seqs", "2", "--bootstrap", "0"),
        setup="truncated_model", env={"POSFLOW_CACHE_DIR": "{cache}"}, expect="corrupt",
        timeout=300.0,
        note="POSFLOW_CACHE_DIR = a temporary copy of the installed folder, model.safetensors "
        "cut to its first 1 MiB; message must say corrupt",
    ),
    Probe(
        "sweep --show: truncated SQLite store", "cli", ("sweep", "--show", "{store}"),
        setup="truncated_store",
        note="a real 2-task rollout_profile store (sweep --in-process), sweep.sqlite cut to 40 %",
    ),
    Probe(
        "sweep --show: random-bytes file", "cli", ("sweep", "--show", "{store}"),
        setup="random_store", note="64 KiB of seeded random bytes named store.sqlite",
    ),
    Probe(
        "verify: SIGINT after ~3 s", "sigint", ("verify",),
        rule="interrupt", note="SIGINT 3 s after the start",
    ),
    Probe(
        "verify --out: SIGINT after the first finished claim", "sigint",
        ("verify", "--out", "{report}"), setup="report_dir", rule="interrupt",
        note="SIGINT once stderr reports a finished claim (≥ 3 s, at most 20 s); clean needs "
        "the partial index.md",
    ),
    # --- arguments refused ----------------------------------------------------------------
    Probe(
        "extrapolate --results --store (missing path)", "cli",
        ("extrapolate", "--results", "--store", "{files}/missing/path"),
        note="a missing path under the temporary folder, not /missing/path itself",
    ),
    Probe(
        "rollout --lambdas: a file holding []", "cli",
        ("rollout", "--n", "16", "--lambdas", "{lambdas}"), setup="empty_lambdas",
        note='--lambdas takes a FILE, so "[]" is its content; --n 16 added (rollout needs --n '
        "or --model)",
    ),
    Probe(
        'rollout --lambdas "[]" (literal)', "cli", ("rollout", "--n", "16", "--lambdas", "[]"),
        before="not in the issue", note='the literal text "[]" read as a file name',
    ),
    Probe(
        "measure --n 1000000000000", "cli", ("measure", "smollm2-135m", "--n", "1000000000000"),
        max_seconds=10.0, expect="--n", note="clean only under 10 s; message must name --n",
    ),
    Probe(
        "measure --corpus (missing path)", "cli",
        ("measure", "smollm2-135m", "--corpus", "{files}/missing"),
        max_seconds=10.0, expect="--corpus",
        note="clean only under 10 s; message must name --corpus",
    ),
    Probe(
        "measure: unknown model path", "cli", ("measure", "{files}/no-such-model"),
        max_seconds=10.0, expect="no-such-model",
        note="clean only under 10 s; message must name the path",
    ),
    Probe(
        "counterexample in an empty cwd", "cli",
        ("counterexample", "PB8", "--relax", "nonnegative_slope", "--max-examples", "5"),
        rule="clean_cwd",
        note="exit 0 expected (a search that finds one); clean = no .hypothesis/ in the cwd",
    ),
    Probe(
        "models list, POSFLOW_CACHE_DIR a file", "cli", ("models", "list"), setup="cache_file",
        env={"POSFLOW_CACHE_DIR": "{cache}"}, expect="unusable",
        note="message must say the cache folder is unusable",
    ),
    Probe(
        "models path smollm2-135m, POSFLOW_CACHE_DIR a file", "cli",
        ("models", "path", "smollm2-135m"), setup="cache_file",
        env={"POSFLOW_CACHE_DIR": "{cache}"}, expect="unusable",
        note="message must say the cache folder is unusable",
    ),
    # --- messages: the file is named ----------------------------------------------------------
    Probe(
        "counterexample --replay of a file holding {}", "cli",
        ("counterexample", "PB8", "--replay", "{record}"), setup="empty_record",
        expect="empty.json", note="replay is counterexample --replay; message must name the file",
    ),
    Probe(
        "sweep of an empty TOML spec", "cli", ("sweep", "{spec}", "--in-process"),
        setup="empty_toml", expect="empty.toml",
        note="sweep SPEC.toml is the TOML experiment; message must name the file",
    ),
    Probe(
        "rollout --lambdas: truncated JSON", "cli",
        ("rollout", "--n", "16", "--lambdas", "{lambdas}"),
        setup="truncated_lambdas", expect="lambdas.json",
        note="[0.1, 0.2, cut; message must name the file",
    ),
    Probe(
        "counterexample --replay: truncated JSON", "cli",
        ("counterexample", "PB8", "--replay", "{record}"), setup="truncated_record",
        expect="record.json", note="a PB8 record cut mid-way; message must name the file",
    ),
    # --- Python API ---------------------------------------------------------------------------
    Probe("alibi_kernel(10**12, [0.5])", "api", setup_code="from posflow import alibi_kernel",
          call="alibi_kernel(10**12, [0.5])", names=("n",)),
    Probe("uniform_kernel(10**12)", "api", setup_code="from posflow import uniform_kernel",
          call="uniform_kernel(10**12)", names=("n",)),
    Probe("constant(0.1, 10**12)", "api", setup_code="from posflow import constant",
          call="constant(0.1, 10**12)", names=("T",)),
    Probe("influence([], [], n=10**12)", "api", setup_code="from posflow import influence",
          call="influence([], [], n=10**12)", names=("n",)),
    Probe("influence([], [], n=0)", "api", setup_code="from posflow import influence",
          call="influence([], [], n=0)", names=("n",)),
    Probe("influence([], [], n=-1)", "api", setup_code="from posflow import influence",
          call="influence([], [], n=-1)", names=("n",)),
    Probe("influence(K64, lam, n=32)", "api", setup_code=K64 + "\nfrom posflow import influence",
          call="influence(K64, lam, n=32)", names=("n",),
          note="K64 = alibi_kernel(64, [0.5]), lam = constant(0.2, 4)"),
    Probe("diagonal(K64, lam, log='yes')", "api",
          setup_code=K64 + "\nfrom posflow import diagonal",
          call="diagonal(K64, lam, log='yes')", names=("log",)),
    Probe("spearman(constant p, q)", "api",
          setup_code="from posflow.simulate import spearman",
          call="spearman([0.25, 0.25, 0.25, 0.25], [0.1, 0.2, 0.3, 0.4])", names=("p",),
          note="posflow.simulate.spearman"),
    Probe("profile_shape([])", "api", setup_code="from posflow.simulate import profile_shape",
          call="profile_shape([])", names=("p",), note="posflow.simulate.profile_shape"),
    Probe("posflow.verify([])", "api", setup_code="import posflow",
          call="posflow.verify([])", names=("ids",)),
    Probe("posflow.verify([3])", "api", setup_code="import posflow",
          call="posflow.verify([3])", names=("ids",)),
    Probe("posflow.verify(out='/proc/x')", "api", setup_code="import posflow",
          call="posflow.verify(out='/proc/x')", names=("out",)),
    Probe("is_stochastically_monotone('x')", "api",
          setup_code="from posflow.simulate import is_stochastically_monotone",
          call="is_stochastically_monotone('x')", names=("K",),
          note="posflow.simulate.is_stochastically_monotone"),
    Probe("alibi_kernel(8, [1.0, 0.5], head_weights=[0.5, 0.6])", "api",
          setup_code="from posflow import alibi_kernel",
          call="alibi_kernel(8, [1.0, 0.5], head_weights=[0.5, 0.6])", names=("head_weights",),
          note="weights sum to 1.1"),
)


# --------------------------------------------------------------------------------------------
# inputs (each returns the placeholders it defines; files go under `files`, never the cwd)


def _posflow(*args, env=None, cwd=None, timeout=300.0):
    return subprocess.run([*POSFLOW, *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=timeout)  # fmt: skip


def _installed_smollm2() -> Path:
    res = _posflow("models", "path", "smollm2-135m", timeout=120.0)
    folder = Path(res.stdout.strip().splitlines()[-1]) if res.returncode == 0 else None
    if folder is None or not (folder / "model.safetensors").is_file():
        raise Skip("smollm2-135m is not installed (posflow models install smollm2-135m)")
    return folder


def setup_truncated_model(files: Path) -> dict:
    src = _installed_smollm2()
    cache = files / "cache"
    dst = cache / "hf-models" / src.name
    dst.mkdir(parents=True)
    for f in src.iterdir():
        if f.is_file() and f.name != "model.safetensors":
            shutil.copy2(f, dst / f.name)
    with open(src / "model.safetensors", "rb") as fin, open(dst / "model.safetensors", "wb") as g:
        g.write(fin.read(2**20))
    return {"cache": str(cache)}


def setup_truncated_store(files: Path) -> dict:
    spec = files / "tiny.toml"
    spec.write_text(
        'experiment = "rollout_profile"\n[params]\nn = 16\nheads = 2\nbeta = 0.0\ncontent = 0.0\n'
        "[grid]\nT = [2, 4]\nlam = [0.3]\n"
    )
    store = files / "store"
    res = _posflow("sweep", str(spec), "--store", str(store), "--in-process", "--workers", "1",
                   cwd=files)  # fmt: skip
    db = store / "sweep.sqlite"
    if res.returncode != 0 or not db.is_file():
        tail = (res.stderr.strip().splitlines() or ["no output"])[-1]
        raise Skip(f"could not build the store to truncate (exit {res.returncode}: {tail})")
    for extra in ("sweep.sqlite-wal", "sweep.sqlite-shm"):
        (store / extra).unlink(missing_ok=True)
    size = db.stat().st_size
    with open(db, "r+b") as f:
        f.truncate(int(size * 0.4))
    return {"store": str(store)}


def setup_random_store(files: Path) -> dict:
    path = files / "store.sqlite"
    path.write_bytes(random.Random(0).randbytes(64 * 1024))
    return {"store": str(path)}


ONE_FILE = {  # setup name: (file name, its text, the placeholder it fills)
    "empty_lambdas": ("lambdas.json", "[]", "lambdas"),
    "cache_file": ("cache-is-a-file", "not a folder\n", "cache"),
    "empty_record": ("empty.json", "{}", "record"),
    "empty_toml": ("empty.toml", "", "spec"),
    "truncated_lambdas": ("lambdas.json", "[0.1, 0.2,", "lambdas"),
}


def setup_one_file(name: str, files: Path) -> dict:
    """Write the one file of setup ``name`` (:data:`ONE_FILE`); its placeholder → its path."""
    fname, text, key = ONE_FILE[name]
    path = files / fname
    path.write_text(text)
    return {key: str(path)}


def setup_truncated_record(files: Path) -> dict:
    record = {"id": "PB8", "relaxed": "nonnegative_slope", "found": True,
              "example": {"n": 3, "slopes": [-1.0], "content": [1.0]},
              "violation": 0.07611688476482911, "seed": 0, "max_examples": 5}  # fmt: skip
    text = json.dumps(record, indent=1)
    path = files / "record.json"
    path.write_text(text[: len(text) // 2])
    return {"record": str(path)}


def setup_report_dir(files: Path) -> dict:
    return {"report": str(files / "report")}


# --------------------------------------------------------------------------------------------
# running and classifying


@dataclass
class Outcome:
    probe: Probe
    status: str  # "clean", "unclean" or "skipped"
    detail: str  # exit code or exception, and the message
    seconds: float
    reasons: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)


def _lines(text: str) -> list[str]:
    return [s.strip() for s in text.splitlines() if s.strip()]


def _traceback_tail(stderr: str) -> str | None:
    """The exception line of a Python traceback on stderr, or None without one."""
    if "Traceback" not in stderr:
        return None
    after = stderr[stderr.rfind("Traceback") :]
    tail = [s for s in after.splitlines() if s and not s.startswith((" ", "Traceback"))]
    return tail[0].strip() if tail else "Traceback"


def _left_in(cwd: Path) -> list[str]:
    return sorted(p.name + ("/" if p.is_dir() else "") for p in cwd.iterdir())


def _env(probe: Probe, subs: dict) -> dict:
    env = dict(os.environ)
    env.update({k: v.format(**subs) for k, v in probe.env.items()})
    return env


def _classify_cli(probe: Probe, rc: int, stdout: str, stderr: str, seconds: float,
                  cwd: Path) -> Outcome:  # fmt: skip
    lines = _lines(stderr)
    last = lines[-1] if lines else ""
    tb = _traceback_tail(stderr)
    reasons = []
    if probe.rule == "clean_cwd":
        if rc != 0:
            reasons.append(f"exit {rc}")
        if (cwd / ".hypothesis").exists():
            reasons.append(".hypothesis/ written in the cwd")
    else:
        if rc != 2:
            reasons.append(f"exit {rc}")
        if len(lines) != 1 and tb is None:
            reasons.append(f"stderr has {len(lines)} non-empty lines")
        if probe.expect is not None and not re.search(re.escape(probe.expect), last):
            reasons.append(f"message does not contain {probe.expect!r}")
    if tb is not None:
        reasons.append(f"Traceback ({tb})")
    if probe.max_seconds is not None and seconds >= probe.max_seconds:
        reasons.append(f"took {seconds:.1f} s ≥ {probe.max_seconds:g} s")
    shown = tb or last or "(stderr empty)"
    if rc == 0 and tb is None:
        shown = (_lines(stdout) or ["(no output)"])[0]
    out = Outcome(probe, "unclean" if reasons else "clean", f"exit {rc}: {shown}", seconds, reasons)
    left = _left_in(cwd)
    if left:
        out.extra.append(f"left in the cwd: {', '.join(left)}")
    elif probe.rule == "clean_cwd":
        out.extra.append("cwd empty afterwards")
    return out


def run_cli(probe: Probe, subs: dict, cwd: Path) -> Outcome:
    args = [a.format(**subs) for a in probe.args]
    t0 = time.perf_counter()
    try:
        res = subprocess.run([*POSFLOW, *args], capture_output=True, text=True, cwd=cwd,
                             env=_env(probe, subs), timeout=probe.timeout)  # fmt: skip
    except subprocess.TimeoutExpired:
        dt = time.perf_counter() - t0
        return Outcome(probe, "unclean", f"timeout after {probe.timeout:g} s", dt,
                       [f"no exit within {probe.timeout:g} s"])  # fmt: skip
    dt = time.perf_counter() - t0
    return _classify_cli(probe, res.returncode, res.stdout, res.stderr, dt, cwd)


_CHILD = """\
import json, sys, time
def _report(**kw):
    sys.stdout.write("\\n{mark}" + json.dumps(kw) + "\\n")
    sys.stdout.flush()
{setup}
_t0 = time.perf_counter()
try:
    _r = eval(compile({call!r}, "<probe>", "eval"))
except BaseException as _exc:
    _report(raised=type(_exc).__name__, value_or_type=isinstance(_exc, (ValueError, TypeError)),
            message=str(_exc), seconds=time.perf_counter() - _t0)
else:
    _report(raised=None, result=repr(_r)[:200], seconds=time.perf_counter() - _t0)
"""


def _cap_memory():  # pragma: no cover - runs in the child
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (API_MEMORY_CAP, API_MEMORY_CAP))


def run_api(probe: Probe, subs: dict, cwd: Path) -> Outcome:
    code = _CHILD.format(mark=MARK, setup=probe.setup_code, call=probe.call)
    t0 = time.perf_counter()
    try:
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             cwd=cwd, env=_env(probe, subs), timeout=probe.timeout,
                             preexec_fn=_cap_memory)  # fmt: skip
    except subprocess.TimeoutExpired:
        dt = time.perf_counter() - t0
        return Outcome(probe, "unclean", f"timeout after {probe.timeout:g} s", dt,
                       [f"no result within {probe.timeout:g} s"])  # fmt: skip
    dt = time.perf_counter() - t0
    found = [s for s in res.stdout.splitlines() if s.startswith(MARK)]
    if not found:  # the child died (signal, MemoryError outside the try) or its setup failed
        tail = _traceback_tail(res.stderr) or (_lines(res.stderr) or ["no output"])[-1]
        return Outcome(probe, "unclean", f"child exit {res.returncode}: {tail}", dt,
                       [f"no result (child exit {res.returncode})"])  # fmt: skip
    rec = json.loads(found[-1][len(MARK) :])
    extra = [f"call {rec['seconds']:.3g} s"]
    if rec["raised"] is None:
        return Outcome(probe, "unclean", f"returned {rec['result']}", dt,
                       ["no exception"], extra)  # fmt: skip
    msg = rec["message"]
    first = (msg.splitlines() or [""])[0]
    reasons = []
    if not rec["value_or_type"]:
        reasons.append(f"{rec['raised']}, not ValueError/TypeError")
    missing = [n for n in probe.names if not re.search(rf"(?<![\w]){re.escape(n)}(?![\w])", msg)]
    if missing:
        reasons.append(f"message does not name {', '.join(missing)}")
    if len(_lines(msg)) > 1:
        extra.append(f"message has {len(_lines(msg))} lines")
    status = "unclean" if reasons else "clean"
    return Outcome(probe, status, f"{rec['raised']}: {first}", dt, reasons, extra)


def _reader(stream, sink: list[str]) -> threading.Thread:
    def pump():
        for line in stream:
            sink.append(line)

    t = threading.Thread(target=pump, daemon=True)
    t.start()
    return t


def run_sigint(probe: Probe, subs: dict, cwd: Path) -> Outcome:
    args = [a.format(**subs) for a in probe.args]
    wait_claim = "--out" in args
    t0 = time.perf_counter()
    proc = subprocess.Popen([*POSFLOW, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=cwd, env=_env(probe, subs))  # fmt: skip
    out, err = [], []
    threads = [_reader(proc.stdout, out), _reader(proc.stderr, err)]
    finished = re.compile(r"^posflow verify: \d+/\d+ ")
    extra = []
    while proc.poll() is None:
        dt = time.perf_counter() - t0
        if dt >= 3.0 and (not wait_claim or any(finished.match(s) for s in err)):
            break
        if dt >= SIGINT_FALLBACK:
            extra.append("no finished claim seen on stderr when SIGINT was sent")
            break
        time.sleep(0.05)
    if proc.poll() is not None:
        for t in threads:
            t.join()
        dt = time.perf_counter() - t0
        return Outcome(probe, "unclean", f"exit {proc.returncode} before SIGINT", dt,
                       ["finished before it could be interrupted"])  # fmt: skip
    t_sig = time.perf_counter()
    proc.send_signal(signal.SIGINT)
    try:
        rc = proc.wait(timeout=probe.timeout / 2)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = proc.wait()
        extra.append("killed: SIGINT was not obeyed")
    for t in threads:
        t.join()
    dt = time.perf_counter() - t0
    stderr = "".join(err)
    tb = _traceback_tail(stderr)
    last = (_lines(stderr) or ["(stderr empty)"])[-1]
    reasons = []
    if rc != 130:
        reasons.append(f"exit {rc}")
    if "interrupted" not in stderr:
        reasons.append('no "interrupted" on stderr')
    if tb is not None:
        reasons.append(f"Traceback ({tb})")
    extra.insert(0, f"SIGINT at {t_sig - t0:.1f} s, exit {time.perf_counter() - t_sig:.1f} s later")
    if wait_claim:
        index = Path(subs["report"]) / "index.md"
        partial = [s.strip() for s in err if s.startswith("partial report")]
        if index.is_file():
            extra.append(partial[0].split(":")[0] if partial else "index.md written")
        else:
            reasons.append("no partial index.md")
    return Outcome(probe, "unclean" if reasons else "clean", f"exit {rc}: {tb or last}", dt,
                   reasons, extra)  # fmt: skip


RUNNERS = {"cli": run_cli, "api": run_api, "sigint": run_sigint}


def run_probe(probe: Probe, root: Path) -> Outcome:
    """Build the probe's inputs under ``root`` and run it with an empty cwd under ``root``."""
    files, cwd = root / "files", root / "cwd"
    files.mkdir(parents=True)
    cwd.mkdir()
    subs = {"files": str(files)}
    t0 = time.perf_counter()
    try:
        if probe.setup is not None:
            subs.update(setup_one_file(probe.setup, files) if probe.setup in ONE_FILE
                        else globals()[f"setup_{probe.setup}"](files))  # fmt: skip
    except Skip as why:
        return Outcome(probe, "skipped", str(why), time.perf_counter() - t0)
    return RUNNERS[probe.kind](probe, subs, cwd)


# --------------------------------------------------------------------------------------------
# the table


def _cell(text: str, width: int = 200) -> str:
    text = " ".join(str(text).split())
    if len(text) > width:
        text = text[: width - 1] + "…"
    return text.replace("|", "\\|")


def _head() -> str:
    try:
        res = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=30)  # fmt: skip
        return res.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _package() -> str:
    """Where the probes' ``import posflow`` comes from (PYTHONPATH may point elsewhere)."""
    code = "import posflow; print(posflow.__file__)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    return res.stdout.strip() or "not importable"


def _before(o: Outcome, before: dict | None) -> str:
    """The issue's state, and with ``--before`` the state measured there by this script."""
    rec = (before or {}).get("outcomes", {}).get(o.probe.name)
    if rec is None:
        return o.probe.before
    why = "; ".join(rec["reasons"]) or rec["detail"]  # a clean one: its message, to compare
    if len(why) > 120:
        why = why[:119] + "…"
    return f"{o.probe.before}; measured at {before['label']}: {rec['status']} ({why})"


def table(outcomes: list[Outcome], before: dict | None = None) -> list[str]:
    lines = [
        "| probe | before | after | exit / exception | seconds | note |",
        "|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        after = o.status if not o.reasons else f"{o.status}: {'; '.join(o.reasons)}"
        note = "; ".join(s for s in (o.probe.note, *o.extra) if s)
        lines.append(
            f"| {_cell(o.probe.name)} | {_cell(_before(o, before), 260)} | {_cell(after)} "
            f"| {_cell(o.detail)} "
            f"| {o.seconds:.2f} | {_cell(note, 400)} |"
        )
    return lines


def report(outcomes: list[Outcome], load0, load1, started: str, before: dict | None = None,
           package: str = "") -> str:  # fmt: skip
    ran = [o for o in outcomes if o.status != "skipped"]
    clean = sum(o.status == "clean" for o in ran)
    skipped = len(outcomes) - len(ran)
    lines = [
        "# Bad-input and fault probes (issue 27)",
        "",
        f"Run {started} by `nice -n 10 python benchmarks/probes.py`; posflow git HEAD "
        f"`{_head()}`; {sys.executable}" + (f", posflow imported from `{package}`." if package
                                             else "."),
        f"Load average at start {load0[0]:.2f}, {load0[1]:.2f}, {load0[2]:.2f}; at the end "
        f"{load1[0]:.2f}, {load1[1]:.2f}, {load1[2]:.2f} ({os.cpu_count()} cores).",
        "",
        "Clean: a CLI probe exits 2 with exactly one line on stderr and no traceback (its note "
        "says what the line must contain, and any time limit); an API probe raises ValueError or "
        "TypeError whose message names the argument; Ctrl-C exits 130 with \"interrupted\". "
        "Seconds: wall time of the probe's process (interpreter start included). $TMP: the run's "
        "temporary folder. Before: the state reported in issue 27"
        + (f"; \"measured at {before['label']}\": this script's classification there ("
           f"{before['clean']} clean of {before['ran']} run; {before['how']}), with the "
           "reasons, or for a clean probe its message then." if before
           else "."),
        "",
        *table(outcomes, before),
        "",
        f"**{clean} clean of {len(ran)} run**" + (f" ({skipped} skipped)." if skipped else "."),
    ]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", metavar="TEXT", help="probes whose name contains TEXT")
    ap.add_argument("--out", type=Path, help=f"result file (default {RESULTS})")
    ap.add_argument("--list", action="store_true", help="print the probes' names and exit")
    ap.add_argument("--json", type=Path, help="also write the outcomes as JSON here")
    ap.add_argument("--label", default="", help="what was probed, stored in --json")
    ap.add_argument("--how", default="", help="how it was probed, stored in --json")
    ap.add_argument("--before", type=Path, help="a --json file of an earlier run: its "
                    "outcomes join the before column")  # fmt: skip
    args = ap.parse_args(argv)
    probes = PROBES
    if args.only:
        probes = tuple(p for p in PROBES if any(t in p.name for t in args.only))
        if not probes:
            ap.error(f"--only {' '.join(args.only)}: no probe matches")
    if args.list:
        print("\n".join(f"{p.kind:7} {p.name}" for p in probes))
        return 0
    out = args.out if args.out is not None else (None if args.only else RESULTS)
    started = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    load0 = os.getloadavg()
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="posflow-probes-") as tmp:
        for i, p in enumerate(probes):
            o = run_probe(p, Path(tmp) / f"p{i:02d}")
            o.detail = o.detail.replace(tmp, "$TMP")  # the temporary folder, shortened
            outcomes.append(o)
            print(f"[{i + 1}/{len(probes)}] {o.status:8} {o.seconds:7.2f} s  {p.name}",
                  file=sys.stderr, flush=True)  # fmt: skip
    before = json.loads(args.before.read_text()) if args.before else None
    package = _package()
    text = report(outcomes, load0, os.getloadavg(), started, before, package)
    if args.json is not None:
        ran = [o for o in outcomes if o.status != "skipped"]
        args.json.write_text(json.dumps({
            "label": args.label or f"HEAD {_head()[:7]}", "how": args.how, "package": package,
            "started": started, "ran": len(ran), "clean": sum(o.status == "clean" for o in ran),
            "outcomes": {o.probe.name: {"status": o.status, "reasons": o.reasons,
                                        "detail": o.detail, "seconds": o.seconds}
                         for o in outcomes},
        }, indent=1) + "\n")  # fmt: skip
    print(text, end="")
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    return 0


def check_probes(probes=PROBES) -> None:
    """Raise ValueError when the probe list is not well-formed (used by the tests)."""
    names = [p.name for p in probes]
    if len(set(names)) != len(names):
        raise ValueError("probe names must be unique")
    for p in probes:
        if p.kind not in KINDS or p.rule not in RULES:
            raise ValueError(f"{p.name}: kind {p.kind!r} / rule {p.rule!r} unknown")
        if p.setup is not None and p.setup not in SETUPS:
            raise ValueError(f"{p.name}: setup {p.setup!r} unknown")
        if p.kind == "api":
            if not p.call or not p.names or p.args:
                raise ValueError(f"{p.name}: an api probe needs call and names, no args")
            compile(p.call, "<probe>", "eval")
            compile(textwrap.dedent(p.setup_code), "<setup>", "exec")
        else:
            if not p.args or p.call:
                raise ValueError(f"{p.name}: a {p.kind} probe needs args, no call")
        if (p.kind == "sigint") != (p.rule == "interrupt"):
            raise ValueError(f"{p.name}: the interrupt rule belongs to sigint probes")
        if p.timeout <= 0:
            raise ValueError(f"{p.name}: timeout must be positive")


if __name__ == "__main__":
    check_probes()
    sys.exit(main())
