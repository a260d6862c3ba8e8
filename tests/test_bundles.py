import json

import numpy as np
import pytest

from attngeom import bundles
from attngeom.errors import InputError
from bundle_tools import GOAT, QK, copy_published, edit_run, npz_array, rewrite_npz


@pytest.fixture()
def copy(published_root, tmp_path):
    return copy_published(published_root, tmp_path / "b")


def test_loads_the_published_bundles(published_root):
    models = bundles.load_models(published_root)
    assert set(models) == {"softmax", "yat_b", "goat_v"}
    assert models["yat_b"].b_LH.shape == (6, 4) and models["softmax"].b_LH is None
    assert models["goat_v"].strict and not models["softmax"].strict
    assert sorted(models["softmax"].maps) == [0, 1200, 6000, 11999]


def test_round_trip_of_the_writers(tmp_path):
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(2, 1, 2, 8, 4)).astype(np.float16)
    attn = rng.uniform(size=(1, 2, 8, 8)).astype(np.float16)
    tokens = np.arange(8)
    bundles.write_attn_npz(tmp_path / "attn_yat_b_s3.npz", tokens, {0: attn, 7: attn})
    bundles.write_geom_npz(tmp_path / "geom_yat_b_s3.npz", tokens, q, k, attn)
    run = {"variant": "yat_b", "seed": 3, "best_val": 1.5, "b_learned": [[1.0, 2.0]], "eps_learned": [[0.1, 0.2]]}
    (tmp_path / "yat_attention.json").write_text(json.dumps({"summary": {}, "runs": [run], "cfg": {"STEPS": 8}}))
    m = bundles.load_model(tmp_path, "yat_b", seed=3)
    np.testing.assert_array_equal(m.q_LHTD, q)
    assert m.tokens_T.dtype == np.int32 and sorted(m.maps) == [0, 7]


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
    return {"missing": "no geom_softmax_s0.npz", "truncated": "corrupt or truncated", "not a zip": "corrupt or truncated",
            "missing key": "missing key", "wrong shape": "has shape", "wrong dtype": "expected float16",
            "nan": "NaN or inf", "inf in maps": "NaN or inf", "bad json": "not valid JSON",
            "no run record": "no run record", "bad b": "b_learned", "nan eps": "eps_learned",
            "tokens differ": "tokens", "missing maps": "missing file"}[how]


HOWS = ["missing", "missing maps", "truncated", "not a zip", "missing key", "wrong shape", "wrong dtype", "nan", "inf in maps",
        "bad json", "no run record", "bad b", "nan eps", "tokens differ"]


@pytest.mark.parametrize("how", HOWS)
def test_bad_input_is_one_clear_error(copy, how):
    expect = damage(copy, how)
    with pytest.raises(InputError, match=expect) as info:
        bundles.load_models(copy)
    assert "\n" not in str(info.value)


def test_missing_variant_names_the_file(copy):
    (copy / GOAT / "geom_goat_v_s0.npz").unlink()
    with pytest.raises(InputError, match="geom_goat_v_s0.npz"):
        bundles.load_models(copy)
    assert set(bundles.load_models(copy, ("softmax", "yat_b"))) == {"softmax", "yat_b"}
