"""Bands derived from an ensemble: they cover the published value and every member, and judge like any band."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from helpers.expected import current_rerun
from hypothesis import given
from hypothesis import strategies as st

from attngeom import cli
from attngeom.base import json_rules, schema, schema_results
from attngeom.base.errors import InputError
from attngeom.jobs import bands, ensemble
from attngeom.judgement import expected, judge
from attngeom.report import markdown, page_spread

VALUES = st.floats(-1e4, 1e4, allow_nan=False)


@given(st.floats(1e-9, 1e9))
def test_round_up_keeps_two_significant_digits_and_never_rounds_down(x):
    r = bands.round_up(x)
    assert x <= r <= x * 1.1 + 1e-12
    digits = f"{r:.6e}".split("e")[0].replace(".", "").rstrip("0")
    assert len(digits) <= 2


@given(st.lists(VALUES, min_size=2, max_size=12), VALUES)
def test_the_tolerance_covers_the_published_value_and_every_member(members, published):
    t = bands.tolerance(members, published, ensemble.spread(members, None)["std"])
    assert all(abs(v - published) <= t for v in members)


def _summary(members: dict[str, list[float]], step: int = 1200) -> dict:
    """A summary file holding one ensemble per variant, as `summary ENS --out FILE` writes it."""
    runs = {}
    for variant, values in members.items():
        spread = {"member_ids": list(range(len(values)))} | ensemble.spread(values, None)
        runs[f"ens-{variant}"] = {
            "ensemble": {
                "members": max(2, len(values)),
                "config": {"preset": "paper"},
                "statistics": {f"{variant}_s0": {"distinct_winners": {str(step): spread}}},
            },
            "members": {},
        }
    return {"what": "", "runs": runs}


def test_a_derived_band_covers_every_member_and_one_moved_outside_it_fails():
    members = [47.4, 49.1, 50.2, 52.6]
    new = bands.derive(current_rerun(), _summary({"yat_b": members}), 1200, "expected/measured/x.json")
    band = new["steps"]["1200"]["occupancy"]["models"]["yat_b"]
    published, t = band["published"], band["tolerance"]
    assert band["ensemble"]["members"] == members and "expected/measured/x.json" in band["reason"]
    how = judge.Judgement(published, "abs", t, band["reason"])
    assert all(judge.passes(v, how) for v in members)
    farthest = max(members, key=lambda v: abs(v - published))
    moved = published + (t + 0.01) * (1 if farthest > published else -1)
    assert not judge.passes(moved, how)  # the member moved just outside the band: the verdict flips
    kept = new["steps"]["1200"]["occupancy"]["models"]["softmax"]
    assert kept == current_rerun()["steps"]["1200"]["occupancy"]["models"]["softmax"]  # no ensemble: the band stays
    assert new["steps"]["1200"]["entropy"] == current_rerun()["steps"]["1200"]["entropy"]
    json_rules.check(new, schema.RERUN_JSON, "derived")


def test_an_ensemble_of_fewer_than_four_members_or_two_of_one_model_derives_nothing():
    for n in (1, 2, 3):  # the literal counts, not the constant's range: the rule says four
        assert (
            bands.derive(current_rerun(), _summary({"yat_b": [50.0 + i for i in range(n)]}), 1200, "x")
            == current_rerun()
        )
    four = bands.derive(current_rerun(), _summary({"yat_b": [50.0 + i for i in range(4)]}), 1200, "x")
    assert four["steps"]["1200"]["occupancy"]["models"]["yat_b"]["ensemble"]["members"] == [50.0, 51.0, 52.0, 53.0]
    doc = _summary({"yat_b": [1.0, 2.0]})
    doc["runs"]["again"] = copy.deepcopy(doc["runs"]["ens-yat_b"])
    with pytest.raises(Exception, match="two ensembles of yat_b"):
        bands.derive(current_rerun(), doc, 1200, "x")


@given(st.floats(1e-6, 1e6), st.floats(0, 0.999), st.floats(1.001, 1e3))
def test_trajectories_part_only_beyond_float16s_rounding_of_their_values(value, within, beyond):
    """`part`'s law: values within U16 (2**-11) of their size are the same model at the bundles' float16
    precision; a hair beyond it, or any farther, they part. Sign and order do not matter."""
    near, far = value * (1 + within * bands.U16), value * (1 + beyond * bands.U16)
    assert not bands.part([value, near, value]) and not bands.part([-near, -value])
    assert bands.part([value, far]) and bands.part([far, near, value]) and bands.part([-far, -value])
    assert not bands.part([value])
    assert not bands.part([1.0, 1.0 - bands.U16]) and bands.part(
        [1.0, 1.0 - 2 * bands.U16]
    )  # the edge, exact in binary


def test_an_ensemble_that_does_not_part_from_the_published_run_keeps_its_band_and_says_so(tmp_path, capsys):
    published = current_rerun()["steps"]["1200"]["occupancy"]["models"]["softmax"]["published"]
    alike = [published, published * (1 + bands.U16 / 2), published, published * (1 - bands.U16 / 2)]
    assert bands.derive(current_rerun(), _summary({"softmax": alike}), 1200, "x") == current_rerun()
    apart = bands.derive(current_rerun(), _summary({"softmax": [*alike[:3], published + 1]}), 1200, "x")
    assert apart["steps"]["1200"]["occupancy"]["models"]["softmax"]["ensemble"]["members"][-1] == published + 1
    summary = tmp_path / "ensemble.json"
    summary.write_text(json.dumps(_summary({"softmax": alike[:2], "yat_b": [50.0, 50.0, 50.0, 51.0]})))
    assert cli.main(["bands", str(summary)]) == 0
    printed = capsys.readouterr().out
    assert (
        f"softmax  published {published:<10g} ± 2 -> ± 2 (kept (its 2 members and the published run do not part, "
        in printed
    )
    assert "yat_b    published 51.0417    ± 5.3 -> ± 1.6 (ensemble)" in printed


def test_overlaps_name_only_the_pairs_the_posts_compare():
    band = {
        "separates": [["softmax", "yat_b"]],
        "models": {
            "softmax": {"published": 65.0, "tolerance": 2.0},
            "yat_b": {"published": 51.0, "tolerance": 2.0},
            "goat_v": {"published": 66.0, "tolerance": 2.0},
        },
    }
    assert expected.overlaps(band) == []  # softmax and goat_v overlap, but the posts do not compare them
    band["models"]["yat_b"]["tolerance"] = 12.0
    assert expected.overlaps(band) == [("softmax", "yat_b")]


def test_the_bands_command_prints_and_writes_the_derived_bands(tmp_path, capsys):
    summary = tmp_path / "ensemble.json"
    summary.write_text(json.dumps(_summary({"yat_b": [47.4, 49.1, 50.2, 52.6]})))
    out = tmp_path / "rerun.json"
    assert cli.main(["bands", str(summary), "--source", "expected/measured/x.json", "--write", str(out)]) == 0
    printed = capsys.readouterr().out
    now = current_rerun()["steps"]["1200"]["occupancy"]["models"]["yat_b"]["tolerance"]
    assert f"yat_b    published 51.0417    ± {now:g} -> ± 5.9 (ensemble)" in printed
    written = json_rules.read_json(out, schema.RERUN_JSON)
    assert written["steps"]["1200"]["occupancy"]["models"]["yat_b"]["tolerance"] == 5.9
    assert cli.main(["bands", str(tmp_path / "missing.json")]) == 2
    capsys.readouterr()
    assert cli.main(["bands", str(summary), "--step", "600"]) == 2  # the step asked, not the default
    assert capsys.readouterr().err == "error: rerun.json has no bands at step 600\n"


def test_the_report_shows_a_stopped_run_beside_its_ensemble():
    ens = {"source": "expected/measured/x.json", "members": [47.4, 49.1, 50.2], "mean": 48.9, "std": 1.4}
    row = {
        "id": "step1200.yat_b.occupancy",
        "claim": "yat_b: distinct winners at step 1200",
        "measured": "46.9",
        "measured_value": 46.9,
        "expected": "51.04 ± 5.1",
        "ensemble": ens | {"min": 47.4, "max": 50.2, "published": 51.0417},
    }
    said = " ".join(" ".join(markdown.ensemble_lines([row])).split())
    assert "published 51.0417; the ensemble of 3 members 47.4 to 50.2 (48.9 ± 1.4)" in said
    assert said.endswith("; this run **outside** it")
    page = page_spread.ensemble({"claims": [row]})
    assert 'data-claim="step1200.yat_b.occupancy"' in page and page.count("<circle") == 4
    assert "<title>published: 51.04</title>" in page and "<title>this run: 46.9</title>" in page
    assert page_spread.ensemble({"claims": [{**row, "ensemble": None} | {"id": "x"}][:0]}) == ""


def test_the_committed_step_1200_reruns_are_judged_again_on_their_summaries():
    """The three CPU reruns of paper-step1200.json against the bands in force (yat_b's derived from its
    ensemble), and against the band of 2 it replaced, which refused yat_b's 47.42 distinct winners."""
    kept = json_rules.read_json(
        expected.REPO / "expected" / "measured" / "paper-step1200.json", schema_results.SUMMARY_JSON
    )
    now = {(m, s): inside for _, m, s, *_, inside in bands.judge_summaries(kept, current_rerun(), 1200)}
    assert len(now) == 6 and all(now.values())
    narrow = copy.deepcopy(current_rerun())
    narrow["steps"]["1200"]["occupancy"]["models"]["yat_b"]["tolerance"] = 2.0
    before = {(m, s): inside for _, m, s, *_, inside in bands.judge_summaries(kept, narrow, 1200)}
    assert not before["yat_b", "occupancy"] and before["softmax", "occupancy"] and before.keys() == now.keys()


