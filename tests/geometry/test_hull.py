from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attngeom.base.errors import InputError
from attngeom.geometry import hull


def lp_only(k_NTD: np.ndarray) -> np.ndarray:
    return np.array([[hull.inside_by_lp(keys, j) for j in range(len(keys))] for keys in k_NTD])


def test_square_with_centre():
    keys = np.array([[1.0, 1], [-1, 1], [-1, -1], [1, -1], [0, 0]])
    assert hull.inside_hull(keys[None]).tolist() == [[False, False, False, False, True]]


def test_duplicate_keys_are_inside():
    keys = np.array([[1.0, 0, 0], [0, 1, 0], [0, 0, 1], [1, 0, 0]])
    assert hull.inside_hull(keys[None])[0].tolist() == [True, False, False, True]


def test_agrees_with_linear_programming_everywhere():
    rng = np.random.default_rng(0)
    # Low dimension: many interior points; high dimension: almost all vertices.
    for dim, n in ((2, 30), (3, 40), (8, 40), (48, 128)):
        k = rng.normal(size=(1 if dim == 48 else 3, n, dim))
        np.testing.assert_array_equal(hull.inside_hull(k), lp_only(k))


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 6), st.integers(0, 10_000))
def test_points_on_a_sphere_are_all_vertices_and_a_mixture_is_inside(dim, seed):
    rng = np.random.default_rng(seed)
    k = rng.normal(size=(dim + 6, dim))
    k /= np.linalg.norm(k, axis=1, keepdims=True)
    w = rng.dirichlet(np.ones(len(k)))
    with_mixture = np.vstack([k, w @ k])
    inside = hull.inside_hull(with_mixture[None])[0]
    assert not inside[:-1].any()
    assert inside[-1]


def test_certificates_in_blocks_of_one_head_give_the_census_of_one_batch(monkeypatch):
    rng = np.random.default_rng(3)
    k = rng.normal(size=(5, 12, 3))  # low dimension: keys inside, certified and Frank-Wolfe ones
    whole = hull.inside_hull(k)
    monkeypatch.setattr(hull.blocks, "BLOCK_BYTES", 1)
    np.testing.assert_array_equal(hull.inside_hull(k), whole)
    assert whole.any() and not whole.all()


def test_frank_wolfe_in_blocks_then_together_separates_what_one_batch_does(monkeypatch):
    """Each pair's search is its own: the blocks, and when the pairs left join, change no verdict."""
    rng = np.random.default_rng(5)
    k = rng.normal(size=(40, 24, 3))  # low dimension: many keys need steps, some are inside
    gram = hull.gram(k)
    before = gram.copy()
    todo = np.argwhere(~hull.certified_vertices(gram))
    np.testing.assert_array_equal(gram, before)  # the diagonal it lifts out is put back
    whole = hull.separated_by_frank_wolfe(gram, todo)
    for early, block in ((0, 4 << 20), (1, 1), (16, 3000), (300, 1)):
        monkeypatch.setattr(hull, "_EARLY_STEPS", early)
        monkeypatch.setattr(hull.blocks, "BLOCK_BYTES", block)
        np.testing.assert_array_equal(hull.separated_by_frank_wolfe(gram, todo), whole, err_msg=f"{early}, {block}")
    assert whole.any() and not whole.all() and len(todo) > 100


def _statuses(monkeypatch, *statuses: int) -> list[str]:
    """linprog answering `statuses` in turn (HiGHS: 0 feasible, 2 infeasible, 4 numerical trouble); the methods asked."""
    asked, answers = [], iter(statuses)

    def linprog(c, A_eq, b_eq, bounds, method):
        asked.append(method)
        status = next(answers)
        return SimpleNamespace(status=status, message=f"status {status} as forced")

    monkeypatch.setattr(hull, "linprog", linprog)
    return asked


SQUARE_WITH_CENTRE = np.array([[1.0, 1], [-1, 1], [-1, -1], [1, -1], [0, 0]])


@pytest.mark.parametrize("final,inside", [(0, True), (2, False)])
def test_numerical_trouble_is_never_a_verdict_the_next_method_decides(monkeypatch, final, inside):
    asked = _statuses(monkeypatch, 4, final)
    assert hull.inside_by_lp(SQUARE_WITH_CENTRE, 4) is inside
    assert asked == ["highs", "highs-ds"]
    asked = _statuses(monkeypatch, 4, 4, final)
    assert hull.inside_by_lp(SQUARE_WITH_CENTRE, 0) is inside
    assert asked == ["highs", "highs-ds", "highs-ipm"]


