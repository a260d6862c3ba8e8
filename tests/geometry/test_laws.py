import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attngeom.geometry import laws


def test_available_masks():
    causal, strict = laws.available_TT(4, False), laws.available_TT(4, True)
    assert causal.sum(1).tolist() == [1, 2, 3, 4]
    assert strict.sum(1).tolist() == [0, 1, 2, 3]
    assert laws.first_scorable(False) == 1 and laws.first_scorable(True) == 2


@given(T=st.integers(3, 300), strict=st.booleans())  # bundles.MIN_WINDOW: a row to score
def test_row_bands_cover_the_scorable_rows_and_hide_only_what_a_row_may_not_attend(T, strict):
    available = laws.available_TT(T, strict)
    bands = laws.row_bands(T, strict)
    rows = np.concatenate([np.arange(T)[r] for r, _, _ in bands])
    assert rows.tolist() == list(range(laws.first_scorable(strict), T))
    for r, keys, hidden in bands:
        assert keys == slice(0, r.stop) and (r.stop % 8 == 0 or r.stop == T)
        assert not available[r, r.stop :].any()  # the keys a band leaves out: no row of it sees them
        assert available[r, : r.start].all()  # left of the diagonal block: every row sees every key
        np.testing.assert_array_equal(hidden, ~available[r, r.start : r.stop])


def test_kernel_matches_direct_formula():
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(5, 3)), rng.normal(size=(7, 3))
    b, eps = 0.7, 0.1
    direct = (q @ k.T + b) ** 2 / (((q[:, None] - k[None]) ** 2).sum(-1) + eps)
    d = laws.dots(q, k)
    via_dots = laws.kernel(d, (q**2).sum(-1), (k**2).sum(-1), b, eps)
    np.testing.assert_allclose(via_dots, direct, rtol=1e-12)
    np.testing.assert_allclose(laws.kernel_points(q, k, b, eps), direct, rtol=1e-12)


def test_kernel_scaled_query_is_kernel_of_scaled_query():
    rng = np.random.default_rng(1)
    q, k = rng.normal(size=(4, 6)), rng.normal(size=(4, 6))
    for t in (0.5, 4.0):
        scaled = laws.kernel(laws.dots(q, k), (q**2).sum(-1), (k**2).sum(-1), 0.3, 0.2, t)
        np.testing.assert_allclose(scaled, laws.kernel_points(t * q, k, 0.3, 0.2), rtol=1e-10)


def test_kernel_weights_rows_sum_to_one_where_keys_exist():
    rng = np.random.default_rng(2)
    kappa = rng.uniform(0.1, 2.0, size=(2, 6, 6))
    w = laws.kernel_weights(kappa, laws.available_TT(6, True))
    np.testing.assert_allclose(w[:, 1:].sum(-1), 1.0, atol=1e-8)
    assert (w[:, 0] == 0).all()
    assert (w[:, laws.available_TT(6, True) == 0] == 0).all()


def test_kernel_in_place_is_the_formula_in_its_order_bit_for_bit():
    """laws.kernel's in-place passes give exactly (t d + b)^2 / (max(t^2 |q|^2 + |k|^2 - 2 t d, 0) + eps)."""
    rng = np.random.default_rng(3)
    q, k = rng.normal(size=(2, 3, 9, 4)), rng.normal(size=(2, 3, 9, 4))
    b, eps = rng.uniform(0, 2, size=(2, 3)), rng.uniform(0, 1, size=(2, 3))
    d, qq, kk = laws.dots(q, k), (q**2).sum(-1), (k**2).sum(-1)
    for t in (0.25, 0.8, 1.0, 1.25, 4.0):
        d2 = (t * t) * qq[..., :, None] + kk[..., None, :] - 2.0 * t * d
        direct = (t * d + b[..., None, None]) ** 2 / (np.maximum(d2, 0.0) + eps[..., None, None])
        np.testing.assert_array_equal(laws.kernel(d, qq, kk, b, eps, t), direct)


def test_the_dot_products_of_the_published_bundles_are_exact_in_any_order(published_root):
    """laws.dots sums with BLAS: on the bundles' float16 values every partial sum is exact, so its bits
    are einsum's, which sums in another order."""
    from attngeom.bundles import layout

    for model in layout.load_models(published_root).values():
        q, k = (a.astype(np.float64) for a in (model.q_LHTD, model.k_LHTD))
        np.testing.assert_array_equal(laws.dots(q, k), np.einsum("...td,...sd->...ts", q, k))


def test_kernel_clamps_a_negative_squared_distance_to_zero():
    """Round-off can make |q|^2 + |k|^2 - 2 q.k negative for a key at its query: it counts as 0, so
    kappa is (d + b)^2 / eps there. Here the inputs are chosen so the difference is exactly -2."""
    kappa = laws.kernel(np.array([[1.0]]), np.array([0.0]), np.array([0.0]), 0.5, 0.25)
    assert kappa.tolist() == [[9.0]]  # (1 + 0.5)^2 / (0 + 0.25), not 2.25 / (-2 + 0.25)


def test_kernel_weights_divide_by_the_row_sum_plus_1e_9():
    """As the original: a row of kappa summing to S has weights kappa / (S + 1e-9), so it sums to S / (S + 1e-9)."""
    kappa = np.array([[[2.0, 6.0], [5.0, 3.0]]])
    w = laws.kernel_weights(kappa, laws.available_TT(2, False))
    np.testing.assert_allclose(w, [[[2.0 / (2.0 + 1e-9), 0.0], [5.0 / (8.0 + 1e-9), 3.0 / (8.0 + 1e-9)]]], rtol=1e-15)
    assert w[0, 0, 0] < 1.0


@pytest.mark.parametrize("strict", [False, True])
def test_hide_writes_the_value_over_the_hidden_keys_of_a_band_only_and_in_place(strict):
    T = 20
    available = laws.available_TT(T, strict)
    for rows, keys, hidden in laws.row_bands(T, strict):
        scores = np.arange(2 * T * T, dtype=np.float64).reshape(2, T, T)
        band = scores[:, rows, keys].copy()
        out = laws.hide(band, rows, hidden, -7.5)
        assert out is band
        np.testing.assert_array_equal(out, np.where(available[rows, keys], scores[:, rows, keys], -7.5))
