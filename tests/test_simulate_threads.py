"""simulate/_threads.py: one thread count for torch, BLAS/OpenMP and numba, and a default that
does not oversubscribe a loaded machine."""

import os
import sys
import time

import numba
import numpy as np
import pytest

from posflow.simulate import _threads


@pytest.fixture
def restore(monkeypatch):
    """Put every library's thread count and the environment back after the test."""
    for var in _threads._ENV_VARS:
        monkeypatch.setenv(var, os.environ.get(var, "1"))
    before = _threads.thread_counts()
    yield
    torch = sys.modules.get("torch") if "torch" in before else None
    _threads._set_blas(max(before["blas"], default=1))
    numba.set_num_threads(before["numba"])
    if torch is not None:
        torch.set_num_threads(before["torch"])


def test_the_count_is_applied_to_every_library(restore):
    torch = pytest.importorskip("torch")
    numba_max = numba.config.NUMBA_NUM_THREADS
    for n in (1, 2):
        assert _threads.set_threads(n, torch=True) == n
        assert torch.get_num_threads() == n
        assert numba.get_num_threads() == min(n, numba_max)
        counts = _threads.thread_counts()
        assert counts["torch"] == n and counts["numba"] == min(n, numba_max)
        assert all(c == n for c in counts["blas"]), counts
        for var in _threads._ENV_VARS:
            assert os.environ[var] == str(n)


def test_numba_is_bounded_by_its_launch_size(restore):
    big = numba.config.NUMBA_NUM_THREADS + 5
    assert _threads.set_threads(big) == big
    assert numba.get_num_threads() == numba.config.NUMBA_NUM_THREADS


def test_blas_is_limited_in_the_loaded_library(restore):
    """numpy's OpenBLAS is loaded before set_threads runs; its count must follow anyway."""
    np.ones((4, 4)) @ np.ones((4, 4))
    _threads.set_threads(1)
    counts = _threads.thread_counts()["blas"]
    assert counts and set(counts) == {1}


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True, 2.0])
def test_bad_counts_name_threads(bad):
    with pytest.raises(ValueError, match="threads must be an integer >= 1"):
        _threads.set_threads(bad)


@pytest.mark.parametrize(
    ("cores", "load", "env", "expected"),
    [
        (2, 0.1, None, 2),  # a quiet machine: every core
        (2, 1.2, None, 1),  # another job keeps a core busy: the other one
        (2, 5.0, None, 1),  # overloaded: still one
        (16, 3.4, None, 13),
        (16, 0.0, "4", 4),  # OMP_NUM_THREADS set before posflow started caps it
        (16, 0.0, "junk", 16),
    ],
)
def test_default_leaves_loaded_cores_alone(monkeypatch, cores, load, env, expected):
    monkeypatch.setattr(_threads, "available_cores", lambda: cores)
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    monkeypatch.setattr(_threads, "_load", lambda: load)
    monkeypatch.setattr(_threads, "_busy_now", lambda: 0.0)
    monkeypatch.setattr(_threads, "_ENV_AT_START", env)
    assert _threads.default_threads() == expected


def test_a_job_that_just_started_counts_before_the_load_average_sees_it(monkeypatch):
    monkeypatch.setattr(_threads, "available_cores", lambda: 2)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(_threads, "_load", lambda: 0.2)
    monkeypatch.setattr(_threads, "_ENV_AT_START", None)
    monkeypatch.setattr(_threads, "_busy_now", lambda: 1.0)
    assert _threads.default_threads() == 1


def test_only_our_share_of_a_big_machine_load_counts(monkeypatch):
    """Two allowed cores of a 64-core host whose load is 32: half of our cores are busy."""
    monkeypatch.setattr(_threads, "available_cores", lambda: 2)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(_threads, "_load", lambda: 32.0)
    monkeypatch.setattr(_threads, "_busy_now", lambda: 0.0)
    monkeypatch.setattr(_threads, "_ENV_AT_START", None)
    assert _threads.default_threads() == 1


def test_busy_now_sees_a_spinning_process():
    """A process spinning on one of our CPUs for the sample shows as about one busy core."""
    import subprocess
    import sys

    cpu = min(os.sched_getaffinity(0))
    code = f"import os, time; os.sched_setaffinity(0, {{{cpu}}}); t = time.time()\n"
    code += "while time.time() - t < 3: pass"
    spin = subprocess.Popen([sys.executable, "-c", code])
    try:
        time.sleep(0.5)
        assert _threads._busy_now(0.5) >= 0.8  # the spinner alone, plus whatever else runs
    finally:
        spin.kill()
        spin.wait()


def test_available_cores_follow_affinity_and_quota(monkeypatch):
    assert 1 <= _threads.available_cores() <= len(os.sched_getaffinity(0))
    monkeypatch.setattr(_threads, "_cgroup_cpus", lambda: 1)
    assert _threads.available_cores() == 1


def test_the_default_is_what_set_threads_applies(restore, monkeypatch):
    monkeypatch.setattr(_threads, "default_threads", lambda: 1)
    assert _threads.set_threads() == 1
    assert numba.get_num_threads() == 1
