import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attngeom.geometry import theorems, toy

dims = st.sampled_from([2, 3, 8, 48])


@settings(max_examples=40, deadline=None)
@given(dims, st.integers(2, 20), st.integers(0, 2**31))
def test_dot_owner_is_invariant_along_rays(dim, n_keys, seed):
    rng = np.random.default_rng(seed)
    k, q = rng.normal(size=(n_keys, dim)), rng.normal(size=(50, dim))
    assert theorems.moved_under_scaling(q, k, "dot") == 0


@settings(max_examples=25, deadline=None)
@given(dims, st.integers(0, 2**31))
def test_dot_borders_are_cones_through_the_origin(dim, seed):
    rng = np.random.default_rng(seed)
    k = rng.normal(size=(6, dim))
    q0, q1 = rng.normal(size=(2, 100, dim))
    differ = toy.owners(q0, k, "dot") != toy.owners(q1, k, "dot")
    p = theorems.border_points(q0[differ], q1[differ], k)
    assert theorems.border_residual(p, k) < 1e-9


def test_kernel_borders_are_not_cones():
    """The same residual under the kernel is far from zero: the check can tell the laws apart."""
    rng = np.random.default_rng(0)
    k = rng.normal(size=(6, 2))
    assert theorems.moved_under_scaling(rng.normal(size=(200, 2)), k, "kernel") > 0


@settings(max_examples=40, deadline=None)
@given(dims, st.integers(3, 12), st.integers(0, 2**31))
def test_a_key_inside_the_others_hull_never_wins_under_the_dot_product(dim, n_keys, seed):
    rng = np.random.default_rng(seed)
    ring = rng.normal(size=(n_keys, dim))
    interior = rng.dirichlet(np.ones(n_keys)) @ ring
    keys = np.vstack([ring, interior])
    q = rng.normal(size=(500, dim))
    assert (toy.owners(q, keys, "dot") != n_keys).all()


@settings(max_examples=40, deadline=None)
@given(dims, st.integers(3, 12), st.integers(0, 2**31))
def test_every_key_owns_its_ground_under_the_kernel_when_eps_is_small(dim, n_keys, seed):
    rng = np.random.default_rng(seed)
    keys = rng.normal(size=(n_keys, dim))
    spacing = min(np.linalg.norm(a - b) for i, a in enumerate(keys) for b in keys[:i])
    eps = 1e-3 * spacing**2
    assert (toy.owners(keys, keys, "kernel", b=np.log(2), eps=eps) == np.arange(n_keys)).all()


def test_wedge_witnesses_on_random_and_toy_keys():
    w = theorems.wedge_random()
    assert w["moved"] == 0 and w["comparisons"] > 0 and w["border_residual"] < 1e-9
    assert theorems.wedge_toy(n_frames=8) == 0


def test_bisection_halves_sixty_times_towards_the_border():
    """Keys +-e_x: the border is x = 0. From x = -1 to x = 3 each halving leaves [lo, 0] with lo = -4 / 2^n
    (a tie goes to key 0, the far side), so after 60 the midpoint is exactly -2^-59."""
    k = np.array([[1.0, 0.0], [-1.0, 0.0]])
    p = theorems.border_points(np.array([[-1.0, 0.5]]), np.array([[3.0, 0.5]]), k)
    assert p.tolist() == [[-(2.0**-59), 0.5]]


def test_border_residual_is_the_top_two_gap_over_t_p_and_the_longest_key():
    """Point (3, 4): scores 3, 4, -8, gap 1 over |p| 5 times max |k| 2; point (1, 0): scores 1, 0, 0, gap 1
    over 1 x 2. The worst, 1/2, at every scale."""
    k = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, -2.0]])
    p = np.array([[3.0, 4.0], [1.0, 0.0]])
    assert theorems.border_residual(p, k) == 0.5
    assert theorems.border_residual(p[:1], k) == pytest.approx(0.1, rel=1e-15)


def test_wedge_random_counts_every_dimension_on_16_keys_and_400_queries_from_seed_0(monkeypatch):
    w = theorems.wedge_random()
    assert w["comparisons"] == 4 * 400 * 6  # dimensions 2, 3, 8, 48; six scales
    assert theorems.wedge_random(seed=0) == w == theorems.wedge_random()
    assert theorems.wedge_random(seed=1) != w
    seen = []

    def moved(q, k, law):  # a law that moved `dim` owners in each dimension
        seen.append((q.shape, k.shape, law))
        return q.shape[1]

    monkeypatch.setattr(theorems, "moved_under_scaling", moved)
    assert theorems.wedge_random()["moved"] == 2 + 3 + 8 + 48
    assert seen == [((400, d), (16, d), "dot") for d in (2, 3, 8, 48)]


def test_wedge_toy_counts_every_one_of_56_frames_on_the_81_by_81_view_of_radius_2(monkeypatch):
    seen = []

    def moved(grid, bodies, law):  # a law that moved one owner per frame
        seen.append((grid, bodies, law))
        return 1

    monkeypatch.setattr(theorems, "moved_under_scaling", moved)
    assert theorems.wedge_toy() == 56
    np.testing.assert_array_equal(np.stack([b for _, b, _ in seen]), toy.orbit_bodies(56))
    for grid, _, law in seen:
        assert law == "dot" and grid.shape == (81 * 81, 2)
        assert grid.max() == 2.0 - 2.0 / 81 and grid.min() == -(2.0 - 2.0 / 81)
