"""The ensemble: perturbation by one ulp, the spread, and `rerun --members K` end to end on the smoke preset."""

from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path

import numpy as np
import pytest
from helpers.runs import interrupt_training, restore_device_settings, same_as_the_whole_run, trained_in_process
from hypothesis import given, settings
from hypothesis import strategies as st

from attngeom import cli
from attngeom.jobs import ensemble
from attngeom.training import runs, train


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(-(2.0**100), 2.0**100, width=32), min_size=1, max_size=50), st.integers(1, 1000))
def test_a_member_moves_every_parameter_by_one_ulp_with_signs_of_its_own(values, member):
    params = {"a": np.array(values, np.float32), "b": {"c": np.array(values[::-1], np.float32)}}
    moved = train.perturb(params, member)
    for before, after in ((params["a"], moved["a"]), (params["b"]["c"], moved["b"]["c"])):
        after = np.asarray(after)
        assert after.dtype == np.float32
        up, down = np.nextafter(before, np.float32(np.inf)), np.nextafter(before, np.float32(-np.inf))
        assert np.all((after == up) | (after == down))  # the neighbouring float32, never further
    again = train.perturb(params, member)
    assert all(np.array_equal(x, y) for x, y in zip(np.asarray(moved["a"]), np.asarray(again["a"])))
    assert train.perturb(params, 0) is params


def test_different_members_draw_different_signs():
    params = {"w": np.ones(256, np.float32)}
    ups = [np.asarray(train.perturb(params, m)["w"]) > 1 for m in (1, 2)]
    assert 64 < ups[0].sum() < 192 and not np.array_equal(ups[0], ups[1])


@given(st.lists(st.floats(-1e3, 1e3), min_size=1, max_size=8), st.floats(-1e3, 1e3))
def test_the_spread_says_where_the_published_value_stands(values, published):
    s = ensemble.spread(values, published)
    assert s["min"] <= s["mean"] + 1e-9 and s["mean"] <= s["max"] + 1e-9
    assert s["published_inside"] == (min(values) <= published <= max(values))
    if len(values) > 1:  # the sample's standard deviation, and the published value's distance in it, with its sign
        assert s["std"] == pytest.approx(statistics.stdev(values), rel=1e-9, abs=1e-10)
    else:
        assert s["std"] == 0
    if s["std"] > 0:
        assert s["published_in_std"] == pytest.approx((published - s["mean"]) / s["std"])
    else:
        assert s["published_in_std"] is None
    assert s["members"] == values and s["min"] == min(values) and s["max"] == max(values)
    assert "published" not in ensemble.spread(values, None)


def test_the_published_value_below_the_members_lies_a_negative_number_of_standard_deviations_away():
    """Members 1 and 3: mean 2, sample standard deviation sqrt(2); published 0 lies -sqrt(2) of them away, 4 +sqrt(2)."""
    below, above = ensemble.spread([1.0, 3.0], 0.0), ensemble.spread([1.0, 3.0], 4.0)
    assert below["mean"] == 2.0 and below["std"] == pytest.approx(2**0.5, rel=1e-15)
    assert below["published_in_std"] == pytest.approx(-(2**0.5), rel=1e-15) and not below["published_inside"]
    assert above["published_in_std"] == pytest.approx(2**0.5, rel=1e-15) and not above["published_inside"]
    assert (
        ensemble.spread([1.0, 3.0], 3.0)["published_inside"]
        and ensemble.spread([2.0, 2.0], 2.0)["published_in_std"] is None
    )


def _losses(member: Path) -> list[float]:
    return [json.loads(line)["loss"] for line in (member / runs.TRAIN_LOG).read_text().splitlines()]


OPTS = ["rerun", "--preset", "smoke", "--seed", "0", "--variants", "yat_b", "--members", "3", "--quiet"]


@pytest.fixture(scope="module")
def three_members(tmp_path_factory) -> Path:
    """A complete smoke ensemble of three members of yat_b (read only: copy it to change it)."""
    return trained_in_process(tmp_path_factory.mktemp("ensemble") / "whole", OPTS)


