"""The GPU hours of an ensemble on Kaggle: how the members split over the GPUs, and the estimate's arithmetic."""

from __future__ import annotations

import pytest

from attngeom.backends import kaggle_budget
from attngeom.backends.kaggle_budget import MACHINES, largest_group
from attngeom.base.errors import InputError
from attngeom.training.flops import EFFICIENCY

T4X2 = MACHINES["NvidiaTeslaT4"]


def test_the_t4_machine_has_two_gpus_at_the_datasheets_float32_rate():
    assert (T4X2.gpus, T4X2.flops_per_s) == (2, 8.1e12)


@pytest.mark.parametrize(("members", "largest"), [(2, 1), (3, 2), (4, 2), (5, 3)])
def test_the_largest_group_is_the_members_halved_rounded_up(members, largest):
    assert largest_group(members, T4X2) == largest


def test_a_kernel_takes_its_variants_one_after_another_at_the_assumed_share_of_the_rate():
    flops = {"softmax": 3e11, "yat_b": 3e11}
    seconds = kaggle_budget.kernel_seconds(flops, 12_000, T4X2)
    compute = 12_000 * 6e11 / (8.1e12 * EFFICIENCY)
    assert seconds == pytest.approx(kaggle_budget.INSTALL_S + compute + 2 * 30.0)


def test_the_quota_left_refuses_kernels_estimated_beyond_it(capsys):
    state = {"accelerator": "NvidiaTeslaT4", "members": 4, "kernels": []}
    kernels = [{"bundle": "b", "seed": 0, "estimated_s": 5400.0}, {"bundle": "c", "seed": 0, "estimated_s": 1800.0}]
    state["kernels"] = kernels
    kaggle_budget.check_quota(state, kernels, 2.0 * 3600)  # 2.0 h of 2.0 h: fits
    assert "estimate: 2.00 GPU hours on T4 x2" in capsys.readouterr().out
    with pytest.raises(InputError, match="estimated at 2.0 GPU hours, more than the 1.9 h of GPU quota left"):
        kaggle_budget.check_quota(state, kernels, 1.9 * 3600)
    kaggle_budget.check_quota(state, kernels, None)  # the quota not reported: nothing to compare with
