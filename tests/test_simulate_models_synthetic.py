"""simulate.models.synthetic: the tasks' answers against a direct loop, the exact error metric on
hand-made logits, chance levels and exact intervals, and bad input."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from posflow.simulate.models.synthetic import (
    IGNORE,
    TASKS,
    AssociativeRecall,
    FlipFlop,
    TaskBatch,
    error_interval,
    make_task,
)


def flipflop_reference(tokens):
    """Direct reading of one flip-flop sequence: (scored positions, answers), a register loop."""
    W, R, ZERO = FlipFlop.W, FlipFlop.R, FlipFlop.ZERO
    reg, pos, ans = None, [], []
    for t in range(0, len(tokens), 2):
        op, bit = int(tokens[t]), int(tokens[t + 1]) - ZERO
        if op == W:
            reg = bit
        elif op == R:
            pos.append(t)
            ans.append(ZERO + reg)
    return pos, ans


def recall_reference(tokens, n_keys):
    """Direct reading of one recall sequence: a dict of key → value seen so far."""
    seen, pos, ans = {}, [], []
    for t in range(0, len(tokens), 2):
        k, v = int(tokens[t]), int(tokens[t + 1])
        if k in seen:
            pos.append(t)
            ans.append(seen[k])
            assert v == seen[k]  # one map per sequence: a repeated key repeats its value
        seen[k] = v
    return pos, ans


def check_against(batch, reference):
    for b in range(len(batch)):
        pos, ans = reference(batch.tokens[b])
        assert np.flatnonzero(batch.mask[b]).tolist() == pos
        pos = np.asarray(pos, dtype=np.int64)
        assert batch.targets[b, pos].tolist() == ans
        assert (batch.targets[b, ~batch.mask[b]] == IGNORE).all()
        # every answer is the next token of the sequence
        assert batch.targets[b, pos].tolist() == batch.tokens[b, pos + 1].tolist()


probs = st.sampled_from([0.0, 0.1, 0.5, 0.8, 0.98])


@given(seed=st.integers(0, 2**32 - 1), pairs=st.integers(2, 40), B=st.integers(1, 5), p=probs)
def test_flipflop_answers_are_the_last_written_bit(seed, pairs, B, p):
    task = FlipFlop(p)
    batch = task.sample(B, 2 * pairs, np.random.default_rng(seed))
    assert batch.tokens.dtype == np.int64 and batch.tokens.shape == (B, 2 * pairs)
    ops, bits = batch.tokens[:, 0::2], batch.tokens[:, 1::2]
    assert np.isin(ops, [0, 1, 2]).all() and np.isin(bits, [3, 4]).all()
    assert (ops[:, 0] == FlipFlop.W).all() and (ops[:, -1] == FlipFlop.R).all()
    check_against(batch, flipflop_reference)


@given(seed=st.integers(0, 2**32 - 1), pairs=st.integers(1, 40), B=st.integers(1, 5),
       K=st.integers(1, 12), V=st.integers(2, 6))  # fmt: skip
def test_recall_answers_are_the_value_of_the_earlier_occurrence(seed, pairs, B, K, V):
    task = AssociativeRecall(K, V)
    batch = task.sample(B, 2 * pairs, np.random.default_rng(seed))
    assert task.vocab_size == K + V
    assert (batch.tokens[:, 0::2] < K).all() and (batch.tokens[:, 1::2] >= K).all()
    assert (batch.tokens < K + V).all()
    check_against(batch, lambda tok: recall_reference(tok, K))


def test_flipflop_frequencies_follow_the_ffl_convention():
    # FFL(0.8): p_w = p_r = 0.1 on the free instructions (all but the first and the last);
    # 4000 × 63 draws: standard error √(0.1·0.9/252000) ≈ 6e-4, tolerance 5 standard errors
    task = FlipFlop(0.8)
    assert task.p_write == task.p_read == pytest.approx(0.1, abs=1e-15)
    ops = task.sample(4000, 130, np.random.default_rng(3)).tokens[:, 2:-2:2]
    for op, p in ((FlipFlop.W, 0.1), (FlipFlop.R, 0.1), (FlipFlop.I, 0.8)):
        se = np.sqrt(p * (1 - p) / ops.size)
        assert abs((ops == op).mean() - p) < 5 * se
    assert FlipFlop.sparse().p_ignore == 0.98 and FlipFlop.dense().p_ignore == 0.1
    assert FlipFlop(0.5, 0.3, 0.2).p_read == 0.2


def test_the_sparse_variant_puts_the_last_write_far_back():
    # mean gap between a read and its write (in instructions), from the reference loop
    def gaps(task):
        batch = task.sample(500, 128, np.random.default_rng(0))
        out = []
        for row in batch.tokens:
            last = 0
            for t in range(0, 128, 2):
                if row[t] == FlipFlop.W:
                    last = t
                elif row[t] == FlipFlop.R:
                    out.append((t - last) // 2)
        return np.mean(out)

    assert gaps(FlipFlop.sparse()) > 3 * gaps(FlipFlop(0.8))  # 4 × in expectation at T = 64


def test_same_seed_same_batch_and_int_seeds():
    for task in (FlipFlop(), AssociativeRecall()):
        a = task.sample(3, 20, np.random.default_rng(5))
        b = task.sample(3, 20, 5)
        for x, y in zip((a.tokens, a.mask, a.targets), (b.tokens, b.mask, b.targets), strict=True):
            assert np.array_equal(x, y)
        assert make_task(task.spec()) == task and hash(make_task(task.spec())) == hash(task)
        assert set(TASKS) == {"flipflop", "recall"}


def one_hot_logits(batch, V, ids):
    logits = np.zeros((*batch.tokens.shape, V))
    np.put_along_axis(logits, ids[..., None], 1.0, axis=-1)
    return logits


@pytest.mark.parametrize("task", [FlipFlop(0.8), FlipFlop.sparse(), AssociativeRecall(6, 5)])
def test_error_of_hand_made_logits(task):
    batch = task.sample(400, 64, np.random.default_rng(11))
    N = batch.count
    V = task.vocab_size
    perfect = one_hot_logits(batch, V, np.where(batch.mask, batch.targets, 0))
    assert task.error(perfect, batch) == (0, N)
    # always wrong: the answer id shifted by one within the answer alphabet
    if isinstance(task, FlipFlop):
        wrong_ids = np.where(batch.targets == FlipFlop.ZERO, FlipFlop.ONE, FlipFlop.ZERO)
    else:
        K, Vv = task.n_keys, task.n_values
        wrong_ids = K + (batch.targets - K + 1) % Vv
    wrong = one_hot_logits(batch, V, np.where(batch.mask, wrong_ids, 0))
    assert task.error(wrong, batch) == (N, N)
    # constant prediction of one answer symbol: errors ~ Binomial(N, chance); the bound is
    # 5 binomial standard errors (N ≥ 300 here)
    const_id = FlipFlop.ZERO if isinstance(task, FlipFlop) else task.n_keys
    const = one_hot_logits(batch, V, np.full(batch.tokens.shape, const_id))
    e, n = task.error(const, batch)
    p = task.chance
    assert n == N >= 300
    assert abs(e / n - p) < 5 * np.sqrt(p * (1 - p) / n)
    # torch logits give the same count
    torch = pytest.importorskip("torch")
    assert task.error(torch.from_numpy(const), batch) == (e, n)


def test_chance_levels():
    assert FlipFlop().chance == 0.5
    assert AssociativeRecall(8, 8).chance == pytest.approx(7 / 8)


def test_error_interval_is_clopper_pearson():
    from scipy.stats import beta

    lo, hi = error_interval(7, 200)
    assert lo == pytest.approx(beta.ppf(0.025, 7, 194), rel=1e-9)  # closed form of the exact CI
    assert hi == pytest.approx(beta.ppf(0.975, 8, 193), rel=1e-9)
    assert error_interval(0, 50)[0] == 0.0 and error_interval(50, 50)[1] == 1.0
    assert error_interval(0, 0) == (0.0, 1.0)


def test_task_batch_slices_and_checks_shapes():
    batch = FlipFlop().sample(5, 8, 0)
    part = batch[1:3]
    assert len(part) == 2 and part.length == 8
    assert np.array_equal(part.tokens, batch.tokens[1:3])
    with pytest.raises(TypeError, match="rows"):
        batch[0]
    with pytest.raises(ValueError, match="shape"):
        TaskBatch(batch.tokens, batch.targets[:, :4], batch.mask)


def test_bad_input_names_the_argument():
    ff = FlipFlop()
    with pytest.raises(ValueError, match="length"):
        ff.sample(2, 7, 0)
    with pytest.raises(ValueError, match="length"):
        ff.sample(2, 2, 0)
    with pytest.raises(ValueError, match="length"):
        AssociativeRecall().sample(2, 9, 0)
    with pytest.raises(ValueError, match="batch_size"):
        ff.sample(0, 8, 0)
    with pytest.raises(TypeError, match="rng"):
        ff.sample(2, 8, "seed")
    with pytest.raises(ValueError, match="p_ignore"):
        FlipFlop(1.0)
    with pytest.raises(ValueError, match="p_ignore"):
        FlipFlop(float("nan"))
    with pytest.raises(ValueError, match="p_write"):
        FlipFlop(0.5, 0.3, 0.3)
    with pytest.raises(ValueError, match="p_write"):
        FlipFlop(0.5, 0.3)
    with pytest.raises(ValueError, match="n_values"):
        AssociativeRecall(4, 1)
    with pytest.raises(ValueError, match="n_keys"):
        AssociativeRecall(0, 4)
    with pytest.raises(ValueError, match="spec"):
        make_task({"name": "copying"})
    batch = ff.sample(2, 8, 0)
    with pytest.raises(ValueError, match="logits"):
        ff.error(np.zeros((2, 8, 4)), batch)
    with pytest.raises(ValueError, match="logits"):
        ff.error(np.full((2, 8, 5), np.nan), batch)
    with pytest.raises(ValueError, match="batch"):
        ff.error(np.zeros((2, 8, 5)), batch.tokens)
    with pytest.raises(ValueError, match="errors"):
        error_interval(5, 4)
    with pytest.raises(ValueError, match="count"):
        error_interval(0, -1)
    with pytest.raises(ValueError, match="level"):
        error_interval(1, 4, level=1.5)
