"""posflow.simulate.models.corpus: the offline byte corpus, windows and training batches."""

import sysconfig
from pathlib import Path

import numpy as np
import pytest

from posflow.simulate.models import corpus as C


def test_stdlib_files_are_sorted_python_sources_outside_site_packages():
    files = C.stdlib_files()
    assert len(files) > 100
    assert files == sorted(files)
    assert all(f.suffix == ".py" for f in files)
    assert not any("site-packages" in f.parts for f in files)
    root = sysconfig.get_paths()["stdlib"]
    assert all(str(f).startswith(root) for f in files)


def test_default_corpus_is_reproducible_and_seeded():
    a = C.load_corpus(max_bytes=30_000, seed=3)
    b = C.load_corpus(max_bytes=30_000, seed=3)
    c = C.load_corpus(max_bytes=30_000, seed=4)
    assert a.data.dtype == np.uint8 and a.data.size == 30_000
    np.testing.assert_array_equal(a.data, b.data)
    assert a.sources == b.sources and a.sources != c.sources
    # the first file's bytes open the corpus
    first = Path(a.sources[0]).read_bytes()[:100]
    assert bytes(a.data[: len(first)]) == first
    assert "standard library" in a.description


def test_user_files_and_folders_are_concatenated_in_order(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "b.txt").write_bytes(b"beta")
    (tmp_path / "d" / "a.txt").write_bytes(b"alpha")
    (tmp_path / "z.txt").write_bytes(b"zeta")
    got = C.load_corpus([tmp_path / "z.txt", tmp_path / "d"])
    assert bytes(got.data) == b"zeta\nalpha\nbeta\n"
    assert bytes(C.load_corpus(tmp_path / "d", max_bytes=8).data) == b"alpha\nbe"


def test_split_holds_out_the_tail():
    c = C.Corpus(np.arange(100, dtype=np.uint8), [], "")
    tr, va = c.split(0.1)
    np.testing.assert_array_equal(tr, np.arange(90))
    np.testing.assert_array_equal(va, np.arange(90, 100))
    with pytest.raises(ValueError, match="valid_fraction"):
        c.split(1.0)


def test_windows_are_disjoint_aligned_and_seeded():
    t = np.arange(1000)
    w = C.windows(t, 10, 7, seed=5)
    assert w.shape == (7, 10) and w.dtype == np.int64
    starts = w[:, 0]
    assert (starts % 10 == 0).all() and (np.diff(starts) > 0).all()
    np.testing.assert_array_equal(w, starts[:, None] + np.arange(10))
    np.testing.assert_array_equal(w, C.windows(t, 10, 7, seed=5))
    assert C.windows(t, 10, 100).shape == (100, 10)  # every window, once
    with pytest.raises(ValueError, match=r"too little text.*need 1010 tokens"):
        C.windows(t, 10, 101)
    with pytest.raises(ValueError, match="n must be a positive integer"):
        C.windows(t, 0, 1)
    with pytest.raises(ValueError, match="tokens must be one-dimensional"):
        C.windows(np.ones((3, 3)), 2, 1)


def test_training_batches_shift_targets_by_one():
    t = np.arange(50, dtype=np.uint8)
    x, y = C.training_batch(t, 6, 8, np.random.default_rng(0))
    assert x.shape == y.shape == (6, 8)
    np.testing.assert_array_equal(y, x + 1)
    np.testing.assert_array_equal(x[:, 1:], x[:, :-1] + 1)  # contiguous windows
    with pytest.raises(ValueError, match="too little text"):
        C.training_batch(t[:8], 1, 8, np.random.default_rng(0))


def test_bad_corpus_arguments(tmp_path):
    with pytest.raises(ValueError, match="neither a file nor a folder"):
        C.load_corpus(tmp_path / "missing.txt")
    with pytest.raises(ValueError, match="max_bytes must be a positive integer"):
        C.load_corpus(max_bytes=0)
    with pytest.raises(ValueError, match="corpus paths name no files"):
        C.load_corpus(tmp_path)
    with pytest.raises(TypeError, match="seed"):
        C.load_corpus(max_bytes=10, seed=1.5)
