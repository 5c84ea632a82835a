"""benchmarks/gpu_extrapolate.sh in its tiny CPU mode: trains 3 schemes x 2 seeds, prints the
table with intervals, AT20's judge gives a verdict for every sub-claim, and the device's limits
(triad, matmuls) come with the training step's rate as a % of the float32 matmul."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_extrapolate.sh"


def test_tiny_mode_runs_the_judge(tmp_path):
    env = {**os.environ, "TINY": "1", "PYTHON": sys.executable,
           "POSFLOW_CACHE_DIR": str(tmp_path / "cache")}  # fmt: skip
    out = tmp_path / "out"
    res = subprocess.run(["bash", str(SCRIPT), str(out)], env=env, capture_output=True,
                         text=True, timeout=300)  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    assert len(list((out / "store").glob("*__s*.json"))) == 6
    assert (out / "extrapolation.png").is_file() and (out / "table.json").is_file()
    report = (out / "report.txt").read_text()
    assert "unigram perplexity" in report and "rotations_alibi_flat" in report
    assert "AT20 on" in report and "INCONCLUSIVE" in report  # 2 seeds, 3 schemes
    assert "references: triad" in res.stdout and "float32" in res.stdout
    assert "| train_step | LM training step, L = 1, d_model 16, 2 × 8 tokens |" in res.stdout
    limits = json.loads((out / "gpu_limits.json").read_text())
    refs = limits["references"]
    assert refs["triad"] > 0 and refs["matmul_f32"] > 0
    (row,) = limits["limits"]
    assert row["ref_name"] == "matmul_f32" and row["reference"] == refs["matmul_f32"]
    assert (out / "gpu_limits.md").read_text().count("| train_step |") == 1
    # AT20's synthetic tasks at the same (here tiny) scale, judged by the task judge
    assert len(list((out / "synthetic").glob("*__s0.json"))) == 4  # 2 tasks × 2 schemes
    text = (out / "synthetic.txt").read_text()
    assert "rotations_below_rope: INCONCLUSIVE" in text and "missing schemes" in text
