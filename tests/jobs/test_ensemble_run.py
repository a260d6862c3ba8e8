"""`rerun --members K` in process, without training: the members an ensemble trains in each call, how
(one after another, or together), what it prints, the ensemble.json it writes after each member, its exit
status, and the settling of a resumed ensemble's leftovers. A stand-in for the rerun's `train_and_judge`
writes what a member's run leaves (its manifest and a bundle); measuring a member is faked as well."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from attngeom import cli
from attngeom.base import fetch
from attngeom.base.errors import InputError
from attngeom.commands.options import typed
from attngeom.jobs import ensemble
from attngeom.judgement import robustness
from attngeom.training import local_run, runs
from attngeom.training.trajectory import perturbation

WHAT = (
    "3 trajectories of one configuration: member 0 the plain rerun, member m >= 1 its initial parameters "
    "moved one float32 ulp with signs from m"
)


def parse(*opts: str) -> local_run.RerunOptions:
    """The options `rerun --preset smoke --variants softmax --quiet OPTS` builds (`commands/rerun.py`)."""
    args = cli.build_parser().parse_args(["rerun", "--preset", "smoke", "--variants", "softmax", "--quiet", *opts])
    return typed(local_run.RerunOptions, args, seeds=args.seeds or (args.seed,))


class Trainer:
    """The rerun's train_and_judge for a group of members: each member's run folder written complete
    (verify's status `verdicts[m]`), or, for a member in `stop_at`, left unfinished before a Ctrl-C."""

    def __init__(self, verdicts: dict[int, int], stop_at: int | None = None, opts: tuple[str, ...] = ()):
        self.verdicts, self.stop_at, self.opts, self.calls, self.seen = verdicts, stop_at, opts, [], []

    def __call__(self, group: list[tuple[local_run.RerunOptions, local_run.Plan]]) -> int:
        self.calls.append([(a.out, a.resume, p.cfg.member) for a, p in group])
        ens = Path(group[0][0].out).parent
        self.seen.append([r["state"] for r in ensemble.read(ens)["member_runs"].values()])
        for args, plan in group:
            m, folder = plan.cfg.member, Path(args.out)
            assert args.preset == "smoke" and args.quiet is True  # the options travel with each member
            assert replace(plan.cfg, member=0) == local_run.new_plan(parse(*self.opts)).cfg
            folder.mkdir(parents=True, exist_ok=True)
            carried = args.resume is not None and (folder / runs.MANIFEST).is_file()
            stop = None if carried else plan.cfg.stop_after
            config = plan.manifest_config()
            config["train"]["stop_after"] = stop
            manifest = {
                "completed": m != self.stop_at,
                "config": config,
                "trajectory": {"member": m, "perturbation": perturbation(m)},
                "stopped_after": stop,
                "wall_s": 1.5,
                "verify_exit": self.verdicts.get(m, 0),
            }
            (folder / runs.MANIFEST).write_text(json.dumps(manifest))
            (folder / "geom_softmax_s0.npz").write_bytes(f"member {m}, stop {stop}".encode())
            if m == self.stop_at:
                raise KeyboardInterrupt
        return max(self.verdicts.get(p.cfg.member, 0) for _, p in group)


@pytest.fixture
def device(tmp_path, monkeypatch):
    """The platform the device reports (a list: set its item), the published bundles an empty folder,
    and each member's statistics 1 + its number at step 9 (the stopping step recorded by the list `measured`)."""
    platform, measured = ["cpu"], []
    (tmp_path / "published").mkdir()
    monkeypatch.setattr(local_run, "prepare_device", lambda: platform[0])
    monkeypatch.setattr(fetch, "fetch_bundles", lambda: tmp_path / "published")

    def member_statistics(path, manifest):
        measured.append((path.name, manifest.get("stopped_after")))
        return {"softmax_s0": {"distinct_winners": {"9": 1.0 + int(path.name.split("-")[1])}}}

    monkeypatch.setattr(ensemble, "member_statistics", member_statistics)
    return platform, measured


def member_run(state: str, verify_exit: int | None = 0, stopped_after: int | None = None) -> dict:
    if state == "not started":
        return {"state": state}
    return {"state": state, "stopped_after": stopped_after, "wall_s": 1.5, "verify_exit": verify_exit}


def spread_of(members: list[int]) -> dict:
    values = [1.0 + m for m in members]
    return {"softmax_s0": {"distinct_winners": {"9": {"member_ids": members, **robustness.spread(values, None)}}}}


def test_a_new_ensemble_on_a_cpu_trains_its_members_one_after_another(tmp_path, device, capsys):
    ens, trainer = tmp_path / "ens", Trainer({1: 1})
    assert ensemble.run(parse("--members", "3", "--out", str(ens)), trainer) == 1
    assert trainer.calls == [[(ensemble.member_dir(ens, m), None, m)] for m in range(3)]
    assert trainer.seen == [  # the summary is rewritten after each member
        ["not started"] * 3,
        ["complete", "not started", "not started"],
        ["complete", "complete", "not started"],
    ]
    assert capsys.readouterr().out == (
        f"ensemble folder: {ens}\nmember 0 of 3\nmember 1 of 3\nmember 2 of 3\n"
        f"ensemble: 3 of 3 members complete: {ens / 'ensemble.json'}\n"
    )
    assert json.loads((ens / "ensemble.json").read_text()) == {
        "what": WHAT,
        "members": 3,
        "config": json.loads(json.dumps(local_run.new_plan(parse()).manifest_config())),
        "members_mode": "sequential",
        "member_runs": {"0": member_run("complete"), "1": member_run("complete", 1), "2": member_run("complete")},
        "statistics": spread_of([0, 1, 2]),
    }
    assert device[1] == [("member-0", None), ("member-1", None), ("member-2", None)]  # each measured once


def test_members_trained_together_on_a_gpu_in_one_call_and_a_good_verdict_exits_0(
    tmp_path, device, capsys, monkeypatch
):
    device[0][0] = "gpu"
    monkeypatch.chdir(tmp_path)  # no --out: a new folder under runs/, named by the time, preset and members
    trainer = Trainer({})
    assert ensemble.run(parse("--members", "3"), trainer) == 0
    (ens,) = (tmp_path / "runs").iterdir()
    assert re.fullmatch(r"\d{8}-\d{6}-smoke-ensemble3", ens.name), ens.name
    ens = Path("runs") / ens.name
    assert trainer.calls == [[(ensemble.member_dir(ens, m), None, m) for m in range(3)]]
    assert capsys.readouterr().out == (
        f"ensemble folder: {ens}\nmembers 0, 1, 2 of 3, trained together\n"
        f"ensemble: 3 of 3 members complete: {ens / 'ensemble.json'}\n"
    )
    assert ensemble.read(ens)["members_mode"] == "together"
    trainer = Trainer({})
    assert ensemble.run(parse("--resume", str(ens)), trainer) == 0 and trainer.calls == []  # no empty group trained


def test_the_published_bundles_found_are_set_beside_each_summary(tmp_path, device, monkeypatch):
    (tmp_path / "published" / "qk").mkdir()
    (tmp_path / "published" / "qk" / "geom_softmax_s0.npz").write_bytes(b"")  # found by its name alone
    asked = []
    monkeypatch.setattr(ensemble, "published_run", lambda preset, seed, variant: preset == "smoke")
    monkeypatch.setattr(
        ensemble, "published_model", lambda f, v: asked.append((f, v)) or (None, {"distinct_winners": {"9": 2.5}})
    )
    ens, trainer = tmp_path / "ens", Trainer({})
    assert ensemble.run(parse("--members", "2", "--out", str(ens)), trainer) == 0
    assert asked == [(tmp_path / "published" / "qk", "softmax")] * 2  # after member 0, then after member 1
    winners = ensemble.read(ens)["statistics"]["softmax_s0"]["distinct_winners"]
    assert winners == {"9": {"member_ids": [0, 1], **robustness.spread([1.0, 2.0], 2.5)}}
    assert ensemble.run(parse("--resume", str(ens)), Trainer({})) == 0
    assert len(asked) == 3  # the resume's first summary, of members finished before, beside them too


def test_a_stopped_ensemble_keeps_what_finished_and_its_resume_trains_the_rest(tmp_path, device, capsys):
    ens = tmp_path / "ens"
    with pytest.raises(KeyboardInterrupt):
        ensemble.run(parse("--members", "3", "--out", str(ens)), Trainer({0: 1}, stop_at=1))
    doc = ensemble.read(ens)
    assert doc["member_runs"] == {
        "0": member_run("complete", 1),
        "1": member_run("unfinished", 0),
        "2": member_run("not started"),
    }
    (ens / ".ensemble.json.1234abcd.tmp").write_text("a killed writer's")
    (ensemble.member_dir(ens, 1) / ".manifest.json.1234abcd.tmp").write_text("the member's own, left to it")
    checkpoints = ensemble.member_dir(ens, 1) / runs.CHECKPOINTS
    checkpoints.mkdir()
    (checkpoints / "softmax_s0.npz.pending").write_bytes(b"cut short")
    capsys.readouterr()
    device[0][0] = "gpu"  # the recorded mode is kept
    trainer = Trainer({})
    device[1].clear()
    assert ensemble.run(parse("--resume", str(ens)), trainer) == 1  # member 0's verdict, judged before, counts
    assert [name for name, _ in device[1]] == ["member-0", "member-1", "member-2"]  # each measured once
    assert trainer.calls == [
        [(ensemble.member_dir(ens, 1), ensemble.member_dir(ens, 1), 1)],
        [(ensemble.member_dir(ens, 2), None, 2)],
    ]
    assert capsys.readouterr().out == (
        "softmax seed 0: the members' unfinished checkpoints are discarded (they had not all been written)\n"
        f"ensemble folder: {ens}\nmember 1 of 3\nmember 2 of 3\n"
        f"ensemble: 3 of 3 members complete: {ens / 'ensemble.json'}\n"
    )
    assert sorted(p.name for p in ens.glob(".*")) == []
    assert (ensemble.member_dir(ens, 1) / ".manifest.json.1234abcd.tmp").is_file()
    assert not (checkpoints / "softmax_s0.npz.pending").exists()
    after = json.loads((ens / "ensemble.json").read_text())
    assert after == {
        **{k: doc[k] for k in ("what", "members", "config")},
        "members_mode": "sequential",
        "member_runs": {"0": member_run("complete", 1), "1": member_run("complete"), "2": member_run("complete")},
        "statistics": spread_of([0, 1, 2]),
    }
    trainer = Trainer({})
    assert ensemble.run(parse("--resume", str(ens)), trainer) == 1 and trainer.calls == []  # nothing left to train
    assert capsys.readouterr().out == (
        f"ensemble folder: {ens}\nensemble: 3 of 3 members complete: {ens / 'ensemble.json'}\n"
    )


@pytest.mark.parametrize("field", ["steps", "lr", "member"])
def test_a_resumed_plan_that_lacks_a_training_field_is_refused_before_anything_changes(tmp_path, device, field):
    ens = tmp_path / "ens"
    with pytest.raises(KeyboardInterrupt):
        ensemble.run(parse("--members", "2", "--out", str(ens)), Trainer({}, stop_at=1))
    doc = ensemble.read(ens)
    del doc["config"]["train"][field]  # today's default would fill it: the paper's 12,000 steps, say
    (ens / ensemble.SUMMARY).write_text(json.dumps(doc))
    (ens / ".ensemble.json.1234abcd.tmp").write_text("a killed writer's")
    before = {p: p.read_bytes() for p in ens.rglob("*") if p.is_file()}
    trainer = Trainer({})
    said = rf"(lacks 'config.train.{field}'|config.train: missing key\(s\) {field})"
    with pytest.raises(InputError, match=rf"ensemble.json: .*{said}"):
        ensemble.run(parse("--resume", str(ens)), trainer)
    assert trainer.calls == [] and {p: p.read_bytes() for p in ens.rglob("*") if p.is_file()} == before


STOP = ("--stop-after", "5")


def test_members_stopped_early_are_carried_on_once_every_one_is_stopped(tmp_path, device, capsys):
    ens = tmp_path / "ens"
    with pytest.raises(KeyboardInterrupt):
        ensemble.run(parse("--members", "3", *STOP, "--out", str(ens)), Trainer({}, 2, STOP))
    (ensemble.member_dir(ens, 2) / runs.MANIFEST).unlink()  # member 2 as if killed before its run began
    doc = json.loads((ens / "ensemble.json").read_text())
    del doc["members_mode"]  # an ensemble that recorded no mode: this machine's (a CPU's) is taken
    (ens / "ensemble.json").write_text(json.dumps(doc))
    capsys.readouterr()
    trainer = Trainer({}, opts=STOP)
    assert ensemble.run(parse("--resume", str(ens)), trainer) == 0
    assert "\nmember 2 of 3\n" in capsys.readouterr().out and ensemble.read(ens)["members_mode"] == "sequential"
    assert trainer.calls == [[(ensemble.member_dir(ens, 2), None, 2)]]  # the stopped ones wait for it
    stopped = {str(m): member_run("complete", stopped_after=5) for m in range(3)}  # complete, stopped early
    assert ensemble.read(ens)["member_runs"] == stopped
    capsys.readouterr()
    trainer = Trainer({2: 2}, opts=STOP)
    assert ensemble.run(parse("--resume", str(ens)), trainer) == 2
    assert trainer.calls == [[(ensemble.member_dir(ens, m), ensemble.member_dir(ens, m), m)] for m in range(3)]
    assert capsys.readouterr().out.endswith(f"ensemble: 3 of 3 members complete: {ens / 'ensemble.json'}\n")
    doc = ensemble.read(ens)
    assert doc["member_runs"] == {
        "0": member_run("complete"),
        "1": member_run("complete"),
        "2": member_run("complete", 2),
    }
    assert device[1][-3:] == [("member-0", None), ("member-1", None), ("member-2", None)]


def test_a_process_trains_only_its_members_and_counts_only_the_complete(tmp_path, device, capsys):
    ens, trainer = tmp_path / "ens", Trainer({1: 3})
    assert ensemble.run(parse("--members", "3", "--member-ids", "2,0", "--out", str(ens)), trainer) == 0
    assert trainer.calls == [[(ensemble.member_dir(ens, m), None, m)] for m in (0, 2)]
    assert capsys.readouterr().out == (
        f"ensemble folder: {ens}\nmember 0 of 3\nmember 2 of 3\n"
        f"ensemble: 2 of 3 members complete: {ens / 'ensemble.json'}\n"
    )
    assert ensemble.read(ens)["member_runs"]["1"] == {"state": "not started"}
    with pytest.raises(KeyboardInterrupt):
        ensemble.run(parse("--resume", str(ens), "--member-ids", "1"), Trainer({1: 3}, stop_at=1))
    trainer = Trainer({})
    assert ensemble.run(parse("--resume", str(ens), "--member-ids", "0,2"), trainer) == 0  # member 1 unfinished
    assert trainer.calls == [] and "ensemble: 2 of 3 members complete" in capsys.readouterr().out


def checkpoint(path: Path, done: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        np.savez(f, done=np.int64(done), losses=np.zeros(done))


def test_a_resume_settles_its_members_checkpoints_written_together_and_leaves_the_others(tmp_path, capsys):
    ens = tmp_path / "ens"
    for m in (0, 1, 2):
        checkpoint(runs.pending_path(runs.checkpoint_path(ensemble.member_dir(ens, m), "yat_b", 3)), 40)
    checkpoint(runs.checkpoint_path(ensemble.member_dir(ens, 0), "softmax", 0), 20)
    checkpoint(runs.pending_path(runs.checkpoint_path(ensemble.member_dir(ens, 2), "softmax", 0)), 40)
    (ens / ".ensemble.json.1234abcd.tmp").mkdir()
    (ens / ".ensemble.json.1234abcd.tmp" / "part").write_text("a killed writer's")
    (ensemble.member_dir(ens, 1) / ".train_log.jsonl.1234abcd.tmp").write_text("member 1's")
    ensemble.settle(ens, local_run.Plan(local_run.new_plan(parse()).cfg, ("softmax", "yat_b"), (0, 3), "smoke"), (0, 2))
    assert capsys.readouterr().out == (
        "softmax seed 0: the members' unfinished checkpoints are discarded (they had not all been written)\n"
        "yat_b seed 3: the members' checkpoints at step 40, written together, are put in place\n"
    )
    left = sorted(p.relative_to(ens).as_posix() for p in ens.rglob("*") if p.is_file())
    assert left == [
        "member-0/checkpoints/softmax_s0.npz",
        "member-0/checkpoints/yat_b_s3.npz",
        "member-1/.train_log.jsonl.1234abcd.tmp",
        "member-1/checkpoints/yat_b_s3.npz.pending",
        "member-2/checkpoints/yat_b_s3.npz",
    ]
    assert runs.checkpoint_step(runs.checkpoint_path(ensemble.member_dir(ens, 0), "softmax", 0), 60) == 20


def test_a_members_statistics_per_model_and_final_only_for_the_whole_schedule(tmp_path, monkeypatch):
    for name in ("qk/geom_softmax_s0.npz", "qk/geom_yat_b_s0.npz", "goat/geom_softmax_s4.npz", "geom_yat_b_s4.npz"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(b"")
    monkeypatch.setattr(ensemble, "load_model", lambda folder, variant, seed: (Path(folder).name, variant, seed))
    monkeypatch.setattr(ensemble, "by_step", lambda model, final: {"of": list(model), "final": final})
    config = {"seeds": [4, 0], "variants": ["yat_b", "softmax"]}
    want = {
        "yat_b_s4": {"of": [tmp_path.name, "yat_b", 4]},
        "softmax_s4": {"of": ["goat", "softmax", 4]},
        "yat_b_s0": {"of": ["qk", "yat_b", 0]},
        "softmax_s0": {"of": ["qk", "softmax", 0]},
    }
    for manifest, final in (({}, True), ({"stopped_after": None}, True), ({"stopped_after": 5}, False)):
        got = ensemble.member_statistics(tmp_path, {"config": config, **manifest})
        assert list(got) == list(want) and got == {k: v | {"final": final} for k, v in want.items()}


def test_a_member_whose_manifest_names_no_training_is_refused_as_unreadable(tmp_path, device):
    """A run's manifest names its preset, variants, seeds and training (the schema): a member without its
    training options is one error line, never a KeyError or a run read with today's defaults."""
    ens, config = tmp_path / "ens", {"preset": "smoke", "seeds": [0], "variants": ["softmax"]}
    ensemble.member_dir(ens, 0).mkdir(parents=True)
    (ensemble.member_dir(ens, 0) / runs.MANIFEST).write_text(json.dumps({"completed": True, "config": config}))
    with pytest.raises(InputError, match=r"member-0/manifest.json: config: missing key\(s\) train"):
        ensemble.summarise(ens, {"members": 2, "config": config}, {})
