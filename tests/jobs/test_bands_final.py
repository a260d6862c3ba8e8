"""`bands --final`: each final-step band of rerun.json beside every full-length trajectory measured
(report.json's `trajectories`), re-derived once there are enough of them, and the command's files read
through their schemas."""

from __future__ import annotations

import json

from helpers.expected import current_rerun

from attngeom import cli
from attngeom.base import json_rules, schema
from attngeom.jobs import bands, ensemble
from attngeom.judgement import expected, judge


def _final_section(values: list[float], judged: float = 53.9583) -> dict:
    """report.json's `trajectories` with occupancy.yat_b.final (rerun band 54 ± 5) measured on `values`."""
    one = {"kind": "statistic", "model": "yat_b", "step": 12000, "quoted": 54, "judged": judged}
    return {
        "claims": {
            "occupancy.yat_b.final": one
            | {"values": [{"trajectory": f"t{i}", "value": v} for i, v in enumerate(values)]}
        }
    }


def test_a_final_band_lists_each_full_length_trajectory_and_whether_it_covers_it():
    doc, lines = bands.final_measured(current_rerun(), _final_section([52.9, 59.0, 59.5][:2]), expected.load_claims())
    band = doc["claims"]["occupancy.yat_b.final"]
    assert band["measured"] == [
        {"trajectory": bands.PUBLISHED_BUNDLES, "value": 53.9583, "covered": True},
        {"trajectory": "t0", "value": 52.9, "covered": True},
        {"trajectory": "t1", "value": 59.0, "covered": True},  # 54 + 5: the band's edge, binary-exact, inside
    ]
    assert band["tolerance"] == current_rerun()["claims"]["occupancy.yat_b.final"]["tolerance"] == 5.0  # 3 of 4: kept
    assert "kept: 3 of the 4" in lines["occupancy.yat_b.final"]
    assert band["reason"] == (  # the reason in force, then every trajectory checked: a second --final rewrites the end
        current_rerun()["claims"]["occupancy.yat_b.final"]["reason"].split(bands.CHECKED)[0]
        + bands.CHECKED
        + "the published bundles 53.9583 inside; t0 52.9 inside; t1 59 inside"
    )
    again = bands.final_measured(doc, _final_section([52.9]), expected.load_claims())[0]
    assert (
        again["claims"]["occupancy.yat_b.final"]["reason"].endswith(
            f"{bands.CHECKED}the published bundles 53.9583 inside; t0 52.9 inside"
        )
        and again["claims"]["occupancy.yat_b.final"]["reason"].count(bands.CHECKED) == 1
    )
    assert "measured" not in doc["claims"]["setup.layers"]  # not a statistic of the final step
    outside = bands.final_measured(current_rerun(), _final_section([59.5]), expected.load_claims())[0]
    assert outside["claims"]["occupancy.yat_b.final"]["measured"][1]["covered"] is False


def test_each_final_band_measured_is_one_line_and_the_others_are_left_as_they_are():
    current, section = current_rerun(), _final_section([52.9, 59.5])
    section["claims"]["entropy.yat_b"] = {"kind": "statistic", "model": "yat_b", "step": 12000, "judged": None}
    section["claims"]["entropy.yat_b"]["values"] = []
    section["claims"]["entropy.softmax"] = {"kind": "statistic", "step": 1200, "judged": 0.49, "values": []}
    section["claims"]["occupancy.softmax.final"] = {"kind": "theorem", "step": 12000, "judged": 72, "values": []}
    doc, lines = bands.final_measured(current, section, expected.load_claims())
    assert current == current_rerun()  # the document read is not changed: the new one is a copy
    kept = "kept: {} of the 4 full-length trajectories a band is derived from"
    assert list(lines.values()) == [  # in the order of rerun.json
        f"{'entropy.yat_b':28} abs 0.03: none measured ({kept.format(0)})",
        f"{'occupancy.yat_b.final':28} abs 5.0: the published bundles 53.9583 inside; t0 52.9 inside; "
        f"t1 59.5 OUTSIDE ({kept.format(3)})",
    ]
    assert doc["claims"]["entropy.yat_b"]["measured"] == []
    assert doc["claims"]["entropy.yat_b"]["reason"].endswith(f"{bands.CHECKED}none yet")
    for other in ("entropy.softmax", "occupancy.softmax.final"):  # another step; not a statistic
        assert doc["claims"][other] == current["claims"][other]
    current["claims"]["occupancy.yat_b.final"]["truncated"] = True  # a band of truncated runs: not a final one
    doc, lines = bands.final_measured(current, _final_section([52.9]), expected.load_claims())
    assert lines == {} and doc == current
    current["claims"]["occupancy.yat_b.final"] = {"reason": "the published run's only", "judged": False}
    doc, lines = bands.final_measured(current, _final_section([52.9]), expected.load_claims())
    assert lines == {} and doc == current  # a statistic not judged on reruns has no final band to check


