"""The ensemble's pure pieces, each pinned at its edges: the spread of a statistic over the members, the
training mode, the members a process trains, and the checks that keep a spread to one plan's members."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attngeom.base.errors import InputError
from attngeom.jobs import ensemble
from attngeom.training import local_run, runs
from attngeom.training.train import PERTURBATION_SEED
from attngeom.training.trajectory import perturbation


def test_the_spread_of_members_with_the_published_value_at_their_edges():
    s = ensemble.spread([1.0, 3.0, 5.0], 1.0)
    assert s == {
        "members": [1.0, 3.0, 5.0],
        **{k: v for k, v in s.items() if k not in ("members", "published", "published_inside", "published_in_std")},
        "published": 1.0,
        "published_inside": True,
        "published_in_std": -1.0,
    }
    assert (s["mean"], s["std"], s["min"], s["max"]) == (3.0, 2.0, 1.0, 5.0)
    assert ensemble.spread([1.0, 3.0, 5.0], 5.0)["published_inside"] is True
    assert ensemble.spread([1.0, 3.0, 5.0], 5.5)["published_inside"] is False
    assert ensemble.spread([1.0, 3.0, 5.0], 0.5)["published_inside"] is False
    assert ensemble.spread([1.0, 3.0, 5.0], 7.0)["published_in_std"] == 2.0
    assert ensemble.spread([1.0, 1.5, 2.0], 2.5)["published_in_std"] == 2.0  # a standard deviation below 1: 0.5
    assert "n" not in s and "published" not in ensemble.spread([1.0, 3.0], None)


def test_the_folders_of_an_ensemble(tmp_path):
    assert ensemble.member_dir(tmp_path, 3) == tmp_path / "member-3"
    assert not ensemble.is_ensemble(tmp_path)
    (tmp_path / "ensemble.json").mkdir()
    assert not ensemble.is_ensemble(tmp_path)  # a folder of that name is not the summary
    (tmp_path / "ensemble.json").rmdir()
    (tmp_path / "ensemble.json").write_text("{}")
    assert ensemble.is_ensemble(tmp_path)


def test_the_together_mode_names_its_group():
    assert ensemble.together_mode([0, 2, 5]) == "together: members 0, 2, 5"


def options(**given) -> local_run.RerunOptions:
    return local_run.RerunOptions(**given)


def test_members_train_together_on_a_gpu_and_one_after_another_on_a_cpu():
    for platform, mode in (("cpu", "sequential"), ("gpu", "together"), ("tpu", "together")):
        assert ensemble.members_mode(options(), platform) == mode
    assert ensemble.members_mode(options(members_mode="sequential"), "gpu") == "sequential"
    assert ensemble.members_mode(options(), "cpu", "together") == "together"
    assert ensemble.members_mode(options(members_mode="together"), "cpu", "together") == "together"


def test_a_resume_keeps_the_recorded_mode_and_a_time_limit_needs_members_together_or_one_member():
    with pytest.raises(InputError) as info:
        ensemble.members_mode(options(members_mode="sequential"), "gpu", "together")
    assert str(info.value) == (
        "--members-mode sequential: this ensemble was trained together; resume it so, or start a new one"
    )
    with pytest.raises(InputError) as info:
        ensemble.check_time_limit(options(time_limit=60, members_mode="sequential"), (0, 1))
    assert str(info.value) == (
        "--time-limit: only for members trained together (--members-mode together) or one member a process "
        "(--member-ids M)"
    )
    ensemble.check_time_limit(options(time_limit=60, members_mode="sequential"), (1,))  # one member: one stop
    ensemble.check_time_limit(options(time_limit=60, members_mode="together"), (0, 1, 2))
    ensemble.check_time_limit(options(members_mode="sequential"), (0, 1))


def test_the_members_a_process_trains():
    assert ensemble.chosen_members(options(), 3) == (0, 1, 2)
    assert ensemble.chosen_members(options(member_ids=(2, 0, 2)), 3) == (0, 2)
    with pytest.raises(InputError) as info:
        ensemble.chosen_members(options(member_ids=(1, 3, 4)), 3)
    assert str(info.value) == "--member-ids: member 3 is not one of the ensemble's 0 to 2"


def plan(stop_after: int | None = None, preset: str = "smoke") -> dict:
    train = {"steps": 10, "lr": 0.1} | ({} if stop_after is None else {"stop_after": stop_after})
    return {"config": {"preset": preset, "seeds": [0], "variants": ["softmax"], "train": train}}


def test_stops_the_plan_none_or_one_time_limit_for_all(tmp_path):
    ensemble.check_stops(tmp_path, plan(), {0: None, 1: None})
    ensemble.check_stops(tmp_path, plan(5), {0: 5, 1: None})
    ensemble.check_stops(tmp_path, plan(), {0: 7, 1: 7})  # a time limit stopped members trained together at once
    with pytest.raises(InputError) as info:
        ensemble.check_stops(tmp_path, plan(), {0: None, 1: 7})
    assert str(info.value) == (
        f"{tmp_path / 'member-1'}: stopped after step 7, where the ensemble's plan runs the whole schedule "
        "and member 0 stops nowhere"
    )


def test_stops_that_differ_name_the_last_member(tmp_path):
    with pytest.raises(InputError) as info:
        ensemble.check_stops(tmp_path, plan(5), {0: 6, 1: 7, 2: 5})
    assert str(info.value) == (
        f"{tmp_path / 'member-1'}: stopped after step 7, where the ensemble's plan stops after step 5 "
        "and member 0 stops after step 6"
    )
    with pytest.raises(InputError) as info:  # two steps, no member at the plan's: not one time limit for all
        ensemble.check_stops(tmp_path, plan(), {0: 6, 1: 7})
    assert str(info.value) == (
        f"{tmp_path / 'member-1'}: stopped after step 7, where the ensemble's plan runs the whole schedule "
        "and member 0 stops after step 6"
    )


def manifest(member: int, preset: str = "smoke", **train) -> dict:
    config = plan(preset=preset)["config"]
    config = {**config, "train": config["train"] | {"member": member} | train}
    return {"config": config, "trajectory": {"member": member, "perturbation": perturbation(member)}}


def test_a_member_is_its_slots_and_the_plans(tmp_path):
    assert manifest(2)["trajectory"]["perturbation"] == f"one float32 ulp, signs from [{PERTURBATION_SEED}, 2]"
    ensemble.check_member(tmp_path, 2, plan(), manifest(2))
    ensemble.check_member(tmp_path, 2, plan(), manifest(2, stop_after=4))  # its stop is checked with the others'
    ensemble.check_member(tmp_path, 0, plan(), {"config": plan()["config"]})  # member 0: the plain rerun
    ensemble.check_member(tmp_path, 2, plan(), {**manifest(2), "trajectory": {"member": 2}})  # names none
    cases = [
        (manifest(1), "member 1's run in the place of member 2"),
        ({**manifest(2), "trajectory": {"member": 1}}, "member 1's run in the place of member 2"),
        (
            {**manifest(2), "trajectory": {"member": 2, "perturbation": "none"}},
            "not member 2's perturbation (none)",
        ),
        (manifest(2, lr=0.2), "not a run of the ensemble's plan (train: lr was 0.1, is now 0.2)"),
    ]
    for given, message in cases:
        with pytest.raises(InputError) as info:
            ensemble.check_member(tmp_path, 2, plan(), given)
        assert str(info.value).startswith(f"{tmp_path}: {message}"), str(info.value)


def test_a_plan_without_the_member_and_the_stop():
    config = {"seeds": [0], "train": {"steps": 10, "member": 2, "stop_after": 4}}
    assert ensemble._without_member(config) == {"seeds": [0], "train": {"steps": 10}}
    assert ensemble._without_member({"seeds": [0]}) == {"seeds": [0], "train": {}}
    assert config["train"] == {"steps": 10, "member": 2, "stop_after": 4}  # the plan itself untouched


def test_a_member_folders_state(tmp_path, monkeypatch):
    assert ensemble.member_state(tmp_path) == ("not started", None)
    (tmp_path / runs.MANIFEST).write_text("{}")
    for read, state in (
        ({"completed": False}, "unfinished"),
        ({"completed": "yes"}, "unfinished"),
        ({"completed": True, "stopped_after": 4}, "stopped"),
        ({"completed": True, "stopped_after": None}, "complete"),
        ({"completed": True}, "complete"),
    ):
        monkeypatch.setattr(runs, "read_manifest", lambda path, read=read: read)
        assert ensemble.member_state(tmp_path) == (state, read)


def test_the_summary_file_is_read_against_its_schema(tmp_path):
    (tmp_path / "ensemble.json").write_text(json.dumps({"members": "three"}))
    with pytest.raises(InputError, match=str(Path(tmp_path) / "ensemble.json")):
        ensemble.read(tmp_path)


# --- the summary of an ensemble's members (their statistics given: measuring them trains models) ---


def member_folder(ens: Path, member: int, manifest: dict | None, bundle: bytes = b"") -> None:
    folder = ensemble.member_dir(ens, member)
    folder.mkdir(parents=True)
    if manifest is not None:
        (folder / runs.MANIFEST).write_text(json.dumps(manifest))
        (folder / "geom_softmax_s0.npz").write_bytes(bundle or f"bundle of member {member}".encode())
        (folder / runs.CHECKPOINTS).mkdir()
        (folder / runs.CHECKPOINTS / "step.npz").write_bytes(b"a checkpoint, not a bundle")


def finished(member: int, preset: str = "smoke", **facts) -> dict:
    return manifest(member, preset) | {"completed": True, "wall_s": 10.0 + member, "verify_exit": member % 2} | facts


@pytest.fixture
def summarising(monkeypatch):
    """Each member's statistics: distinct winners 1 + member at step 9 (and 7 + member at 0), as if measured."""
    measured = []

    def member_statistics(path, manifest):
        measured.append(path.name)
        m = int(path.name.split("-")[1])
        return {"softmax_s0": {"distinct_winners": {"0": 7.0 + m, "9": 1.0 + m}}}

    monkeypatch.setattr(runs, "read_manifest", lambda path: json.loads(Path(path).read_text()))
    monkeypatch.setattr(ensemble, "member_statistics", member_statistics)
    return measured