@pytest.mark.slow
def test_an_ensemble_of_three_trains_distinct_members_member_0_the_plain_rerun_and_resumes(
    three_members, smoke_runs, tmp_path, monkeypatch, capsys
):
    restore_device_settings(monkeypatch)
    opts, whole = OPTS, three_members
    doc = ensemble.read(whole)
    assert [r["state"] for r in doc["member_runs"].values()] == ["complete"] * 3
    assert [runs.require_complete(ensemble.member_dir(whole, m))["config"]["train"]["member"] for m in range(3)] == [
        0,
        1,
        2,
    ]
    # member 0 is the plain rerun, bit for bit: the session's run of seed 0 holds the same bundles and log
    same_as_the_whole_run(smoke_runs["default"].path, ensemble.member_dir(whole, 0), ("yat_b",), 0)
    losses = [_losses(ensemble.member_dir(whole, m)) for m in range(3)]
    assert len({tuple(x) for x in losses}) == 3  # three trajectories
    last = doc["statistics"]["yat_b_s0"]["validation_loss"]["60"]
    assert last["member_ids"] == [0, 1, 2] and len(set(last["members"])) == 3 and last["std"] > 0
    assert "published" not in last  # a smoke run is not set beside the published paper run
    assert set(doc["statistics"]["yat_b_s0"]["final"]) >= {"distinct_winners_last", "reconstruction_max_abs"}
    kept = tmp_path / "kept.json"
    assert cli.main(["summary", str(whole), "--out", str(kept)]) == 0
    summary = json.loads(kept.read_text())["runs"]["whole"]
    assert summary["ensemble"]["statistics"] == doc["statistics"]
    assert sorted(summary["members"]) == ["member-0", "member-1", "member-2"]
    assert all(m["verdict"]["verdict"] == "PASS" for m in summary["members"].values())

    cut = tmp_path / "cut"
    with monkeypatch.context() as m:
        interrupt_training(m, 23, member=1)
        assert cli.main([*opts, "--out", str(cut)]) == 130
    states = [r["state"] for r in ensemble.read(cut)["member_runs"].values()]
    assert states == ["complete", "unfinished", "not started"]  # what finished is kept
    capsys.readouterr()
    assert cli.main(["rerun", "--resume", str(cut), "--quiet"]) == 0
    assert "yat_b seed 0: resuming after step 20" in capsys.readouterr().out
    for m in range(3):
        same_as_the_whole_run(ensemble.member_dir(whole, m), ensemble.member_dir(cut, m), ("yat_b",), 0)
    assert ensemble.read(cut)["statistics"] == doc["statistics"]
    assert cli.main(["rerun", "--resume", str(cut), "--quiet"]) == 0  # nothing left to do: every member complete


def _edit(path: Path, change) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def _member_1_copied_from_0(ens: Path, renumbered: bool) -> None:
    """Member 1's folder replaced by member 0's; `renumbered`: its manifest then made to say member 1."""
    one = runs.require_complete(ensemble.member_dir(ens, 1))["trajectory"]["perturbation"]
    shutil.rmtree(ensemble.member_dir(ens, 1))
    shutil.copytree(ensemble.member_dir(ens, 0), ensemble.member_dir(ens, 1))
    if renumbered:

        def renumber(doc):
            doc["config"]["train"]["member"] = doc["trajectory"]["member"] = 1
            doc["trajectory"]["perturbation"] = one

        _edit(ensemble.member_dir(ens, 1) / runs.MANIFEST, renumber)


