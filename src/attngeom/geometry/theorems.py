"""Numerical witnesses of the exact theorems on random keys (deterministic seeds).

Wedge theorem: under the dot-product law the owner of q is the owner of t q for every t > 0, and
the border between two territories is a hyperplane through the origin: at a border point p the
two owners tie, and they still tie at t p for every t.
"""

from __future__ import annotations

import numpy as np

from attngeom.geometry import toy

DIMS = (2, 3, 8, 48)
# Powers of two: scaling by them is exact in floating point, so a moved owner would be the
# law's doing, not round-off at a near-tie.
TEST_SCALES = (2.0**-6, 0.25, 0.5, 2.0, 4.0, 2.0**6)


def moved_under_scaling(q_PD: np.ndarray, k_KD: np.ndarray, law: str, scales=TEST_SCALES) -> int:
    """How many (query, scale) pairs change owner when the query is scaled."""
    base = toy.owners(q_PD, k_KD, law)
    return int(sum((toy.owners(t * q_PD, k_KD, law) != base).sum() for t in scales))


def border_points(q0_PD: np.ndarray, q1_PD: np.ndarray, k_KD: np.ndarray, iterations: int = 60) -> np.ndarray:
    """Bisect each segment q0 -> q1 (owners differ) down to a point on a dot-law border: (P, D)."""
    lo, hi = q0_PD.copy(), q1_PD.copy()
    own_lo = toy.owners(lo, k_KD, "dot")
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        same = toy.owners(mid, k_KD, "dot") == own_lo
        lo = np.where(same[:, None], mid, lo)
        hi = np.where(same[:, None], hi, mid)
    return 0.5 * (lo + hi)


def border_residual(p_PD: np.ndarray, k_KD: np.ndarray, scales=TEST_SCALES) -> float:
    """Largest gap between the top two dot scores at t p, relative to t |p| max|k|: 0 on a cone."""
    worst = 0.0
    for t in scales:
        s = np.sort((t * p_PD) @ k_KD.T, axis=1)
        norm = t * np.linalg.norm(p_PD, axis=1) * np.linalg.norm(k_KD, axis=1).max()
        worst = max(worst, float(np.max((s[:, -1] - s[:, -2]) / norm)))
    return worst


def wedge_random(seed: int = 0, n_keys: int = 16, n_queries: int = 400) -> dict[str, float]:
    """Scale invariance and borders through the origin on random keys in several dimensions."""
    rng = np.random.default_rng(seed)
    moved, residual, comparisons = 0, 0.0, 0
    for dim in DIMS:
        k = rng.normal(size=(n_keys, dim))
        q0, q1 = rng.normal(size=(2, n_queries, dim))
        moved += moved_under_scaling(q0, k, "dot")
        comparisons += n_queries * len(TEST_SCALES)
        differ = toy.owners(q0, k, "dot") != toy.owners(q1, k, "dot")
        residual = max(residual, border_residual(border_points(q0[differ], q1[differ], k), k))
    return {"moved": moved, "comparisons": comparisons, "border_residual": residual}


def wedge_toy(n_frames: int = 56, radius: float = 2.0, n: int = 81) -> int:
    """On the orbiting toy bodies, owner changes of the dot law under query scaling (all frames)."""
    grid = toy.view_grid(radius, n)
    return sum(moved_under_scaling(grid, bodies, "dot") for bodies in toy.orbit_bodies(n_frames))
