import json
from pathlib import Path

import numpy as np
import pytest

from attngeom.base import fetch
from attngeom.base.errors import InputError
from attngeom.bundles import companion
from attngeom.judgement import claims, expected, judge
from attngeom.measures import results


@pytest.fixture(scope="module")
def runs_json() -> Path:
    return fetch.fetch_companion()


def quality_verdict(path: Path, source: str = fetch.COMPANION_URL) -> tuple[float, str]:
    """The quality quote's measured value and verdict, judged as the default verify judges it."""
    entry = next(e for e in expected.load_claims() if e["id"] == "quality.within_percent")
    res = {"quality": {"companion": companion.quality(path, source)}}
    measured = claims.CLAIM_FUNCTIONS[entry["function"]](res, **entry["args"])
    return measured, "PASS" if judge.passes(measured, judge.judgement_for(entry, "published", {})) else "FAIL"


def test_means_are_recomputed_from_each_seed(runs_json):
    data = json.loads(runs_json.read_text())
    q = companion.quality(runs_json, fetch.COMPANION_URL)["mechanisms"]
    for name in ("softmax", "yat"):
        best = [r["best_val"] for r in data["curves"] if r["variant"] == name]
        assert len(best) == 3 and q[name]["seeds"] == [0, 1, 2]
        assert q[name]["mean"] == pytest.approx(np.mean(best), abs=1e-15)
        assert q[name]["std"] == pytest.approx(np.std(best), abs=1e-15)
        assert q[name]["mean"] == pytest.approx(data["summary"][name]["best_val_mean"], abs=1e-12)


def test_the_quote_is_judged_on_the_companion(runs_json):
    entry = next(e for e in expected.load_claims() if e["id"] == "quality.within_percent")
    assert entry["args"]["runs_json"] == fetch.COMPANION_URL and "runs.json" in entry["reason"]
    gap, verdict = quality_verdict(runs_json)
    assert gap == pytest.approx((1.5089159533381462 - 1.4923025419314702) / 1.4923025419314702, rel=1e-9)
    assert verdict == "PASS"


def test_the_per_seed_values_decide_not_the_summary(runs_json, tmp_path):
    data = json.loads(runs_json.read_text())
    for run in data["curves"]:
        if run["variant"] == "yat":
            run["best_val"] += 0.02  # the summary still says 1.5089
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(data))
    gap, verdict = quality_verdict(path)
    assert gap > 0.02 and verdict == "FAIL"


def test_a_runs_file_other_than_the_named_one_is_refused(runs_json):
    with pytest.raises(KeyError, match="runs.json"):
        quality_verdict(runs_json, "elsewhere/runs.json")


