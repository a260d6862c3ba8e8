import numpy as np
import pytest

from attngeom import toy


def test_view_grid_is_square_and_centred():
    g = toy.view_grid(2.0, 5)
    assert g.shape == (25, 2)
    assert g[0].tolist() == pytest.approx([-1.6, 1.6])
    assert np.allclose(g.mean(0), 0)


def test_shares_sum_to_one():
    s = toy.shares(np.array([0, 0, 2, 1]), 4)
    assert s.tolist() == [0.5, 0.25, 0.25, 0.0]


def test_walker_starts_inside_and_leaves_the_hull():
    walk = toy.hull_walk(n_frames=16, n=61)
    assert walk["inside"][0] and not walk["inside"].all()
    assert walk["share_dot"][walk["inside"]].max() == 0.0
    assert walk["share_dot"][~walk["inside"]].min() > 0
    assert walk["share_kernel"].min() > 0


def test_inside_ring():
    assert toy.inside_ring(np.array([[0.0, 0.0], [2.0, 2.0]])).tolist() == [True, False]


def test_orbit_moves_only_body_three():
    frames = toy.orbit_bodies(8)
    assert frames.shape == (8, 6, 2)
    np.testing.assert_array_equal(np.delete(frames, 3, axis=1), np.broadcast_to(np.delete(toy.BODIES, 3, 0), (8, 5, 2)))
    np.testing.assert_allclose(np.linalg.norm(frames[:, 3] - [0.6, -0.2], axis=1), 0.9)


def test_ray_ride_rows_are_distributions_and_softmax_winner_is_fixed():
    ride = toy.ray_ride()
    np.testing.assert_allclose(ride["softmax"].sum(1), 1)
    np.testing.assert_allclose(ride["kernel"].sum(1), 1)
    assert len(set(ride["softmax"].argmax(1))) == 1
    assert len(set(ride["kernel"].argmax(1))) > 1


def test_far_field_climbs_and_radius_lookup():
    far = toy.far_field()
    assert far["agreement"][0] == 0.0 and far["agreement"][-1] > 0.9
    assert toy.first_radius_reaching(far, 0.0) == pytest.approx(2.0)
    assert toy.first_radius_reaching({"radius": [1, 2], "agreement": [0.1, 0.2]}, 0.5) == float("inf")


def test_far_field_correction_shrinks_like_one_over_t():
    g3, g4 = toy.far_field_correction(1e3), toy.far_field_correction(1e4)
    assert g4 < g3 / 5


def test_own_ground():
    g = toy.own_ground()
    assert g["max_rel_error"] < 1e-12 and g["bodies_winning_home"] == 6 and g["eps_below_spacing"]
