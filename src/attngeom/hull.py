"""Hull census: is each key a convex combination of its head's other keys?

A key that is the strict unique maximiser of some linear functional over its head's keys is a
vertex of their hull, so it is provably not inside the others' hull. Certificates come in two
rounds: the functionals x -> (k_j - c).x for two centres c (the head's mean, the origin) settle
most keys at once, for every head of every window in one batch; for the rest,
Frank-Wolfe steps towards the min-norm point p of conv{k_l - k_j} stop as soon as p.(k_l - k_j) > 0
for every other l, which is a certificate. Only keys still without one go to the exact test: a linear-programming feasibility problem (HiGHS)
asking for weights lambda >= 0, sum lambda = 1, sum lambda_l k_l = k_j over the other keys.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linprog

from attngeom import blocks
from attngeom.errors import InputError

_MARGIN = 1e-9


def certified_vertices(k_NTD: np.ndarray) -> np.ndarray:
    """True where a key is the strict unique maximiser of a certifying functional: (N, T)."""
    k = k_NTD.astype(np.float64, copy=False)
    k_NDT = k.swapaxes(-1, -2)
    gram_NTT = k @ k_NDT
    certified = np.zeros(k.shape[:-1], dtype=bool)
    for centre in (k.mean(-2, keepdims=True), np.zeros_like(k[..., :1, :])):
        s_NTT = gram_NTT - centre @ k_NDT  # functional of key j applied to key l
        own = np.einsum("...jj->...j", s_NTT).copy()
        np.einsum("...jj->...j", s_NTT)[...] = -np.inf
        certified |= own - s_NTT.max(-1) > _MARGIN * np.maximum(1.0, np.abs(own))
    return certified


def separated_by_frank_wolfe(k_NTD: np.ndarray, todo_P2: np.ndarray, iterations: int = 300) -> np.ndarray:
    """For each (head, key) pair in `todo_P2` (sorted by head), True when a separating functional
    was found.

    Each step lays the unsettled pairs out per head, (heads, slots), and scores every key of a head
    against all its pairs' points p in one matrix product, so no head's keys are copied per pair."""
    n, j = todo_P2[:, 0], todo_P2[:, 1]
    T = k_NTD.shape[1]
    kj_PD = k_NTD[n, j]
    p_PD = (k_NTD.sum(1)[n] - kj_PD) / (T - 1) - kj_PD
    separated = np.zeros(len(n), dtype=bool)
    active = np.arange(len(n))
    for _ in range(iterations if len(n) else 0):
        heads, h = np.unique(n[active], return_inverse=True)
        slot = np.arange(len(active)) - np.searchsorted(n[active], n[active])
        p_HSD = np.zeros((len(heads), int(slot.max()) + 1, k_NTD.shape[-1]))
        p_HSD[h, slot] = p_PD[active]
        s_AT = (k_NTD[heads] @ p_HSD.swapaxes(-1, -2))[h, :, slot]
        s_AT -= (kj_PD[active] * p_PD[active]).sum(-1)[:, None]  # s[a, l] = p_a.(k_l - k_j)
        s_AT[np.arange(len(active)), j[active]] = np.inf
        worst = s_AT.argmin(1)
        done = s_AT[np.arange(len(active)), worst] > _MARGIN
        separated[active[done]] = True
        active, worst = active[~done], worst[~done]
        if len(active) == 0:
            break
        step_AD = k_NTD[n[active], worst] - kj_PD[active] - p_PD[active]
        num = -(p_PD[active] * step_AD).sum(1)
        gamma = np.clip(num / np.maximum((step_AD * step_AD).sum(1), 1e-300), 0.0, 1.0)
        p_PD[active] += gamma[:, None] * step_AD
    return separated


def inside_by_lp(keys_TD: np.ndarray, j: int) -> bool:
    """Exact test: is key j a convex combination of the other keys? (HiGHS feasibility LP)."""
    others = np.delete(keys_TD, j, axis=0)
    a_eq = np.vstack([others.T, np.ones(len(others))])
    b_eq = np.concatenate([keys_TD[j], [1.0]])
    for method in ("highs", "highs-ds", "highs-ipm"):  # fall back when HiGHS reports numerical trouble
        res = linprog(np.zeros(len(others)), A_eq=a_eq, b_eq=b_eq, bounds=(0, None), method=method)
        if res.status in (0, 2):
            return res.status == 0
    raise InputError(f"hull linear program for key {j} is inconclusive (status {res.status}: {res.message})")


def inside_hull(k_NTD: np.ndarray) -> np.ndarray:
    """For every head and key, whether the key lies in the convex hull of the head's other keys
    (certificates on blocks of heads whose T x T products fit the cache, blocks.spans)."""
    k = k_NTD.astype(np.float64)
    flat = k.reshape(-1, *k.shape[-2:])
    inside = np.zeros(flat.shape[:2], dtype=bool)
    certified = [certified_vertices(flat[span]) for span in blocks.spans(len(flat), flat.shape[1] ** 2 * 8)]
    todo = np.argwhere(~np.concatenate(certified))
    todo = todo[~separated_by_frank_wolfe(flat, todo)]
    for n, j in todo:
        inside[n, j] = inside_by_lp(flat[n], j)
    return inside.reshape(k.shape[:-1])