def test_the_summary_holds_each_members_state_and_the_spread_of_the_finished(tmp_path, summarising):
    ens, plan_ = tmp_path / "ens", {"members": 4, **plan(), "what": "w"}
    member_folder(ens, 0, finished(0))
    member_folder(ens, 1, finished(1, stopped_after=None))
    member_folder(ens, 2, finished(2, completed=False))
    member_folder(ens, 3, None)
    doc = ensemble.summarise(ens, plan_, {})
    assert doc["members"] == 4 and doc["what"] == "w" and doc["config"] == plan_["config"]
    assert doc["member_runs"] == {
        "0": {"state": "complete", "stopped_after": None, "wall_s": 10.0, "verify_exit": 0},
        "1": {"state": "complete", "stopped_after": None, "wall_s": 11.0, "verify_exit": 1},
        "2": {"state": "unfinished", "stopped_after": None, "wall_s": 12.0, "verify_exit": 0},
        "3": {"state": "not started"},
    }
    winners = doc["statistics"]["softmax_s0"]["distinct_winners"]
    assert winners.keys() == {"0", "9"}
    assert winners["9"] == {"member_ids": [0, 1], **ensemble.spread([1.0, 2.0], None)}
    assert winners["0"] == {"member_ids": [0, 1], **ensemble.spread([7.0, 8.0], None)}
    assert sorted(summarising) == ["member-0", "member-1"]


