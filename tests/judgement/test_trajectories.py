"""Each trajectory statistic beside every measured trajectory at its step, and each comparison on their pairings."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from attngeom.base import json_rules, schema_results
from attngeom.base.errors import InputError
from attngeom.judgement import expected, trajectories
from attngeom.judgement.trajectories import Trajectory

CLAIMS = {e["id"]: e for e in expected.load_claims()}
RERUN = expected.load_rerun()


def _stopped(name: str, variant: str, winners: float, entropy: float) -> Trajectory:
    """A trajectory stopped after step 1200, as a summary keeps it."""
    return Trajectory(
        name,
        variant,
        12000,
        {"distinct_winners": {"0": 30.0, "1200": winners}, "mean_norm_entropy": {"0": 0.9, "1200": entropy}},
    )


def _full(name: str, variant: str, **final: float) -> Trajectory:
    """A trajectory that ran the whole schedule: its maps at each step and its final model's statistics."""
    recorded = {"distinct_winners": {"0": 31.0, "1200": 50.0, "11999": 53.0}, "mean_norm_entropy": {"11999": 0.73}}
    return Trajectory(name, variant, 12000, recorded | {"final": final})


def test_a_trajectory_gives_each_statistic_at_its_checkpoint_only():
    stopped = _stopped("s", "yat_b", 48.0, 0.76)
    assert stopped.values_at(0)["distinct_winners_first"] == 30.0
    assert stopped.values_at(1200) == {"distinct_winners_last": 48.0, "mean_norm_entropy_final": 0.76}
    assert stopped.values_at(12000) == {}  # stopped before the end: nothing of the final model
    full = _full("f", "yat_b", **{"scale_changed@0.5": 0.13, "distinct_winners_first": 31.0, "retired_statistic": 1.0})
    at_end = full.values_at(12000)
    assert at_end["distinct_winners_last"] == 53.0 and at_end["scale_changed@0.5"] == 0.13
    assert "distinct_winners_first" not in at_end and full.values_at(0)["distinct_winners_first"] == 31.0
    assert "retired_statistic" not in at_end  # an older summary's statistic that no claim quotes


def test_a_statistic_gives_its_trajectories_spread_and_where_the_quote_stands():
    entry = CLAIMS["occupancy.yat_b.final"]  # 54 ± 0.5 at step 12,000
    runs = [_full("a", "yat_b"), _full("b", "yat_b"), _stopped("c", "yat_b", 55.0, 0.7), _full("d", "softmax")]
    runs[1] = Trajectory("b", "yat_b", 12000, {"distinct_winners": {"11999": 54.2}})
    one = trajectories.statistic_spread(entry, 53.9583, runs)
    assert one["step"] == 12000 and [v["trajectory"] for v in one["values"]] == ["a", "b"]  # not c (stopped), not d
    s = one["spread"]
    assert (s["min"], s["max"], s["published"]) == (53.0, 54.2, 54) and s["published_inside"]
    assert one["within_quote"] == 1 and one["judged"] == 53.9583  # 54.2 is within 0.5 of 54, 53 is not


def test_each_value_is_set_beside_the_rerun_band_it_would_be_judged_with():
    """occupancy.yat_b.final's rerun band is 54 ± 5 (expected/rerun.json): 49 and 59 are its edges, binary-exact."""
    entry = CLAIMS["occupancy.yat_b.final"]
    band = trajectories.rerun_band(entry, RERUN)
    assert (band.value, band.comparison, band.tolerance) == (54, "abs", 5.0)
    runs = [
        Trajectory(n, "yat_b", 12000, {"distinct_winners": {"11999": v}}) for n, v in zip("abcd", (49, 59, 48.5, 59.5))
    ]
    one = trajectories.statistic_spread(entry, 53.9583, runs, band)
    assert [v["in_rerun_band"] for v in one["values"]] == [True, True, False, False]
    assert one["rerun_band"] == {
        "value": 54,
        "comparison": "abs",
        "tolerance": 5.0,
        "interval": [49.0, 59.0],  # what the strips draw: exactly the values that pass
        "covers": 2,
        "judged_inside": True,
    }
    assert one["quote_interval"] == [53.5, 54.5]
    bound = {**entry, "comparison": "le", "tolerance": None}
    assert trajectories.statistic_spread(bound, 53.9583, runs)["quote_interval"] == [None, 54]  # unbounded below
    assert not trajectories.statistic_spread(entry, 48.0, runs, band)["rerun_band"]["judged_inside"]
    assert "rerun_band" not in trajectories.statistic_spread(entry, 53.9583, runs)  # no band given: none shown
    assert trajectories.rerun_band(CLAIMS["hull.yat_b.inside"], {}) is None  # a claim without a band
    assert "rerun_band" in trajectories.section([entry], [], runs, ["here"], RERUN)["claims"][entry["id"]]


def test_none_measured_at_the_step_is_said_so():
    one = trajectories.statistic_spread(CLAIMS["scale.yat_b.0.5x"], 0.1207, [_stopped("s", "yat_b", 48.0, 0.76)])
    assert one["values"] == [] and "spread" not in one
    assert one["none"] == "no trajectory of yat_b measured at step 12,000"
    quality = trajectories.statistic_spread(CLAIMS["quality.within_percent"], 0.011, [_full("f", "yat_b")])
    assert quality["step"] is None and quality["none"].startswith("not a statistic of a model's maps")