def test_four_full_length_trajectories_re_derive_a_final_band_that_covers_every_one():
    values = [53.5, 54.4, 53.1]  # and the published bundles' 53.9583: four
    doc, lines = bands.final_measured(current_rerun(), _final_section(values), expected.load_claims())
    band = doc["claims"]["occupancy.yat_b.final"]
    assert lines["occupancy.yat_b.final"].endswith(" inside (re-derived)"), lines
    how = judge.Judgement(54, "abs", band["tolerance"], band["reason"])
    assert band["tolerance"] == bands.tolerance(
        [53.9583, *values], 54, ensemble.spread([53.9583, *values], None)["std"]
    )
    assert all(m["covered"] and judge.passes(m["value"], how) for m in band["measured"]) and band["tolerance"] < 5.0
    assert "the spread of 4 full-length trajectories" in band["reason"]
    assert band["reason"].endswith(
        f"{bands.CHECKED}the published bundles 53.9583 inside; t0 53.5 inside; t1 54.4 inside; t2 53.1 inside"
    )


def test_full_length_trajectories_that_do_not_part_keep_their_band_and_say_so():
    published = 53.9583
    for values in ([published], [published * (1 + bands.U16 / 2)] * 3):  # two, then four, within float16's rounding
        doc, lines = bands.final_measured(current_rerun(), _final_section(values, published), expected.load_claims())
        band, n = doc["claims"]["occupancy.yat_b.final"], len(values) + 1
        assert band["tolerance"] == current_rerun()["claims"]["occupancy.yat_b.final"]["tolerance"] == 5.0
        assert f"(kept: its {n} full-length trajectories do not part, {bands.APART})" in lines["occupancy.yat_b.final"]
        assert band["reason"].endswith(f" inside (they do not part, {bands.APART}; the tolerance is kept)")
        again = bands.final_measured(doc, _final_section(values, published), expected.load_claims())[0]
        assert again["claims"]["occupancy.yat_b.final"]["reason"] == band["reason"]  # rewritten, not appended to
    apart = [published * (1 + 2 * bands.U16)] * 3  # a hair beyond the rounding: they part, and the band is derived
    doc, lines = bands.final_measured(current_rerun(), _final_section(apart, published), expected.load_claims())
    assert (
        lines["occupancy.yat_b.final"].endswith("(re-derived)")
        and doc["claims"]["occupancy.yat_b.final"]["tolerance"] < 1
    )
    assert "do not part" not in doc["claims"]["occupancy.yat_b.final"]["reason"]


def _report_base() -> dict:
    """What a report.json has besides its `trajectories`."""
    base = {"summary": {"passed": 1, "failed": 0, "skipped": 0, "verdict": "PASS"}, "tier": "published", "claims": []}
    evidence = {"kind": "published bundles", "why": "every file pinned", "scope": "all", "stopped_after": None}
    return base | {"provenance": {"inputs": {}}, "evidence": evidence | {"line": "evidence: published bundles"}}


