from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attngeom.bundles.layout import BundleModel
from attngeom.geometry import laws
from attngeom.measures import stats


def one_hot_maps(win_T: list[int], T: int) -> np.ndarray:
    m = np.zeros((1, 1, T, T), dtype=np.float16)
    m[0, 0, np.arange(T), win_T] = 1
    return m


def model(q, k, attn, run=None, variant="softmax") -> BundleModel:
    T = q.shape[-2]
    return BundleModel(variant, 0, np.zeros(T, np.int32), {0: attn, 1: attn}, q, k, attn, run or {"best_val": 1.0}, {})


def test_winners_ignore_unavailable_keys_and_unscorable_rows():
    s = np.array([[0, 9, 9], [1, 0, 9], [0, 5, 1]], dtype=float)
    assert stats.winners(s, strict=False).tolist() == [0, 1]
    assert stats.winners(s, strict=True).tolist() == [1]


def test_distinct_count():
    assert stats.distinct_count(np.array([[3, 1, 3, 2], [0, 0, 0, 0]])).tolist() == [3, 1]


def test_occupancy_counts_distinct_winners_over_T():
    T = 8
    maps = one_hot_maps([0, 0, 1, 1, 2, 2, 2, 2], T)
    assert stats.occupancy(maps, strict=False)[0, 0] == pytest.approx(3 / T)


def test_entropy_uniform_is_one_and_one_hot_is_zero():
    T = 6
    uniform = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
    assert stats.norm_entropy(uniform[None, None].astype(np.float16), strict=False)[0, 0] == pytest.approx(
        1.0, abs=1e-3
    )
    assert stats.norm_entropy(one_hot_maps(list(range(T)), T), strict=False)[0, 0] == 0.0
    strict_uniform = np.tril(np.ones((T, T)), -1) / np.maximum(np.arange(T), 1)[:, None]
    assert stats.norm_entropy(strict_uniform[None, None].astype(np.float16), strict=True)[0, 0] == pytest.approx(
        1.0, abs=1e-3
    )


def test_scale_test_softmax_never_moves_and_kernel_does():
    rng = np.random.default_rng(0)
    q = rng.normal(size=(1, 2, 16, 4)).astype(np.float16)
    k = rng.normal(size=(1, 2, 16, 4)).astype(np.float16)
    attn = np.zeros((1, 2, 16, 16), np.float16)
    soft = model(q, k, attn)
    assert stats.scale_changed(soft).max() == 0
    ker = model(q, k, attn, {"best_val": 1.0, "b_learned": [[0.7, 0.7]], "eps_learned": [[0.01, 0.01]]}, "yat_b")
    assert stats.scale_changed(ker).max() > 0


def test_reconstruction_error_zero_for_consistent_export_and_detects_a_change():
    rng = np.random.default_rng(1)
    q = rng.normal(size=(1, 1, 8, 3)).astype(np.float16)
    k = rng.normal(size=(1, 1, 8, 3)).astype(np.float16)
    run = {"best_val": 1.0, "b_learned": [[0.5]], "eps_learned": [[0.3]]}
    probe = model(q, k, np.zeros((1, 1, 8, 8), np.float16), run, "yat_b")
    from attngeom.geometry import laws

    w = laws.kernel_weights(stats.raw_scores(probe), laws.available_TT(8, False)).astype(np.float16)
    assert stats.reconstruction_error(model(q, k, w, run, "yat_b")) < 1e-3
    w[0, 0, 5, 2] += np.float16(0.01)
    assert stats.reconstruction_error(model(q, k, w, run, "yat_b")) > 5e-3


def test_winner_agreement_nearest_and_aligned():
    # Keys on a line: the query at 2 is nearest key 2 but best aligned with key 3.
    k = np.array([0.0, 1.0, 2.0, 3.0])[None, None, :, None].astype(np.float16) * np.ones((1, 1, 4, 1), np.float16)
    q = np.full((1, 1, 4, 1), 2.0, np.float16)
    attn = one_hot_maps([0, 0, 2, 3], 4)
    nearest, aligned = stats.winner_agreement(model(q, k, attn))
    assert nearest[0, 0] == pytest.approx(1 / 3)  # rows 1..3: winners 0, 2, 3; nearest 1, 2, 2
    assert aligned[0, 0] == pytest.approx(2 / 3)  # aligned: 1, 2, 3


