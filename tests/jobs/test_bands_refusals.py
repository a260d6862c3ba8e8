"""`bands --final` reads only the report it is for and writes only what its readers accept: the published
bundles' report, values their statistics can take, a rerun.json the schema allows, and nothing beside it."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from helpers.reports import refused

from attngeom import cli


@pytest.fixture(scope="module")
def published_report(tmp_path_factory, published_root) -> dict:
    """report.json of the default job on the published bundles (read only)."""
    out = tmp_path_factory.mktemp("published") / "report"
    assert cli.main(["--bundles", str(published_root), "--out", str(out)]) == 1  # the two far-field claims
    return json.loads((out / "report.json").read_text())


def written(tmp_path: Path, doc: dict) -> Path:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(doc))
    return path


def test_the_report_of_other_bundles_is_refused(published_report, tmp_path, capsys):
    doc = json.loads(json.dumps(published_report))
    doc["evidence"]["kind"] = "paper rerun"
    refused(capsys, ["bands", "--final", str(written(tmp_path, doc))], "a report of paper rerun; --final reads")


@pytest.mark.parametrize("value", [-5, -1e308])
def test_a_value_its_statistic_cannot_take_is_refused(published_report, tmp_path, capsys, value):
    doc = json.loads(json.dumps(published_report))
    doc["trajectories"]["claims"]["occupancy.yat_b.final"]["values"][0]["value"] = value
    refused(capsys, ["bands", "--final", str(written(tmp_path, doc))], f"{value!r} is no value of")
    doc = json.loads(json.dumps(published_report))
    doc["trajectories"]["claims"]["occupancy.yat_b.final"]["judged"] = value  # the published bundles' own value
    refused(capsys, ["bands", "--final", str(written(tmp_path, doc))], f"occupancy.yat_b.final: {value!r} is no value")


def test_values_too_far_apart_for_a_band_are_one_error_line_without_a_warning(published_report, tmp_path, capsys):
    doc = json.loads(json.dumps(published_report))
    claim = doc["trajectories"]["claims"]["occupancy.yat_b.final"]
    claim["values"] = [{"trajectory": f"t{i}", "value": v} for i, v in enumerate([1e308, 50.0, 51.0, 52.0])]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's overflow warning would end the command otherwise
        refused(capsys, ["bands", "--final", str(written(tmp_path, doc))], "too far apart to derive a band from")


def test_a_rerun_json_the_schema_refuses_is_never_written(published_report, tmp_path, capsys):
    doc = json.loads(json.dumps(published_report))
    values = [{"trajectory": f"t{i}", "value": 0.12} for i in range(70)]
    doc["trajectories"]["claims"]["scale.yat_b.0.5x"]["values"] = values
    out = tmp_path / "rerun.json"
    assert cli.main(["bands", "--final", str(written(tmp_path, doc)), "--write", str(out)]) == 2
    assert "a list of 71 items (0 to 64)" in capsys.readouterr().err and not out.exists()


@pytest.mark.parametrize(
    "beside", [["s.json"], ["--judge", "fail.json"], ["--step", "600"]], ids=["summary", "judge", "step"]
)
def test_nothing_is_given_beside_final(published_report, tmp_path, capsys, beside):
    report = written(tmp_path, published_report)
    flag = {"s.json": "SUMMARY"}.get(beside[0], beside[0])
    refused(capsys, ["bands", "--final", str(report), *beside], f"--final: alone; {flag} belong to the bands of an")
    refused(capsys, ["bands", "--final", str(report), "s.json", "--step", "600"], "alone; SUMMARY, --step belong")


def test_the_published_report_itself_is_read(published_report, tmp_path, capsys):
    out = tmp_path / "rerun.json"
    assert cli.main(["bands", "--final", str(written(tmp_path, published_report)), "--write", str(out)]) in (0, 1)
    assert json.loads(out.read_text())["claims"]["entropy.yat_b"]["measured"][0]["trajectory"] == (
        "the published bundles"
    )
