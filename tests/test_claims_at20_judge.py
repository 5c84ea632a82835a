"""claims.at20_judge: AT20's sub-claims judged by paired intervals across seeds, on hand-made
stores whose answers are known (HOLDS, FAILS, INCONCLUSIVE)."""

import json
import math

import numpy as np
import pytest

from posflow.proofs_checks.claims import at20_judge as AT
from posflow.proofs_checks.kit import FAILS, HOLDS, INCONCLUSIVE
from posflow.simulate.models import seed_store as SS

LENGTHS = [4, 8, 16, 32, 64]  # training length 4, NEAR_FACTOR 8 -> 32, L_max = 16x
# log-ratio at L_max of each scheme ([B]'s order), and at 8x for the learned schemes
TARGET = {"rope": 2.0, "alibi": 0.0, "random_qk": 0.5, "random_qkv": 0.3, "learned_qk": 0.4,
          "learned_qkv": 0.35, "random_qk_alibi": 0.0}  # fmt: skip
NEAR = {"learned_qk": 0.12, "learned_qkv": 0.1}
SEED_NOISE = (-0.005, 0.0, 0.005)


PPL0 = math.exp(4.0)


def nats_of(scheme, k, *, lmax=None, ppl0=PPL0, noise=SEED_NOISE):
    lm = TARGET[scheme] if lmax is None else lmax
    ell = np.interp(np.log2(LENGTHS), [2, 5, 6], [0.0, NEAR.get(scheme, lm / 2), lm])
    ell[1:] += noise[k]
    return [[math.log(ppl0) + w + e for e in ell] for w in (-0.1, 0.1)]  # 2 windows


def write_store(path, nats=None, seeds=(0, 1, 2), schemes=tuple(TARGET)):
    path.mkdir(parents=True, exist_ok=True)
    meta = {"format": SS.FORMAT, "version": 1, "key": "k", "eval_lengths": LENGTHS, "windows": 2,
            "config": {"train_len": 4, "steps": 10, "n_layer": 1, "n_head": 2, "d_head": 8,
                       "base": 100.0, "batch_size": 2},
            "unigram_ppl": 500.0, "vocab_size": 300,
            "tokens_per_length": {str(L): 2 * L for L in LENGTHS},
            "mixing": {"blocks": 4, "counts": {str(L): 1 for L in LENGTHS},
                       "paper": {"counts": {"512": 10}}}}  # fmt: skip
    (path / "meta.json").write_text(json.dumps(meta))
    for s in schemes:
        for k in seeds:
            n = (nats or nats_of)(s, k)
            blob = {"scheme": s, "seed": k, "key": "k", "train_len": 4, "eval_lengths": LENGTHS,
                    "nats": n, "train": {"steps": 10, "final_train_loss": 4.0,
                                         "cpu_seconds": 1.0}, "eval_cpu_seconds": 0.5,
                    "angle_means": [{"mean": [0.1, -0.1], "std": [1.0, 1.0]}]
                    if s.startswith("learned") else None}  # fmt: skip
            (path / SS.run_file(s, k)).write_text(json.dumps(blob))
    return SS.load_seed_store(path)


def verdicts(st, **kw):
    return {s["name"]: s["status"] for s in AT.judge(st, **kw)}


def test_papers_order_with_tight_seeds_holds(tmp_path):
    st = write_store(tmp_path)
    subs = AT.judge(st)
    assert [s["name"] for s in subs] == list(AT.SUB_CLAIMS)
    assert all(s["status"] == HOLDS for s in subs), [(s["name"], s["reason"]) for s in subs]
    # one comparison by hand: ℓ_rope − ℓ_random_qk at 16x has d_k = 1.5 for every seed (the
    # seed noise is shared by the pair), so the interval is [1.5, 1.5] up to rounding
    (c,) = [c for c in subs[2]["comparisons"] if "random_qk " in c["label"] + " "][:1]
    assert c["mean"] == pytest.approx(1.5, abs=1e-12) and c["hi"] - c["lo"] < 1e-9
    M = sum(len(s["comparisons"]) for s in subs)
    assert M == 14 and c["alpha"] == pytest.approx(AT.ALPHA / M)
    # ALiBi's interval: mean 0, s = 0.005, n = 3, t at 1 − α/(2M)
    from scipy.stats import t

    a = subs[0]["comparisons"][0]
    half = t.ppf(1 - AT.ALPHA / M / 2, 2) * 0.005 / math.sqrt(3)
    assert (a["lo"], a["hi"]) == (pytest.approx(-half, abs=1e-12), pytest.approx(half, abs=1e-12))
    assert a["p_sign"] == 0.25  # every seed below ln 1.1: 2·(1/2)^3


