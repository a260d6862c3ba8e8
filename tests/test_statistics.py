"""The one table of statistics: every consumer reads the same definition, and the share a winner holds."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from attngeom import bundles, claims, laws, results, statistics, stats
from attngeom.bundles import BundleModel

L, H, T, D = 4, 2, 8, 3


def _model(variant: str) -> BundleModel:
    """A small model whose maps follow its law: softmax rows of q.k, kernel rows of kappa / (S + 1e-9)."""
    rng = np.random.default_rng(1)
    q, k = (rng.standard_normal((L, H, T, D)).astype(np.float16) for _ in range(2))
    strict = variant.startswith("goat")
    available = laws.available_TT(T, strict)
    kernel = variant != "softmax"
    b, eps = np.full((L, H), 0.5), np.full((L, H), 0.1)
    dots = laws.dots(q, k)
    if kernel:
        qq, kk = (np.square(a.astype(np.float64)).sum(-1) for a in (q, k))
        maps = laws.kernel_weights(laws.kernel(dots, qq, kk, b, eps), available)
    else:
        z = np.exp(np.where(available, dots, -np.inf) - np.where(available, dots, -np.inf).max(-1, keepdims=True))
        maps = z / z.sum(-1, keepdims=True)
    maps = np.nan_to_num(maps).astype(np.float16)  # a strict mask's row 0 has no key at all
    run = {"best_val": 1.5} | ({"b_learned": b.tolist(), "eps_learned": eps.tolist()} if kernel else {})
    tokens = np.arange(T, dtype=np.int32)
    return BundleModel(variant, 0, tokens, {0: maps, 9: maps}, q, k, maps, run, {"STEPS": 10})


@pytest.fixture(scope="module", params=["softmax", "yat_b", "goat_v"])
def judged(request) -> tuple[BundleModel, dict]:
    model = _model(request.param)
    return model, {"models": {"m": results.model_results(model)}}


def test_results_hold_every_statistic_the_model_can_show(judged):
    model, res = judged
    measures = statistics.Measures.of(model)
    for key, stat in statistics.applicable(model).items():
        assert statistics.value(res, "m", key) == pytest.approx(float(stat.per_window(measures)[0]), abs=1e-9), key
    assert ("reconstruction_max_abs" in statistics.applicable(model)) == (model.b_LH is not None)


def test_each_quoted_statistic_is_what_its_claim_function_reads(judged):
    """The claim function quoting a statistic returns the statistic computed from the model's arrays."""
    model, res = judged
    measures = statistics.Measures.of(model)
    quoted = {key: stat for key, stat in statistics.applicable(model).items() if stat.claim is not None}
    assert {"scale_moved_rows", "mean_norm_entropy_final"} <= set(quoted)
    for key, stat in quoted.items():
        function, args = stat.claim
        measured = stat.per_window(measures)[0].item()
        assert claims.CLAIM_FUNCTIONS[function](res, model="m", **args) == pytest.approx(measured, abs=1e-9), key


def test_the_window_axis_gives_the_same_values_window_by_window(judged):
    model, _ = judged
    one = statistics.on_every_window(statistics.Measures.of(model))
    windowed = bundles.fixed_window_only(model)
    two = bundles.window(replace(windowed, **_twice(windowed)), slice(None))
    both = statistics.on_every_window(statistics.Measures(two))
    for key, values in one.items():
        assert both[key].shape == (2,) and both[key] == pytest.approx(np.repeat(values, 2), abs=1e-12), key


def test_windows_in_blocks_give_the_values_of_one_batch(judged, monkeypatch):
    """Measures.blocks: three different windows, measured in blocks of one window each and all at once."""
    model, _ = judged
    rng = np.random.default_rng(2)
    order_WT = np.stack([np.arange(T), *(rng.permutation(T) for _ in range(2))])
    windowed = bundles.fixed_window_only(model)
    shuffled = replace(
        windowed,
        tokens_T=np.repeat(windowed.tokens_T, 3, 0),
        maps={s: np.repeat(m, 3, 0) for s, m in windowed.maps.items()},
        q_LHTD=np.moveaxis(model.q_LHTD[:, :, order_WT], 2, 0),
        k_LHTD=np.moveaxis(model.k_LHTD[:, :, order_WT], 2, 0),
        attn_LHTT=np.repeat(windowed.attn_LHTT, 3, 0),
    )
    whole = statistics.on_every_window(statistics.Measures(shuffled))
    monkeypatch.setattr(statistics.blocks, "BLOCK_BYTES", 1)
    assert len(statistics.Measures(shuffled).spans()) == 3
    parts = statistics.on_every_window(statistics.Measures(shuffled))
    assert parts.keys() == whole.keys()
    for key, values in whole.items():
        np.testing.assert_array_equal(parts[key], values, err_msg=key)


