import inspect
from pathlib import Path

import pytest

from attngeom import claims, expected
from attngeom.errors import InputError

SEEDS = Path(__file__).resolve().parents[2] / "shared" / "seeds"


def test_every_claim_has_one_function_and_the_fields():
    entries = expected.load_claims()
    assert len({e["id"] for e in entries}) == len(entries) >= 40
    for e in entries:
        fn = claims.CLAIM_FUNCTIONS[e["function"]]
        inspect.signature(fn).bind({}, **e["args"])
        assert e["reason"] and e["quote"] and e["source"]
        assert e["tier"] in ("published bundles", "mathematics")


@pytest.mark.skipif(not SEEDS.is_dir(), reason="the posts' text is not beside this checkout")
def test_quotes_are_verbatim():
    text = " ".join(p.read_text() for p in SEEDS.glob("*.txt"))
    for e in expected.load_claims():
        assert e["quote"] in text, e["id"]


def test_every_published_claim_has_a_rerun_band():
    bands = expected.load_rerun()
    published = {e["id"] for e in expected.load_claims() if e["tier"] == "published bundles"}
    assert published <= set(bands)
    assert all(b["smoke"] for cid, b in bands.items() if cid.startswith("toy."))


def test_step_statistics_are_the_published_maps_and_their_bands_cover_the_authors_reruns():
    """rerun.json's per-step values are the published maps' statistics; the author's reruns fall inside the bands."""
    import numpy as np

    from attngeom import fetch, stats
    from attngeom.variants import strict_mask

    published = fetch.fetch_bundles()
    telemetry = fetch.fetch_bundles(fetch.TELEMETRY_BUNDLES)
    files = {
        "softmax": published / "kgl_blog-attngeom-qk",
        "yat_b": published / "kgl_blog-attngeom-qk",
        "goat_v": published / "kgl_blog-attngeom-goat",
    }
    reruns = {"yat_b": telemetry / "kgl_blog-yatattn-b-telem", "goat_v": telemetry / "kgl_blog-goat-telem"}
    measure = {
        "occupancy": lambda m, strict: stats.occupancy(m, strict).mean() * 128,
        "entropy": lambda m, strict: stats.norm_entropy(m, strict).mean(),
    }
    steps = expected.load_steps()
    assert sorted(steps) == [1200, 6000]
    for step, statistics in steps.items():
        for name, band in statistics.items():
            for model, one in band["models"].items():
                value = one["published"]
                with np.load(files[model] / f"attn_{model}_s0.npz") as z:
                    assert measure[name](z[f"step{step}"], strict_mask(model)) == pytest.approx(value, abs=1e-6)
                if model in reruns:
                    with np.load(reruns[model] / f"attn_{model}_s0.npz") as z:
                        drift = abs(measure[name](z[f"step{step}"], strict_mask(model)) - value)
                    assert 0 < drift < one["tolerance"], (step, name, model)


def test_every_claim_says_what_it_is_a_property_of_and_an_unknown_kind_is_refused(tmp_path):
    import json
    import shutil

    claims = expected.load_claims()
    assert {c["kind"] for c in claims} == set(expected.KINDS)
    by_kind = {c["id"]: c["kind"] for c in claims}
    assert by_kind["scale.softmax.moved"] == "theorem" and by_kind["hull.yat_b.total"] == "setup"
    assert by_kind["occupancy.yat_b.final"] == "statistic" and by_kind["inversion"] == "comparison"
    shutil.copytree(expected.EXPECTED_DIR, tmp_path / "expected")
    path = tmp_path / "expected" / "claims.json"
    doc = json.loads(path.read_text())
    doc["claims"][0]["kind"] = "a guess"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match="unknown kind 'a guess'"):
        expected.load_claims(tmp_path / "expected")
    del doc["claims"][0]["kind"]
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match="lacks kind"):
        expected.load_claims(tmp_path / "expected")
