import io
import json
import tracemalloc
import zipfile

import numpy as np
import pytest
from helpers.bundles import GOAT, QK, copy_published, edit_run, hostile, npz_array, rewrite_npz

from attngeom.base import json_rules, schema, train_config
from attngeom.base.errors import InputError
from attngeom.base.variants import PUBLISHED
from attngeom.bundles import arrays, layout
from attngeom.training import train


@pytest.fixture()
def copy(published_root, tmp_path):
    return copy_published(published_root, tmp_path / "b")


def test_loads_the_published_bundles(published_root):
    models = layout.load_models(published_root)
    assert tuple(models) == PUBLISHED
    assert models["yat_b"].b_LH.shape == (6, 4) and models["softmax"].b_LH is None
    assert models["goat_v"].strict and not models["softmax"].strict
    assert sorted(models["softmax"].maps) == [0, 1200, 6000, 11999]


def test_round_trip_of_the_writers(tmp_path):
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(2, 1, 2, 8, 4)).astype(np.float16)
    weights = np.tril(rng.uniform(size=(1, 2, 8, 8)))
    attn = (weights / weights.sum(-1, keepdims=True)).astype(np.float16)
    tokens = np.arange(8)
    layout.write_attn_npz(tmp_path / "attn_yat_b_s3.npz", tokens, {0: attn, 7: attn})
    layout.write_geom_npz(tmp_path / "geom_yat_b_s3.npz", tokens, q, k, attn)
    run = {"variant": "yat_b", "seed": 3, "best_val": 1.5, "b_learned": [[1.0, 2.0]], "eps_learned": [[0.1, 0.2]]}
    (tmp_path / "yat_attention.json").write_text(json.dumps({"summary": {}, "runs": [run], "cfg": {"STEPS": 8}}))
    m = layout.load_model(tmp_path, "yat_b", seed=3)
    np.testing.assert_array_equal(m.q_LHTD, q)
    assert m.tokens_T.dtype == np.int32 and sorted(m.maps) == [0, 7]


def test_a_windows_file_read_at_its_ends_holds_its_first_and_last_maps_only(tmp_path):
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(2, 2, 1, 2, 8, 4)).astype(np.float16)
    weights = np.tril(rng.uniform(size=(2, 1, 2, 8, 8)))
    attn = (weights / weights.sum(-1, keepdims=True)).astype(np.float16)
    tokens = np.arange(8)
    layout.write_attn_npz(tmp_path / "attn_softmax_s0.npz", tokens, {0: attn[0], 7: attn[0]})
    layout.write_geom_npz(tmp_path / "geom_softmax_s0.npz", tokens, q[0], k[0], attn[0])
    run = {"variant": "softmax", "seed": 0, "best_val": 1.5}
    (tmp_path / "yat_attention.json").write_text(json.dumps({"summary": {}, "runs": [run], "cfg": {"STEPS": 8}}))
    broken = np.full_like(attn, -1.0)  # a middle map no statistic reads: never read, so never refused
    path = layout.windows_file(tmp_path, "softmax", 0)
    layout.write_windows_npz(path, np.stack([tokens, tokens[::-1]]), {0: attn, 3: broken, 7: attn}, q, k)
    model = layout.load_model(tmp_path, "softmax", 0)
    ends = layout.read_windows(path, model, every_step=False)
    assert sorted(ends.maps) == [0, 7] and ends.attn_LHTT is ends.maps[7]
    np.testing.assert_array_equal(ends.maps[0], attn)
    with zipfile.ZipFile(path) as z:  # q and k are stored (they barely deflate), the maps deflated
        stored = sorted(i.filename for i in z.infolist() if i.compress_type == zipfile.ZIP_STORED)
    assert stored == ["k_WLHTD.npy", "q_WLHTD.npy"]
    with pytest.raises(InputError, match="'attn_3' holds negative attention weights"):
        layout.read_windows(path, model)


