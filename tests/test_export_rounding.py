"""export_rounding: the model's own exports lie in the interval the exported numbers fix (at the laws'
edges: tests/test_acceptance.py), the interval is tight, and a weight outside it is caught."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from attngeom import export_rounding, laws, stats
from attngeom.bundles import BundleModel
from attngeom.training.config import ModelConfig
from attngeom.training.model import Attention

H, T, D = 2, 12, 8


def attention_export(variant: str, scale: float, seed: int = 1) -> BundleModel:
    """One layer of the model's own attention (training.model.Attention) on x of the given scale, its q, k
    and weights rounded to float16 as telemetry exports them, with its float32 b and eps."""
    cfg = ModelConfig(d_model=H * D, heads=H, layers=1, seq_len=T, dropout=0.0)
    attn = Attention(variant, cfg, rngs=nnx.Rngs(seed))
    attn.b_raw[...] = jnp.asarray([0.5, -2.0])  # b = softplus: 0.97 and 0.13
    attn.eps_raw[...] = jnp.asarray([0.0, -6.0])  # eps: log 2 and 0.0025
    _, probe = attn(jax.random.normal(jax.random.key(seed), (1, T, H * D)) * scale)
    b, eps = (np.asarray(v, np.float64) for v in attn.scalars())
    run = {"best_val": 1.0, "b_learned": [b.tolist()], "eps_learned": [eps.tolist()]}
    q, k, maps = (np.asarray(probe[name], np.float16) for name in ("q", "k", "attn"))
    return BundleModel(variant, 0, np.zeros(T, np.int32), {0: maps}, q, k, maps, run, {})


def share(model: BundleModel) -> float:
    return float(stats.reconstruction(model)[1].max())


@pytest.mark.parametrize("variant", ["yat_b", "goat_v"])
@pytest.mark.parametrize("scale", [0.1, 1.0, 20.0])
def test_the_models_own_attention_exports_within_its_room(variant, scale):
    """At a trained model's sizes (the laws' edges: tests/test_acceptance.py)."""
    assert 0 < share(attention_export(variant, scale)) <= 1.0


def _interval(model: BundleModel) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The recomputed weights of the model's one layer and their interval, on whole rows."""
    score = stats.scorer(model)
    available = laws.available_TT(T, model.strict)
    export = export_rounding.Export(model.q_LHTD, model.k_LHTD)
    every = slice(0, T)
    lo, hi = export.kappa_interval(every, every, score.dots, score.qq, score.kk, score.b, score.eps)
    lo, hi = export.weight_interval(lo, hi, available)
    return laws.kernel_weights(score(1.0), available)[0], lo[0], hi[0]


def test_a_weight_just_outside_its_interval_is_caught_and_one_at_its_edge_is_not():
    model = attention_export("yat_b", 1.0, seed=5)
    weights, lo, hi = _interval(model)
    i = (1, 9, int(weights[1, 9].argmax()))  # a row's winner
    beyond, inside = np.float16(hi[i]), np.float16(hi[i])
    while beyond <= hi[i]:
        beyond = np.nextafter(beyond, np.float16(np.inf))
    while inside > hi[i]:
        inside = np.nextafter(inside, np.float16(0))
    assert weights[i] < inside < beyond and (beyond - weights[i]) / weights[i] < 0.01  # the room is tight
    for value, caught in ((beyond, True), (inside, False)):
        attn = model.attn_LHTT.copy()
        attn[(0, *i)] = value
        moved = BundleModel(
            model.variant, 0, model.tokens_T, {0: attn}, model.q_LHTD, model.k_LHTD, attn, model.run, {}
        )
        assert (share(moved) > 1.0) is caught


def test_room_share_is_the_gap_over_the_room_on_its_side():
    recomputed = np.array([0.5, 0.5, 0.0, 0.25])
    lo, hi = np.array([0.4, 0.4, 0.0, 0.25]), np.array([0.7, 0.7, 0.0, 0.25])
    exported = np.array([0.6, 0.45, 0.0, 0.3])
    np.testing.assert_allclose(
        export_rounding.room_share(exported, recomputed, lo, hi), [0.5, 0.5, 0.0, np.inf]
    )  # a weight with no room (hi at the recomputed weight) moved at all is out


def test_half_spacing_is_how_far_rounding_to_float16_can_move_a_number():
    x = np.array([1.0, -0.75, 0.0, 2.0**-20, 1000.0, -32.0], np.float16)
    np.testing.assert_array_equal(
        export_rounding.half_spacing(x), [2.0**-11, 2.0**-12, 2.0**-25, 2.0**-25, 0.25, 2.0**-6]
    )
    x32 = np.random.default_rng(2).normal(size=10_000).astype(np.float32) * np.float32(30)
    x16 = x32.astype(np.float16)
    assert (np.abs(x32 - x16.astype(np.float32)) <= export_rounding.half_spacing(x16)).all()
    assert export_rounding.gamma(2) == pytest.approx(2 * 2.0**-24, rel=1e-6)


def test_the_units_of_rounding_are_float16s_float32s_and_float64s():
    assert (export_rounding.U16, export_rounding.SUBNORMAL16) == (2.0**-11, 2.0**-25)
    assert (export_rounding.U32, export_rounding.U64) == (2.0**-24, 2.0**-53)
    assert export_rounding.ONE_E9 == 9.999999717180685e-10  # 1e-9 as the model's float32 holds it
    assert export_rounding.gamma(3) == 3 * 2.0**-24 / (1 - 3 * 2.0**-24)
    assert export_rounding.gamma(50, 2.0**-53) == 50 * 2.0**-53 / (1 - 50 * 2.0**-53)