def test_numerical_trouble_in_every_method_is_refused_not_read_as_outside(monkeypatch):
    asked = _statuses(monkeypatch, 4, 4, 4)
    with pytest.raises(InputError, match=r"key 4 is inconclusive \(status 4: status 4 as forced\)"):
        hull.inside_by_lp(SQUARE_WITH_CENTRE, 4)
    assert asked == ["highs", "highs-ds", "highs-ipm"]


def certified(keys_TD) -> list[bool]:
    """certified_vertices on one head of keys."""
    return hull.certified_vertices(hull.gram(np.array(keys_TD, dtype=np.float64)[None]))[0].tolist()


def test_each_round_of_certificates_asks_for_a_margin_of_1e_9_of_its_own_value_or_of_1():
    """Exact keys near the margin. (0, 0) beside (2^-14, 2^-16): the mean's functional gives key 0 a gap of
    |k_1|^2 / 2 = 1.98e-9 (> 1e-9 x max(1, 0)); the origin's gives key 1 |k_1|^2. Beside (2^-15, 2^-15), key 0's gap
    is 2^-30 < 1e-9, and key 1's from the origin 2^-29 = 1.86e-9. Under the roof (0, 1) of (+-1, 1 - 2^-30) and a
    key (0, -7 + 2^-29) that puts the mean's product with key 0 at -1, key 0's gap 2^-29 is under 1e-9 x 2 (its
    value less the mean's, 2), and its origin gap 2^-30 under 1e-9. So is the origin gap 2^-29 of the roof
    (0, 2) of (+-1, 2 - 2^-30), under 1e-9 x 4."""
    assert certified([(0, 0), (2.0**-14, 2.0**-16)]) == [True, True]
    assert certified([(0, 0), (2.0**-15, 2.0**-15)]) == [False, True]
    e = 2.0**-30
    assert certified([(0, 1), (1, 1 - e), (-1, 1 - e), (0, -7 + 2 * e)]) == [False, True, True, True]
    assert certified([(0, 2), (1, 2 - e), (-1, 2 - e), (0, -7)]) == [False, True, True, True]
    # (2, 2) by the origin's functional only: its own 8 beats its row (6), not the product 12 of two other keys
    assert certified([(2, -2), (2, 2), (1, 2), (3, -3)]) == [False, True, True, True]
    # 1-D: 0 is a vertex of {0, 2^-28, 2} by the mean's functional only (gap 2.5e-9); 2^-28 lies between
    assert certified([(0,), (2.0**-28,), (2,)]) == [True, False, True]


def test_a_gap_of_exactly_the_margin_is_no_certificate():
    """The Gram matrices of the keys 0 and sqrt(2e-9), and 0 and sqrt(1e-9): the mean's functional gives key 0 a
    gap of 1e-9 in the first, the origin's key 1 one of 1e-9 in the second, and Frank-Wolfe both keys of the second."""
    assert hull.certified_vertices(np.array([[[0.0, 0.0], [0.0, 2e-9]]])).tolist() == [[False, True]]
    at_margin = np.array([[[0.0, 0.0], [0.0, 1e-9]]])
    assert hull.certified_vertices(at_margin).tolist() == [[False, False]]
    assert hull.separated_by_frank_wolfe(at_margin, np.array([[0, 0], [0, 1]])).tolist() == [False, False]


def test_frank_wolfe_asks_for_a_margin_of_1e_9_of_the_largest_squared_norm_or_of_1():
    """Key 0 of {0, 2^-30, 2}: its first gap, about 2^-30 (9.3e-10), is under 1e-9 x 4, and the steps only
    shrink it; of {0, 2^-28, 1}, the first gap 1.86e-9 is over 1e-9 x 1."""
    for keys, separated in (([0.0, 2.0**-30, 2.0], [False, False, True]), ([0.0, 2.0**-28, 1.0], [True, False, True])):
        gram = hull.gram(np.array(keys)[None, :, None])
        assert hull.separated_by_frank_wolfe(gram, np.array([[0, 0], [0, 1], [0, 2]])).tolist() == separated


