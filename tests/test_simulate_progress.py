"""simulate._progress: a rich bar on a terminal, plain lines on stderr when piped."""

import io
import re

from posflow.simulate.runtime import progress


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_piped_progress_is_one_plain_line_per_step():
    out = io.StringIO()
    with progress(3, "posflow verify", stream=out) as bar:
        for cid in ("PB1", "PB2", "AT1"):
            bar.describe(f"verifying {cid}")  # a terminal-only label: nothing written
            bar.advance(detail=f"{cid} HOLDS")
    lines = out.getvalue().splitlines()
    assert [re.sub(r" \(\d+\.\d s\)$", "", ln) for ln in lines] == [
        "posflow verify: 1/3 PB1 HOLDS", "posflow verify: 2/3 PB2 HOLDS",
        "posflow verify: 3/3 AT1 HOLDS"]  # fmt: skip


def test_throttled_lines_keep_the_last_step_and_unknown_totals():
    out = io.StringIO()
    with progress(100, "training", stream=out, every=3600) as bar:
        for _ in range(100):
            bar.advance(loss="loss 1.0")
    assert [ln.rsplit(" (", 1)[0] for ln in out.getvalue().splitlines()] == [
        "training: 1/100 loss 1.0", "training: 100/100 loss 1.0"]  # fmt: skip
    out = io.StringIO()
    with progress(None, "mutants", stream=out) as bar:
        bar.advance(2, detail="PB1 under x")
    assert out.getvalue().startswith("mutants: 2 PB1 under x (")


def test_disabled_progress_writes_nothing_and_a_terminal_gets_the_bar():
    out = io.StringIO()
    with progress(2, "x", stream=out, enabled=False) as bar:
        bar.advance()
        bar.describe("y")
    assert out.getvalue() == ""
    term = Terminal()
    with progress(2, "measuring", stream=term) as bar:
        bar.advance()
        bar.advance()
    assert "measuring: 1/2" not in term.getvalue()  # rich's bar, not plain lines
