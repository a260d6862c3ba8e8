import inspect
import re
from pathlib import Path

import pytest
from helpers import REPO

from attngeom.base.errors import InputError
from attngeom.judgement import claims, expected

SEEDS = REPO.parent / "shared" / "seeds"


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
    assert not any(e["tier"] == "mathematics" for e in expected.load_claims() if e["id"] in bands)


def test_a_band_for_a_claim_of_mathematics_is_refused(tmp_path):
    """A claim of mathematics does not depend on the run: the default verify judges it, no rerun does."""
    folder = _folder(tmp_path, [_claim(tier="mathematics", kind="mathematics")], claims={"c1": {"reason": "r"}})
    message = "band for c1, a claim of mathematics, which no rerun judges"
    with pytest.raises(InputError, match=_exactly(folder / "rerun.json", message)):
        expected.load_rerun(folder)


def test_step_statistics_are_the_published_maps_and_their_bands_cover_the_authors_reruns():
    """rerun.json's per-step values are the published maps' statistics; the author's reruns fall inside the bands."""
    import numpy as np

    from attngeom.base import fetch
    from attngeom.base.variants import strict_mask
    from attngeom.measures import stats

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


def _claim(cid: str = "c1", **fields) -> dict:
    base = {
        "id": cid,
        "claim": "a claim",
        "quote": "a quote",
        "source": "a post",
        "function": "keys_total",
        "args": {"model": "softmax"},
        "value": 3072,
        "unit": "keys",
        "comparison": "exact",
        "tolerance": None,
        "reason": "a setup fact",
        "tier": "published bundles",
        "kind": "setup",
    }
    return {**base, **fields}


def _folder(tmp_path: Path, entries: list[dict] | None = None, **rerun) -> Path:
    """An expected folder of its own: claims.json with `entries` (one sound claim by default), rerun.json with `rerun`."""
    import json

    folder = tmp_path / "expected"
    folder.mkdir(exist_ok=True)
    (folder / "claims.json").write_text(json.dumps({"claims": [_claim()] if entries is None else entries}))
    (folder / "rerun.json").write_text(json.dumps(rerun))
    return folder


def _exactly(path: Path, message: str) -> str:
    """The pattern of exactly one error line: the file, then `message`."""
    return f"^{re.escape(f'{path}: {message}')}$"


@pytest.mark.parametrize(
    "entry, message",
    [
        (_claim(comparison="near"), "claim c1 has unknown comparison 'near'"),
        (_claim(comparison="abs"), "claim c1 compares with abs but has no numeric tolerance"),
        (_claim(comparison="rel"), "claim c1 compares with rel but has no numeric tolerance"),
        (_claim(function="guess"), "claim c1 names unknown function guess"),
        (
            _claim(kind="a guess"),
            "claim c1 has unknown kind 'a guess' (one of theorem, setup, statistic, comparison, mathematics)",
        ),
        (
            _claim(kind="mathematics"),
            "claim c1 is of kind mathematics in tier published bundles: mathematics is both or neither",
        ),
        ({k: v for k, v in _claim().items() if k not in ("unit", "kind")}, "claim c1 lacks unit, kind"),
        ({k: v for k, v in _claim().items() if k != "id"}, "claim ? lacks id"),
        (_claim(tolerance=-1), "claims[0].tolerance: -1 is outside [0, inf]"),
    ],
)
def test_a_bad_claim_is_one_error_naming_the_file_the_claim_and_the_fault(tmp_path, entry, message):
    folder = _folder(tmp_path, [entry])
    with pytest.raises(InputError, match=_exactly(folder / "claims.json", message)):
        expected.load_claims(folder)


def test_a_claim_id_twice_is_refused(tmp_path):
    folder = _folder(tmp_path, [_claim("c1"), _claim("c2"), _claim("c1")])
    with pytest.raises(InputError, match=_exactly(folder / "claims.json", "claim id c1 appears twice")):
        expected.load_claims(folder)


def test_claims_without_a_tolerance_are_sound_where_the_comparison_needs_none(tmp_path):
    entries = [_claim(f"c.{c}", comparison=c) for c in ("exact", "le", "lt", "ge", "gt")]
    entries += [_claim("c.abs", comparison="abs", tolerance=0), _claim("c.rel", comparison="rel", tolerance=0.5)]
    assert [e["id"] for e in expected.load_claims(_folder(tmp_path, entries))] == [e["id"] for e in entries]


def test_files_without_their_tables_hold_no_claims_bands_or_steps(tmp_path):
    import json

    folder = _folder(tmp_path)
    (folder / "claims.json").write_text(json.dumps({}))
    assert expected.load_claims(folder) == []
    assert expected.load_rerun(folder) == {}
    assert expected.load_steps(folder) == {}


@pytest.mark.parametrize(
    "rerun, message",
    [
        ({"claims": {"c2": {"reason": "r"}}}, "band for unknown claim c2"),
        (
            {"claims": {"c1": {"reason": "r", "comparison": "abs"}}},
            "claim c1 compares with abs but has no numeric tolerance",
        ),
        ({"claims": {"c1": {"reason": "r", "comparison": "near"}}}, "claim c1 has unknown comparison 'near'"),
        ({"claims": {"c1": {"reason": "r", "smoke": "yes"}}}, "claims.c1.smoke: a string where true or false is due"),
    ],
)
def test_a_bad_band_is_one_error_naming_the_file_the_claim_and_the_fault(tmp_path, rerun, message):
    folder = _folder(tmp_path, **rerun)
    with pytest.raises(InputError, match=_exactly(folder / "rerun.json", message)):
        expected.load_rerun(folder)


