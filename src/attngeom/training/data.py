"""The character corpus, its split and the batches of the original runs.

Every batch is drawn on the host with its own `numpy.random.default_rng(seed)`, exactly as the
original script did, so the data order depends only on the step index and the run's seed, never
on how many steps a device executes at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attngeom.base.fetch import fetch_corpus

TRAIN_SEED_STRIDE = 10_000_000
VAL_SEED_BASE = 77_000
WINDOW_SEED = 424_242
MORE_WINDOWS_SEED = 20_260_101


@dataclass(frozen=True)
class Corpus:
    """The encoded corpus: vocabulary, and the train / validation token streams."""

    vocab: tuple[str, ...]
    train_M: np.ndarray
    val_M: np.ndarray

    def decode(self, tokens_T: np.ndarray) -> str:
        """Characters of a token sequence."""
        return "".join(self.vocab[i] for i in np.asarray(tokens_T).tolist())


def encode_text(text: str) -> Corpus:
    """Vocabulary = sorted set of characters; the first 90% of tokens train, the rest validate."""
    vocab = tuple(sorted(set(text)))
    lookup = {ch: i for i, ch in enumerate(vocab)}
    tokens_M = np.fromiter((lookup[ch] for ch in text), dtype=np.int32, count=len(text))
    n_train = int(0.9 * len(tokens_M))
    return Corpus(vocab=vocab, train_M=tokens_M[:n_train], val_M=tokens_M[n_train:])


def load_corpus(path: Path | None = None) -> Corpus:
    """Tiny Shakespeare, fetched and sha256-verified unless a path is given; bytes decoded UTF-8."""
    path = Path(path) if path is not None else fetch_corpus()
    return encode_text(path.read_bytes().decode("utf-8", errors="ignore"))


def batch(tokens_M: np.ndarray, bs: int, seq_len: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Inputs and next-token targets, both (bs, seq_len), at offsets drawn with `seed`."""
    rng = np.random.default_rng(seed)
    ix_B = rng.integers(0, len(tokens_M) - seq_len - 1, bs)
    idx_BT = ix_B[:, None] + np.arange(seq_len)[None, :]
    return tokens_M[idx_BT], tokens_M[idx_BT + 1]


def train_batches(corpus: Corpus, seed: int, steps: range, bs: int, seq_len: int) -> tuple[np.ndarray, np.ndarray]:
    """The training batches of a run's steps, stacked: (steps I, batch rows B, positions T) each."""
    pairs = [batch(corpus.train_M, bs, seq_len, seed * TRAIN_SEED_STRIDE + s) for s in steps]
    return np.stack([p[0] for p in pairs]), np.stack([p[1] for p in pairs])


def val_batches(corpus: Corpus, n: int, bs: int, seq_len: int) -> tuple[np.ndarray, np.ndarray]:
    """The fixed validation batches (seeds 77000 + i), stacked: (batches E, rows B, positions T) each."""
    pairs = [batch(corpus.val_M, bs, seq_len, VAL_SEED_BASE + i) for i in range(n)]
    return np.stack([p[0] for p in pairs]), np.stack([p[1] for p in pairs])


def telemetry_window(corpus: Corpus, seq_len: int) -> np.ndarray:
    """The fixed window every attention map is taken on: the one row of validation batch 424242."""
    x_1T, _ = batch(corpus.val_M, 1, seq_len, WINDOW_SEED)
    return x_1T[0]


def telemetry_windows(corpus: Corpus, seq_len: int, windows: int) -> np.ndarray:
    """(W, T): the fixed window first, then W - 1 validation windows drawn with their own fixed seed."""
    more_WT, _ = batch(corpus.val_M, windows - 1, seq_len, MORE_WINDOWS_SEED)
    return np.concatenate([telemetry_window(corpus, seq_len)[None], more_WT]).astype(np.int32)
