from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attngeom import hull
from attngeom.errors import InputError


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
