"""Hull census: is each key a convex combination of its head's other keys?

A key that is the strict unique maximiser of some linear functional over its head's keys is a
vertex of their hull, so it is provably not inside the others' hull. Certificates come in two
rounds, both on each head's Gram matrix of key dot products: the functionals x -> (k_j - c).x for
two centres c (the head's mean, the origin) settle most keys at once; for the rest, Frank-Wolfe
steps towards the min-norm point p of conv{k_l - k_j} stop as soon as p.(k_l - k_j) > 0 for every
other l. Each step moves p towards one k_w - k_j, so the products p.k_l move by a row of the Gram
matrix: a step costs T numbers per key, not a T x D product. Only keys still without one go to
the exact test: a linear-programming feasibility problem (HiGHS) asking for weights lambda >= 0,
sum lambda = 1, sum lambda_l k_l = k_j over the other keys.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

import numpy as np
from scipy.optimize import linprog

from attngeom.base import blocks
from attngeom.base.errors import InputError

_MARGIN = 1e-9


def gram(k_NTD: np.ndarray) -> np.ndarray:
    """Every head's key dot products k_i.k_l, in float64: (N, T, T)."""
    k = k_NTD.astype(np.float64, copy=False)
    return k @ k.swapaxes(-1, -2)


def certified_vertices(gram_NTT: np.ndarray) -> np.ndarray:
    """True where a key is the strict unique maximiser of a certifying functional: (N, T). The functional
    of key j applied to key l is (k_j - c).k_l for the centres c = the head's mean and the origin; the
    origin's is the Gram matrix itself, read with its diagonal lifted out for a moment."""
    diagonal_NT = np.einsum("...jj->...j", gram_NTT)  # a view: writing it writes the diagonal
    own_NT = diagonal_NT.copy()
    centre_N1T = gram_NTT.mean(-2, keepdims=True)
    s_NTT = gram_NTT - centre_N1T  # (k_j - mean).k_l
    np.einsum("...jj->...j", s_NTT)[...] = -np.inf
    certified = (own_NT - centre_N1T[..., 0, :]) - s_NTT.max(-1) > _MARGIN * np.maximum(
        1.0, np.abs(own_NT - centre_N1T[..., 0, :])
    )
    diagonal_NT[...] = -np.inf
    try:
        certified |= own_NT - gram_NTT.max(-1) > _MARGIN * np.maximum(1.0, np.abs(own_NT))
    finally:
        diagonal_NT[...] = own_NT
    return certified


_EARLY_STEPS = 16  # the steps each block of keys takes before the keys left search together


def separated_by_frank_wolfe(gram_NTT: np.ndarray, todo_P2: np.ndarray, iterations: int = 300) -> np.ndarray:
    """For each (head, key) pair in `todo_P2`, True when a separating functional was found.

    p = sum_l w_l k_l - k_j starts at the mean of the other keys and moves by steps
    p <- p + gamma (k_w - k_j - p), towards the key k_w that p ranks lowest. The products s_l = p.k_l
    are kept instead of p: a step sets them to (1 - gamma) s + gamma (k_w.k_l - k_j.k_l), a convex
    combination of Gram entries, so after n steps they are within about n float64 ulps of |G|'s
    largest entry of the exact products; the certificate asks for a margin of 1e-9 of that entry, far
    above it (n <= 300).

    Every pair's search is its own: the first _EARLY_STEPS steps run on blocks of pairs whose rows fit
    the cache (most pairs are separated by then: 96% of goat_v's on 16 windows), then the pairs left
    search together, so a stubborn pair costs its steps once, not once per block."""
    T = gram_NTT.shape[-1]
    sums_NT = gram_NTT.sum(-2)  # sum_i k_i.k_l
    margins_N = _MARGIN * np.maximum(1.0, np.einsum("...ll->...l", gram_NTT).max(-1))  # |k_i.k_l| <= max |k|^2
    found = np.zeros(len(todo_P2), dtype=bool)
    early = [
        _Search.start(gram_NTT, sums_NT, margins_N, todo_P2, np.arange(span.start, span.stop)).run(
            gram_NTT, todo_P2, min(iterations, _EARLY_STEPS), found
        )
        for span in blocks.spans(len(todo_P2), 8 * T * 8)
    ]
    if early:
        _Search.join(early).run(gram_NTT, todo_P2, iterations - _EARLY_STEPS, found)
    return found


