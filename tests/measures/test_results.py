import json
import math

import numpy as np
import pytest

from attngeom.bundles.layout import BundleModel
from attngeom.measures import results

L, H, T, D = 4, 2, 8, 3


def _model(variant: str = "softmax") -> BundleModel:
    rng = np.random.default_rng(0)
    q, k = (rng.standard_normal((L, H, T, D)).astype(np.float16) for _ in range(2))
    maps_LHTT = np.tril(rng.random((L, H, T, T))) + np.eye(T)
    maps_LHTT = (maps_LHTT / maps_LHTT.sum(-1, keepdims=True)).astype(np.float16)
    one_hot = np.broadcast_to(np.eye(T, dtype=np.float16), (L, H, T, T))
    run = {"best_val": 1.5}
    return BundleModel(
        variant, 0, np.arange(T, dtype=np.int32), {0: one_hot, 9: maps_LHTT}, q, k, maps_LHTT, run, {"STEPS": 10}
    )


@pytest.fixture(scope="module")
def softmax() -> dict:
    return results.model_results(_model())


def test_setup_and_counts_follow_the_shapes(softmax):
    assert softmax["setup"] == {
        "layers": L,
        "heads": H,
        "head_dim": D,
        "window": T,
        "steps": 10,
        "steps_trained": 10,  # the whole schedule: no STOPPED_AFTER in its cfg
        "checkpoints": [0, 9],
        "scorable_rows_per_head": T - 1,
    }
    assert softmax["scale_comparisons"] == L * H * (T - 1) * 5
    assert softmax["keys_total"] == L * H * T
    assert softmax["census_head"]["head"] == [3, 0]


def test_softmax_winners_never_move_and_quality_is_in_bits(softmax):
    assert set(softmax["scale_changed_rows"].values()) == {0}
    assert softmax["bpc"] == pytest.approx(1.5 / math.log(2))
    assert "reconstruction_max_abs" not in softmax and "b" not in softmax["per_head"]


def test_one_hot_diagonal_maps_give_every_row_its_own_winner(softmax):
    # at step 0 every row's winner is its own position: T - 1 distinct winners among the scorable rows
    assert softmax["occupancy_by_step"]["0"] == pytest.approx((T - 1) / T)
    assert softmax["census_head"]["distinct_by_step"]["0"] == T - 1
    assert len(softmax["per_head"]["occupancy_by_step"]["9"]) == L


def test_results_are_plain_json(softmax):
    assert json.loads(json.dumps(softmax)) == softmax


def test_each_step_statistic_is_read_back_by_its_claim_function(softmax):
    """A band of rerun.json's steps names a statistic of statistics.STEP_STATISTICS; the claim function
    claims.STEP_CLAIMS gives for it reads back from results.json the value that statistic measures."""
    from attngeom.judgement.claims import STEP_CLAIMS
    from attngeom.measures.table import STEP_STATISTICS, by_step

    assert STEP_CLAIMS.keys() == STEP_STATISTICS.keys()
    measured = by_step(_model())
    for name, read in STEP_CLAIMS.items():
        for step in (0, 9):
            assert read({"models": {"softmax": softmax}}, "softmax", step) == pytest.approx(measured[name][str(step)])
