"""simulate.models.retrieval: the key–value retrieval task, its scores and intervals (PB17)."""

import copy

import numpy as np
import pytest
from scipy.stats import spearmanr

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

from posflow.simulate.models import retrieval as R  # noqa: E402
from posflow.simulate.models.hub import installed_models  # noqa: E402

KEYS = R.WORDS[:30]
PREAMBLE = "Each word has a number.\n"


@pytest.fixture(scope="module")
def tok():
    """A word-level tokenizer, no download: words, digits, ' ', ':', '\\n' each one token."""
    vocab = ["[UNK]", *map(str, range(10)), " ", "\n", ":", ".", "Each", "word", "has", "a",
             "number", *KEYS]  # fmt: skip
    model = tokenizers.models.WordLevel({w: i for i, w in enumerate(vocab)}, unk_token="[UNK]")
    t = tokenizers.Tokenizer(model)
    t.pre_tokenizer = tokenizers.pre_tokenizers.Split(
        tokenizers.Regex(r"\d|\s|[^\w\s]|\w+"), behavior="isolated"
    )
    return transformers.PreTrainedTokenizerFast(tokenizer_object=t, unk_token="[UNK]")


@pytest.fixture(scope="module")
def llama(tok):
    """A randomly initialised Llama with grouped-query attention (4 heads, 2 KV heads)."""
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=256,
                                   rope_theta=1e5)  # fmt: skip
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
    with torch.no_grad():  # larger weights than the 0.02 default, so the logits are not flat
        for p in model.parameters():
            if p.ndim == 2:
                p.mul_(10)
    return model.eval()