def test_a_band_is_judged_with_its_claim_and_the_claims_given_are_used(tmp_path):
    folder = _folder(tmp_path, claims={"c1": {"reason": "r", "comparison": "abs", "tolerance": 2}})
    assert expected.load_rerun(folder) == {"c1": {"reason": "r", "comparison": "abs", "tolerance": 2}}
    (folder / "claims.json").unlink()  # the claims given are read, not the file
    given = [_claim("c1", comparison="abs", tolerance=1)]
    assert expected.load_rerun(folder, claims=given) == {"c1": {"reason": "r", "comparison": "abs", "tolerance": 2}}
    band = {"c1": {"reason": "r", "tolerance": None}}  # the claim's own tolerance is taken away: refused
    (folder / "rerun.json").write_text(__import__("json").dumps({"claims": band}))
    with pytest.raises(InputError, match="claim c1 compares with abs but has no numeric tolerance"):
        expected.load_rerun(folder, claims=given)


def _step_band(statistic: str = "distinct_winners", **models) -> dict:
    return {
        "statistic": statistic,
        "label": "l",
        "unit": "u",
        "models": models or {"softmax": {"published": 65.0, "tolerance": 2.0, "reason": "r"}},
    }


def test_steps_are_read_by_their_number(tmp_path):
    folder = _folder(
        tmp_path, steps={"1200": {"occupancy": _step_band()}, "6000": {"entropy": _step_band("mean_norm_entropy")}}
    )
    steps = expected.load_steps(folder)
    assert steps == {1200: {"occupancy": _step_band()}, 6000: {"entropy": _step_band("mean_norm_entropy")}}


@pytest.mark.parametrize(
    "steps, message",
    [
        ({"first": {"occupancy": _step_band()}}, "steps.first.occupancy names an unknown step or statistic"),
        ({"1200": {"occupancy": _step_band("winners")}}, "steps.1200.occupancy names an unknown step or statistic"),
        (
            {"1200": {"occupancy": {"statistic": "distinct_winners"}}},
            "steps.1200.occupancy: missing key(s) label, unit, models",
        ),
    ],
)
def test_a_bad_step_band_is_one_error_naming_the_file_and_the_band(tmp_path, steps, message):
    folder = _folder(tmp_path, steps=steps)
    with pytest.raises(InputError, match=_exactly(folder / "rerun.json", message)):
        expected.load_steps(folder)


@pytest.mark.parametrize("table", ["STEP_STATISTICS", "STEP_CLAIMS"])
def test_a_step_statistic_needs_both_its_measure_and_its_claim_function(tmp_path, monkeypatch, table):
    """A band's statistic must be measured (statistics.STEP_STATISTICS) and judged (claims.STEP_CLAIMS)."""
    monkeypatch.setitem(getattr(expected, table), "winners", None)
    folder = _folder(tmp_path, steps={"1200": {"occupancy": _step_band("winners")}})
    with pytest.raises(InputError, match="steps.1200.occupancy names an unknown step or statistic"):
        expected.load_steps(folder)


def test_the_sha256_of_each_expected_file(tmp_path):
    import hashlib

    folder = _folder(tmp_path)
    (folder / "notes.txt").write_text("not a values file")
    assert expected.sha256_of(folder) == {
        name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in ("claims.json", "rerun.json")
    }
    assert set(expected.sha256_of()) == {"claims.json", "rerun.json"}


def _bands(a: tuple[float, float], b: tuple[float, float], separates=(("a", "b"),)) -> dict:
    models = {"a": {"published": a[0], "tolerance": a[1]}, "b": {"published": b[0], "tolerance": b[1]}}
    return {"models": models, "separates": [list(p) for p in separates]}


@pytest.mark.parametrize(
    "a, b, overlap",
    [
        ((1.0, 0.5), (2.0, 0.5), True),  # [0.5, 1.5] and [1.5, 2.5] touch: a value of 1.5 is inside both
        ((2.0, 0.5), (1.0, 0.5), True),
        ((1.0, 0.5), (2.0, 0.25), False),  # [0.5, 1.5] and [1.75, 2.25]
        ((2.0, 0.25), (1.0, 0.5), False),
        ((1.0, 0.25), (2.0, 0.5), False),  # [0.75, 1.25] and [1.5, 2.5]
        ((2.0, 0.5), (1.0, 0.25), False),
        ((2.0, 0.25), (2.0, 1.0), True),  # one inside the other
        ((2.0, 1.0), (2.0, 0.25), True),
        ((1.0, 0.0), (1.0, 0.0), True),  # the same single value
    ],
)
def test_overlaps_of_the_bands_the_posts_compare(a, b, overlap):
    assert expected.overlaps(_bands(a, b)) == ([("a", "b")] if overlap else [])


def test_overlaps_skip_pairs_with_a_model_without_a_band_and_bands_that_separate_nothing():
    assert expected.overlaps(_bands((1.0, 1.0), (1.0, 1.0), separates=(("a", "c"), ("c", "b"), ("b", "a")))) == [
        ("b", "a")
    ]
    assert expected.overlaps({"models": _bands((1.0, 1.0), (1.0, 1.0))["models"]}) == []


def test_the_shipped_step_bands_separate_the_models_the_posts_compare():
    steps = expected.load_steps()
    assert all(expected.overlaps(band) == [] for bands in steps.values() for band in bands.values())
