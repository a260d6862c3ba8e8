"""The FLOPs of one training step (lowered, never compiled), and the time a schedule of such steps takes."""

from __future__ import annotations

import pytest
from helpers.runs import TINY

from attngeom.training import flops


def test_a_schedule_is_its_steps_at_the_rate_plus_each_variants_compilation():
    assert flops.schedule_seconds({"a": 2e9, "b": 3e9}, 100, 1e12) == pytest.approx(0.5 + 2 * flops.COMPILE_S)
    assert flops.schedule_seconds({"a": 1e9}, 10, 1e9, compile_s=0) == 10.0
    assert flops.schedule_seconds({}, 10, 1e9) == 0.0


def test_the_assumptions_are_a_fraction_and_seconds():
    assert 0 < flops.EFFICIENCY <= 1 and flops.COMPILE_S > 0


@pytest.fixture(scope="module")
def one_step() -> float:
    return flops.step_flops("softmax", TINY, 1)


def test_a_step_is_counted_without_compiling_it(monkeypatch):
    import jax

    monkeypatch.setattr(jax.stages.Lowered, "compile", lambda *a, **k: pytest.fail("the step was compiled"))
    assert flops.step_flops("yat_b", TINY, 2) > 0


def test_a_step_has_the_flops_its_matmuls_need_at_least(one_step):
    m, B, T = TINY.model, TINY.batch, TINY.model.seq_len
    # forward and backward (3x) of the dense layers alone: qkv and out projections and the MLP, per token
    dense = 2 * B * T * m.layers * (4 * m.d_model * m.d_model + 2 * m.d_model * m.d_ff)
    assert 3 * dense < one_step < 30 * dense


def test_members_trained_together_cost_about_their_number_of_steps(one_step):
    together = flops.step_flops("softmax", TINY, 2)  # vmapped: the batch's shared work is done once
    assert 1.6 * one_step < together < 2.2 * one_step