FORGED_MEMBERS = {
    "the plan edited from 60 steps to 80, member 1 deleted": (
        lambda ens: (
            _edit(ens / ensemble.SUMMARY, lambda d: d["config"]["train"].update(steps=80)),
            shutil.rmtree(ensemble.member_dir(ens, 1)),
        ),
        "member-0: not a run of the ensemble's plan (train: steps was 80, is now 60)",
    ),
    "member 1 a copy of member 0": (
        lambda ens: _member_1_copied_from_0(ens, renumbered=False),
        "member-1: member 0's run in the place of member 1",
    ),
    "member 1 a copy of member 0 renumbered": (
        lambda ens: _member_1_copied_from_0(ens, renumbered=True),
        "member-1: the same bundles as member 0's: one trajectory counted twice",
    ),
    "member 2 stopped at another step": (
        lambda ens: _edit(
            ensemble.member_dir(ens, 2) / runs.MANIFEST, lambda d: d["config"]["train"].update(stop_after=30)
        ),
        "member-2: stopped after step 30, where the ensemble's plan runs the whole schedule",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("forged", FORGED_MEMBERS)
def test_a_member_of_another_plan_or_slot_is_refused_by_resume_and_summary(
    three_members, forged, tmp_path, monkeypatch, capsys
):
    restore_device_settings(monkeypatch)
    ens = tmp_path / "whole"
    shutil.copytree(three_members, ens)
    damage, message = FORGED_MEMBERS[forged]
    damage(ens)
    before = sorted(p.relative_to(ens) for p in ens.rglob("*"))
    for command in (
        ["rerun", "--resume", str(ens), "--quiet"],
        ["summary", str(ens), "--out", str(tmp_path / "s.json")],
    ):
        capsys.readouterr()
        assert cli.main(command) == 2, command
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err
    assert sorted(p.relative_to(ens) for p in ens.rglob("*")) == before  # nothing trained, nothing written
    assert not (tmp_path / "s.json").exists()


@pytest.mark.slow
def test_the_resume_of_a_complete_ensemble_exits_with_its_members_worst_verdict(three_members, tmp_path, monkeypatch):
    restore_device_settings(monkeypatch)
    ens = tmp_path / "whole"
    shutil.copytree(three_members, ens)
    assert cli.main(["rerun", "--resume", str(ens), "--quiet"]) == 0
    _edit(ensemble.member_dir(ens, 2) / runs.MANIFEST, lambda d: d.update(verify_exit=1))  # member 2 judged FAIL
    assert cli.main(["rerun", "--resume", str(ens), "--quiet"]) == 1


def test_one_member_a_process_stops_at_its_time_limit_and_resumes_to_that_member_of_the_whole_ensemble(
    three_members, tmp_path, monkeypatch, capsys
):
    """Member 1 alone (`--member-ids 1`, one after another: a CPU's mode), stopped by `--time-limit 0.001` after
    its first chunk while member 0 never starts, then carried on by `--resume ENS --member-ids 1`: it ends
    as member 1 of the ensemble trained whole, bit for bit."""
    restore_device_settings(monkeypatch)
    ens = tmp_path / "ens"
    lone = [*OPTS[:-3], "--members", "3", "--member-ids", "1", "--quiet"]
    assert cli.main([*lone, "--time-limit", "0.001", "--out", str(ens)]) == 0
    doc = ensemble.read(ens)
    assert doc["members_mode"] == "sequential"
    assert doc["member_runs"]["1"]["state"] == "complete" and doc["member_runs"]["1"]["stopped_after"] == 1
    assert doc["member_runs"]["0"] == doc["member_runs"]["2"] == {"state": "not started"}
    capsys.readouterr()
    assert cli.main(["rerun", "--resume", str(ens), "--member-ids", "1", "--quiet"]) == 0
    assert "member 1 of 3" in capsys.readouterr().out
    doc = ensemble.read(ens)
    assert doc["member_runs"]["1"]["stopped_after"] is None and doc["member_runs"]["0"] == {"state": "not started"}
    same_as_the_whole_run(ensemble.member_dir(three_members, 1), ensemble.member_dir(ens, 1), ("yat_b",), 0)
    assert _losses(ensemble.member_dir(ens, 1)) == _losses(ensemble.member_dir(three_members, 1))


def test_bad_ensemble_options_are_one_line_errors(tmp_path, monkeypatch, capsys):
    restore_device_settings(monkeypatch)
    assert cli.main(["rerun", "--preset", "smoke", "--members", "1", "--out", str(tmp_path / "e")]) == 2
    assert "from 2 to 64, got 1" in capsys.readouterr().err
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / ensemble.SUMMARY).write_text("{}")
    assert cli.main(["rerun", "--resume", str(tmp_path / "bad")]) == 2
    assert "ensemble.json" in capsys.readouterr().err
    assert cli.main(["rerun", "--preset", "smoke", "--member-ids", "1", "--out", str(tmp_path / "m")]) == 2
    assert "--member-ids: only for an ensemble" in capsys.readouterr().err
    args = ["rerun", "--preset", "smoke", "--members", "2", "--member-ids", "0,2", "--out", str(tmp_path / "o")]
    assert cli.main(args) == 2
    assert "--member-ids: member 2 is not one of the ensemble's 0 to 1" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()  # refused before the ensemble folder is claimed
