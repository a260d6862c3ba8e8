import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import REPO
from helpers.bundles import (
    GOAT,
    QK,
    add_seed,
    add_windows,
    copy_published,
    npz_array,
    rewrite_npz,
)

from attngeom.base.errors import InputError
from attngeom.bundles import layout
from attngeom.judgement import claims, robustness
from attngeom.measures import results, table
from attngeom.report import markdown
from attngeom.report import page as html_report

W = 3


@pytest.fixture(scope="module")
def windowed_root(published_root, tmp_path_factory) -> Path:
    """The published bundles with W windows per model, and a second softmax seed with its own windows."""
    root = copy_published(published_root, tmp_path_factory.mktemp("windows") / "b")
    add_seed(root / QK, "softmax", 1, best_val=1.5)
    models = layout.load_models(root)
    for m in models.values():
        add_windows(m, W)
    add_windows(layout.load_model(root / QK, "softmax", 1), W, seed=1)
    return root


@pytest.fixture(scope="module")
def measured(windowed_root):
    models = layout.load_models(windowed_root)
    robust, files = robustness.measure(layout.list_bundles(windowed_root), models)
    return models, robust, files


def direct(model) -> dict:
    """Every statistic of a one-window model, through results.py and the table's reading of results.json."""
    r = {"models": {"m": results.model_results(model)}}
    return {key: table.value(r, "m", key) for key in table.applicable(model)}


def test_every_window_and_seed_is_found(measured, windowed_root):
    _, robust, files = measured
    assert robust["softmax"]["seeds"] == [0, 1] and robust["yat_b"]["seeds"] == [0]
    assert robust["softmax"]["windows"] == {"0": W, "1": W}
    assert robust["softmax"]["files"] == {"0": "windows_softmax_s0.npz", "1": "windows_softmax_s1.npz"}
    assert (
        windowed_root / QK / "windows_softmax_s1.npz" in files and windowed_root / QK / "geom_softmax_s1.npz" in files
    )


def test_aggregates_equal_a_direct_computation(measured, windowed_root):
    models, robust, _ = measured
    for variant, model0 in models.items():
        seeds = robust[variant]["seeds"]
        per_seed = {}
        for s in seeds:
            model = model0 if s == 0 else layout.load_model(windowed_root / QK, variant, s)
            ev = layout.load_windowed(model.files["geom"].parent, variant, s, model)
            per_seed[s] = [direct(layout.window(ev, w)) for w in range(W)]
        section = robust[variant]
        for key in section["counts"]:
            assert section["counts"][key]["count"] == sum(d[key] for ws in per_seed.values() for d in ws)
        for key, stat in section["statistics"].items():
            values = [d[key] for s in seeds for d in per_seed[s]]
            assert stat["all_windows"] == pytest.approx(
                {
                    "n": len(values),
                    "mean": np.mean(values),
                    "std": np.std(values),
                    "min": min(values),
                    "max": max(values),
                },
                abs=1e-9,  # results.json rounds the sweep to 10 digits
            ), (variant, key)
            assert stat["over_seeds"]["mean"] == pytest.approx(np.mean([per_seed[s][0][key] for s in seeds]), abs=1e-9)
            for s in seeds:
                assert stat["per_seed"][str(s)] == pytest.approx([d[key] for d in per_seed[s]], abs=1e-9)


def test_seed0_fixed_window_is_the_judged_value_and_published_values_are_beside_it(measured):
    models, robust, _ = measured
    judged = {"models": {v: results.model_results(m) for v, m in models.items()}}
    stat = robust["yat_b"]["statistics"]["scale_changed@0.5"]
    assert stat["fixed_window_seed0"] == claims.scale_changed_fraction(judged, "yat_b", 0.5)
    assert stat["published"] == 0.121
    assert robust["softmax"]["counts"]["scale_moved_rows"]["published"] == 0
    assert robust["softmax"]["statistics"]["winner_is_nearest"]["published"] is None