def test_bands_final_exits_1_when_a_trajectory_lies_outside_and_2_on_a_report_without_the_section(tmp_path, capsys):
    report_json, base = tmp_path / "report.json", _report_base()
    section = _final_section([52.9])
    section["claims"]["entropy.yat_b"] = {"kind": "statistic", "model": "yat_b", "step": 12000, "quoted": 0.72}
    section["claims"]["entropy.yat_b"] |= {"judged": 0.721, "values": []}
    report_json.write_text(json.dumps(base | {"trajectories": {"sources": [], "trajectories": []} | section}))
    out = tmp_path / "rerun.json"
    capsys.readouterr()
    assert cli.main(["bands", "--final", str(report_json), "--write", str(out)]) == 0
    kept = "(kept: {} of the 4 full-length trajectories a band is derived from)"
    assert capsys.readouterr().out.splitlines() == [
        f"{'entropy.yat_b':28} abs 0.03: the published bundles 0.721 inside {kept.format(1)}",
        f"{'occupancy.yat_b.final':28} abs 5.0: the published bundles 53.9583 inside; t0 52.9 inside {kept.format(2)}",
        f"written: {out}",
    ]
    written = json_rules.read_json(out, schema.RERUN_JSON)
    assert written["claims"]["occupancy.yat_b.final"]["measured"][1] == {
        "trajectory": "t0",
        "value": 52.9,
        "covered": True,
    }
    report_json.write_text(
        json.dumps(base | {"trajectories": {"sources": [], "trajectories": []} | _final_section([60.5])})
    )
    assert cli.main(["bands", "--final", str(report_json)]) == 1
    report_json.write_text(json.dumps(base))
    capsys.readouterr()
    assert cli.main(["bands", "--final", str(report_json)]) == 2
    assert (
        capsys.readouterr().err
        == f"error: {report_json}: no `trajectories` section (a report of this version's verify)\n"
    )
    assert cli.main(["bands"]) == 2
    assert capsys.readouterr().err == "error: bands: give a summary file holding ensembles, or --final REPORT_JSON\n"


def test_bands_reads_each_file_through_its_schema(tmp_path, monkeypatch, capsys):
    """A report, a summary to judge or a rerun.json that is not one of its kind is one error line and 2,
    though the parts the command reads would do."""
    section = {"trajectories": {"sources": [], "trajectories": []} | _final_section([52.9])}
    (no_summary := tmp_path / "report.json").write_text(json.dumps(section))  # a report has its verdict
    (runless := tmp_path / "runs.json").write_text(json.dumps({"runs": {"x": {}}}))  # a run has its statistics
    source = str(expected.REPO / "expected" / "measured" / "ensemble-step1200.json")
    for command in (["--final", str(no_summary)], [source, "--judge", str(runless)]):
        capsys.readouterr()
        assert cli.main(["bands", *command]) == 2, command
        assert capsys.readouterr().err.startswith(f"error: {tmp_path}/")
    copied = tmp_path / "expected"
    copied.mkdir()
    for path in expected.EXPECTED_DIR.glob("*.json"):
        (copied / path.name).write_bytes(path.read_bytes())
    rerun_doc = current_rerun()
    rerun_doc["claims"]["setup.layers"]["note"] = "a field no band has"
    (copied / "rerun.json").write_text(json.dumps(rerun_doc))
    monkeypatch.setattr(expected, "EXPECTED_DIR", copied)
    for command in (["--final", str(tmp_path / "good.json")], [source]):
        (tmp_path / "good.json").write_text(json.dumps(json.loads(no_summary.read_text()) | _report_base()))
        capsys.readouterr()
        assert cli.main(["bands", *command]) == 2, command
        assert capsys.readouterr().err.startswith(f"error: {copied / 'rerun.json'}: "), command


def test_bands_final_exits_on_what_its_report_measures_not_on_a_band_it_leaves_as_it_was(tmp_path, monkeypatch, capsys):
    """A band the report does not measure keeps its `measured`, an OUTSIDE included; the exit status is
    about the trajectories this report measured (all inside here), so it is 0."""
    import shutil

    folder = tmp_path / "expected"
    shutil.copytree(expected.EXPECTED_DIR, folder, ignore=shutil.ignore_patterns("measured"))
    doc = json.loads((folder / "rerun.json").read_text())
    doc["claims"]["sweep.yat_b.max"]["measured"] = [{"trajectory": "far", "value": 0.01, "covered": False}]
    (folder / "rerun.json").write_text(json.dumps(doc))
    monkeypatch.setattr(expected, "EXPECTED_DIR", folder)
    report_json, out = tmp_path / "report.json", tmp_path / "rerun.json"
    report_json.write_text(
        json.dumps(_report_base() | {"trajectories": {"sources": [], "trajectories": []} | _final_section([52.9])})
    )
    assert cli.main(["bands", "--final", str(report_json), "--write", str(out)]) == 0
    written = json_rules.read_json(out, schema.RERUN_JSON)["claims"]
    assert written["sweep.yat_b.max"]["measured"] == doc["claims"]["sweep.yat_b.max"]["measured"]
    assert "OUTSIDE" not in capsys.readouterr().out
    report_json.write_text(
        json.dumps(_report_base() | {"trajectories": {"sources": [], "trajectories": []} | _final_section([60.5])})
    )
    assert cli.main(["bands", "--final", str(report_json)]) == 1