def enc(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


def test_the_layout_matches_a_hand_count(tok):
    task = R.build_task(tok, 5, 3, seed=1, preamble=PREAMBLE)
    # hand count: "Each word has a number.\n" = Each,' ',word,' ',has,' ',a,' ',number,'.','\n'
    # = 11 tokens; a line key,':',' ',d,d,d,'\n' = 7 tokens; a query key,':',' ' = 3 tokens
    assert (task.preamble_length, task.line_length, task.query_ids.shape[2]) == (11, 7, 3)
    assert task.prompt_length == 11 + 5 * 7 + 3 and task.value_length == 3
    np.testing.assert_array_equal(task.line_starts, [11, 18, 25, 32, 39])
    for c in range(3):
        keys, vals = task.keys[c], task.values[c]
        assert len(set(keys)) == 5 and len(set(vals)) == 5
        assert all(len(v) == 3 and v[0] != "0" for v in vals)
        for k in range(5):
            s = 11 + 7 * k
            line = task.context_ids[c, s : s + 7].tolist()
            assert line == enc(tok, f"{keys[k]}: {vals[k]}\n")  # line k holds key k
            assert task.query_ids[c, k].tolist() == enc(tok, f"{keys[k]}: ")  # query asks key k
            assert "".join(tok.convert_ids_to_tokens(task.value_ids[c, k].tolist())) == vals[k]
            full = task.prompt(c, k, with_value=True).tolist()
            lines = "".join(f"{a}: {b}\n" for a, b in zip(keys, vals, strict=True))
            text = PREAMBLE + lines + f"{keys[k]}: {vals[k]}"
            assert full == enc(tok, text)  # the whole prompt tokenizes to the stated positions
    np.testing.assert_array_equal(task.line_spans()[2], [25, 32])


def test_bos_puts_the_tokenizers_bos_first_and_shifts_every_position_by_one(tok):
    """bos=True: the same task with ``bos_token_id`` first; the layout moves by one token."""
    plain = R.build_task(tok, 5, 3, seed=1, preamble=PREAMBLE)
    with pytest.raises(ValueError, match="bos_token_id"):
        R.build_task(tok, 5, 3, seed=1, preamble=PREAMBLE, bos=True)  # the tokenizer has none
    with pytest.raises(TypeError, match="bos must be a bool"):
        R.build_task(tok, 5, 3, seed=1, bos=1)
    tb = copy.deepcopy(tok)
    tb.bos_token = "[UNK]"  # any id will do: the rule is "this id first"
    task = R.build_task(tb, 5, 3, seed=1, preamble=PREAMBLE, bos=True)
    assert task.preamble_length == plain.preamble_length + 1
    np.testing.assert_array_equal(task.line_starts, plain.line_starts + 1)
    np.testing.assert_array_equal(task.context_ids[:, 0], tb.bos_token_id)
    np.testing.assert_array_equal(task.context_ids[:, 1:], plain.context_ids)
    np.testing.assert_array_equal(task.query_ids, plain.query_ids)
    assert task.prompt_length == plain.prompt_length + 1


def test_same_seed_same_task_and_another_seed_another(tok):
    a, b = R.build_task(tok, 6, 4, seed=3), R.build_task(tok, 6, 4, seed=3)
    c = R.build_task(tok, 6, 4, seed=4)
    np.testing.assert_array_equal(a.context_ids, b.context_ids)
    assert a.keys == b.keys and a.values == b.values
    assert not np.array_equal(a.context_ids, c.context_ids)


def direct(model, task, c, k):
    """log p(value) from one full forward pass and torch.log_softmax on the full logits, and a
    hand greedy decoding of m tokens."""
    ids = torch.from_numpy(task.prompt(c, k, with_value=True)[None])
    n, m = task.prompt_length, task.value_length
    with torch.no_grad():
        logp = torch.log_softmax(model(ids).logits[0].double(), dim=-1)
        lp = sum(float(logp[n - 1 + i, ids[0, n + i]]) for i in range(m))
        seq = ids[:, :n]
        for _ in range(m):
            nxt = model(seq).logits[0, -1].argmax()
            seq = torch.cat([seq, nxt.view(1, 1)], dim=1)
    return lp, bool((seq[0, n:] == ids[0, n:]).all())


@pytest.mark.parametrize("share_prefix", [True, False])
def test_scores_equal_a_direct_forward_pass_and_greedy_decoding(tok, llama, share_prefix):
    task = R.build_task(tok, 4, 3, seed=0, preamble=PREAMBLE)
    sc = R.score(llama, task, share_prefix=share_prefix, batch_size=5)
    assert sc.logprob.shape == sc.correct.shape == (3, 4) and sc.token_logprob.shape == (3, 4, 3)
    np.testing.assert_allclose(sc.token_logprob.sum(-1), sc.logprob, rtol=0, atol=1e-12)
    for c in range(3):
        for k in range(4):
            lp, greedy = direct(llama, task, c, k)
            # float32 logits of O(10) through 2 layers: the two passes agree to ~1e-5
            assert sc.logprob[c, k] == pytest.approx(lp, abs=1e-4)
            assert sc.correct[c, k] == greedy
    assert (sc.logprob < 0).all()


def test_a_copying_model_retrieves_every_value(tok):
    """An induction 'copier' (logit 30 on the token that followed the longest earlier match of
    the current suffix, up to 6 tokens, so the key decides) retrieves every value: all exact
    matches and log-probs ≈ −(V−1)·e^{−60} ≈ 0."""

    class Copier(torch.nn.Module):
        def __init__(self, vocab):
            super().__init__()
            self.vocab = vocab
            self.w = torch.nn.Parameter(torch.zeros(1))

        def forward(self, input_ids, **kw):
            B, n = input_ids.shape
            out = torch.full((B, n, self.vocab), -30.0)
            for b in range(B):
                s = input_ids[b].tolist()
                for i in range(n):
                    for L in range(min(6, i), 0, -1):
                        js = [j for j in range(i - 1, L - 2, -1)
                              if s[j - L + 1 : j + 1] == s[i - L + 1 : i + 1]]  # fmt: skip
                        if js:
                            out[b, i, s[js[0] + 1]] = 30.0
                            break
            return type("Out", (), {"logits": out})()

    task = R.build_task(tok, 4, 2, seed=5, preamble=PREAMBLE)
    sc = R.score(Copier(len(tok)), task, share_prefix=False)
    assert sc.correct.all() and np.abs(sc.logprob).max() < 1e-20


def test_the_bootstrap_interval_contains_the_mean_and_equals_a_plain_loop():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(30, 6))
    x[:, 2] = 1.5  # a constant column: a zero-width interval at its value
    cur = R.position_curve(x, confidence=0.9, resamples=500, seed=7)
    np.testing.assert_allclose(cur.mean, x.mean(axis=0), rtol=0, atol=1e-15)
    assert ((cur.lo <= cur.mean) & (cur.mean <= cur.hi)).all()
    assert cur.lo[2] == cur.hi[2] == 1.5
    gen = np.random.default_rng(7)  # the same resamples, one at a time
    means = np.array([x[gen.integers(0, 30, size=30)].mean(axis=0) for _ in range(500)])
    np.testing.assert_allclose(cur.lo, np.quantile(means, 0.05, axis=0), rtol=0, atol=1e-12)
    np.testing.assert_allclose(cur.hi, np.quantile(means, 0.95, axis=0), rtol=0, atol=1e-12)
    # 30 standard normals: the 90% interval has half-width ≈ 1.645/√30 = 0.30 (± 20%)
    assert np.median((cur.hi - cur.lo)[[0, 1, 3, 4, 5]]) / 2 == pytest.approx(0.30, rel=0.2)


def test_spearman_and_its_interval_against_scipy():
    rng = np.random.default_rng(1)
    prof = np.array([5.0, 1, 1, 2, 3, 4, 6, 0.5])
    x = prof + rng.normal(scale=2.0, size=(40, 8))
    rho, lo, hi, dropped = R.bootstrap_spearman(x, prof, resamples=400, seed=2)
    assert rho == pytest.approx(spearmanr(x.mean(0), prof).statistic, abs=1e-12)
    assert lo <= rho <= hi and dropped == 0
    rows = rng.integers(0, 3, size=(20, 8)).astype(float)  # many ties
    want = [spearmanr(r, prof).statistic for r in rows]
    got = R._spearman_rows(rows, prof)
    ok = np.isfinite(want)
    np.testing.assert_allclose(got[ok], np.array(want)[ok], rtol=0, atol=1e-12)