def test_the_step_1200_bands_are_those_the_committed_ensembles_derive():
    """rerun.json's step-1200 bands stay grounded in expected/measured/ensemble-step1200.json: a member added
    to the file without deriving the bands again (`./reproduce.sh bands ... --write`) fails here."""
    source = "expected/measured/ensemble-step1200.json"
    kept = json_rules.read_json(expected.REPO / source, schema_results.SUMMARY_JSON)
    assert bands.derive(current_rerun(), kept, 1200, source) == current_rerun()


def _spread_of(doc: dict) -> dict:
    return doc["runs"]["ens-yat_b"]["ensemble"]["statistics"]["yat_b_s0"]["distinct_winners"]["1200"]


FORGED = {
    "a NaN member": lambda d: _spread_of(d)["members"].__setitem__(0, float("nan")),
    "an infinite std": lambda d: _spread_of(d).__setitem__("std", float("inf")),
    "a negative std": lambda d: _spread_of(d).__setitem__("std", -1.0),
    "a boolean member": lambda d: _spread_of(d)["members"].__setitem__(0, True),
    "a member of 1e308": lambda d: _spread_of(d)["members"].__setitem__(0, 1e308),
    "a member of 0 distinct winners": lambda d: _spread_of(d)["members"].__setitem__(0, 0.0),
    "10,000 members": lambda d: _spread_of(d).update(members=[50.0] * 10_000, member_ids=list(range(10_000))),
    "a string for a number": lambda d: _spread_of(d).__setitem__("mean", "49"),
    "a list for a number": lambda d: _spread_of(d).__setitem__("max", [52.6]),
    "a scalar for the statistics": lambda d: d["runs"]["ens-yat_b"]["ensemble"].__setitem__("statistics", 3),
    "an unknown model": lambda d: d["runs"]["ens-yat_b"]["ensemble"]["statistics"].__setitem__("gpt_s0", {}),
    "a std not of the members": lambda d: _spread_of(d).__setitem__("std", 0.01),
    "a member counted twice": lambda d: _spread_of(d).__setitem__("member_ids", [0, 1, 1, 3]),
}


