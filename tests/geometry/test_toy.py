import numpy as np
import pytest

from attngeom.geometry import toy


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


def test_the_far_fields_failure_quotes_the_exact_radii():
    """The cause a failing far-field claim gives (judgement.causes) names the exact settling radii: the last
    two directions' and the largest of the rest."""
    from attngeom.judgement.causes import far_field_settling

    radii = toy.settle_radii()
    theta = np.degrees(np.arange(len(radii)) * np.pi / len(radii))
    said = far_field_settling({"theta_deg": theta.tolist(), "settle_radius": radii.tolist(), "never_agree": 0})
    for r in np.sort(radii)[-3:]:
        assert f"{r:.1f}" in said, said


# --- the panels' numbers pinned, each at its defaults -------------------------------------------


def test_owners_under_the_dot_product_and_the_kernel():
    q_PD = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    k_KD = np.array([[3.0, 0.0], [1.0, 0.0]])  # the far key has the larger dot, the near one the larger kappa
    assert toy.owners(q_PD, k_KD, "dot").tolist() == [0, 0, 1]
    assert toy.owners(q_PD, k_KD, "kernel").tolist() == [1, 1, 0]
    assert toy.owners(q_PD, k_KD, "kernel", b=0.0, eps=100.0).tolist() == [0, 0, 0]


def test_the_walker_walks_out_and_back():
    np.testing.assert_allclose(toy.walker_positions(4), [[0.1, 0.05], [1.15, 0.525], [2.2, 1.0], [1.15, 0.525]])
    assert toy.walker_positions().shape == (64, 2)


def test_body_three_orbits_anticlockwise_from_angle_zero():
    np.testing.assert_allclose(
        toy.orbit_bodies(4)[:, 3], [[1.5, -0.2], [0.6, 0.7], [-0.3, -0.2], [0.6, -1.1]], atol=1e-15
    )
    assert toy.orbit_bodies().shape == (56, 6, 2)


def test_the_hull_walk_at_its_defaults():
    """The judged panel: 64 frames on the 241-pixel view of radius 2.6 (pixels the walker owns, counted)."""
    walk = toy.hull_walk()
    assert set(walk) == {"walker", "inside", "share_dot", "share_kernel"}
    np.testing.assert_array_equal(walk["walker"], toy.walker_positions())
    assert walk["share_dot"].shape == walk["share_kernel"].shape == (64,)
    pixels = 241 * 241
    assert (walk["share_dot"][[0, 16, 32]] * pixels).round().tolist() == [0, 9136, 19134]
    assert (walk["share_kernel"][[0, 16, 32]] * pixels).round().tolist() == [976, 7022, 10573]


def test_the_hull_walk_on_a_smaller_view():
    walk = toy.hull_walk(n_frames=4, n=61)
    assert (walk["share_dot"] * 61 * 61).round().tolist() == [0, 598, 1225, 598]
    assert (walk["share_kernel"] * 61 * 61).round().tolist() == [65, 453, 677, 453]


def test_a_walker_on_a_ring_body_ties_it_and_owns_nothing(monkeypatch):
    """A tie goes to the ring (argmax's first index): the walker owns a pixel only where it wins strictly.
    Pixel centres at +-1 make every product exact, so the walker's score ties its ring body's exactly."""
    monkeypatch.setattr(toy, "walker_positions", lambda n_frames: toy.RING[[2, 3]])
    walk = toy.hull_walk(n_frames=2, radius=2.0, n=2)
    assert walk["share_dot"].tolist() == walk["share_kernel"].tolist() == [0.0, 0.0]


def test_the_ray_ride_at_its_defaults():
    ride = toy.ray_ride()
    assert set(ride) == {"length", "query", "softmax", "kernel", "mass"}
    assert ride["length"].shape == (72,) and ride["mass"].shape == (72,)
    np.testing.assert_allclose(ride["length"][[0, 18, 36]], [0.05, 1.675, 3.3], rtol=1e-12)
    np.testing.assert_allclose(ride["query"][[0, 36]], [[0.04, 0.03], [2.64, 1.98]], rtol=1e-12)
    softmax = [
        3.7989636697960236e-03,
        5.9632582861918956e-02,
        9.3605657960255384e-01,
        1.9164880305112529e-04,
        3.2022506268006556e-04,
    ]
    kernel = [
        3.7755852388097560e-03,
        5.5379946770089845e-02,
        9.4078806054809361e-01,
        5.6269228920935708e-05,
        1.3821408572434212e-07,
    ]
    np.testing.assert_allclose(ride["softmax"][36], softmax, rtol=1e-9)
    np.testing.assert_allclose(ride["kernel"][36], kernel, rtol=1e-9)
    np.testing.assert_allclose(ride["mass"][[0, 36]], [1.1243997933931367, 527.8565450366245], rtol=1e-9)


def test_the_far_field_sweeps_radii_2_to_120():
    far = toy.far_field()
    assert far["radius"].shape == far["agreement"].shape == (60,)
    assert far["radius"][0] == 2.0 and far["radius"][-1] == pytest.approx(120.0, rel=1e-12)


def test_own_ground_error_is_relative_and_eps_must_be_below_the_spacing(monkeypatch):
    spacing = min(np.linalg.norm(toy.BODIES[i] - toy.BODIES[j]) for i in range(6) for j in range(i))
    monkeypatch.setattr(toy, "EPS", spacing)
    assert toy.own_ground()["eps_below_spacing"] is False
    monkeypatch.undo()
    points = toy.laws.kernel_points
    monkeypatch.setattr(toy.laws, "kernel_points", lambda *a: points(*a) * 1.001)
    assert toy.own_ground()["max_rel_error"] == pytest.approx(1e-3, rel=1e-9)