def test_a_comparison_is_judged_on_every_pairing_and_one_trajectory_can_break_it():
    entry = CLAIMS["inversion"]  # the sharper-rowed softmax crowns more distinct winners than yat_b
    runs = [
        _stopped("s0", "softmax", 65.2, 0.557),
        _stopped("y0", "yat_b", 47.5, 0.76),
        _stopped("y1", "yat_b", 51.1, 0.78),
    ]
    at = trajectories.comparison_at(entry, 1200, runs)
    assert (at["pairings"], at["held"]) == (2, 2)
    assert at["ranges"]["yat_b"]["distinct_winners_last"] | {"std": 0} == {
        "n": 2,
        "mean": pytest.approx(49.3),
        "std": 0,
        "min": 47.5,
        "max": 51.1,
    }
    broken = trajectories.comparison_at(entry, 1200, [*runs, _stopped("y2", "yat_b", 66.0, 0.75)])
    assert (broken["pairings"], broken["held"]) == (3, 2)
    whole = trajectories.comparison_spread(entry, True, runs)
    assert [r["step"] for r in whole["steps"]] == [12000, 1200]
    assert whole["steps"][0]["pairings"] == 0 and whole["steps"][0]["measured"] == {"softmax": 0, "yat_b": 0}


def test_a_comparison_of_a_statistic_no_trajectory_records_is_not_measured():
    runs = [_stopped("s0", "softmax", 65.2, 0.557), _stopped("y0", "yat_b", 47.5, 0.76)]
    census = trajectories.comparison_spread(CLAIMS["census.kernel_fewer"], True, runs)
    assert [r["step"] for r in census["steps"]] == [12000]  # step 1200 has no census head: no pairing shown
    full = [_full("s", "softmax", census_distinct_final=30), _full("y", "yat_b", census_distinct_final=40)]
    assert trajectories.comparison_at(CLAIMS["census.kernel_fewer"], 12000, full) | {"ranges": {}} == {
        "step": 12000,
        "pairings": 1,
        "held": 0,
        "measured": {"yat_b": 1, "softmax": 1},
        "ranges": {},
    }


def test_the_measured_files_are_read_and_a_new_one_with_no_code_change(tmp_path: Path):
    folder = tmp_path / "measured"
    shutil.copytree(trajectories.MEASURED_DIR, folder, ignore=shutil.ignore_patterns("*step12000*"))
    measured, files = trajectories.read_measured(folder)
    assert [p.name for p in files] == ["ensemble-step1200.json", "paper-step1200.json"]  # fidelity records passed over
    inversion = trajectories.comparison_spread(CLAIMS["inversion"], True, measured)
    at1200 = inversion["steps"][1]
    assert at1200["step"] == 1200 and at1200["held"] == at1200["pairings"] == 3 * 5
    assert at1200["ranges"]["softmax"]["distinct_winners_last"]["max"] == 65.2083
    assert at1200["ranges"]["yat_b"]["distinct_winners_last"]["max"] == 51.0833
    doc = json.loads((folder / "paper-step1200.json").read_text())
    run = doc["runs"]["yat_b"]
    run.update(stopped_after=None)
    run["statistics"]["yat_b_s0"]["run"]["distinct_winners"]["11999"] = 52.5
    run["statistics"]["yat_b_s0"]["run"]["final"] = {"scale_changed@0.5": 0.125}
    (folder / "paper-step12000.json").write_text(json.dumps({"what": "a full rerun", "runs": {"yat_b": run}}))
    measured, _ = trajectories.read_measured(folder)
    section = trajectories.section(list(CLAIMS.values()), [], measured, ["here"], RERUN)
    assert section["claims"]["scale.yat_b.0.5x"]["spread"]["members"] == [0.125]
    assert section["claims"]["occupancy.yat_b.final"]["spread"]["members"] == [52.5]
    json_rules.check(section, schema_results.TRAJECTORIES, "section")
    (folder / "paper-step12000.json").write_text(json.dumps({"runs": {"yat_b": {"preset": "paper"}}}))
    with pytest.raises(InputError, match="paper-step12000.json"):
        trajectories.read_measured(folder)


def test_the_section_schema_refuses_what_breaks_it():
    runs = [_stopped("s0", "softmax", 65.2, 0.557), _stopped("y0", "yat_b", 47.5, 0.76)]
    section = trajectories.section(list(CLAIMS.values()), [], runs, ["here"], RERUN)
    json_rules.check(section, schema_results.TRAJECTORIES, "section")
    section["claims"]["inversion"]["steps"][1]["held"] = -1
    with pytest.raises(InputError, match="held"):
        json_rules.check(section, schema_results.TRAJECTORIES, "section")
    section["claims"]["inversion"]["steps"][1]["held"] = 1
    section["claims"]["occupancy.yat_b.step0"]["spread"]["std"] = float("nan")
    with pytest.raises(InputError, match="occupancy.yat_b.step0.spread.std"):
        json_rules.check(section, schema_results.TRAJECTORIES, "section")