def test_a_tampered_window_flips_the_theorem_count(windowed_root, tmp_path):
    root = copy_published(windowed_root, tmp_path / "b")
    path = root / QK / "windows_yat_b_s0.npz"
    k = npz_array(path, "k_WLHTD")
    k[2, 1, 3, 40] = k[2, 1, 3, 100]  # a duplicated key lies in the others' hull, and so does its twin
    rewrite_npz(path, k_WLHTD=k)
    robust, _ = robustness.measure(layout.list_bundles(root), layout.load_models(root))
    assert robust["yat_b"]["counts"]["keys_inside_hull"]["count"] == 2
    assert robust["yat_b"]["counts"]["keys_inside_hull"]["per_seed"]["0"] == [0, 0, 2]
    assert robust["softmax"]["counts"]["keys_inside_hull"]["count"] == 0
    assert (
        f"**2 of {robust['yat_b']['counts']['keys_inside_hull']['out_of']:,}** (the published value is 0)"
        in "\n".join(markdown.robustness_lines(robust))
    )


def test_one_window_of_one_seed_adds_nothing(published_root):
    models = layout.load_models(published_root)
    assert robustness.measure(layout.list_bundles(published_root), models) == ({}, [])
    assert "one window of one seed" in markdown.robustness_lines({})[0]


def corrupt(root: Path, **arrays) -> Path:
    rewrite_npz(root / GOAT / "windows_goat_v_s0.npz", **arrays)
    return root


@pytest.mark.parametrize(
    "tamper,match",
    [
        (lambda p: {"tokens_WT": np.zeros((W, 128), np.int32)}, "window 0 is not the bundle's fixed window"),
        (lambda p: {"q_WLHTD": npz_array(p, "q_WLHTD")[:, :, :, :64]}, "'q_WLHTD' has shape"),
        (lambda p: {"k_WLHTD": npz_array(p, "k_WLHTD").astype(np.float32)}, "expected float16"),
        (lambda p: {"steps": np.array([0, 1200, 6000, 12000], np.int32)}, "missing key"),
        (lambda p: {"attn_0": np.full(npz_array(p, "attn_0").shape, np.nan, np.float16)}, "NaN"),
    ],
)
def test_a_malformed_windows_file_is_one_input_error(windowed_root, tmp_path, tamper, match):
    root = copy_published(windowed_root, tmp_path / "b")
    path = root / GOAT / "windows_goat_v_s0.npz"
    rewrite_npz(path, **tamper(path))
    with pytest.raises(InputError, match=match) as info:
        robustness.measure(layout.list_bundles(root), layout.load_models(root))
    assert "windows_goat_v_s0.npz" in str(info.value)


def test_end_to_end_report_files(windowed_root, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "attngeom", "--bundles", str(windowed_root), "--out", str(out), "--tier", "published"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr  # the two far-field quotes, as on the published bundles
    robust = json.loads((out / "results.json").read_text())["robustness"]
    assert set(robust) == {"softmax", "yat_b", "goat_v"}
    md = (out / "REPORT.md").read_text()
    assert (
        "## Robustness: every window and seed" in md
        and f"| softmax | 0 of {robust['softmax']['counts']['scale_moved_rows']['out_of']:,} |" in md
    )
    inputs = json.loads((out / "report.json").read_text())["provenance"]["inputs"]
    assert any(p.endswith("windows_softmax_s1.npz") for p in inputs)
    page = (out / html_report.INDEX).read_text()
    keys = {k for m in robust.values() for k in m["statistics"]}
    robust_part = page[page.index('<h2 id="robustness">') : page.index('<h2 id="figures">')]
    assert page.count('<figure class="robust"') == len(keys) and robust_part.count("<svg") >= len(keys)
    assert robust_part.count('stroke="#c62828"') == sum(
        s["published"] is not None for m in robust.values() for s in m["statistics"].values()
    )