def test_the_table_reads_the_maps_of_the_first_and_last_steps_only(judged):
    """What lets robustness read a window's first and last maps alone: a statistic that read a middle
    step's map would see it gone here, and fail."""
    model, _ = judged
    steps = {0: model.maps[0], 4: model.maps[0] * 0, 9: model.maps[9]}
    every = statistics.on_every_window(statistics.Measures.of(replace(model, maps=steps)))
    ends = statistics.on_every_window(statistics.Measures.of(replace(model, maps={0: steps[0], 9: steps[9]})))
    assert every.keys() == ends.keys()
    for key, values in every.items():
        np.testing.assert_array_equal(ends[key], values, err_msg=key)


def _twice(windowed: BundleModel) -> dict:
    """The per-window arrays of one-window evidence, on two identical windows."""
    return {
        "tokens_T": np.repeat(windowed.tokens_T, 2, 0),
        "maps": {s: np.repeat(m, 2, 0) for s, m in windowed.maps.items()},
        "q_LHTD": np.repeat(windowed.q_LHTD, 2, 0),
        "k_LHTD": np.repeat(windowed.k_LHTD, 2, 0),
        "attn_LHTT": np.repeat(windowed.attn_LHTT, 2, 0),
    }


def test_the_new_statistic_is_in_results_and_the_report(judged):
    from attngeom import report

    model, res = judged
    share = res["models"]["m"]["winner_share_final"]
    assert 0 < share <= 1
    _, rows = report.statistics_rows(res)
    assert (statistics.TABLE["winner_share_final"].label, [f"{share:.4f}"]) in rows


# --- the share of its row the winner holds, on rows made by the laws -----------------------------

N = 6  # keys in a window


def _rows(draw_scores, kernel: bool, strict: bool) -> np.ndarray:
    """Maps of one head made by a law from raw scores: softmax rows sum to 1; kernel rows are
    kappa / (S + 1e-9), anything in [0, 1), a row of vanishing scores included."""
    available = laws.available_TT(N, strict)
    if kernel:
        return laws.kernel_weights(np.abs(draw_scores), available)
    z = np.where(available, np.exp(draw_scores - draw_scores.max(-1, keepdims=True)), 0.0)
    return z / np.maximum(z.sum(-1, keepdims=True), 1e-300)


scores = arrays(np.float64, (N, N), elements=st.floats(-30, 30, allow_nan=False))


@settings(max_examples=60, deadline=None)
@given(scores=scores, kernel=st.booleans(), strict=st.booleans(), scale=st.floats(1e-6, 1e6))
def test_the_share_lies_between_an_even_row_and_one_winner_and_the_entropy_in_0_1(scores, kernel, strict, scale):
    rows = _rows(scores * (scale if kernel else 1.0), kernel, strict)
    share = stats.winner_share(rows[None, None], strict)[0, 0]
    entropy = stats.norm_entropy(rows[None, None], strict)[0, 0]
    assert np.isfinite(entropy) and -1e-12 <= entropy <= 1 + 1e-12
    first = laws.first_scorable(strict)
    n_keys = np.arange(first, N) + (0 if strict else 1)
    assert np.isfinite(share) and np.mean(1 / n_keys) - 1e-12 <= share <= 1 + 1e-12


@settings(max_examples=30, deadline=None)
@given(strict=st.booleans(), kernel=st.booleans())
def test_one_hot_rows_give_one_and_vanishing_kernel_rows_an_even_share_and_entropy(strict, kernel):
    available = laws.available_TT(N, strict)
    one_hot = np.eye(N)[None, None]
    if strict:
        one_hot = np.roll(np.eye(N), -1, axis=1)[None, None] * available
    assert stats.winner_share(one_hot, strict)[0, 0] == pytest.approx(1.0)
    zero = laws.kernel_weights(np.zeros((N, N)), available)[None, None]  # every kappa 0: rows of no weight
    first = laws.first_scorable(strict)
    even = np.mean(1 / (np.arange(first, N) + (0 if strict else 1)))
    assert stats.winner_share(zero, strict)[0, 0] == pytest.approx(even)
    assert stats.norm_entropy(zero, strict)[0, 0] == 1.0  # no distribution: counted as an even row


def test_a_statistic_with_a_per_step_twin_equals_it_at_its_checkpoint(judged):
    """A trajectory's statistics at a step (trajectories.py) are read from its per-step statistics: a table
    statistic naming a twin equals it at its own checkpoint (the first or the last), and at no other."""
    model, _ = judged
    even = laws.available_TT(T, model.strict) / laws.available_TT(T, model.strict).sum(-1, keepdims=True).clip(1)
    first = np.broadcast_to(np.nan_to_num(even), model.maps[0].shape).astype(np.float16)
    model = replace(model, maps={0: first, 9: model.maps[9]})  # step 0's map differs from the last one
    recorded = statistics.by_step(model, final=True)
    twins = {key: s for key, s in statistics.TABLE.items() if s.per_step is not None}
    assert set(twins) == {"distinct_winners_first", "distinct_winners_last", "mean_norm_entropy_final"}
    for key, s in twins.items():
        at, other = ("0", "9") if s.checkpoint == "first" else ("9", "0")
        per_step = recorded[s.per_step]
        assert recorded["final"][key] == pytest.approx(per_step[at], abs=1e-4), key
        assert recorded["final"][key] != pytest.approx(per_step[other], abs=1e-3), key