def damage(copy, how):
    geom = copy / QK / "geom_softmax_s0.npz"
    attn = copy / QK / "attn_softmax_s0.npz"
    js = copy / QK / "yat_attention.json"
    if how == "missing":
        geom.unlink()
    elif how == "missing maps":
        attn.unlink()
    elif how == "truncated":
        geom.write_bytes(geom.read_bytes()[:5000])
    elif how == "not a zip":
        geom.write_bytes(b"hello")
    elif how == "missing key":
        rewrite_npz(geom, drop=("k",))
    elif how == "wrong shape":
        rewrite_npz(geom, q=npz_array(geom, "q")[:, :, :, :40])
    elif how == "wrong dtype":
        rewrite_npz(geom, q=npz_array(geom, "q").astype(np.float32))
    elif how == "nan":
        q = npz_array(geom, "q")
        q[2, 1, 5, 7] = np.nan
        rewrite_npz(geom, q=q)
    elif how == "inf in maps":
        m = npz_array(attn, "step6000")
        m[0, 0, 3, 0] = np.inf
        rewrite_npz(attn, step6000=m)
    elif how == "bad json":
        js.write_text("{not json")
    elif how == "no run record":
        edit_run(js, "softmax", seed=5)
    elif how == "bad b":
        edit_run(copy / GOAT / "yat_attention.json", "goat_v", b_learned=[[1.0, 2.0]])
    elif how == "nan eps":
        edit_run(js, "yat_b", eps_learned=[[float("nan")] * 4] * 6)
    elif how == "tokens differ":
        rewrite_npz(attn, tokens=np.zeros(128, np.int32))
    elif how == "bad curve":
        edit_run(js, "softmax", curve=[{"step": 500, "val": "low"}])
    return {
        "missing": "no geom_softmax_s0.npz",
        "truncated": "corrupt or truncated",
        "not a zip": "corrupt or truncated",
        "missing key": "missing key",
        "wrong shape": "has shape",
        "wrong dtype": "expected float16",
        "nan": "NaN or inf",
        "inf in maps": "NaN or inf",
        "bad json": "not valid JSON",
        "no run record": "no run record",
        "bad b": "b_learned",
        "nan eps": "eps_learned",
        "tokens differ": "tokens",
        "missing maps": "missing file",
        "bad curve": r"curve\[0\]\.val: a string where a number is due",
    }[how]


HOWS = [
    "bad curve",
    "missing",
    "missing maps",
    "truncated",
    "not a zip",
    "missing key",
    "wrong shape",
    "wrong dtype",
    "nan",
    "inf in maps",
    "bad json",
    "no run record",
    "bad b",
    "nan eps",
    "tokens differ",
]


@pytest.mark.parametrize("how", HOWS)
def test_bad_input_is_one_clear_error(copy, how):
    expect = damage(copy, how)
    with pytest.raises(InputError, match=expect) as info:
        layout.load_models(copy)
    assert "\n" not in str(info.value)


def test_missing_variant_names_the_file(copy):
    (copy / GOAT / "geom_goat_v_s0.npz").unlink()
    with pytest.raises(InputError, match="geom_goat_v_s0.npz"):
        layout.load_models(copy)
    assert set(layout.load_models(copy, ("softmax", "yat_b"))) == {"softmax", "yat_b"}


HOSTILE = [
    "best_val 1e400",
    "best_val of 401 digits",
    "STEPS a string",
    "nested 200,000 deep",
    "a 5,000-digit integer",
    "seed a float",
    "2 layers",
    "T = 1",
    "head dim 0",
    "rows that do not sum to 1",
    "negative weights",
]


@pytest.mark.parametrize("how", HOSTILE)
def test_hostile_input_is_one_clear_error(copy, how):
    expect = hostile(copy, how)
    with pytest.raises(InputError, match=expect) as info:
        layout.load_models(copy, heads={"the census head": (3, 0)})
    assert "\n" not in str(info.value)


def _lying_npz(path, shape, payload=b""):
    """An npz whose one member 'q' declares `shape` of float16 in its npy header but holds `payload`."""
    header = io.BytesIO()
    np.lib.format.write_array_header_2_0(header, {"descr": "<f2", "fortran_order": False, "shape": shape})
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("q.npy", header.getvalue() + payload)


