"""The one table of statistics: every consumer reads the same definition, and the share a winner holds."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from attngeom.bundles import layout
from attngeom.bundles.layout import BundleModel
from attngeom.geometry import laws
from attngeom.judgement import claims
from attngeom.measures import results, stats, table

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
    measures = table.Measures.of(model)
    for key, stat in table.applicable(model).items():
        assert table.value(res, "m", key) == pytest.approx(float(stat.per_window(measures)[0]), abs=1e-9), key
    assert ("reconstruction_max_abs" in table.applicable(model)) == (model.b_LH is not None)


def test_each_quoted_statistic_is_what_its_claim_function_reads(judged):
    """The claim function quoting a statistic returns the statistic computed from the model's arrays."""
    model, res = judged
    measures = table.Measures.of(model)
    quoted = {key: stat for key, stat in table.applicable(model).items() if stat.claim is not None}
    assert {"scale_moved_rows", "mean_norm_entropy_final"} <= set(quoted)
    for key, stat in quoted.items():
        function, args = stat.claim
        measured = stat.per_window(measures)[0].item()
        assert claims.CLAIM_FUNCTIONS[function](res, model="m", **args) == pytest.approx(measured, abs=1e-9), key


def test_the_window_axis_gives_the_same_values_window_by_window(judged):
    model, _ = judged
    one = table.on_every_window(table.Measures.of(model))
    windowed = layout.fixed_window_only(model)
    two = layout.window(replace(windowed, **_twice(windowed)), slice(None))
    both = table.on_every_window(table.Measures(two))
    for key, values in one.items():
        assert both[key].shape == (2,) and both[key] == pytest.approx(np.repeat(values, 2), abs=1e-12), key


def test_windows_in_blocks_give_the_values_of_one_batch(judged, monkeypatch):
    """Measures.blocks: three different windows, measured in blocks of one window each and all at once."""
    model, _ = judged
    rng = np.random.default_rng(2)
    order_WT = np.stack([np.arange(T), *(rng.permutation(T) for _ in range(2))])
    windowed = layout.fixed_window_only(model)
    shuffled = replace(
        windowed,
        tokens_T=np.repeat(windowed.tokens_T, 3, 0),
        maps={s: np.repeat(m, 3, 0) for s, m in windowed.maps.items()},
        q_LHTD=np.moveaxis(model.q_LHTD[:, :, order_WT], 2, 0),
        k_LHTD=np.moveaxis(model.k_LHTD[:, :, order_WT], 2, 0),
        attn_LHTT=np.repeat(windowed.attn_LHTT, 3, 0),
    )
    whole = table.on_every_window(table.Measures(shuffled))
    monkeypatch.setattr(table.blocks, "BLOCK_BYTES", 1)
    assert len(table.Measures(shuffled).spans()) == 3
    parts = table.on_every_window(table.Measures(shuffled))
    assert parts.keys() == whole.keys()
    for key, values in whole.items():
        np.testing.assert_array_equal(parts[key], values, err_msg=key)


def test_the_table_reads_the_maps_of_the_first_and_last_steps_only(judged):
    """What lets robustness read a window's first and last maps alone: a statistic that read a middle
    step's map would see it gone here, and fail."""
    model, _ = judged
    steps = {0: model.maps[0], 4: model.maps[0] * 0, 9: model.maps[9]}
    every = table.on_every_window(table.Measures.of(replace(model, maps=steps)))
    ends = table.on_every_window(table.Measures.of(replace(model, maps={0: steps[0], 9: steps[9]})))
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
    from attngeom.report import markdown

    model, res = judged
    share = res["models"]["m"]["winner_share_final"]
    assert 0 < share <= 1
    _, rows = markdown.statistics_rows(res)
    assert (table.TABLE["winner_share_final"].label, [f"{share:.4f}"]) in rows


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
    recorded = table.by_step(model, final=True)
    twins = {key: s for key, s in table.TABLE.items() if s.per_step is not None}
    assert set(twins) == {"distinct_winners_first", "distinct_winners_last", "mean_norm_entropy_final"}
    for key, s in twins.items():
        at, other = ("0", "9") if s.checkpoint == "first" else ("9", "0")
        per_step = recorded[s.per_step]
        assert recorded["final"][key] == pytest.approx(per_step[at], abs=1e-4), key
        assert recorded["final"][key] != pytest.approx(per_step[other], abs=1e-3), key


# --- the table's pieces, each pinned on its own ------------------------------------------------


def _three_steps(model: BundleModel) -> BundleModel:
    """The model with three telemetry steps whose maps differ: an even map at 0, the model's own at 9,
    and at 5 the model's own map with each row's weights reversed."""
    even = laws.available_TT(T, model.strict) / laws.available_TT(T, model.strict).sum(-1, keepdims=True).clip(1)
    first = np.broadcast_to(np.nan_to_num(even), model.maps[9].shape).astype(np.float16)
    return replace(model, maps={0: first, 5: model.maps[9][..., ::-1], 9: model.maps[9]})


def test_at_picks_the_first_or_the_last_step():
    assert table._at("first")([3, 5, 7]) == 3
    assert table._at("last")([3, 5, 7]) == 7


