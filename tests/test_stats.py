import numpy as np
import pytest

from attngeom import stats
from attngeom.bundles import BundleModel


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
    from attngeom import laws

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
            np.testing.assert_array_equal(score.winners(t, strict), stats.winners(score(t), strict))