def test_scale_sweep_reference_is_scale_one():
    rng = np.random.default_rng(3)
    q = rng.normal(size=(1, 1, 12, 3)).astype(np.float16)
    k = rng.normal(size=(1, 1, 12, 3)).astype(np.float16)
    run = {"best_val": 1.0, "b_learned": [[0.5]], "eps_learned": [[0.05]]}
    sweep = stats.scale_sweep(model(q, k, np.zeros((1, 1, 12, 12), np.float16), run, "yat_b"))
    assert len(sweep) == 41 and sweep[20] == 0.0


@pytest.mark.parametrize("kernel", [False, True])
@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("T", [3, 4, 5, 8, 13])
def test_winners_by_row_bands_are_the_winners_of_the_whole_scores(kernel, strict, T):
    """Scorer.winners skips the scores no upper row can see; ties included (integer q and k), it picks
    the winners argmax picks on the whole masked scores, at every scale."""
    rng = np.random.default_rng(T)
    for q, k in (
        (rng.normal(size=(3, 2, T, 4)), rng.normal(size=(3, 2, T, 4))),
        (rng.integers(-1, 2, size=(3, 2, T, 2)).astype(float), rng.integers(-1, 2, size=(3, 2, T, 2)).astype(float)),
    ):
        b, eps = (rng.uniform(0.1, 1, size=(2,)), rng.uniform(0.1, 1, size=(2,))) if kernel else (None, None)
        score = stats.Scorer(np.einsum("...td,...sd->...ts", q, k), (q * q).sum(-1), (k * k).sum(-1), b, eps)
        for t in (0.5, 1.0, 4.0):
            np.testing.assert_array_equal(score.winners(t, strict), whole_winners(score(t), strict))
        np.testing.assert_array_equal(
            score.nearest(strict),
            whole_winners(-np.linalg.norm(q[..., :, None, :] - k[..., None, :, :], axis=-1), strict),
        )


def whole_winners(scores_NTT: np.ndarray, strict: bool) -> np.ndarray:
    """The definition, on whole rows: the argmax over each scorable row's available keys."""
    T = scores_NTT.shape[-1]
    masked = np.where(laws.available_TT(T, strict), scores_NTT, -np.inf)
    return masked.argmax(-1)[..., laws.first_scorable(strict) :]


def whole_rows(attn_NTT: np.ndarray, strict: bool) -> tuple[np.ndarray, np.ndarray]:
    """The scorable rows of a map in float64, zero on the keys a row may not attend, and their key counts."""
    T, first = attn_NTT.shape[-1], laws.first_scorable(strict)
    p = np.where(laws.available_TT(T, strict), attn_NTT.astype(np.float64), 0.0)[..., first:, :]
    return p, np.arange(first, T) + (0 if strict else 1)


def whole_entropy(attn_NTT: np.ndarray, strict: bool) -> np.ndarray:
    p, n_keys = whole_rows(attn_NTT, strict)
    p = p / p.sum(-1, keepdims=True)
    plogp = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return (-plogp.sum(-1) / np.log(n_keys)).mean(-1)


def whole_share(attn_NTT: np.ndarray, strict: bool) -> np.ndarray:
    p, n_keys = whole_rows(attn_NTT, strict)
    return (p.max(-1) / p.sum(-1)).mean(-1)


@st.composite
def maps(draw, most_T: int = 128) -> tuple[np.ndarray, bool]:
    """Float16 maps of 1 layer of 2 heads that a law allows: never negative, zero on the hidden keys, rows of few
    distinct weights (ties and zeros) and every scorable row with some weight."""
    T, strict = draw(st.integers(3, most_T)), draw(st.booleans())
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    levels = rng.integers(0, 4, size=(1, 2, T, T)) * np.float16(draw(st.sampled_from([2.0**-14, 0.01, 0.25])))
    attn = np.where(laws.available_TT(T, strict), levels, 0.0)
    attn[..., np.arange(laws.first_scorable(strict), T), 0] += 0.5  # key 0: every scorable row has weight
    return attn.astype(np.float16), strict


