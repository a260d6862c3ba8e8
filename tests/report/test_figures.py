"""The six figures: rendered from the published bundles, small enough, and showing the judged numbers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import REPO
from PIL import Image

from attngeom.report import figures

FRAMES = {
    "territory.gif": 56,
    "hull_crossing.gif": 64,
    "ray_ride.gif": 72,
    "scale_sweep.gif": 41,
    "far_field.gif": 60,
    "census.gif": 1,
}


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    return subprocess.run(
        [sys.executable, "-m", "attngeom", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )


@pytest.fixture(scope="module")
def rendered(published_root, tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """`verify` then `figures` into one folder, as a reviewer would run them."""
    out = tmp_path_factory.mktemp("report")
    assert cli("--bundles", str(published_root), "--out", str(out), cwd=out).returncode in (0, 1)
    return cli("figures", "--bundles", str(published_root), "--out", str(out), cwd=out), out


def _counters(out: Path) -> dict[str, dict]:
    entries = json.loads((out / "figures" / "figures.json").read_text(encoding="utf-8"))["figures"]
    return {e["file"]: e["counters"] for e in entries}


def test_six_gifs_within_limits(rendered):
    proc, out = rendered
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    for name, frames in FRAMES.items():
        path = out / "figures" / name
        assert path.stat().st_size <= 2_000_000, name
        with Image.open(path) as gif:
            assert gif.n_frames == frames, name
            assert gif.size[0] >= 600, name
            if frames > 1:
                assert 60 <= gif.info["duration"] <= 200, name  # calm: 5 to 17 frames a second


def test_report_page_embeds_the_figures(rendered):
    proc, out = rendered
    page = (out / "index.html").read_text(encoding="utf-8")
    assert f"report with figures: {out / 'index.html'}" in proc.stdout
    assert page.count('src="data:image/gif;base64,') == len(FRAMES)
    assert "antipodal agreement from 0.0 %" in page


def test_counters_are_the_judged_numbers(rendered):
    _, out = rendered
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    c = _counters(out)
    walk = results["mathematics"]["hull_walk"]
    for key in ("share_dot", "share_kernel"):
        np.testing.assert_allclose(c["hull_crossing.gif"][key], walk[key], rtol=0, atol=1e-9)
    assert c["hull_crossing.gif"]["inside"] == walk["inside"]
    far = results["mathematics"]["far_field"]
    for key in ("radius", "agreement"):
        np.testing.assert_allclose(c["far_field.gif"][key], far[key], rtol=0, atol=1e-9)
    for variant in figures.FIGURE_VARIANTS:
        model = results["models"][variant]
        np.testing.assert_allclose(c["scale_sweep.gif"]["changed"][variant], model["scale_sweep"]["changed"], atol=1e-9)
        assert c["census.gif"]["distinct_by_step"][variant] == model["census_head"]["distinct_by_step"]


def test_drawn_strips_match_the_curves(rendered):
    """The lit columns of the sweep strips are the rows the curve counts."""
    c = _counters(rendered[1])["scale_sweep.gif"]
    for variant in figures.FIGURE_VARIANTS:
        np.testing.assert_allclose(c["strip_mean"][variant], c["changed"][variant], atol=1e-12)
    assert max(c["changed"]["softmax"]) == 0 and 0.15 < max(c["changed"]["yat_b"]) < 0.35


def test_hull_counter_reads_zero_inside(rendered):
    c = _counters(rendered[1])["hull_crossing.gif"]
    inside = np.asarray(c["inside"])
    assert inside.any() and not inside.all()
    assert (np.asarray(c["share_dot"])[inside] == 0).all() and (np.asarray(c["share_dot"])[~inside] > 0).all()
    assert (np.asarray(c["share_kernel"]) > 0).all()


def test_unusable_bundles_are_one_line(tmp_path):
    proc = cli("figures", "--bundles", str(tmp_path / "none"), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_census_labels_the_steps_as_the_claims_count_them(rendered):
    entries = json.loads((rendered[1] / "figures" / "figures.json").read_text(encoding="utf-8"))["figures"]
    caption = next(e["caption"] for e in entries if e["file"] == "census.gif")
    assert "steps 0, 1,200, 6,000, 12,000" in caption and "11999" not in caption
