"""A synthetic key–value retrieval task built from a model's own tokenizer (claim PB17).

"Lost in the middle" (Liu et al. 2023) asks how well a causal LM retrieves a fact as a function
of where the fact sits in its context. Here a *context* lists K key–value pairs, one per line,
after a short preamble, and a *prompt* appends the query ``"{key_k}: "`` for one of them; the
model should continue with the value of key k. Every context is queried at every position
k = 0…K−1, so the C contexts give C prompts per position (a paired design: the positions are
compared on the same lists).

Token rule (checked, ValueError naming ``tokenizer`` otherwise):

* a **key** is a word of :data:`WORDS` (or of ``words``) that the tokenizer encodes as exactly
  one known token, also when it starts a line ``"{key}: 0\\n"``; the K keys of a context are
  distinct, drawn without replacement;
* a **value** is a random ``digits``-digit number (first digit non-zero; distinct within a
  context); every decimal digit must be one token, so a value is ``digits`` tokens;
* a **line** ``"{key}: {value}\\n"`` therefore has a fixed number ℓ of tokens (its encoding alone);
  the context is the concatenation preamble + lines and every full prompt is checked to encode,
  as one text, to exactly that concatenation (so the token positions below are the model's).

Positions: line k occupies tokens ``[s_k, s_k + ℓ)`` with ``s_k = len(preamble) + k·ℓ`` (its
newline included); the prompt has n = len(preamble) + K·ℓ + q tokens (q: the query's tokens),
and the value's m = ``digits`` tokens follow it.

Scores (teacher forcing): ``log p(value | prompt) = Σ_{i<m} log softmax(z_{n−1+i})[v_i]`` in
float32 or better, and *exact match* = every value token is the argmax of its teacher-forced
distribution — the same as greedy decoding producing the value's m tokens (greedy emits v_0 iff it
is the argmax after the prompt, and then sees exactly the teacher-forced prefix). Hugging Face
models run each context once and its K queries on the cached keys/values (``share_prefix``).

Intervals: plain percentile bootstrap over contexts (seeded), per position and for the Spearman
correlation of the position curve with a predicted profile aggregated per key line.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import numpy as np

__all__ = [
    "WORDS",
    "PositionCurve",
    "RetrievalScores",
    "RetrievalTask",
    "bootstrap_spearman",
    "build_task",
    "line_profile",
    "position_curve",
    "score",
]

# common English nouns; the tokenizer decides which of them are usable keys (one token each)
WORDS = tuple(
    """apple river stone house bread chair table window garden music paper water money
    horse tiger eagle snake mouse lemon grape melon peach cherry onion carrot potato tomato
    pepper salt sugar honey butter cheese cream coffee juice wine beer glass plate spoon knife
    fork bottle basket bucket candle lamp clock watch phone radio camera piano guitar drum
    violin flute song dance story poem letter book page pen pencil brush paint color
    king queen prince knight castle tower bridge road street city town village farm field
    forest mountain valley island ocean lake beach desert cloud rain snow storm wind
    fire smoke ice gold silver iron copper steel wood glassware cotton wool silk leather
    doctor nurse teacher farmer driver pilot sailor soldier artist writer singer actor
    dog cat cow pig sheep goat duck chicken rabbit wolf bear lion fox deer whale shark
    train plane boat ship car truck bike wheel engine motor rocket planet star moon sun
    heart brain hand foot finger shoulder tooth nose mouth ear eye hair skin bone blood
    shirt dress coat hat shoe sock glove ring belt button pocket bag box door wall roof
    floor kitchen bedroom office school library hospital market museum church temple
    """.split()
)

DEFAULT_PREAMBLE = "Each word below has a number.\n"


def _encode(tokenizer, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


@dataclass
class RetrievalTask:
    """C contexts of K key–value lines; prompt (c, k) queries key k of context c.

    Arrays (NumPy int64): ``context_ids`` (C, n0) with n0 = len(preamble) + K·ℓ,
    ``query_ids`` (C, K, q), ``value_ids`` (C, K, m); ``line_starts`` (K,) and ``line_length`` ℓ
    give the key lines' token positions (the same in every context); ``keys``/``values`` the
    strings, (C, K) lists.
    """

    K: int
    context_ids: np.ndarray
    query_ids: np.ndarray
    value_ids: np.ndarray
    line_starts: np.ndarray
    line_length: int
    preamble_length: int
    keys: list
    values: list
    seed: int

    @property
    def num_contexts(self) -> int:
        return int(self.context_ids.shape[0])

    @property
    def prompt_length(self) -> int:
        """n: tokens up to and including the query; the last one predicts value token 0."""
        return int(self.context_ids.shape[1] + self.query_ids.shape[2])

    @property
    def value_length(self) -> int:
        return int(self.value_ids.shape[2])

    def line_spans(self) -> np.ndarray:
        """(K, 2) [start, stop) token positions of the key lines (newline included)."""
        return np.stack([self.line_starts, self.line_starts + self.line_length], axis=1)

    def prompt(self, c: int, k: int, *, with_value: bool = False) -> np.ndarray:
        """Token ids of prompt (c, k), shape (n,), or (n + m,) with the value appended."""
        parts = [self.context_ids[c], self.query_ids[c, k]]
        if with_value:
            parts.append(self.value_ids[c, k])
        return np.concatenate(parts)

    def prompts(self, pairs=None, *, with_value: bool = False) -> np.ndarray:
        """(P, n) or (P, n + m) ids of the prompts ``pairs`` [(c, k), …] (default: all, c-major)."""
        if pairs is None:
            pairs = [(c, k) for c in range(self.num_contexts) for k in range(self.K)]
        return np.stack([self.prompt(c, k, with_value=with_value) for c, k in pairs])

    def text(self, tokenizer, c: int, k: int) -> str:
        """The decoded text of prompt (c, k) with its value (for reading, not for scoring)."""
        return tokenizer.decode(self.prompt(c, k, with_value=True).tolist())


def _positive_int(name: str, v, low: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, int | np.integer):
        raise TypeError(f"{name} must be an integer; got {type(v).__name__}")
    if v < low:
        raise ValueError(f"{name} must be >= {low}; got {v}")
    return int(v)


def _usable_keys(tokenizer, words) -> list[str]:
    unk = getattr(tokenizer, "unk_token_id", None)
    out = []
    for w in dict.fromkeys(words):
        ids = _encode(tokenizer, w)
        if len(ids) == 1 and ids[0] != unk and _encode(tokenizer, f"{w}: 0\n")[0] == ids[0]:
            out.append(w)
    return out


def build_task(
    tokenizer,
    K: int,
    contexts: int,
    *,
    seed: int = 0,
    digits: int = 3,
    words=None,
    preamble: str = DEFAULT_PREAMBLE,
    bos: bool = False,
) -> RetrievalTask:
    """Build C = ``contexts`` random key–value contexts of K lines each (claim PB17).

    Parameters
    ----------
    tokenizer : Hugging Face tokenizer
        The model's own tokenizer (called with ``add_special_tokens=False``).
    K : int, >= 2
        Key–value lines per context.
    contexts : int, >= 1
        Contexts; each is queried at every position, so this is the prompts per position.
    seed : int
        Seeds the keys and values (``numpy.random.default_rng(seed)``): same seed, same task.
    digits : int, >= 1
        Digits per value (the value is ``digits`` tokens).
    words : sequence of str, optional
        Candidate keys (default :data:`WORDS`); those that are not one token are dropped.
    preamble : str
        Text before the first line (its tokens are in no key line).
    bos : bool
        Put the tokenizer's ``bos_token_id`` first in every context (the convention of models
        whose tokenizer adds it, e.g. Gemma 3); it counts as a preamble token.

    Returns
    -------
    RetrievalTask

    Raises TypeError for a non-integer K, contexts or digits and ValueError for K < 2, fewer
    usable keys than K, fewer distinct values than K, digits that are not single tokens, lines of
    unequal token length or prompts whose joint encoding differs from the concatenation (the
    message names ``tokenizer`` or the argument).
    """
    K = _positive_int("K", K, 2)
    C = _positive_int("contexts", contexts)
    digits = _positive_int("digits", digits)
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise TypeError(f"seed must be an integer; got {type(seed).__name__}")
    if not callable(tokenizer):
        raise TypeError(
            f"tokenizer must be a Hugging Face tokenizer; got {type(tokenizer).__name__}"
        )
    if not isinstance(bos, bool):
        raise TypeError(f"bos must be a bool; got {type(bos).__name__}")
    bos_id = getattr(tokenizer, "bos_token_id", None) if bos else None
    if bos and bos_id is None:
        raise ValueError("tokenizer has no bos_token_id; bos=True needs one")
    if not isinstance(preamble, str):
        raise TypeError(f"preamble must be a string; got {type(preamble).__name__}")
    if words is not None and (isinstance(words, str) or not all(isinstance(w, str) for w in words)):
        raise TypeError("words must be a sequence of strings")
    if 9 * 10 ** (digits - 1) < K:
        raise ValueError(f"digits = {digits} gives fewer than K = {K} distinct values")
    digit_ids = [_encode(tokenizer, str(d)) for d in range(10)]
    if any(len(t) != 1 for t in digit_ids):
        raise ValueError("tokenizer must encode every decimal digit as one token")
    keys_pool = _usable_keys(tokenizer, WORDS if words is None else words)
    if len(keys_pool) < K:
        raise ValueError(
            f"tokenizer encodes only {len(keys_pool)} of the candidate words as one token; "
            f"K = {K} keys are needed (pass more words)"
        )
    rng = np.random.default_rng(seed)
    pre = ([int(bos_id)] if bos else []) + (_encode(tokenizer, preamble) if preamble else [])
    ctx_ids, q_ids, v_ids, all_keys, all_vals = [], [], [], [], []
    ell = q_len = None
    for _ in range(C):
        keys = [keys_pool[i] for i in rng.choice(len(keys_pool), size=K, replace=False)]
        nums = rng.choice(9 * 10 ** (digits - 1), size=K, replace=False) + 10 ** (digits - 1)
        vals = [str(int(v)) for v in nums]
        lines = [_encode(tokenizer, f"{k}: {v}\n") for k, v in zip(keys, vals, strict=True)]
        queries = [_encode(tokenizer, f"{k}: ") for k in keys]
        values = [[digit_ids[int(ch)][0] for ch in v] for v in vals]
        ell = ell or len(lines[0])
        q_len = q_len or len(queries[0])
        if any(len(t) != ell for t in lines) or any(len(t) != q_len for t in queries):
            raise ValueError(
                "tokenizer gives key lines (or queries) of different token lengths; choose "
                "words that are one token each"
            )
        ctx = pre + [i for t in lines for i in t]
        text = preamble + "".join(f"{k}: {v}\n" for k, v in zip(keys, vals, strict=True))
        for k in range(K):
            joint = _encode(tokenizer, text + f"{keys[k]}: {vals[k]}")
            if bos:
                joint = [int(bos_id), *joint]
            if joint != ctx + queries[k] + values[k]:
                raise ValueError(
                    "tokenizer encodes a whole prompt differently from the concatenation of its "
                    f"lines (context {len(ctx_ids)}, key {keys[k]!r}); token positions would be "
                    "wrong"
                )
        ctx_ids.append(ctx)
        q_ids.append(queries)
        v_ids.append(values)
        all_keys.append(keys)
        all_vals.append(vals)
    return RetrievalTask(
        K=K,
        context_ids=np.asarray(ctx_ids, dtype=np.int64),
        query_ids=np.asarray(q_ids, dtype=np.int64),
        value_ids=np.asarray(v_ids, dtype=np.int64),
        line_starts=len(pre) + ell * np.arange(K, dtype=np.int64),
        line_length=int(ell),
        preamble_length=len(pre),
        keys=all_keys,
        values=all_vals,
        seed=int(seed),
    )


@dataclass
class RetrievalScores:
    """Per prompt (c, k): ``logprob`` (C, K) summed over the value's tokens, ``token_logprob``
    (C, K, m), ``correct`` (C, K) exact match (bool)."""

    logprob: np.ndarray
    token_logprob: np.ndarray
    correct: np.ndarray


def _value_scores(logits, targets):
    """Teacher-forced log-probs (B, m) and argmax hits (B, m) from logits (B, m, V)."""
    import torch

    logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
    logp = torch.log_softmax(logits, dim=-1)
    tok = logp.gather(-1, targets[..., None])[..., 0]
    return tok, logits.argmax(dim=-1) == targets


def _cache_kwarg(model):
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return None
    for name in ("cache", "past_key_values"):
        if name in params:
            return name
    return None


def score(model, task: RetrievalTask, *, batch_size=None, share_prefix=None, progress=False):
    """Teacher-forced log-prob and exact match of every prompt of ``task`` (claim PB17).

    log p(value | prompt) = Σ_{i<m} log softmax(z_{n−1+i})[v_i]   (logits z in float32 or better)

    exact match: argmax z_{n−1+i} = v_i for every i < m (≡ greedy decoding emits the value).

    Parameters
    ----------
    model : causal LM returning ``.logits`` (B, n, V), e.g. a Hugging Face Llama
        Run in evaluation mode without gradients; its dtype is kept (float32 by default).
    task : RetrievalTask
    batch_size : int, optional
        Prompts per forward pass (default K, i.e. one context's queries at a time).
    share_prefix : bool, optional
        Run each context once and its K queries on the cached keys/values (Hugging Face models
        with a ``cache``/``past_key_values`` argument; the default when available). ``False``
        runs every prompt in full; both agree to float rounding (tested).
    progress : bool
        A progress bar (rich) over batches.

    Returns
    -------
    RetrievalScores

    Cost: C forward passes over n0 tokens plus C·K over q + m − 1 tokens with ``share_prefix``,
    else C·K passes over n + m − 1 tokens. Raises TypeError for a task that is not a
    RetrievalTask and ValueError for a bad batch_size or token ids outside the vocabulary.
    """
    import torch

    if not isinstance(task, RetrievalTask):
        raise TypeError(f"task must be a RetrievalTask; got {type(task).__name__}")
    if not callable(model):
        raise TypeError(f"model must be a causal LM module; got {type(model).__name__}")
    C, K, m = task.num_contexts, task.K, task.value_length
    B = K if batch_size is None else batch_size
    if isinstance(B, bool) or not isinstance(B, int) or B < 1:
        raise ValueError(f"batch_size must be a positive integer; got {batch_size!r}")
    emb = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    if emb is not None:
        top = max(int(task.context_ids.max()), int(task.query_ids.max()), int(task.value_ids.max()))
        if top >= emb.num_embeddings:
            raise ValueError(
                f"task token ids reach {top}, outside the model's vocabulary of "
                f"{emb.num_embeddings}: was it built with this model's tokenizer?"
            )
    kw = _cache_kwarg(model)
    if share_prefix is None:
        share_prefix = kw is not None
    if share_prefix and kw is None:
        raise ValueError("share_prefix needs a model with a cache (past_key_values) argument")
    device = next(model.parameters()).device
    tok_lp = np.empty((C, K, m))
    hits = np.empty((C, K, m), dtype=bool)
    n, q = task.prompt_length, task.query_ids.shape[2]
    from posflow.simulate._progress import progress as progress_of

    was_training = model.training
    model.eval()
    try:
        with (
            torch.no_grad(),
            progress_of(C if share_prefix else C * K, f"retrieval K = {K}",
                        enabled=bool(progress), every=10.0) as bar,
        ):  # fmt: skip
            if share_prefix:
                per = max(1, B // K)  # contexts per prefix pass
                for c0 in range(0, C, per):
                    cs = range(c0, min(C, c0 + per))
                    pre = torch.from_numpy(task.context_ids[c0 : cs.stop]).to(device)
                    out = model(pre, use_cache=True, logits_to_keep=1)
                    cache = getattr(out, "cache", None) or out.past_key_values
                    cache.batch_repeat_interleave(K)
                    suf = np.concatenate(
                        [task.query_ids[c0 : cs.stop], task.value_ids[c0 : cs.stop, :, :-1]], -1
                    ).reshape(len(cs) * K, q + m - 1)
                    logits = model(torch.from_numpy(suf).to(device), **{kw: cache}).logits
                    tgt = torch.from_numpy(task.value_ids[c0 : cs.stop].reshape(-1, m)).to(device)
                    lp, hit = _value_scores(logits[:, q - 1 :], tgt)
                    tok_lp[c0 : cs.stop] = lp.double().cpu().numpy().reshape(len(cs), K, m)
                    hits[c0 : cs.stop] = hit.cpu().numpy().reshape(len(cs), K, m)
                    bar.advance(len(cs))
            else:
                pairs = [(c, k) for c in range(C) for k in range(K)]
                for s in range(0, len(pairs), B):
                    chunk = pairs[s : s + B]
                    ids = torch.from_numpy(task.prompts(chunk, with_value=True)[:, :-1]).to(device)
                    logits = model(ids).logits[:, n - 1 :]
                    tgt = torch.from_numpy(np.stack([task.value_ids[c, k] for c, k in chunk]))
                    lp, hit = _value_scores(logits, tgt.to(device))
                    for (c, k), a, h in zip(chunk, lp.double().cpu().numpy(), hit.cpu().numpy(),
                                            strict=True):  # fmt: skip
                        tok_lp[c, k], hits[c, k] = a, h
                    bar.advance(len(chunk))
    finally:
        model.train(was_training)
    return RetrievalScores(tok_lp.sum(-1), tok_lp, hits.all(-1))


@dataclass
class PositionCurve:
    """Mean over contexts per key position k with percentile-bootstrap bounds, each (K,)."""

    mean: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    confidence: float
    resamples: int


def _resample_index(C: int, resamples: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, C, size=(resamples, C))


def _check_per_context(name: str, x) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] < 2 or a.shape[1] < 2:
        raise ValueError(
            f"{name} must have shape (C, K) with C >= 2 contexts, K >= 2; got {a.shape}"
        )
    if not np.isfinite(a).all():
        raise ValueError(f"{name} must be finite")
    return a


def _check_boot(confidence, resamples):
    if not (isinstance(confidence, float | int) and 0 < confidence < 1):
        raise ValueError(f"confidence must lie in (0, 1); got {confidence!r}")
    _positive_int("resamples", resamples, 10)


def position_curve(per_context, *, confidence=0.95, resamples=2000, seed=0) -> PositionCurve:
    """Per-position mean over contexts and its percentile-bootstrap interval (claim PB17).

    mean_k = (1/C) Σ_c x[c, k]; the interval is the (α/2, 1 − α/2) quantile of the mean over
    ``resamples`` resamplings of the C contexts with replacement (whole rows: positions stay
    paired), α = 1 − confidence.

    Parameters
    ----------
    per_context : array_like, shape (C, K)
        E.g. ``scores.logprob`` or ``scores.correct``.
    confidence : float in (0, 1)
    resamples : int, >= 10
    seed : int

    Cost O(resamples · C · K). Raises ValueError for C < 2, K < 2, non-finite values or bad
    confidence/resamples.
    """
    x = _check_per_context("per_context", per_context)
    _check_boot(confidence, resamples)
    boot = x[_resample_index(x.shape[0], resamples, seed)].mean(axis=1)  # (R, K)
    a = (1 - confidence) / 2
    lo, hi = np.quantile(boot, [a, 1 - a], axis=0)
    return PositionCurve(x.mean(axis=0), lo, hi, float(confidence), int(resamples))


def line_profile(p, task: RetrievalTask) -> np.ndarray:
    """Predicted influence aggregated per key line: q[k] = Σ_{j ∈ line k} p(j), shape (K,).

    Parameters
    ----------
    p : array_like, shape (n,)
        An influence profile over the prompt's token positions (n = ``task.prompt_length``).
    task : RetrievalTask

    The preamble and query tokens belong to no key line, so Σ_k q[k] ≤ Σ_j p(j).
    Raises ValueError for a profile of the wrong length or with non-finite entries.
    """
    if not isinstance(task, RetrievalTask):
        raise TypeError(f"task must be a RetrievalTask; got {type(task).__name__}")
    p = np.asarray(p, dtype=np.float64)
    if p.shape != (task.prompt_length,):
        raise ValueError(f"p must have shape ({task.prompt_length},) (the prompt); got {p.shape}")
    if not np.isfinite(p).all():
        raise ValueError("p must be finite")
    c = np.concatenate([[0.0], np.cumsum(p)])
    spans = task.line_spans()
    return c[spans[:, 1]] - c[spans[:, 0]]


def _spearman_rows(X, y):
    """Spearman correlation of each row of X (R, K) with y (K,), average ranks for ties."""
    from scipy.stats import rankdata

    rx = rankdata(X, axis=1)
    ry = rankdata(y)
    rx = rx - rx.mean(axis=1, keepdims=True)
    ry = ry - ry.mean()
    den = np.sqrt((rx**2).sum(axis=1) * (ry**2).sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        return (rx @ ry) / den  # NaN for a constant row


def bootstrap_spearman(per_context, profile, *, confidence=0.95, resamples=2000, seed=0):
    """Spearman ρ of the mean position curve with a profile, and a bootstrap interval (PB17).

    ρ = spearmanr(mean_c x[c, ·], profile); the interval is the percentile interval of ρ over
    resamplings of the contexts (the profile held fixed). Resamples whose mean curve is constant
    (ρ undefined) are dropped; their count is returned.

    Returns
    -------
    rho, lo, hi : float
    dropped : int
    """
    from scipy.stats import spearmanr

    x = _check_per_context("per_context", per_context)
    y = np.asarray(profile, dtype=np.float64)
    if y.shape != (x.shape[1],) or not np.isfinite(y).all():
        raise ValueError(f"profile must be finite with shape ({x.shape[1]},); got {y.shape}")
    _check_boot(confidence, resamples)
    mean = x.mean(axis=0)
    if np.ptp(mean) == 0 or np.ptp(y) == 0:
        return float("nan"), float("nan"), float("nan"), int(resamples)
    rho = float(spearmanr(mean, y).statistic)
    r = _spearman_rows(x[_resample_index(x.shape[0], resamples, seed)].mean(axis=1), y)
    ok = np.isfinite(r)
    if not ok.any():
        return rho, float("nan"), float("nan"), int(resamples)
    a = (1 - confidence) / 2
    lo, hi = np.quantile(r[ok], [a, 1 - a])
    return rho, float(lo), float(hi), int((~ok).sum())
