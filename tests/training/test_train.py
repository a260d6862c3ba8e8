"""The training harness: event-aligned chunks, the same losses as a per-step loop, checkpoints.

That it trains as the author's script does is checked against that script on the same machine
(tests/training/test_fidelity.py), not against losses frozen on another CPU.
"""

from __future__ import annotations

from dataclasses import replace

import jax
import numpy as np
import pytest
from helpers.runs import TINY

from attngeom.base import train_config
from attngeom.base.errors import InputError
from attngeom.training import data, runs, train

# Member m's parameters, literally: each float32 moved to its neighbour (one ulp), up or down by the
# signs of np.random.default_rng([20260, m]) drawn leaf after leaf ("a", then "b"/"c"); a zero moves to
# the smallest subnormal, -2**-149 here.
PARAMS = {"a": [1.0, -2.0, 0.0, 3.5], "b": {"c": [[0.5, -0.25]]}}
MOVED = {
    1: {"a": [1 + 2**-23, -2 + 2**-23, -(2**-149), 3.5 + 2**-22], "c": [[0.5 + 2**-24, -0.25 + 2**-26]]},
    2: {"a": [1 + 2**-23, -2 + 2**-23, -(2**-149), 3.5 + 2**-22], "c": [[0.5 + 2**-24, -0.25 - 2**-25]]},
    3: {"a": [1 + 2**-23, -2 - 2**-22, -(2**-149), 3.5 + 2**-22], "c": [[0.5 - 2**-25, -0.25 + 2**-26]]},
}


def _is_values(x) -> bool:
    return isinstance(x, list)


@pytest.mark.parametrize("member", sorted(MOVED))
def test_a_member_moves_each_parameter_one_ulp_by_the_signs_of_its_number(member):
    params = jax.tree.map(lambda x: jax.numpy.asarray(np.array(x, np.float32)), PARAMS, is_leaf=_is_values)
    moved = train.perturb(params, member)
    for leaf, after in (("a", moved["a"]), ("c", moved["b"]["c"])):
        after = np.asarray(after)
        assert after.dtype == np.float32 and after.tobytes() == np.array(MOVED[member][leaf], np.float32).tobytes()
    assert train.perturb(params, 0) is params  # member 0: the seed's own parameters


def test_telemetry_steps_follow_the_original_rule():
    assert train_config.PRESETS["paper"].telemetry_steps() == (0, 1200, 6000, 11999)
    assert train_config.preset("paper", steps=300).telemetry_steps() == (0, 30, 150, 299)


def test_evaluation_every_500_steps_and_after_the_last():
    assert train_config.PRESETS["paper"].eval_points() == tuple(range(500, 12_001, 500))
    assert train_config.preset("paper", steps=1200).eval_points() == (500, 1000, 1200)


@pytest.mark.parametrize("cfg", [TINY, train_config.PRESETS["paper"], train_config.PRESETS["smoke"]])
def test_chunk_plan_covers_every_step_once_and_stops_at_every_event(cfg):
    plan = train.chunk_plan(cfg)
    starts = [first for first, _ in plan]
    assert starts[0] == 0 and all(0 < n <= cfg.chunk for _, n in plan)
    assert [first + n for first, n in plan[:-1]] == starts[1:]
    assert plan[-1][0] + plan[-1][1] == cfg.steps
    ends = {first + n for first, n in plan}
    assert set(cfg.eval_points()) <= ends
    assert {s + 1 for s in cfg.telemetry_steps() if s > 0} <= ends


def test_the_first_chunks_of_a_process_grow_from_two_steps_to_the_chunk():
    paper = train_config.PRESETS["paper"]
    sizes = [n for _, n in train.chunk_plan(paper)]
    assert sizes[:7] == [2, 4, 8, 16, 32, 50, 50] and train.RAMP_FROM == 2
    resumed = train.chunk_plan(paper, start=7550)  # a resumed process shows its first steps as soon
    assert resumed[:3] == [(7550, 2), (7552, 4), (7556, 8)]
    assert [n for _, n in train.chunk_plan(TINY)][:4] == [2, 1, 4, 3]  # an event cuts a grown chunk short


def test_a_later_seed_or_member_of_the_same_model_reuses_its_engine_and_trains_the_same(corpus, monkeypatch):
    built = []

    def counted(*made):
        built.append(made)
        return train.single(*made)

    short = replace(TINY, steps=3)
    monkeypatch.setattr(train, "_ENGINES", {})
    runs_ = [
        train.train_group("yat_b", seed, replace(short, member=m), corpus, [train.Member(m)], counted)[0]
        for seed, m in ((0, 0), (1, 0), (1, 1))
    ]
    assert len(built) == 1  # one engine for the three trainings
    train.train_group("yat_b", 1, replace(short, lr=1e-4), corpus, [train.Member()], counted)
    assert len(built) == 2  # another optimiser: another engine
    monkeypatch.setattr(train, "_ENGINES", {})
    for (seed, m), reused in zip(((1, 0), (1, 1)), runs_[1:]):
        fresh = train.train_group("yat_b", seed, replace(short, member=m), corpus, [train.Member(m)], counted)[0]
        np.testing.assert_array_equal(fresh.losses, reused.losses)
        np.testing.assert_array_equal(fresh.attn_LHTT, reused.attn_LHTT)
    assert not np.array_equal(runs_[0].losses, runs_[1].losses)


