"""Assertions shared by the command-line tests: a bad input is one line on stderr and exit 2."""

import contextlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from posflow.proofs_checks.cli import main


def run(capsys, *argv):
    """``posflow ARGV`` in this process: (exit code, stdout, stderr)."""
    capsys.readouterr()  # drop what fixtures printed
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_usage_error(capsys, argv, *words):
    """``posflow ARGV`` exits 2 with exactly one stderr line, ``posflow CMD: error: …``,
    containing every one of ``words`` (the argument it names); no traceback. Returns the line."""
    code, _out, err = run(capsys, *argv)
    lines = err.splitlines()
    assert code == 2, (code, err)
    assert len(lines) == 1 and err.endswith("\n"), err
    line = lines[0]
    assert line.startswith("posflow") and ": error: " in line, line
    assert "Traceback" not in err
    for w in words:
        assert w in line, (w, line)
    return line


def _writable(folder: Path) -> bool:
    try:
        fd, name = tempfile.mkstemp(dir=folder)
    except OSError:
        return False
    os.close(fd)
    os.unlink(name)
    return True


@contextlib.contextmanager
def read_only_folder(parent: Path):
    """A folder in which no file can be created, even by root: mode 0o500, and where root
    ignores modes the immutable attribute (chattr +i). Skips when neither can be had."""
    d = parent / "read-only"
    d.mkdir()
    d.chmod(0o500)
    immutable = False
    if _writable(d) and shutil.which("chattr"):
        immutable = subprocess.run(["chattr", "+i", str(d)], capture_output=True).returncode == 0
    try:
        if _writable(d):
            pytest.skip("cannot make a read-only folder here (root without chattr +i)")
        yield d
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(d)], capture_output=True)
        d.chmod(0o700)
