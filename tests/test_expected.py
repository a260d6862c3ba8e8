import inspect
import math
from pathlib import Path

import pytest

from attngeom import claims, expected
from attngeom.expected import Judgement, passes

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


@pytest.mark.parametrize(
    "measured,j,ok",
    [
        (0, Judgement(0, "exact", None, ""), True),
        (1, Judgement(0, "exact", None, ""), False),
        ("disagree", Judgement("disagree", "exact", None, ""), False),
        (0.1207, Judgement(0.121, "abs", 0.0005, ""), True),
        (0.1204, Judgement(0.121, "abs", 0.0005, ""), False),
        (42.4, Judgement(45, "rel", 0.15, ""), True),
        (math.inf, Judgement(100, "rel", 0.3, ""), False),
        (math.nan, Judgement(1, "le", None, ""), False),
        (3.9e-4, Judgement(4e-4, "lt", None, ""), True),
        (4e-4, Judgement(4e-4, "lt", None, ""), False),
        (0.0, Judgement(0.0, "gt", None, ""), False),
        (True, Judgement(1, "ge", None, ""), False),
    ],
)
def test_passes(measured, j, ok):
    assert passes(measured, j) is ok


def test_rerun_tier_and_smoke():
    entry = {"id": "x", "tier": "published bundles", "value": 0.12, "comparison": "abs", "tolerance": 0.001, "reason": "r"}
    math_entry = {**entry, "tier": "mathematics"}
    bands = {"x": {"comparison": "abs", "tolerance": 0.05, "reason": "drift", "smoke": False}}
    assert expected.judgement_for(entry, "published", bands, False).tolerance == 0.001
    assert expected.judgement_for(entry, "rerun", bands, False).tolerance == 0.05
    assert "smoke" in expected.judgement_for(entry, "rerun", bands, True)
    assert expected.judgement_for(entry, "rerun", {}, False).startswith("not judged on reruns")
    theorem = {"x": {"reason": "a theorem", "smoke": True}}
    assert expected.judgement_for(math_entry, "rerun", theorem, True).tolerance == 0.001


def test_describe():
    assert expected.describe(Judgement(0.121, "abs", 0.0005, "")) == "0.121 ± 0.0005"
    assert expected.describe(Judgement(4e-4, "lt", None, "")) == "< 0.0004"
    assert expected.describe(Judgement(45.0, "rel", 0.15, "")) == "45 ± 15%"


def test_every_published_claim_has_a_rerun_band():
    bands = expected.load_rerun()
    published = {e["id"] for e in expected.load_claims() if e["tier"] == "published bundles"}
    assert published <= set(bands)
    assert all(b["smoke"] for cid, b in bands.items() if cid.startswith("toy."))


@pytest.mark.parametrize("cid", [c for c, b in expected.load_rerun().items() if b.get("comparison") in ("abs", "rel")])
def test_each_rerun_band_fails_just_outside_it(cid):
    entry = next(e for e in expected.load_claims() if e["id"] == cid)
    j = expected.judgement_for(entry, "rerun", expected.load_rerun(), smoke=False)
    width = j.tolerance * (abs(j.value) if j.comparison == "rel" else 1)
    assert passes(j.value, j) and passes(j.value + 0.99 * width, j)
    assert not passes(j.value + 1.01 * width, j) and not passes(j.value - 1.01 * width, j)


def test_rerun_bands_cover_the_authors_own_rerun(tmp_path):
    """The telemetry rerun of yat_b (same seed and configuration) passes the rerun bands."""
    import numpy as np

    from attngeom import fetch, stats

    root = fetch.fetch_bundles(fetch.TELEMETRY_BUNDLES)
    with np.load(root / "kgl_blog-yatattn-b-telem" / "attn_yat_b_s0.npz") as z:
        maps = {k: z[k] for k in z.files if k.startswith("step")}
    measured = {
        "occupancy.yat_b.final": stats.occupancy(maps["step11999"], False).mean() * 128,
        "occupancy.yat_b.step0": stats.occupancy(maps["step0"], False).mean() * 128,
        "entropy.yat_b": stats.norm_entropy(maps["step11999"], False).mean(),
    }
    bands, entries = expected.load_rerun(), {e["id"]: e for e in expected.load_claims()}
    for cid, value in measured.items():
        j = expected.judgement_for(entries[cid], "rerun", bands, smoke=False)
        assert passes(float(value), j), (cid, value)
        assert not passes(float(value), expected.judgement_for(entries[cid], "published", bands, False)) or cid.endswith("step0")