def test_line_profile_sums_each_key_line(tok):
    task = R.build_task(tok, 5, 1, seed=0, preamble=PREAMBLE)
    n = task.prompt_length
    p = np.random.default_rng(0).dirichlet(np.ones(n))
    q = R.line_profile(p, task)
    want = [p[11 + 7 * k : 18 + 7 * k].sum() for k in range(5)]
    np.testing.assert_allclose(q, want, rtol=0, atol=1e-15)
    # preamble (11 tokens) and query (3 tokens) are in no line
    assert q.sum() == pytest.approx(1 - p[:11].sum() - p[-3:].sum(), abs=1e-12)
    np.testing.assert_allclose(R.line_profile(np.full(n, 1 / n), task), 7 / n, atol=1e-15)


def test_the_measured_rollout_aggregates_on_a_tiny_llama(tok, llama):
    from posflow.simulate.models.measure import measure
    from posflow.simulate.rollout import influence

    task = R.build_task(tok, 4, 2, seed=0, preamble=PREAMBLE)
    m = measure(llama, task.prompts([(0, 1), (1, 3)]), qk=False, influence=False)
    p = influence(m.kernels(), m.lambdas)
    q = R.line_profile(p, task)
    assert p.shape == (task.prompt_length,) and q.shape == (4,) and (q > 0).all()
    assert q.sum() < 1


def test_bad_input_names_the_argument(tok, llama):
    with pytest.raises(ValueError, match="K must be >= 2"):
        R.build_task(tok, 1, 3)
    with pytest.raises(TypeError, match="K must be an integer"):
        R.build_task(tok, 4.0, 3)
    with pytest.raises(ValueError, match="contexts"):
        R.build_task(tok, 4, 0)
    with pytest.raises(TypeError, match="seed"):
        R.build_task(tok, 4, 2, seed=0.5)
    with pytest.raises(ValueError, match="tokenizer encodes only 30"):
        R.build_task(tok, 31, 2)
    with pytest.raises(ValueError, match="digits = 1 gives fewer than K = 12"):
        R.build_task(tok, 12, 2, digits=1)
    with pytest.raises(TypeError, match="words"):
        R.build_task(tok, 4, 2, words="apple")
    task = R.build_task(tok, 4, 2)
    with pytest.raises(TypeError, match="task"):
        R.score(llama, "task")
    with pytest.raises(ValueError, match="batch_size"):
        R.score(llama, task, batch_size=0)
    with pytest.raises(ValueError, match="p must have shape"):
        R.line_profile(np.ones(3), task)
    with pytest.raises(ValueError, match="per_context"):
        R.position_curve(np.ones(5))
    with pytest.raises(ValueError, match="confidence"):
        R.position_curve(np.ones((3, 3)), confidence=1.5)
    with pytest.raises(ValueError, match="profile"):
        R.bootstrap_spearman(np.ones((3, 3)), np.ones(4))


NOT_INSTALLED = "SmolLM2 is not installed (posflow models install smollm2-135m)"


@pytest.mark.skipif(installed_models()["smollm2-135m"] is None, reason=NOT_INSTALLED)
def test_smollm2_retrieves_values_from_its_own_tokenizer():
    """Integration: the real model and tokenizer, 2 contexts of 10 lines (20 prompts)."""
    from posflow.simulate.models.hub import load_pretrained

    model, _, tk = load_pretrained("smollm2-135m")
    task = R.build_task(tk, 10, 2, seed=0)
    assert task.line_length == 7 and task.value_length == 3  # key ':' ' ' d d d '\n'
    sc = R.score(model, task)
    lp, _ = direct(model, task, 1, 4)
    assert sc.logprob[1, 4] == pytest.approx(lp, abs=1e-3)
    # the first line is retrieved (measured: 6 of 6 contexts in PB17's quick run)
    assert sc.correct[:, 0].all() and (sc.logprob < 0).all()


@pytest.mark.skipif(installed_models()["gemma3-270m"] is None,
                    reason="Gemma 3 270M is not installed (posflow models install gemma3-270m)")
def test_gemma3_retrieves_values_with_bos_first():
    """Integration: Gemma 3 270M with <bos> first (its tokenizer's convention), 2 × 10 prompts."""
    from posflow.simulate.models.hub import load_pretrained

    model, _, tk = load_pretrained("gemma3-270m")
    task = R.build_task(tk, 10, 2, seed=0, bos=True)
    assert task.context_ids[0, 0] == tk.bos_token_id and task.value_length == 3
    assert task.line_length == 7  # key ':' ' ' d d d '\n' (measured on its tokenizer)
    sc = R.score(model, task)
    lp, _ = direct(model, task, 1, 4)
    assert sc.logprob[1, 4] == pytest.approx(lp, abs=1e-3)
    assert (sc.logprob < 0).all() and sc.correct.mean() > 0.5  # measured: 0.8 on this task
