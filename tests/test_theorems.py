import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from attngeom import theorems, toy

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
