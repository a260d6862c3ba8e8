"""The two score laws, vectorised over any leading axes.

Dot product (softmax attention): s(q, k) = q.k; the softmax is monotone, so it never changes a
winner. Yat kernel: kappa(q, k) = (q.k + b)^2 / (max(|q|^2 + |k|^2 - 2 q.k, 0) + eps), the
distance assembled from the same dot products exactly as the original script did.
"""

from __future__ import annotations

from functools import cache

import numpy as np


def available_TT(T: int, strict: bool) -> np.ndarray:
    """Keys row i may attend: j <= i (causal) or j < i (strict, goat variants)."""
    i_T1, j_1T = np.arange(T)[:, None], np.arange(T)[None, :]
    return j_1T < i_T1 if strict else j_1T <= i_T1


def first_scorable(strict: bool) -> int:
    """The first row with at least two available keys."""
    return 2 if strict else 1


@cache
def row_bands(T: int, strict: bool, bands: int = 4) -> tuple[tuple[slice, slice, np.ndarray], ...]:
    """The scorable rows in consecutive bands, each with the keys its rows may attend and where they may
    not: (rows, keys, hidden_RR). Rows a <= i < b see keys j < b only, so a row statistic taken band by
    band never touches the scores above the diagonal's staircase (4 bands hold 5/8 of the T x T
    scores); and every key j < a is available to them, so the keys a row may not attend all lie in
    the band's diagonal block, keys a <= j < b: `hidden_RR` marks them there (`hide`).

    A band ends at a multiple of 8 (or at T): numpy sums a row of at most 128 numbers in 8 running
    sums, so a band's row sums are those of the whole row, whose later keys add zeros."""
    ends = sorted({min(T, 8 * max(1, T * n // bands // 8)) for n in range(1, bands)} | {T})
    starts = [first_scorable(strict), *ends[:-1]]
    hidden = ~available_TT(T, strict)
    return tuple((slice(a, b), slice(0, b), hidden[a:b, a:b]) for a, b in zip(starts, ends) if b > a)


def hide(band_NRS: np.ndarray, rows: slice, hidden_RR: np.ndarray, value: float) -> np.ndarray:
    """A band of scores (row_bands) with `value` written over the keys its rows may not attend, in place."""
    np.copyto(band_NRS[..., rows.start :], value, where=hidden_RR)
    return band_NRS


def dots(q_NTD: np.ndarray, k_NSD: np.ndarray) -> np.ndarray:
    """All query-key dot products, in float64: (..., T, S).

    The bundles' q and k are float16: every product q_d k_d is exact in float64, and so is every partial
    sum while the products of a row stay within float64's 53 bits of their finest ulp, as they do at
    the bundles' magnitudes. Then any order of summation gives the same bits, BLAS's (matmul, 6x faster
    than einsum on one thread) as well as einsum's (a test checks it on the published bundles). The
    judgement commands run BLAS on one thread (blocks.one_blas_thread)."""
    q = q_NTD.astype(np.float64, copy=False)
    return q @ k_NSD.astype(np.float64, copy=False).swapaxes(-1, -2)


def kernel(dots_NTS, qq_NT, kk_NS, b_N, eps_N, t: float = 1.0) -> np.ndarray:
    """kappa with the query scaled by t, from dot products and squared norms.

    `b_N` and `eps_N` broadcast against the leading axes (one scalar per head); `dots_NTS` has the
    result's shape, the squared norms `qq_NT`, `kk_NS` broadcast against it.
    """
    b = np.asarray(b_N, dtype=np.float64)[..., None, None]
    eps = np.asarray(eps_N, dtype=np.float64)[..., None, None]
    # The same operations in the same order as (t d + b)^2 / (max(d2, 0) + eps), in place and in two
    # arrays: they are large (a block of windows' heads), and each fresh one costs as much as a pass.
    d2 = (t * t) * qq_NT[..., :, None] + kk_NS[..., None, :]
    num = np.multiply(dots_NTS, 2.0 * t)
    d2 -= num
    np.maximum(d2, 0.0, out=d2)
    d2 += eps
    np.multiply(dots_NTS, t, out=num)
    num += b
    num *= num
    num /= d2
    return num


def kernel_weights(kappa_NTS: np.ndarray, available_TS: np.ndarray) -> np.ndarray:
    """Masked kappa normalised by its row sum (+1e-9, as the original): rows with no key stay 0."""
    masked = np.where(available_TS, kappa_NTS, 0.0)
    masked /= masked.sum(-1, keepdims=True) + 1e-9
    return masked


def kernel_points(q_PD: np.ndarray, k_KD: np.ndarray, b: float, eps: float) -> np.ndarray:
    """kappa between explicit points (toy geometry): (P, K)."""
    d = q_PD @ k_KD.T
    d2 = (q_PD * q_PD).sum(1)[:, None] + (k_KD * k_KD).sum(1)[None, :] - 2.0 * d
    return (d + b) ** 2 / (np.maximum(d2, 0.0) + eps)