def test_chunked_steps_give_the_losses_of_a_per_step_loop(corpus):
    graphdef, _, tx, state = train.init_state("yat_b", TINY, seed=0)
    step = jax.jit(train.make_step(graphdef, tx))
    per_step = []
    for s in range(6):
        x_BT, y_BT = data.batch(corpus.train_M, TINY.batch, TINY.model.seq_len, s)
        state, loss = step(state, x_BT, y_BT)
        per_step.append(float(loss))

    _, _, _, state = train.init_state("yat_b", TINY, seed=0)
    run_chunk = train.make_chunk(train.make_step(graphdef, tx))
    chunked = []
    for first, n in [(0, 4), (4, 2)]:  # the second chunk is padded with inactive steps
        state, loss_I = run_chunk(state, *train.chunk_batches(corpus, TINY, 0, first, n))
        chunked += np.asarray(loss_I)[:n].tolist()
    assert chunked == per_step


@pytest.fixture(scope="module")
def yat_b_run(corpus) -> tuple[train.RunResult, list[tuple[int, int]]]:
    """yat_b trained on TINY without interruption, and the (first step, steps) of each chunk."""
    seen = []
    result = train.train_variant("yat_b", 0, TINY, corpus, on_steps=lambda first, loss: seen.append((first, len(loss))))
    return result, seen


def test_train_variant_records_everything_the_bundle_needs(corpus, yat_b_run):
    result, seen = yat_b_run
    L, H, T, D = TINY.model.layers, TINY.model.heads, TINY.model.seq_len, TINY.model.head_dim
    assert sum(n for _, n in seen) == TINY.steps and result.losses.shape == (TINY.steps,)
    assert np.isfinite(result.losses).all()
    assert sorted(result.maps) == [0, 2, 11, 22]
    assert all(m.shape == (L, H, T, T) and m.dtype == np.float16 for m in result.maps.values())
    assert result.q_LHTD.shape == result.k_LHTD.shape == (L, H, T, D) and result.q_LHTD.dtype == np.float16
    np.testing.assert_array_equal(result.attn_LHTT, result.maps[22])  # no update after the last snapshot
    assert [p["step"] for p in result.curve] == [10, 20, 23]
    assert result.best_val == min(p["val"] for p in result.curve)
    assert len(result.score_max) == TINY.val_batches * L
    assert result.b_LH.shape == result.eps_LH.shape == (L, H) and (result.eps_LH > 0).all()
    assert result.prompt == corpus.decode(result.tokens_T)


def test_train_variant_records_the_maps_on_every_window(corpus, yat_b_run):
    result, _ = yat_b_run
    W, L, H, T, D = TINY.windows, TINY.model.layers, TINY.model.heads, TINY.model.seq_len, TINY.model.head_dim
    np.testing.assert_array_equal(result.windows_WT, data.telemetry_windows(corpus, T, W))
    np.testing.assert_array_equal(result.windows_WT[0], result.tokens_T)
    assert sorted(result.window_maps) == sorted(result.maps)
    assert all(m.shape == (W, L, H, T, T) and m.dtype == np.float16 for m in result.window_maps.values())
    assert result.q_WLHTD.shape == result.k_WLHTD.shape == (W, L, H, T, D) and result.q_WLHTD.dtype == np.float16
    for step, attn_LHTT in result.maps.items():  # window 0 is the fixed window, computed in a batch of W
        np.testing.assert_allclose(result.window_maps[step][0], attn_LHTT, rtol=2e-3, atol=1e-6)
    np.testing.assert_allclose(result.q_WLHTD[0], result.q_LHTD, rtol=2e-3, atol=1e-3)
    assert not np.array_equal(result.window_maps[22][0], result.window_maps[22][1])


def test_softmax_records_no_kernel_scalars(corpus):
    result = train.train_variant("softmax", 0, replace(TINY, steps=2), corpus)
    assert result.b_LH is None and result.eps_LH is None
    assert sorted(result.maps) == [0, 1]


def test_a_diverging_run_stops_with_a_clear_error(corpus):
    with pytest.raises(InputError, match="not finite at step"):
        train.train_variant("softmax", 0, replace(TINY, steps=8, lr=1e30), corpus)


def test_a_run_continued_from_its_checkpoint_ends_as_an_uninterrupted_one(corpus, yat_b_run, tmp_path):
    ckpt = tmp_path / "ckpt.npz"

    def stop_at_16(first, losses):
        if first == 16:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train.train_variant("yat_b", 0, TINY, corpus, on_steps=stop_at_16, checkpoint=ckpt)
    assert runs.checkpoint_step(ckpt, TINY.steps) == 10
    seen = []
    resumed = train.train_variant("yat_b", 0, TINY, corpus, on_steps=lambda f, n: seen.append(f), checkpoint=ckpt)
    assert seen[0] == 10 and runs.checkpoint_step(ckpt, TINY.steps) == TINY.steps
    whole = yat_b_run[0]
    for name in ("losses", "tokens_T", "q_LHTD", "k_LHTD", "attn_LHTT", "b_LH", "eps_LH"):
        np.testing.assert_array_equal(getattr(resumed, name), getattr(whole, name))
    assert resumed.curve == whole.curve and resumed.score_max == whole.score_max
    assert sorted(resumed.maps) == sorted(whole.maps)
    assert all(np.array_equal(resumed.maps[s], whole.maps[s]) for s in whole.maps)
    assert sorted(resumed.window_maps) == sorted(whole.window_maps)
    assert all(np.array_equal(resumed.window_maps[s], whole.window_maps[s]) for s in whole.window_maps)
    np.testing.assert_array_equal(resumed.q_WLHTD, whole.q_WLHTD)

    wider = replace(TINY, model=replace(TINY.model, d_model=32))
    with pytest.raises(InputError, match="another configuration"):
        train.train_variant("yat_b", 0, wider, corpus, checkpoint=ckpt)