class _Search(NamedTuple):
    """Frank-Wolfe's state for the pairs `at` (indices into todo) still searching: their products
    s = p.k_l, their rows k_j.k_l of the Gram matrix, |p|^2 and their margins."""

    at: np.ndarray
    s_AT: np.ndarray
    g_AT: np.ndarray
    pp_A: np.ndarray
    margin_A: np.ndarray

    @classmethod
    def start(cls, gram_NTT, sums_NT, margins_N, todo_P2: np.ndarray, at: np.ndarray) -> _Search:
        """p at the mean of the other keys, for the pairs todo[at]."""
        n, j = todo_P2[at, 0], todo_P2[at, 1]
        others = max(gram_NTT.shape[-1] - 1, 1)
        g_AT = gram_NTT[n, j]  # k_j.k_l
        s_AT = (sums_NT[n] - g_AT) / others - g_AT  # p.k_l
        r = np.arange(len(at))
        pp_A = (s_AT.sum(1) - s_AT[r, j]) / others - s_AT[r, j]  # |p|^2 = p.(mean of the others - k_j)
        return cls(at, s_AT, g_AT, pp_A, margins_N[n])

    @classmethod
    def join(cls, searches: list[_Search]) -> _Search:
        return cls(*(np.concatenate(arrays) for arrays in zip(*searches)))

    def run(self, gram_NTT: np.ndarray, todo_P2: np.ndarray, iterations: int, found: np.ndarray) -> _Search:
        """Up to `iterations` rounds of a check, which marks the separated pairs in `found`, and a step
        for the others; the state of the pairs left."""
        at, s_AT, g_AT, pp_A, margin_A = self
        n, j = todo_P2[:, 0], todo_P2[:, 1]
        for _ in range(iterations if len(at) else 0):
            r = np.arange(len(at))
            s_j = s_AT[r, j[at]]
            gap_AT = s_AT - s_j[:, None]  # p.(k_l - k_j)
            gap_AT[r, j[at]] = np.inf
            worst = gap_AT.argmin(1)
            done = gap_AT[r, worst] > margin_A
            found[at[done]] = True
            keep = ~done
            at, worst, s_j = at[keep], worst[keep], s_j[keep]
            s_AT, g_AT, pp_A, margin_A = s_AT[keep], g_AT[keep], pp_A[keep], margin_A[keep]
            if len(at) == 0:
                break
            r = np.arange(len(at))
            d_AT = gram_NTT[n[at], worst] - g_AT - s_AT  # d.k_l for the step d = k_w - k_j - p
            pd = s_AT[r, worst] - s_j - pp_A  # p.d
            dd = d_AT[r, worst] - d_AT[r, j[at]] - pd  # |d|^2 = d.(k_w - k_j) - d.p
            gamma = np.clip(-pd / np.maximum(dd, 1e-300), 0.0, 1.0)
            s_AT += gamma[:, None] * d_AT
            pp_A += gamma * (2.0 * pd + gamma * dd)
        return _Search(at, s_AT, g_AT, pp_A, margin_A)


_ONE_LP_AT_A_TIME = threading.Lock()  # HiGHS keeps global state (its task scheduler): one solve at a time


def inside_by_lp(keys_TD: np.ndarray, j: int) -> bool:
    """Exact test: is key j a convex combination of the other keys? (HiGHS feasibility LP; the models'
    censuses run on threads side by side, their rare linear programs one at a time)."""
    others = np.delete(keys_TD, j, axis=0)
    a_eq = np.vstack([others.T, np.ones(len(others))])
    b_eq = np.concatenate([keys_TD[j], [1.0]])
    for method in ("highs", "highs-ds", "highs-ipm"):  # fall back when HiGHS reports numerical trouble
        with _ONE_LP_AT_A_TIME:
            res = linprog(np.zeros(len(others)), A_eq=a_eq, b_eq=b_eq, bounds=(0, None), method=method)
        if res.status in (0, 2):
            return res.status == 0
    raise InputError(f"hull linear program for key {j} is inconclusive (status {res.status}: {res.message})")


def unsettled(k_NTD: np.ndarray) -> np.ndarray:
    """Which keys neither round of certificates settles, (N, T): the Gram matrices and the first round
    on blocks of heads whose T x T products fit the cache (blocks.spans), then Frank-Wolfe on the rest."""
    N, T = k_NTD.shape[:2]
    gram_NTT, certified = np.empty((N, T, T)), np.empty((N, T), dtype=bool)
    for span in blocks.spans(N, T * T * 8):
        gram_NTT[span] = gram(k_NTD[span])
        certified[span] = certified_vertices(gram_NTT[span])
    todo = np.argwhere(~certified)
    todo = todo[~separated_by_frank_wolfe(gram_NTT, todo)]
    out = np.zeros((N, T), dtype=bool)
    out[todo[:, 0], todo[:, 1]] = True
    return out


def inside_hull(k_NTD: np.ndarray) -> np.ndarray:
    """For every head and key, whether the key lies in the convex hull of the head's other keys: the
    certificates on a share of the heads per core (blocks.each), the linear programs on what they leave."""
    k = k_NTD.astype(np.float64)
    flat = k.reshape(-1, *k.shape[-2:])
    shares = np.array_split(flat, max(1, min(len(flat), blocks.cores())))
    todo = np.argwhere(np.concatenate(blocks.each(unsettled, shares)))
    inside = np.zeros(flat.shape[:2], dtype=bool)
    for n, j in todo:
        inside[n, j] = inside_by_lp(flat[n], j)
    return inside.reshape(k.shape[:-1])