@settings(max_examples=60, deadline=None)
@given(maps())
def test_a_maps_rows_by_band_give_its_whole_rows_statistics_bit_for_bit(drawn):
    """Band by band (laws.row_bands), a map's winners, entropy and winner share are those its whole
    rows give: the same numbers, the same sums (T <= 128), ties to the first key."""
    attn, strict = drawn
    rows = stats.MapRows(attn, strict)
    np.testing.assert_array_equal(rows.winners, whole_winners(attn, strict))
    np.testing.assert_array_equal(rows.entropy, whole_entropy(attn, strict))
    np.testing.assert_array_equal(rows.share, whole_share(attn, strict))


@settings(max_examples=20, deadline=None)
@given(maps(most_T=300))
def test_past_128_keys_the_bands_sum_in_another_order_only(drawn):
    attn, strict = drawn
    rows = stats.MapRows(attn, strict)
    np.testing.assert_array_equal(rows.winners, whole_winners(attn, strict))
    np.testing.assert_allclose(rows.entropy, whole_entropy(attn, strict), rtol=1e-13)
    np.testing.assert_allclose(rows.share, whole_share(attn, strict), rtol=1e-13)


def test_winners_compare_float64_scores_in_float64():
    """Scores 2^-40 apart are one float32: compared in their own precision, the larger wins."""
    s = np.array([[0.0, 0.0], [1.0, 1.0 + 2.0**-40]])
    assert stats.winners(s, strict=False).tolist() == [1]


def test_distinct_count_counts_along_each_row_of_any_leading_axes():
    win = np.array([[[3, 1, 3, 2], [0, 0, 0, 0]], [[1, 2, 3, 4], [5, 5, 4, 4]]])
    assert stats.distinct_count(win).tolist() == [[3, 1], [4, 2]]


def test_occupancy_and_winner_share_read_the_strict_mask():
    """Strict T = 4: row 1 (key 0 only) is not scorable; rows 2 and 3 are won by key 1 with shares 3/4 and 5/8."""
    attn = np.zeros((1, 1, 4, 4), np.float16)
    attn[0, 0, 1, 0] = 1.0
    attn[0, 0, 2, :2] = [0.25, 0.75]
    attn[0, 0, 3, :3] = [0.25, 0.625, 0.125]
    assert stats.occupancy(attn, strict=True).tolist() == [[0.25]]  # one distinct winner over T = 4
    assert stats.winner_share(attn, strict=True).tolist() == [[0.6875]]


def test_winner_share_is_the_winners_weight_over_its_rows_weight():
    attn = np.zeros((1, 1, 3, 3), np.float16)
    attn[0, 0, 0, 0] = 1.0
    attn[0, 0, 1, :2] = [0.75, 0.25]
    attn[0, 0, 2] = [0.25, 0.125, 0.5]  # weight 7/8: the winner holds 4/7
    assert stats.winner_share(attn, strict=False)[0, 0] == pytest.approx((0.75 + 4 / 7) / 2, rel=1e-15)


def test_a_softmax_scorer_scales_the_dot_products_and_picks_a_head():
    rng = np.random.default_rng(4)
    q, k = (rng.normal(size=(2, 3, 5, 4)).astype(np.float16) for _ in range(2))
    soft = model(q, k, np.zeros((2, 3, 5, 5), np.float16))
    dots = np.einsum("...td,...sd->...ts", q.astype(np.float64), k.astype(np.float64))
    np.testing.assert_array_equal(stats.raw_scores(soft, 2.0), 2.0 * dots)
    head = stats.scorer(soft, (1, 2))
    assert head.b is None and head.eps is None
    np.testing.assert_array_equal(head.dots, dots[1, 2])
    np.testing.assert_array_equal(stats.raw_scores(soft, 0.5, (1, 2)), 0.5 * dots[1, 2])


def windowed_kernel(strict: bool, T: int = 13) -> tuple[BundleModel, Callable[[float], np.ndarray]]:
    """A kernel model with a window axis (W 2, L 2, H 3) and its kappa on whole rows at scale t. Its exported
    map is the kernel weights of those rows exactly (float64), but for one weight of head (0, 1, 2) moved by
    1/2 in the last row before the first scorable one, and another of head (1, 0, 1) in row T - 2."""
    rng = np.random.default_rng(11)
    q, k = (rng.normal(size=(2, 2, 3, T, 4)).astype(np.float16) for _ in range(2))
    b, eps = rng.uniform(0.1, 1.0, size=(2, 2, 3))
    q64, k64 = q.astype(np.float64), k.astype(np.float64)
    d, qq, kk = np.einsum("...td,...sd->...ts", q64, k64), (q64**2).sum(-1), (k64**2).sum(-1)

    def kappa(t: float) -> np.ndarray:
        return laws.kernel(d, qq, kk, b, eps, t)

    attn = laws.kernel_weights(kappa(1.0), laws.available_TT(T, strict))
    attn[0, 1, 2, laws.first_scorable(strict) - 1, 0] += 0.5
    attn[1, 0, 1, T - 2, 3] += 0.25
    run = {"best_val": 1.0, "b_learned": b.tolist(), "eps_learned": eps.tolist()}
    return model(q, k, attn, run, "goat_v" if strict else "yat_b"), kappa