@pytest.mark.parametrize("forged", FORGED)
def test_a_forged_ensemble_is_one_error_and_nothing_written(forged, tmp_path, capsys):
    doc = _summary({"yat_b": [47.4, 49.1, 50.2, 52.6]})
    FORGED[forged](doc)
    summary, out = tmp_path / "ensemble.json", tmp_path / "rerun.json"
    summary.write_text(json.dumps(doc))  # NaN and Infinity as Python's json writes them
    capsys.readouterr()
    assert cli.main(["bands", str(summary), "--write", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert not out.exists()


def test_bands_judge_exits_1_when_a_judged_run_lies_outside_its_band(tmp_path, capsys):
    kept = json_rules.read_json(
        expected.REPO / "expected" / "measured" / "paper-step1200.json", schema_results.SUMMARY_JSON
    )
    source = expected.REPO / "expected" / "measured" / "ensemble-step1200.json"
    inside, outside = tmp_path / "inside.json", tmp_path / "outside.json"
    inside.write_text(json.dumps(kept))
    name, run = next((n, r) for n, r in kept["runs"].items() if "yat_b_s0" in r.get("statistics", {}))
    band = current_rerun()["steps"]["1200"]["occupancy"]["models"]["yat_b"]
    run["statistics"]["yat_b_s0"]["run"]["distinct_winners"]["1200"] = band["published"] + band["tolerance"] + 0.5
    outside.write_text(json.dumps(kept))
    assert cli.main(["bands", str(source), "--judge", str(inside)]) == 0
    assert cli.main(["bands", str(source), "--judge", str(inside), "--judge", str(outside)]) == 1
    failed = [line for line in capsys.readouterr().out.splitlines() if line.endswith(": FAIL")]
    assert len(failed) == 1 and failed[0].startswith(f"{outside}: {name} yat_b occupancy at 1200: "), failed


def test_a_summary_judged_again_skips_what_no_band_of_the_step_judges():
    rerun_doc = copy.deepcopy(current_rerun())
    del rerun_doc["steps"]["1200"]["entropy"]["models"]["goat_v"]
    occupancy, entropy = (rerun_doc["steps"]["1200"][k]["models"] for k in ("occupancy", "entropy"))

    def run(preset: str, model: str, **values: float) -> dict:
        return {"preset": preset, "statistics": {model: {"run": {k: {"1200": v} for k, v in values.items()}}}}

    doc = {
        "runs": {
            "unfinished": {"preset": "paper"},  # no statistics yet
            "smoke": run("smoke", "yat_b_s0", distinct_winners=99.0),  # no published run of its preset
            "seed 3": run("paper", "yat_b_s3", distinct_winners=99.0),  # nor of its seed
            "no occupancy": run("paper", "yat_b_s0", mean_norm_entropy=0.9),  # the first band has no value
            "goat_v": run("paper", "goat_v_s0", distinct_winners=70.0, mean_norm_entropy=0.5),  # no entropy band
            "another step": {"preset": "paper", "statistics": {"softmax_s0": {"run": {"distinct_winners": {"7": 1}}}}},
        }
    }
    assert bands.judge_summaries(doc, rerun_doc, 1200) == [
        ("no occupancy", "yat_b", "entropy", 0.9, entropy["yat_b"]["published"], entropy["yat_b"]["tolerance"], False),
        (
            "goat_v",
            "goat_v",
            "occupancy",
            70.0,
            occupancy["goat_v"]["published"],
            occupancy["goat_v"]["tolerance"],
            True,
        ),
    ]
    assert bands.judge_summaries(doc, rerun_doc, 7) == []  # no band at that step


def test_bands_say_which_derived_bands_of_compared_models_overlap(tmp_path, capsys):
    summary = tmp_path / "ensemble.json"
    summary.write_text(json.dumps(_summary({"yat_b": [40.0, 50.0, 60.0, 62.0]})))  # wide: reaches softmax's 65 ± 2
    assert cli.main(["bands", str(summary)]) == 0
    assert "step 1200 occupancy: the bands of softmax and yat_b overlap" in capsys.readouterr().out.splitlines()


def test_round_up_of_nothing_or_less_is_zero_and_keeps_exact_values():
    assert bands.round_up(0.0) == 0.0 and bands.round_up(-3.0) == 0.0
    assert (
        bands.round_up(0.12) == 0.12
        and bands.round_up(0.121) == 0.13
        and bands.round_up(5.5) == 5.5
        and bands.round_up(5.9) == 6.0
    )  # 5.9 is a little above 5.9


def test_the_bands_command_line_says_what_each_option_takes(tmp_path):
    parser = cli.build_parser()
    sub = parser._subparsers._group_actions[0].choices["bands"]
    text = " ".join(sub.format_help().split())
    for words in (
        "usage: reproduce.sh bands [-h] [--final REPORT_JSON] [--step STEP] [--source SOURCE] [--judge SUMMARY] "
        "[--write FILE] [ensemble]",
        "--final REPORT_JSON instead: the final-step bands beside the full-length trajectories of the published "
        "bundles' report.json",
        "ensemble a summary file holding ensembles (`summary ENS ... --out FILE`)",
        "--step STEP the telemetry step whose bands are derived (default 1200)",
        "--source SOURCE how the reason names the file (default: the path given)",
        "--judge SUMMARY judge the runs a summary file keeps again with the derived bands (repeatable)",
        "--write FILE write the rerun.json with the derived bands to FILE",
    ):
        assert words in text, words
    assert "bands derive rerun.json's bands from measured trajectories" in " ".join(parser.format_help().split())
    args = parser.parse_args(["bands", "s.json", "--step", "600", "--judge", "a.json", "--judge", "b.json"])
    assert (args.ensemble, args.step, args.judge, args.write) == (
        Path("s.json"),
        600,
        [Path("a.json"), Path("b.json")],
        None,
    )
    assert parser.parse_args(["bands", "s.json", "--write", str(tmp_path / "r.json")]).write == tmp_path / "r.json"
    assert parser.parse_args(["bands", "s.json"]).step is None  # the job takes bands.DEFAULT_STEP, 1200


def test_a_spread_is_its_members_to_a_billionth_or_to_1e_12_near_zero():
    def at(members, **change) -> dict:
        doc = _summary({"yat_b": members})
        doc["runs"]["ens-yat_b"]["ensemble"]["statistics"]["yat_b_s0"]["distinct_winners"]["1200"].update(change)
        return doc

    members = [1000.0, 1001.0, 1002.0, 1003.0]
    assert (
        bands.ensembles_at(at(members, mean=1001.5 * (1 + 1e-10)), 1200)["yat_b"]["distinct_winners"]["mean"] > 1001.5
    )
    assert bands.ensembles_at(at([2.0] * 4, std=1e-13), 1200)["yat_b"]["distinct_winners"]["std"] == 1e-13
    for change in ({"mean": 1001.5 * (1 + 1e-8)}, {"min": 1000.5}):
        with pytest.raises(InputError) as e:
            bands.ensembles_at(at(members, **change), 1200)
        assert str(e.value) == (
            "the summary file: ens-yat_b yat_b_s0 distinct_winners at step 1200: the spread is not that of its members"
        )
    with pytest.raises(InputError, match=r"^ensemble.json: ens-yat_b yat_b_s0 distinct_winners at step 1200: the"):
        bands.ensembles_at(at([0.0, 0.0, 0.0, 1.0], mean=0.75), 1200, "ensemble.json")
    assert bands.ensembles_at(at(members), 600) == {"yat_b": {}}  # no value at that step
    with pytest.raises(InputError) as e:
        bands.derive(current_rerun(), at(members), 7, "x")
    assert str(e.value) == "rerun.json has no bands at step 7"


def test_a_derived_band_names_its_source_in_its_reason_and_its_ensemble():
    new = bands.derive(current_rerun(), _summary({"yat_b": [47.4, 49.1, 50.2, 52.6]}), 1200, "expected/measured/x.json")
    band = new["steps"]["1200"]["occupancy"]["models"]["yat_b"]
    assert band["ensemble"]["source"] == "expected/measured/x.json"
    assert band["reason"].startswith("the spread of 4 trajectories of this run on one CPU (expected/measured/x.json: ")


def test_the_bands_command_says_why_each_band_is_kept_and_each_verdict(tmp_path, capsys):
    summary, out = tmp_path / "ensemble.json", tmp_path / "rerun.json"
    for members, why in (
        ([50.0, 51.0, 52.0], "kept (3 members, fewer than 4)"),
        ([50.0], "kept (1 member, fewer than 4)"),
    ):
        summary.write_text(json.dumps(_summary({"softmax": members})))
        assert cli.main(["bands", str(summary), "--write", str(out)]) == 0
        lines = capsys.readouterr().out.splitlines()
        softmax = [line for line in lines if line.startswith("step 1200 occupancy  softmax ")]
        assert len(softmax) == 1 and softmax[0].endswith(f"({why})"), lines
        assert lines[-1] == f"written: {out}"
    summary.write_text(json.dumps(_summary({"yat_b": [50.0, 51.0, 52.0, 53.0]})))
    assert cli.main(["bands", str(summary)]) == 0
    assert "step 1200 occupancy  softmax " in (printed := capsys.readouterr().out)
    assert [line for line in printed.splitlines() if " softmax " in line][0].endswith("(kept (no ensemble))")
    kept = expected.REPO / "expected" / "measured" / "paper-step1200.json"
    source = expected.REPO / "expected" / "measured" / "ensemble-step1200.json"
    assert cli.main(["bands", str(source), "--judge", str(kept)]) == 0
    verdicts = [line for line in capsys.readouterr().out.splitlines() if line.startswith(f"{kept}: ")]
    assert verdicts and all(line.endswith(": PASS") for line in verdicts)


def test_ensembles_skip_plain_runs_and_models_of_other_runs_and_name_their_file():
    doc = _summary({"yat_b": [50.0, 51.0, 52.0, 53.0]})
    doc["runs"] = {"plain": {"statistics": {}}, **doc["runs"]}  # a run of the summary that is no ensemble
    by_model = doc["runs"]["ens-yat_b"]["ensemble"]["statistics"]
    doc["runs"]["ens-yat_b"]["ensemble"]["statistics"] = {"yat_b_s7": by_model["yat_b_s0"], **by_model}  # seed 7 first
    assert list(bands.ensembles_at(doc, 1200)) == ["yat_b"]
    by_model["yat_b_s0"]["distinct_winners"]["1200"]["mean"] = 0.0
    doc["runs"]["ens-yat_b"]["ensemble"]["statistics"] = by_model
    with pytest.raises(
        InputError, match=r"^expected/measured/x.json: ens-yat_b yat_b_s0 distinct_winners at step 1200"
    ):
        bands.derive(current_rerun(), doc, 1200, "expected/measured/x.json")
    assert bands.judge_summaries(doc, current_rerun(), 7) == []  # no band at that step
