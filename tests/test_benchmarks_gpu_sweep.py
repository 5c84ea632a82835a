"""benchmarks/gpu_sweep.py's limits on the CPU: the references and the rate rows follow their
byte and flop models exactly (a fake timer gives the seconds), the flop model of a training step
equals torch's own flop count, and with no CUDA device the script says so and exits with 2."""

import importlib
import json
import types
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def gs(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module("gpu_sweep")


class FakeTimer:
    """Runs ``fn`` as often as asked and reports ``seconds`` for it."""

    def __init__(self, seconds):
        self.seconds, self.repeats = seconds, []

    def best(self, fn, repeat):
        out = None
        for _ in range(repeat):
            out = fn()
        self.repeats.append(repeat)
        return self.seconds, out


def test_the_references_are_the_stream_and_matmul_counts_over_the_timed_seconds(gs):
    timer = FakeTimer(0.5)
    refs = gs.references("torch", torch.device("cpu"), timer, tiny=True)
    n, m = 2**16, 64  # the tiny sizes
    assert refs["triad_n"] == n and refs["matmul_n"] == m
    assert refs["triad"] == 24.0 * n / 0.5 / 1e9  # STREAM: 24 bytes per element
    assert refs["matmul_f64"] == refs["matmul_f32"] == 2.0 * m**3 / 0.5 / 1e9
    assert timer.repeats == [3, 3, 3] and refs["repeat"] == 3  # best of ≥ 3
    assert refs["tf32"] is False and refs["load"] >= 0


def test_the_timer_keeps_the_shortest_call(gs, monkeypatch):
    clock = iter([0.0, 3.0, 10.0, 11.0, 20.0, 22.0])  # calls of 3, 1 and 2 s
    monkeypatch.setattr(gs, "time", types.SimpleNamespace(perf_counter=lambda: next(clock)))
    calls = []
    t, out = gs.DeviceTimer("torch", torch.device("cpu")).best(lambda: calls.append(1) or 7, 3)
    assert (t, out, len(calls)) == (1.0, 7, 3)
    with pytest.raises(ValueError, match="repeat"):
        gs.DeviceTimer("torch", torch.device("cpu")).best(lambda: 0, 0)


def test_each_row_divides_its_model_by_its_time_and_by_its_reference(gs):
    refs = {"triad": 100.0, "matmul_f64": 50.0, "matmul_f32": 400.0}
    res = {
        "structured": {"n": 10**6, "T": 64, "heads": 32, "influence_s": 2.0,
                       "influence_1head_s": 0.5, "load": 1.5},
        "dense": {"n": 1000, "T": 4, "build_s": 0.25, "validate_s": 0.5, "influence_s": 1.0,
                  "load": 0.5},
        "so2_scores": {"n": 2048, "n_q": 256, "d": 96, "seconds": 0.125, "load": 0.0},
        "route_means": {"routes": 1000, "steps": 512, "seconds": 2.0, "load": 0.0},
    }  # fmt: skip
    rows = {r.path: r for r in gs.limit_rows(res, refs)}
    r = rows["influence, ALiBi 32 heads, n = 1,000,000, T = 64"]
    assert r.achieved == pytest.approx(165 * 64e6 / 2.0 / 1e9, rel=1e-15)  # (5H + 5) n T flops
    assert (r.ref_name, r.unit, r.load) == ("matmul_f64", "GFLOP/s", 1.5)
    assert r.percent == pytest.approx(100 * r.achieved / 50.0, rel=1e-15)
    r = rows["influence, ALiBi 1 head, n = 1,000,000, T = 64"]
    assert r.achieved == pytest.approx(16 * 64e6 / 0.5 / 1e9, rel=1e-15)  # 16 n T bytes
    assert (r.ref_name, r.unit) == ("triad", "GB/s")
    assert rows["ALiBi kernel as an n × n matrix, n = 1,000"].achieved == pytest.approx(0.032)
    assert rows["dense_kernel checks and copy, n = 1,000"].achieved == pytest.approx(0.032)
    r = rows["influence, dense kernel, n = 1,000, T = 4"]
    assert r.achieved == pytest.approx(0.032) and r.percent == pytest.approx(0.032)
    r = rows["SO(2) scores 256 × 2,048, d = 96"]
    assert r.achieved == pytest.approx(2 * 256 * 2048 * 96 / 0.125 / 1e9, rel=1e-15)
    r = rows["route means, 1,000 routes × 512 steps"]
    assert r.achieved == pytest.approx(56 * 48 * 1000 * 512 / 2.0 / 1e9, rel=1e-15)
    assert len(rows) == 7
    line = gs.table_line(gs.Row("s", "p", 3.0, "GB/s", 4.0, "triad", 0.5))
    assert line == "| s | p | 3.00 GB/s | triad 4.00 GB/s | 75 % | 0.50 |"  # as limits.py
    with pytest.raises(ValueError, match="seconds"):
        gs.rate_row("s", "p", 1.0, 0.0, refs, "triad", 0.0)


def test_the_training_flop_model_equals_torchs_count_of_one_step(gs):
    from torch.utils.flop_counter import FlopCounterMode

    from posflow.simulate.models.lm import LM, LMConfig

    L, H, dh, V, n, b = 2, 2, 8, 50, 12, 3
    cfg = LMConfig(vocab_size=V, n_layer=L, n_head=H, d_model=H * dh, scheme="rope",
                   scheme_options={"base": 100.0})  # fmt: skip
    model = LM(cfg, seed=0)
    ids = torch.randint(V, (b, n + 1), generator=torch.Generator().manual_seed(0))
    with FlopCounterMode(display=False) as count:
        model.loss(ids[:, :-1], ids[:, 1:]).backward()
    # torch counts 2·m·n·k per product, forward and backward; the model counts the same products
    assert count.get_total_flops() == gs.train_flops(L, H * dh, V, n, b)


def test_train_step_mode_writes_the_limits_table_on_the_cpu(gs, tmp_path, capsys):
    res = gs.main([str(tmp_path), "--tiny", "--device", "cpu",
                   "--train-step", "1", "2", "8", "40", "8", "2"])  # fmt: skip
    out = capsys.readouterr().out
    assert out.startswith("references: triad") and "| train_step | LM training step" in out
    (row,) = json.loads((tmp_path / "gpu_limits.json").read_text())["limits"]
    assert row["achieved"] > 0 and row["ref_name"] == "matmul_f32"
    assert row["percent"] == pytest.approx(100 * row["achieved"] / res["references"]["matmul_f32"])


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
def test_without_a_cuda_device_the_script_says_so_and_exits_2(gs, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        gs.main([str(tmp_path)])
    assert exc.value.code == 2 and "torch finds no CUDA device" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # nothing was measured or written