def test_a_published_run_stands_beside_the_published_value_and_each_member_is_measured_once(
    tmp_path, summarising, monkeypatch
):
    ens, plan_ = tmp_path / "ens", {"members": 2, **plan(preset="paper")}
    member_folder(ens, 0, finished(0, "paper", stopped_after=5))
    member_folder(ens, 1, finished(1, "paper", stopped_after=5))
    asked = []
    monkeypatch.setattr(
        ensemble, "published_run", lambda preset, seed, variant: asked.append((preset, seed, variant)) or True
    )
    monkeypatch.setattr(ensemble, "published_model", lambda folder, variant: (None, {"distinct_winners": {"9": 1.5}}))
    known: dict = {}
    for _ in range(2):
        doc = ensemble.summarise(ens, plan_, {"softmax": tmp_path / "published"}, known)
    assert summarising == ["member-0", "member-1"]  # the second summary read them from `known`
    assert asked[0] == ("paper", 0, "softmax")
    assert doc["member_runs"]["0"]["state"] == "complete" and doc["member_runs"]["0"]["stopped_after"] == 5
    winners = doc["statistics"]["softmax_s0"]["distinct_winners"]
    assert winners["9"] == {"member_ids": [0, 1], **ensemble.spread([1.0, 2.0], 1.5)}
    assert "published" not in winners["0"]
    doc = ensemble.summarise(ens, plan_, {}, {})  # the published bundles not at hand: nothing beside them
    assert "published" not in doc["statistics"]["softmax_s0"]["distinct_winners"]["9"]


def test_a_member_copied_from_another_is_refused(tmp_path, summarising):
    ens = tmp_path / "ens"
    member_folder(ens, 0, finished(0), bundle=b"the same")
    member_folder(ens, 1, finished(1), bundle=b"the same")
    with pytest.raises(InputError) as info:
        ensemble.summarise(ens, {"members": 2, **plan()}, {})
    assert str(info.value) == (
        f"{ensemble.member_dir(ens, 1)}: the same bundles as member 0's: one trajectory counted twice; "
        "delete the member's folder and resume the ensemble to train it"
    )


def test_the_summary_is_written_beside_the_members(tmp_path, summarising):
    ens = tmp_path / "ens"
    member_folder(ens, 0, None)
    doc = ensemble.write_summary(ens, {"members": 1, **plan()}, {}, {})
    assert json.loads((ens / "ensemble.json").read_text()) == doc


def test_the_summary_checks_every_started_member_after_one_not_started(tmp_path, summarising):
    ens = tmp_path / "ens"
    member_folder(ens, 0, None)
    member_folder(ens, 1, manifest(0) | {"completed": True})  # member 0's run in member 1's place
    with pytest.raises(InputError) as info:
        ensemble.summarise(ens, {"members": 2, **plan()}, {})
    assert str(info.value) == f"{ensemble.member_dir(ens, 1)}: member 0's run in the place of member 1"


def test_the_summary_refuses_a_member_that_stops_elsewhere(tmp_path, summarising):
    ens = tmp_path / "ens"
    member_folder(ens, 0, finished(0))
    member_folder(ens, 1, finished(1, stopped_after=7) | {"config": manifest(1, stop_after=7)["config"]})
    with pytest.raises(InputError) as info:
        ensemble.summarise(ens, {"members": 2, **plan()}, {})
    assert str(info.value) == (
        f"{ensemble.member_dir(ens, 1)}: stopped after step 7, where the ensemble's plan runs the whole schedule "
        "and member 0 stops nowhere"
    )