def _peak_memory_refusing(copy, message: str) -> int:
    """Bytes allocated at most while the bundles are refused with `message`."""
    tracemalloc.start()
    try:
        with pytest.raises(InputError, match=message):
            layout.load_models(copy)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_header_declaring_5_pib_is_refused_before_allocating(copy):
    _lying_npz(copy / QK / "geom_softmax_s0.npz", (5 * 2**50 // 2,), bytes(64))
    assert _peak_memory_refusing(copy, "declares shape") < 32 << 20


def test_a_zip_bomb_is_refused_without_large_memory(copy):
    geom = copy / QK / "geom_softmax_s0.npz"
    n = (arrays.MAX_NPZ_BYTES + (64 << 20)) // 2
    header = io.BytesIO()
    np.lib.format.write_array_header_2_0(header, {"descr": "<f2", "fortran_order": False, "shape": (n,)})
    with (
        zipfile.ZipFile(geom, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z,
        z.open("q.npy", "w", force_zip64=True) as f,
    ):
        f.write(header.getvalue())
        block = bytes(16 << 20)
        for _ in range(2 * n // len(block) + 1):
            f.write(block)
    assert geom.stat().st_size < 16 << 20
    assert _peak_memory_refusing(copy, "declares .* bytes uncompressed") < 32 << 20


def test_a_telemetry_only_bundle_loads_its_maps_and_a_bad_map_is_one_clear_error(tmp_path):
    """The author's telemetry reruns hold maps and a run JSON, no q or k: their maps load under the same
    laws as a bundle's, and q and k have head dimension 0."""
    import shutil

    from attngeom.base import fetch

    folder = tmp_path / "telem"
    shutil.copytree(fetch.fetch_bundles(fetch.TELEMETRY_BUNDLES) / "kgl_blog-yatattn-b-telem", folder)
    model = layout.load_telemetry(folder, "yat_b")
    assert sorted(model.maps) == [0, 1200, 6000, 11999] and model.q_LHTD.shape == (6, 4, 128, 0)
    assert model.attn_LHTT is model.maps[11999] and model.cfg["STEPS"] == 12000
    path = folder / "attn_yat_b_s0.npz"
    bad = npz_array(path, "step1200").copy()
    bad[0, 0, 5, :3] = np.float16(0.9)  # a row past its sum: no kernel map
    rewrite_npz(path, step1200=bad)
    with pytest.raises(InputError, match="attn_yat_b_s0.npz.*step1200"):
        layout.load_telemetry(folder, "yat_b")


def _result(seed: int, curve: list[dict]) -> train.RunResult:
    """What training leaves behind, reduced to what the run JSON reads."""
    return train.RunResult(
        variant="yat_b",
        seed=seed,
        lr=3e-3,
        losses=np.zeros(2),
        curve=curve,
        tokens_T=np.zeros(4, np.int32),
        prompt="abcd",
        maps={},
        windows_WT=None,
        window_maps={},
        q_WLHTD=None,
        k_WLHTD=None,
        q_LHTD=None,
        k_LHTD=None,
        attn_LHTT=None,
        score_max=[1.0] if curve else [],
        b_LH=np.ones((1, 2)),
        eps_LH=np.ones((1, 2)),
        wall_s=0.0,
    )


def test_run_json_summarises_every_seed():
    doc = layout.run_json(
        [_result(0, [{"step": 2, "val": 1.0}]), _result(1, [{"step": 2, "val": 2.0}])], train_config.PRESETS["smoke"]
    )
    assert doc["summary"]["yat_b"]["best_val_mean"] == 1.5 and doc["summary"]["yat_b"]["best_val_std"] == 0.5
    assert [list(r)[:6] for r in doc["runs"]][0] == ["variant", "seed", "best_val", "bpc", "curve", "score_max"]
    assert doc["runs"][1]["b_learned"] == [[1.0, 1.0]]


def test_a_run_stopped_before_its_first_evaluation_says_so_in_its_run_json():
    cfg = train_config.preset("paper", stop_after=2)
    doc = layout.run_json([_result(0, [])], cfg)
    assert {k: doc["runs"][0][k] for k in ("best_val", "bpc", "curve", "score_max")} == {
        "best_val": None,
        "bpc": None,
        "curve": [],
        "score_max": [],
    }
    assert doc["summary"]["yat_b"] == {"best_val_mean": None, "best_val_std": None, "bpc_mean": None}
    json_rules.check(json.loads(json.dumps(doc)), schema.RUN_JSON, "run JSON")  # the reader accepts it
    seeds = layout.run_json([_result(0, []), _result(1, [{"step": 500, "val": 2.0}])], cfg)["summary"]["yat_b"]
    assert seeds["best_val_mean"] == 2.0  # over the seeds that reached an evaluation