@pytest.mark.parametrize("step,at,index", [("first", 0, 0), ("last", 9, -1)])
def test_distinct_winners_is_a_statistic_of_its_own_checkpoint(judged, step, at, index):
    model, _ = judged
    model = _three_steps(model)
    s = table._distinct_winners(step)
    assert (s.label, s.unit, s.claim) == (
        f"distinct winners, {step} checkpoint (mean over heads)",
        "keys",
        ("distinct_winners", {"step": step}),
    )
    assert (s.checkpoint, s.per_step, s.needs, s.out_of, s.fmt) == (step, "distinct_winners", "any", None, ".4f")
    entry = {"occupancy_by_step": {"0": 0.25, "5": 0.375, "9": 0.5}, "setup": {"window": 8}}
    assert s.read(entry) == [2.0, 3.0, 4.0][index]
    windowed = layout.fixed_window_only(model)
    two = replace(windowed, **_twice(windowed))
    two = replace(two, maps={k: np.concatenate([m[:1], m[:1, ..., ::-1]]) for k, m in two.maps.items()})
    want = stats.MapRows(two.maps[at], model.strict).occupancy.mean((1, 2)) * T
    assert want.shape == (2,) and want[0] != want[1]
    np.testing.assert_array_equal(s.per_window(table.Measures(two)), want)


def test_map_rows_read_a_strict_model_as_strict(judged):
    model, _ = judged
    m = table.Measures.of(model)
    rows = stats.MapRows(model.maps[9][None], model.strict)
    np.testing.assert_array_equal(m.occupancy(9), rows.occupancy)
    np.testing.assert_array_equal(m.entropy(9), rows.entropy)


def test_by_step_states_the_validation_curve_and_the_final_statistics_only_when_asked(judged):
    model, _ = judged
    model = replace(model, run=model.run | {"curve": [{"step": 5, "val": 1.23456789}, {"step": 9, "val": 2.0}]})
    recorded = table.by_step(model)
    assert "final" not in recorded
    assert recorded["validation_loss"] == {"5": 1.234568, "9": 2.0}
    assert table.by_step(replace(model, run={}))["validation_loss"] == {}


@pytest.mark.parametrize(
    "checkpoints,steps,labels",
    [
        ([0, 9], 10, [0, 10]),
        ([0, 5, 9], 10, [0, 5, 10]),
        ([9], 10, [10]),
        ([0, 8], 10, [0, 8]),
        ([0, 9], 9, [0, 9]),
        ([0, 9], None, [0, 9]),
        ([], 10, []),
    ],
)
def test_the_last_checkpoint_is_counted_as_the_steps_run(checkpoints, steps, labels):
    assert table.checkpoint_labels(checkpoints, steps) == labels


def test_value_reads_a_table_name_before_where_results_json_has_long_held_it():
    entry = {"scale_moved_rows": 7, "scale_changed_rows": {"0.5": 1, "2.0": 2}}
    assert table.value({"models": {"m": entry}}, "m", "scale_moved_rows") == 7
    assert table.value({"models": {"m": entry | {"scale_moved_rows": None}}}, "m", "scale_moved_rows") is None
    del entry["scale_moved_rows"]
    assert table.value({"models": {"m": entry}}, "m", "scale_moved_rows") == 3
    assert table.value({"models": {"m": {"winner_share_final": 0.5}}}, "m", "winner_share_final") == 0.5


def test_a_block_of_every_window_is_the_model_itself(judged):
    model, _ = judged
    windowed = layout.fixed_window_only(model)
    two = table.Measures(replace(windowed, **_twice(windowed)))
    assert two.part(slice(0, 2)) is two
    assert two.part(slice(1, 2)) is not two and two.part(slice(1, 2)).windows == 1


def test_blocks_hold_as_many_windows_as_fit_in_block_bytes(judged, monkeypatch):
    model, _ = judged
    windowed = layout.fixed_window_only(model)
    three = replace(
        windowed, **{k: np.concatenate([v, v[:1]]) if k != "maps" else v for k, v in _twice(windowed).items()}
    )
    monkeypatch.setattr(table.blocks, "BLOCK_BYTES", 2 * L * H * T * T * 8)  # two windows of float64 scores
    assert table.Measures(three).spans() == [slice(0, 2), slice(2, 3)]
    monkeypatch.setattr(table.blocks, "BLOCK_BYTES", 2 * L * H * T * T * 8 - 1)
    assert table.Measures(three).spans() == [slice(0, 1), slice(1, 2), slice(2, 3)]


def test_the_census_and_the_sweep_run_once_for_every_block(judged, monkeypatch):
    """The blocks share the whole's census and sweep, computed on every window before the blocks run side
    by side (two here, on two cores whatever the machine has): never again in a block or a second thread."""
    import threading
    import time

    model, _ = judged
    windowed = layout.fixed_window_only(model)
    two = replace(windowed, **_twice(windowed))
    calls = {"census": 0, "sweep": 0}
    census, sweep = table.hull.inside_hull, table.stats.scale_sweep

    def counted(name, fn):
        def run(*args, **kwargs):
            calls[name] += 1
            time.sleep(0.05)  # long enough for a second thread to ask for it too
            return fn(*args, **kwargs)

        return run

    monkeypatch.setattr(table.hull, "inside_hull", counted("census", census))
    monkeypatch.setattr(table.stats, "scale_sweep", counted("sweep", sweep))
    monkeypatch.setattr(table.blocks, "BLOCK_BYTES", 1)
    monkeypatch.setattr(table.blocks, "cores", lambda: 2)
    monkeypatch.setattr(table.blocks, "_RUNNING", threading.BoundedSemaphore(2))
    values = table.on_every_window(table.Measures(two))
    assert calls == {"census": 1, "sweep": 1}
    assert values["keys_inside_hull"][0] == values["keys_inside_hull"][1]