@pytest.mark.parametrize("strict", [False, True])
def test_a_windowed_kernel_models_statistics_are_their_definitions_on_whole_rows(strict):
    """Every statistic of a model with a window axis and several layers and heads, band by band, is the one
    its definition gives on whole rows, bit for bit, in the shape (W, L, H, ...)."""
    m, kappa = windowed_kernel(strict)
    available = laws.available_TT(13, strict)
    np.testing.assert_array_equal(stats.raw_scores(m, 0.5), kappa(0.5))
    base = whole_winners(kappa(1.0), strict)
    changed = np.stack([(whole_winners(kappa(t), strict) != base).mean(-1) for t in (0.5, 0.8, 1.25, 2.0, 4.0)], -1)
    assert changed.shape == (2, 2, 3, 5) and changed.max() > 0
    np.testing.assert_array_equal(stats.scale_changed(m), changed)
    np.testing.assert_array_equal(stats.scale_changed(m, head=(1, 2)), changed[:, 1, 2])
    np.testing.assert_array_equal(
        stats.changed_winners(m, (2.0,), 1.0, (1, 2))[0], whole_winners(kappa(2.0), strict)[:, 1, 2] != base[:, 1, 2]
    )

    gap = np.abs(laws.kernel_weights(kappa(1.0), available) - m.attn_LHTT).max((-2, -1))
    assert (
        gap.shape == (2, 2, 3)
        and gap[0, 1, 2] == pytest.approx(0.5)
        and gap[1, 0, 1] == pytest.approx(0.25)
        and (gap == 0).sum() == 10
    )
    np.testing.assert_array_equal(stats.reconstruction(m)[0], gap)
    share = stats.reconstruction(m)[1]  # of the room float16 export leaves each gap (export_rounding)
    assert share.shape == gap.shape and (share[gap == 0] == 0).all() and (share[gap > 0] > 1).all()

    nearest = whole_winners(
        -((m.q_LHTD[..., :, None, :] - m.k_LHTD[..., None, :, :]).astype(np.float64) ** 2).sum(-1), strict
    )
    aligned = whole_winners(
        np.einsum("...td,...sd->...ts", m.q_LHTD.astype(np.float64), m.k_LHTD.astype(np.float64)), strict
    )
    own = whole_winners(m.attn_LHTT, strict)
    agreement = stats.winner_agreement(m)
    np.testing.assert_array_equal(agreement[0], (own == nearest).mean(-1))
    np.testing.assert_array_equal(agreement[1], (own == aligned).mean(-1))


def test_the_sweep_is_on_layer_0_head_0_of_every_window_against_scale_1():
    m, kappa = windowed_kernel(False)
    nearest_1 = stats.SWEEP_SCALES[20]  # the middle of 41 scales from 1/4 to 4
    base = whole_winners(kappa(nearest_1), False)[:, 0, 0]
    sweep = np.stack([(whole_winners(kappa(t), False)[:, 0, 0] != base).mean(-1) for t in stats.SWEEP_SCALES])
    assert sweep.shape == (41, 2) and sweep.max() > 0
    np.testing.assert_array_equal(stats.scale_sweep(m), sweep)
    np.testing.assert_array_equal(stats.scale_sweep(m, scales=(0.25, nearest_1, 4.0)), sweep[[0, 20, 40]])


def test_a_given_scorer_is_the_one_the_scale_test_reads(monkeypatch):
    m, _ = windowed_kernel(True)
    score, changed = stats.scorer(m), stats.scale_changed(m)

    def no_scorer(*args):
        raise AssertionError("a scorer made again")

    monkeypatch.setattr(stats, "scorer", no_scorer)
    np.testing.assert_array_equal(stats.scale_changed(m, score=score), changed)
