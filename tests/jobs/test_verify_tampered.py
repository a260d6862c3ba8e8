"""verify's judgement of tampered published bundles: each tampering flips the claims it touches, and only
those, to the verdict the changed numbers earn."""

import numpy as np
import pytest
from helpers.bundles import GOAT, QK, copy_published, edit_run, npz_array, rewrite_npz

from attngeom.base import fetch
from attngeom.bundles import layout
from attngeom.judgement import judge
from attngeom.measures import results


@pytest.fixture(scope="session")
def mathematics():
    return results.mathematics_results()


def verdicts_after(tamper, published_root, tmp_path, mathematics) -> dict[str, str]:
    root = copy_published(published_root, tmp_path / "b")
    tamper(root)
    models = layout.load_models(root)
    res = {
        "models": {v: results.model_results(m) for v, m in models.items()},
        "quality": results.quality_results(models, fetch.fetch_companion()),
        "mathematics": mathematics,
    }
    return {row["id"]: row["verdict"] for row in judge.judge_all(res, "published")}


def scale_kernel_queries(root):
    geom = root / QK / "geom_yat_b_s0.npz"
    rewrite_npz(geom, q=(npz_array(geom, "q") * np.float16(0.25)))


def softmax_run_with_kernel_scalars(root):
    edit_run(root / QK / "yat_attention.json", "softmax", b_learned=[[0.7] * 4] * 6, eps_learned=[[0.01] * 4] * 6)


def uniform_final_maps(root):
    path = root / QK / "attn_softmax_s0.npz"
    T = 128
    rows = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
    rewrite_npz(path, step11999=np.broadcast_to(rows, (6, 4, T, T)).astype(np.float16))


def one_winner_everywhere(root):
    path = root / QK / "attn_softmax_s0.npz"
    m = np.zeros((6, 4, 128, 128), np.float16)
    m[..., 0] = 1
    rewrite_npz(path, step11999=m, step0=m)


def duplicate_a_key(root):
    geom = root / QK / "geom_yat_b_s0.npz"
    k = npz_array(geom, "k")
    k[2, 3, 10] = k[2, 3, 90]
    rewrite_npz(geom, k=k)


def perturb_exported_maps(root):
    geom = root / QK / "geom_yat_b_s0.npz"
    a = npz_array(geom, "attn")
    a[4, 1, 60, 7] += np.float16(0.01)
    rewrite_npz(geom, attn=a)


def swap_census_heads(root):
    a, b = root / QK / "attn_softmax_s0.npz", root / QK / "attn_yat_b_s0.npz"
    sa, sb = npz_array(a, "step11999"), npz_array(b, "step11999")
    sa[3, 0], sb[3, 0] = sb[3, 0].copy(), sa[3, 0].copy()
    rewrite_npz(a, step11999=sa)
    rewrite_npz(b, step11999=sb)


def drop_a_checkpoint(root):
    for path in (
        root / QK / "attn_softmax_s0.npz",
        root / QK / "attn_yat_b_s0.npz",
        root / GOAT / "attn_goat_v_s0.npz",
    ):
        rewrite_npz(path, drop=("step6000",))


def shrink_goat_scale(root):
    geom = root / GOAT / "geom_goat_v_s0.npz"
    rewrite_npz(geom, q=(npz_array(geom, "q") * np.float16(8)))


TAMPERS = [
    (scale_kernel_queries, ["scale.yat_b.0.5x", "scale.yat_b.4x", "sweep.yat_b.max"], "FAIL"),
    (softmax_run_with_kernel_scalars, ["scale.softmax.moved", "sweep.softmax.max"], "FAIL"),
    (shrink_goat_scale, ["scale.goat_v.0.5x"], "FAIL"),
    (uniform_final_maps, ["entropy.softmax", "inversion"], "FAIL"),
    (one_winner_everywhere, ["occupancy.softmax.final", "occupancy.softmax.step0", "inversion"], "FAIL"),
    (duplicate_a_key, ["hull.yat_b.inside"], "FAIL"),
    (perturb_exported_maps, ["reconstruction.yat_b"], "FAIL"),
    (swap_census_heads, ["census.kernel_fewer"], "FAIL"),
    (drop_a_checkpoint, ["setup.checkpoints"], "FAIL"),
]


@pytest.mark.parametrize("tamper,claims,verdict", TAMPERS, ids=[t[0].__name__ for t in TAMPERS])
def test_tampered_bundles_flip_their_claims(tamper, claims, verdict, published_root, tmp_path, mathematics):
    verdicts = verdicts_after(tamper, published_root, tmp_path, mathematics)
    assert {c: verdicts[c] for c in claims} == {c: verdict for c in claims}