@pytest.mark.parametrize(
    "text,match",
    [
        ("not json", "not valid JSON"),
        ('{"summary": {}}', "'curves' list"),
        ('{"curves": []}', "'curves' list"),
        ('{"curves": [3]}', "run 0 is not an object"),
        ('{"curves": [{"variant": "softmax", "best_val": 1.5}]}', "'seed'"),
        ('{"curves": [{"variant": "softmax", "seed": 0, "best_val": NaN}]}', "finite positive"),
        ('{"curves": [{"variant": "softmax", "seed": 0, "best_val": "1.5"}]}', "finite positive"),
        (
            '{"curves": [{"variant": "yat", "seed": 0, "best_val": 1.5}, {"variant": "yat", "seed": 0, "best_val": 1.6}]}',
            "appears twice",
        ),
    ],
)
def test_malformed_runs_file_is_one_input_error(tmp_path, text, match):
    path = tmp_path / "runs.json"
    path.write_text(text)
    with pytest.raises(InputError, match=match) as info:
        companion.read_runs(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_the_bundles_seed0_gap_is_kept_as_a_statistic(published_root, runs_json):
    from attngeom.bundles import layout
    from attngeom.report import markdown

    models = layout.load_models(published_root, ("softmax", "yat_b"))
    q = results.quality_results(models, runs_json)
    soft, yat = (models[v].run["best_val"] for v in ("softmax", "yat_b"))
    assert q["bundle_gap_to_softmax"] == {"yat_b": pytest.approx(abs(yat - soft) / min(yat, soft))}
    items = "\n".join(markdown.quality_lines(q)).split("\n- ")  # one item each, wrapped
    assert len(items) == 2 and "runs.json" in items[0] and items[1].startswith("seed-0 bundle gap")
    assert "2.23%" in items[1]


def write_runs(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(data))
    return path


def test_quality_states_the_summary_mean_beside_the_recomputed_one(tmp_path):
    curves = [
        {"variant": "softmax", "seed": 1, "best_val": 0.5},
        {"variant": "softmax", "seed": 0, "best_val": 1.5},
        {"variant": "yat", "seed": 0, "best_val": 2.0},
        {"variant": "kernel", "seed": 0, "best_val": 3.0},
        {"variant": "other", "seed": 0, "best_val": 4.0},
    ]
    summary = {"softmax": {"best_val_mean": 0.75}, "yat": 2, "kernel": {"best_val_mean": "3.0"}}
    q = companion.quality(write_runs(tmp_path, {"curves": curves, "summary": summary}), "here/runs.json")
    assert q["file"] == "here/runs.json"
    assert q["mechanisms"] == {
        "softmax": {"seeds": [0, 1], "best_val": [1.5, 0.5], "mean": 1.0, "std": 0.5, "summary_mean": 0.75},
        "yat": {"seeds": [0], "best_val": [2.0], "mean": 2.0, "std": 0.0, "summary_mean": None},
        "kernel": {"seeds": [0], "best_val": [3.0], "mean": 3.0, "std": 0.0, "summary_mean": None},
        "other": {"seeds": [0], "best_val": [4.0], "mean": 4.0, "std": 0.0, "summary_mean": None},
    }


@pytest.mark.parametrize("summary", [None, [1.0], "softmax"])
def test_quality_without_a_summary_object_states_none(tmp_path, summary):
    data = {"curves": [{"variant": "softmax", "seed": 0, "best_val": 1.5}], "summary": summary}
    q = companion.quality(write_runs(tmp_path, data), "runs.json")
    assert q["mechanisms"]["softmax"]["summary_mean"] is None


def test_quality_names_the_file_it_refuses(tmp_path):
    path = write_runs(tmp_path, {"curves": []})
    with pytest.raises(InputError) as info:
        companion.quality(path, "runs.json")
    assert str(info.value) == f"{path}: expected an object with a non-empty 'curves' list of runs"


@pytest.mark.parametrize(
    "data,message",
    [
        ([{"curves": []}], "expected an object with a non-empty 'curves' list of runs"),
        (
            {"curves": [{"variant": "yat", "seed": True, "best_val": 1.5}]},
            "run 0 lacks a 'variant' (text) or 'seed' (integer)",
        ),
        (
            {"curves": [{"variant": "yat", "seed": 2, "best_val": 0}]},
            "run 0 (yat seed 2) has no finite positive 'best_val'",
        ),
        (
            {"curves": [{"variant": "yat", "seed": 2, "best_val": True}]},
            "run 0 (yat seed 2) has no finite positive 'best_val'",
        ),
    ],
)
def test_runs_refused_at_the_edges(tmp_path, data, message):
    path = write_runs(tmp_path, data)
    with pytest.raises(InputError) as info:
        companion.read_runs(path)
    assert str(info.value) == f"{path}: {message}"


def test_a_loss_below_one_is_a_run(tmp_path):
    path = write_runs(tmp_path, {"curves": [{"variant": "yat", "seed": 0, "best_val": 0.5}]})
    assert companion.read_runs(path) == {"yat": {0: 0.5}}


def test_relative_gap_is_over_the_better_loss():
    assert companion.relative_gap(1.0, 1.5) == 0.5
    assert companion.relative_gap(1.5, 1.0) == 0.5