def test_a_rule_broken_with_confidence_fails(tmp_path):
    def nats(s, k):
        return nats_of(s, k, lmax=0.5 if s == "alibi" else None)

    v = verdicts(write_store(tmp_path, nats))
    assert v["alibi_flat"] == FAILS and v["random_qkv_le_qk"] == HOLDS
    assert verdicts(write_store(tmp_path, nats), flat=2.0)["alibi_flat"] == HOLDS


def test_wide_intervals_missing_seeds_and_the_regime_are_inconclusive(tmp_path):
    wide = (-0.3, 0.0, 0.3)  # seed spread covering ln FLAT_TOL

    def noisy(s, k):
        return nats_of(s, k, noise=wide if s == "alibi" else SEED_NOISE)

    sub = {s["name"]: s for s in AT.judge(write_store(tmp_path / "a", noisy))}
    assert sub["alibi_flat"]["status"] == INCONCLUSIVE and "contains" in sub["alibi_flat"]["reason"]
    st = write_store(tmp_path / "b", seeds=(0, 1))
    v = verdicts(st)
    assert set(v.values()) == {INCONCLUSIVE}
    assert "2 paired seed(s), needs ≥ 3" in AT.judge(st)[0]["reason"]
    # with the seed rule relaxed, two seeds still cannot decide: t_{1−α/2M, 1} ≈ 178
    (alibi,) = [s for s in AT.judge(st, min_seeds=2) if s["name"] == "alibi_flat"]
    assert alibi["status"] == INCONCLUSIVE and "seed(s)" not in alibi["reason"]
    assert "contains" in alibi["reason"]

    def undertrained(s, k):  # random Q/K 20 % above RoPE's PPL at the training length
        return nats_of(s, k, ppl0=1.2 * math.exp(4.0) if s == "random_qk" else math.exp(4.0))

    sub = {s["name"]: s for s in AT.judge(write_store(tmp_path / "c", undertrained))}
    assert sub["random_qkv_le_qk"]["status"] == INCONCLUSIVE
    assert "not in the regime: random_qk" in sub["random_qkv_le_qk"]["reason"]
    assert sub["alibi_flat"]["status"] == HOLDS
    st = write_store(tmp_path / "c", undertrained)
    assert verdicts(st, regime_tol=1.25)["random_qkv_le_qk"] == HOLDS
    st = write_store(tmp_path / "d", schemes=("alibi", "rope"))
    v = verdicts(st)
    assert v["alibi_flat"] == HOLDS and v["random_qkv_le_qk"] == INCONCLUSIVE


def test_without_a_rope_collapse_the_long_length_sub_claims_are_blocked(tmp_path):
    def flat_rope(s, k):
        return nats_of(s, k, lmax=0.1 if s == "rope" else None)

    st = write_store(tmp_path, flat_rope)
    sub = {s["name"]: s for s in AT.judge(st)}
    for name in ("rotations_much_below_rope", "rotation_only_degrades"):
        assert sub[name]["status"] == INCONCLUSIVE
        assert (
            "RoPE has not collapsed: its ratio at 16× is 1.11 < ROPE_COLLAPSE 2.0"
            in (sub[name]["reason"])
        )
    assert sub["rotations_much_below_rope"]["comparisons"][0]["decision"] == FAILS  # shown
    assert sub["rotation_only_degrades"]["comparisons"][0]["decision"] == HOLDS
    assert sub["alibi_flat"]["status"] == HOLDS  # not about RoPE's collapse
    assert verdicts(st, rope_collapse=1.0)["rotations_much_below_rope"] == FAILS
