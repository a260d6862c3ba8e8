import json
from pathlib import Path

import numpy as np
import pytest

from attngeom import claims, companion, expected, fetch, judge, results
from attngeom.errors import InputError


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
    from attngeom import bundles, report

    models = bundles.load_models(published_root, ("softmax", "yat_b"))
    q = results.quality_results(models, runs_json)
    soft, yat = (models[v].run["best_val"] for v in ("softmax", "yat_b"))
    assert q["bundle_gap_to_softmax"] == {"yat_b": pytest.approx(abs(yat - soft) / min(yat, soft))}
    lines = report.quality_lines(q)
    assert "runs.json" in lines[0] and lines[1].startswith("- seed-0 bundle gap") and "2.23%" in lines[1]
