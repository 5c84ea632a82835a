"""The house rules of proofs_checks: a claim ID reaches its check in one hop, checks stay short,
modules stay small (issue 22's layout, enforced)."""

import ast
import inspect
import re
import statistics
from pathlib import Path

from posflow.proofs_checks import kit

ROOT = Path(__file__).resolve().parents[1] / "proofs_checks"
MAX_MODULE_LINES = 400
MAX_LARGE_MODULES = 2  # each with the reason in its docstring
MAX_MEDIAN_CHECK_LINES = 60


def _id_numbers(module: str) -> tuple[str, list[int]]:
    """("AT", [12, 13]) for ``at12_13_far_mass``: the IDs a claim module's name carries."""
    m = re.fullmatch(r"(pb|at)(\d+(?:_\d+)*)(?:_[a-z].*)?", module)
    assert m, f"claim module {module!r} does not start with its IDs (e.g. pb01_03_…)"
    return m.group(1).upper(), [int(x) for x in m.group(2).split("_")]


def test_every_check_lives_in_a_module_named_by_its_id():
    for c in kit.all_claims():
        mod, fn = c.check.__module__, c.check.__name__
        assert mod.startswith("posflow.proofs_checks.claims."), (c.id, mod)
        assert fn == c.id.lower(), (c.id, fn)
        prefix, nums = _id_numbers(mod.rpartition(".")[2])
        n = int(c.id[2:])
        assert c.id.startswith(prefix) and min(nums) <= n <= max(nums), (c.id, mod)


def test_the_id_parser_refuses_an_unnamed_module():
    assert _id_numbers("pb08_10_13_shape") == ("PB", [8, 10, 13])
    try:
        _id_numbers("position_bias_shape")
    except AssertionError:
        return
    raise AssertionError("an unnamed module passed")


def test_checks_are_short():
    lengths = {c.id: len(inspect.getsourcelines(c.check)[0]) for c in kit.all_claims()}
    assert statistics.median(lengths.values()) <= MAX_MEDIAN_CHECK_LINES, lengths


def test_modules_are_small():
    large = []
    for p in sorted(ROOT.rglob("*.py")):
        n = len(p.read_text(encoding="utf-8").splitlines())
        if n > MAX_MODULE_LINES:
            doc = ast.get_docstring(ast.parse(p.read_text(encoding="utf-8"))) or ""
            assert "lines" in doc and str(MAX_MODULE_LINES) in doc, (
                f"{p.relative_to(ROOT)} has {n} lines and no reason in its docstring"
            )
            large.append(p.name)
    assert len(large) <= MAX_LARGE_MODULES, large


def test_registration_is_one_explicit_list():
    from posflow.proofs_checks import claims

    files = {p.stem for p in (ROOT / "claims").glob("*.py")} - {"__init__"}
    assert set(claims.MODULES) == files
    assert kit.claim_modules() == tuple(f"posflow.proofs_checks.claims.{m}" for m in claims.MODULES)
