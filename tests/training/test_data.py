"""The corpus, its split, the seeded batches and the fixed telemetry window."""

from __future__ import annotations

import numpy as np

from attngeom.training import data


def test_corpus_size_vocabulary_and_split(corpus):
    assert len(corpus.vocab) == 65
    assert corpus.vocab == tuple(sorted(corpus.vocab))
    total = len(corpus.train_M) + len(corpus.val_M)
    assert total == 1_115_394
    assert len(corpus.train_M) == int(0.9 * total)
    assert corpus.train_M.dtype == np.int32


def test_fixed_window_is_the_original(corpus):
    window_T = data.telemetry_window(corpus, 128)
    assert window_T.tolist()[:12] == [58, 43, 52, 39, 52, 41, 43, 6, 1, 57, 47, 56]
    assert corpus.decode(window_T).startswith("tenance, sir.\nSignior Baptista, you are happily met.")


def test_batch_targets_are_inputs_shifted_by_one(corpus):
    x_BT, y_BT = data.batch(corpus.train_M, 4, 16, seed=7)
    assert x_BT.shape == y_BT.shape == (4, 16)
    np.testing.assert_array_equal(x_BT[:, 1:], y_BT[:, :-1])


def test_batches_depend_only_on_their_seed(corpus):
    x_IBT, y_IBT = data.train_batches(corpus, seed=1, steps=range(3, 6), bs=2, seq_len=8)
    for i, step in enumerate(range(3, 6)):
        x_BT, y_BT = data.batch(corpus.train_M, 2, 8, seed=data.TRAIN_SEED_STRIDE + step)
        np.testing.assert_array_equal(x_IBT[i], x_BT)
        np.testing.assert_array_equal(y_IBT[i], y_BT)
    assert not np.array_equal(x_IBT[0], x_IBT[1])


def test_validation_batches_use_their_own_seeds(corpus):
    x_EBT, _ = data.val_batches(corpus, 2, 3, 8)
    np.testing.assert_array_equal(x_EBT[1], data.batch(corpus.val_M, 3, 8, data.VAL_SEED_BASE + 1)[0])


def test_encode_text_small():
    c = data.encode_text("abcab" * 4)
    assert c.vocab == ("a", "b", "c")
    assert c.decode(c.train_M[:3]) == "abc"
    assert len(c.train_M) == 18 and len(c.val_M) == 2


def test_more_windows_are_fixed_validation_windows_after_the_fixed_one(corpus):
    windows_WT = data.telemetry_windows(corpus, 32, 5)
    assert windows_WT.shape == (5, 32) and windows_WT.dtype == np.int32
    np.testing.assert_array_equal(windows_WT[0], data.telemetry_window(corpus, 32))
    np.testing.assert_array_equal(windows_WT, data.telemetry_windows(corpus, 32, 5))  # deterministic
    np.testing.assert_array_equal(windows_WT[1:], data.batch(corpus.val_M, 4, 32, data.MORE_WINDOWS_SEED)[0])
    assert len({tuple(w) for w in windows_WT.tolist()}) == 5
    assert data.telemetry_windows(corpus, 32, 1).shape == (1, 32)
