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
    # the quoted value at t = 1e4 (2000 draws of seed 0); round-off moves it by ~1e-12 relative at most
    assert g4 == pytest.approx(5.1289e-4, rel=1e-4)


def test_own_ground():
    g = toy.own_ground()
    assert g["max_rel_error"] < 1e-12 and g["bodies_winning_home"] == 6 and g["eps_below_spacing"]


def antipodes_agree(radius_UR: np.ndarray, u_U2: np.ndarray, bodies: np.ndarray = toy.BODIES) -> np.ndarray:
    """Brute force: whether the kernel owners of r u and -r u agree, for every direction and radius."""
    q = (radius_UR[..., None] * u_U2[:, None, :]).reshape(-1, 2)
    return (toy.owners(q, bodies, "kernel") == toy.owners(-q, bodies, "kernel")).reshape(radius_UR.shape)


def test_settle_radii_match_a_brute_force_scan_at_large_radii():
    settle = toy.settle_radii()
    u = toy.directions()
    assert np.isfinite(settle).all() and (settle > 0).all()
    beyond = settle[:, None] * np.geomspace(1 + 1e-6, 1e5, 2000)[None, :]
    assert antipodes_agree(beyond, u).all()  # agree for good past the radius, out to 3e7
    assert not antipodes_agree(settle[:, None] * (1 - 1e-6), u).any()  # and not just before it
    slowest = np.argsort(settle)[-2:]
    assert np.degrees(np.arange(90) * np.pi / 90)[slowest].tolist() == pytest.approx([78.0, 76.0])
    assert settle[slowest] == pytest.approx([133.944080, 309.020089], rel=1e-8)


def test_settle_radii_reproduce_the_sweep_counter():
    far, settle = toy.far_field(), toy.settle_radii()
    assert [float((settle <= r).mean()) for r in far["radius"]] == far["agreement"].tolist()


def test_a_direction_exactly_on_a_border_never_agrees():
    bodies = np.array([(1.0, 0.5), (-1.0, 0.5), (0.1, 0.2)])  # u = (1, 0): |u.k| ties between the first two
    settle = toy.settle_radii(bodies, n_directions=2)
    assert settle[0] == np.inf and np.isfinite(settle[1])
    assert not antipodes_agree(np.geomspace(1e2, 1e8, 50)[None, :], toy.directions(2)[:1], bodies).any()


def test_reasons_quote_the_exact_radii():
    from attngeom import expected

    settle = np.sort(toy.settle_radii())
    reasons = {e["id"]: e["reason"] for e in expected.load_claims()}
    for cid in ("toy.far.saturates", "toy.far.reaches_100"):
        assert f"{settle[-1]:.1f}" in reasons[cid]
    assert f"{settle[-2]:.1f}" in reasons["toy.far.saturates"] and f"{settle[-3]:.1f}" in reasons["toy.far.saturates"]