def reference_frank_wolfe(keys_TD: np.ndarray, j: int, margin: float, rounds: int) -> tuple[int | None, np.ndarray]:
    """Frank-Wolfe on explicit vectors: p from the mean of the other keys less k_j, each round a check (every
    p.(k_l - k_j) > margin) then an exact line search towards the k_w - k_j that p ranks lowest. The round that
    separates (None: none did) and p after the steps taken."""
    q_LD = np.delete(keys_TD, j, axis=0) - keys_TD[j]
    p = q_LD.mean(0)
    for n in range(rounds):
        gaps = q_LD @ p
        if gaps.min() > margin:
            return n, p
        d = q_LD[gaps.argmin()] - p
        if d @ d > 0:  # else p is that key already
            p = p + np.clip(-(p @ d) / (d @ d), 0.0, 1.0) * d
    return None, p


@pytest.mark.parametrize("keys", ["random", "close", "two"])
def test_frank_wolfe_steps_are_exact_line_searches_from_the_mean_of_the_other_keys(keys):
    """The search keeps p.k_l and |p|^2, not p: after each number of rounds they are those of p on explicit
    vectors, and so are the pairs found. "close": a key 2^-31 (1, 1) from the key 0 at the origin, which
    the first p ranks lowest with a gap under the margin, so the line search ends just past it (gamma
    clipped to 1); "two": two keys, one other to take the mean of."""
    rng = np.random.default_rng(7)
    k_NTD = {
        "random": rng.normal(size=(3, 9, 2)),
        "close": np.array([[[0.0, 0.0], [2.0**-31, 2.0**-31], [1, 0], [0, 1]]]),
        "two": np.array([[[1.0, 1.0], [2.0, 1.5]]]),
    }[keys]
    gram = hull.gram(k_NTD)
    N, T = k_NTD.shape[:2]
    todo = np.argwhere(np.ones((N, T), dtype=bool))
    margins = 1e-9 * np.maximum(1.0, np.einsum("...ll->...l", gram).max(-1))
    for rounds in range(1, 7):
        found = np.zeros(len(todo), dtype=bool)
        start = hull._Search.start(gram, gram.sum(-2), margins, todo, np.arange(len(todo)))
        left = start.run(gram, todo, rounds, found)
        expected = [reference_frank_wolfe(k_NTD[n], j, margins[n], rounds) for n, j in todo]
        assert found.tolist() == [n is not None for n, _ in expected]
        assert left.at.tolist() == [i for i, (n, _) in enumerate(expected) if n is None]
        for i, s_T, pp in zip(left.at, left.s_AT, left.pp_A):
            n, j = todo[i]
            p = expected[i][1]
            np.testing.assert_allclose(s_T, k_NTD[n] @ p, rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(pp, p @ p, rtol=1e-9, atol=1e-12)
    assert not found.all() or keys == "two"


def test_frank_wolfe_takes_300_steps_in_all_16_in_blocks_first(monkeypatch):
    asked = []
    run = hull._Search.run

    def counted(self, gram_NTT, todo_P2, iterations, found):
        asked.append(iterations)
        return run(self, gram_NTT, todo_P2, iterations, found)

    monkeypatch.setattr(hull._Search, "run", counted)
    monkeypatch.setattr(hull.blocks, "BLOCK_BYTES", 1)  # a block per pair
    k = np.random.default_rng(5).normal(size=(2, 6, 2))
    todo = np.argwhere(np.ones((2, 6), dtype=bool))
    hull.separated_by_frank_wolfe(hull.gram(k), todo)
    assert asked == [16] * 12 + [284]


def test_unsettled_keys_are_those_no_certificate_settles():
    """1-D {0, 2^-28, 2} and {0, 2^-30, 2}: 2^-28 and 2^-30 lie inside; 0 is a vertex the mean's functional
    certifies in the first (Frank-Wolfe never would: its gaps shrink to 2^-56), in the second neither round does."""
    k = np.array([[0.0, 2.0**-28, 2.0], [0.0, 2.0**-30, 2.0]])[..., None]
    out = hull.unsettled(k)
    assert out.dtype == bool and out.tolist() == [[False, True, False], [True, True, False]]


def test_the_census_keeps_the_leading_axes_and_answers_in_booleans():
    keys = np.array([[1.0, 1], [-1, 1], [-1, -1], [1, -1], [0, 0]])
    k = np.stack([keys, keys[::-1], keys * 2])
    inside = hull.inside_hull(np.stack([k, k]))
    assert inside.dtype == bool and inside.shape == (2, 3, 5)
    assert inside[1].tolist() == [[False] * 4 + [True], [True] + [False] * 4, [False] * 4 + [True]]
