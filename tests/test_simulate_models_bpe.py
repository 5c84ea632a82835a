"""simulate.models.bpe: a byte-level BPE vocabulary that round-trips text; the unigram ceiling."""

import math

import numpy as np
import pytest

from posflow.simulate.models import bpe

TEXT = (
    "def frobnicate(x, y):\n    return x ** 2 + y  # a comment with ünïcödé\n\n"
    "The quick brown fox jumps over the lazy dog. " * 20
)


@pytest.fixture(scope="module")
def tok():
    return bpe.train_tokenizer([TEXT], 300)


def test_round_trip_is_exact_on_seen_and_unseen_text(tok):
    for s in (TEXT, "\t  tabs\r\nand CRLF\x00 bytes € 𝔘 — never seen", ""):
        assert bpe.decode(tok, bpe.encode(tok, s)) == s
    assert tok.get_vocab_size() == 300
    ids = bpe.encode(tok, TEXT)
    assert ids.dtype == np.int32 and ids.size < 0.7 * len(TEXT.encode())  # 44 merges compress


def test_unigram_perplexity_matches_a_hand_computation():
    train, valid = np.array([0, 0, 1, 2]), np.array([0, 1])
    # add-one: p = (3, 2, 2, 1) / 8 over V = 4
    want = math.exp(-(math.log(3 / 8) + math.log(2 / 8)) / 2)
    assert bpe.unigram_perplexity(train, valid, 4) == pytest.approx(want, rel=1e-15)
    with pytest.raises(ValueError, match="valid"):
        bpe.unigram_perplexity(train, np.array([5]), 4)
    with pytest.raises(ValueError, match="valid"):
        bpe.unigram_perplexity(train, np.array([], dtype=int), 4)


def test_bad_configuration_is_rejected():
    with pytest.raises(ValueError, match="vocab_size"):
        bpe.BPEConfig(vocab_size=100)
    with pytest.raises(ValueError, match="valid_fraction"):
        bpe.BPEConfig(valid_fraction=0.7)
    with pytest.raises(ValueError, match="vocab_size"):
        bpe.train_tokenizer(["x"], 10)
    with pytest.raises(TypeError, match="config"):
        bpe.bpe_streams({"vocab_size": 300})