# --- the exact settle radii, piece by piece ------------------------------------------------------


def test_positive_real_roots_of_quartics_and_of_lower_degrees():
    quartics = np.array(
        [
            np.polynomial.polynomial.polyfromroots([1.0, 2.0, 3.0, -1.0]),  # one negative root
            np.polynomial.polynomial.polyfromroots([0.0, 0.5, 2.0, 3.0]),  # a root at 0, one below 1
            np.polynomial.polynomial.polymul([2.0, -2.0, 1.0], [2.0, -3.0, 1.0]),  # 1 +- i, and 1, 2
            [-6.0, 11.0, -6.0, 1.0, 0.0],  # a cubic: (x - 1)(x - 2)(x - 3)
            [2.0, -3.0, 1.0, 0.0, 0.0],  # a quadratic: (x - 1)(x - 2)
            [0.0, 0.0, 0.0, 0.0, 0.0],  # no polynomial: no root
        ]
    )
    roots = np.sort(toy.positive_real_roots(quartics), axis=1)
    inf = np.inf
    np.testing.assert_allclose(
        roots,
        [[1, 2, 3, inf], [0.5, 2, 3, inf], [1, 2, inf, inf], [1, 2, 3, inf], [1, 2, inf, inf], [inf] * 4],
        rtol=1e-9,
    )


def test_a_near_double_root_counts_as_real():
    """Round-off splits a double root at 1000 into a pair whose imaginary parts are far above 1e-7 but
    far below 1e-7 of the root's size: it counts as real (a breakpoint too many costs one test interval)."""
    p = np.polynomial.polynomial.polyfromroots([1000.0, 1000.0, 1.0, 2.0])
    roots = np.sort(toy.positive_real_roots(p[None]), axis=1)[0]
    np.testing.assert_allclose(roots, [1.0, 2.0, 1000.0, 1000.0], rtol=1e-6)


def test_a_root_is_real_when_its_imaginary_part_is_at_most_1e7_of_its_size_or_of_1(monkeypatch):
    """The edge of "tiny": |imag| <= 1e-7 max(1, |root|), at and just past it, below and above size 1."""
    found = np.array([[0.5 + 1e-7j, 0.5 + 1.5e-7j, 3 + 2.9e-7j, 3 + 3.1e-7j]])
    monkeypatch.setattr(np.linalg, "eigvals", lambda companion: found)
    roots = toy.positive_real_roots(np.array([[1.0, 0.0, 0.0, 0.0, 1.0]]))
    assert roots.tolist() == [[0.5, np.inf, 3.0, np.inf]]


def test_pair_gap_polynomials_are_the_gap_of_each_pair_times_both_denominators():
    a_UK = np.array([[0.5, -1.0, 2.0], [0.1, 0.2, -0.3]])
    c_K, b, R = np.array([1.0, 2.0, 5.0]), 0.7, 1.7
    gaps = toy.pair_gap_polynomials(a_UK, c_K, b)
    assert gaps.shape == (2, 3, 5)
    num, den = (R * a_UK + b) ** 2, R**2 - 2 * R * a_UK + c_K
    for p, (i, j) in enumerate([(0, 1), (0, 2), (1, 2)]):
        want = num[:, i] * den[:, j] - num[:, j] * den[:, i]
        np.testing.assert_allclose(np.polynomial.polynomial.polyval(R, gaps[:, p].T), want, rtol=1e-12)


def test_one_body_owns_both_antipodes_at_every_radius():
    assert toy.settle_radii(np.array([[0.5, 0.5]]), n_directions=3).tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize(
    "bodies,eps,radii",
    [
        (  # keys of one norm: their owners differ from the origin on, and agree from the first cut
            [(1.0, 0.0), (0.6, 0.8)],
            toy.EPS,
            [0.8777109945628525, 0.8216815310419217, 1.967428626474871, 2.9318400504668447],
        ),
        (  # a large eps: the radii of eps = 0.25 would be other radii
            [(1.2, 0.3), (0.7, 0.1)],
            10.0,
            [0.7362395445545704, 0.8617938841313952, 3.5089222987778337, 1.3143974565479128],
        ),
        (  # direction 2 settles below radius 1, at its last cut
            [(-0.1, 1.4), (-0.7, 0.4)],
            toy.EPS,
            [1.7770064455996009, 2.7321296350905633, 0.8693469227655295, 1.5392103743012415],
        ),
        (
            [(0.9, 0.85), (-1.05, 0.6), (0.15, -1.1)],
            0.6,
            [21.78956100181946, 5.297956997463557, 12.915087253333796, 12.15523664182049],
        ),
    ],
)
def test_settle_radii_of_small_configurations_match_a_brute_force_scan(bodies, eps, radii):
    bodies = np.array(bodies)
    settle = toy.settle_radii(bodies, eps=eps, n_directions=4)
    np.testing.assert_allclose(settle, radii, rtol=1e-9)
    u = toy.directions(4)

    def agree(radius_UR):
        q = (radius_UR[..., None] * u[:, None, :]).reshape(-1, 2)
        owner = toy.owners(q, bodies, "kernel", eps=eps), toy.owners(-q, bodies, "kernel", eps=eps)
        return (owner[0] == owner[1]).reshape(radius_UR.shape)

    finite = np.isfinite(settle) & (settle > 0)
    assert finite.any()
    beyond = np.where(finite, settle, 1.0)[:, None] * np.geomspace(1 + 1e-6, 1e4, 500)[None, :]
    assert agree(beyond)[finite].all()
    assert not agree(np.where(finite, settle, 1.0)[:, None] * (1 - 1e-6))[finite].any()
    assert agree(np.geomspace(1e-3, 1e4, 500)[None, :].repeat(4, 0))[settle == 0].all()
