"""`rerun`'s command: its help, and the RerunOptions record it builds once from the command line."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.commands import assert_own_help, capture, run

from attngeom.base.errors import InputError
from attngeom.base.variants import PUBLISHED
from attngeom.commands import rerun
from attngeom.jobs import rerun as rerun_job
from attngeom.training.local_run import RerunOptions


def test_help_prints_the_commands_own_description(capsys):
    assert_own_help("rerun", rerun, capsys)


def test_no_option_is_the_paper_rerun_of_seed_0(monkeypatch):
    calls = capture(monkeypatch, rerun_job, "run", status=1)
    assert run(["rerun"]) == 1
    assert calls == [(RerunOptions(),)]
    assert calls[0][0].variants == PUBLISHED and calls[0][0].seeds == (0,) and calls[0][0].preset == "paper"


def test_every_option_lands_in_its_field(monkeypatch, tmp_path):
    calls = capture(monkeypatch, rerun_job, "run")
    argv = ["rerun", "--preset", "smoke", "--out", str(tmp_path), "--steps", "40", "--seed", "3"]
    argv += ["--variants", "goat_nov,softmax", "--lr", "0.002", "--stop-after", "20", "--windows", "4"]
    argv += ["--members", "3", "--time-limit", "90.5", "--preflight", "0", "--members-mode", "sequential"]
    argv += ["--member-ids", "2,1", "--quiet"]
    assert run(argv) == 0
    (opts,) = calls[0]
    assert opts == RerunOptions(
        preset="smoke",
        out=tmp_path,
        steps=40,
        seeds=(3,),
        variants=("goat_nov", "softmax"),
        lr=0.002,
        stop_after=20,
        windows=4,
        members=3,
        time_limit=90.5,
        preflight=0,
        members_mode="sequential",
        member_ids=(2, 1),
        quiet=True,
    )
    assert opts.deadline is None and opts.resume is None  # the deadline is set once, by the rerun itself


def test_seeds_override_seed_and_resume_is_a_path(monkeypatch, tmp_path):
    calls = capture(monkeypatch, rerun_job, "run")
    run(["rerun", "--seed", "5", "--seeds", "1,2,1"])
    run(["rerun", "--resume", str(tmp_path)])
    assert [c[0].seeds for c in calls] == [(1, 2), (0,)]
    assert calls[1][0].resume == tmp_path and isinstance(calls[1][0].resume, Path)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--members", "1"], "--members"),
        (["--members", "65"], "--members"),
        (["--time-limit", "inf"], "--time-limit"),
        (["--seed", "-1"], "--seed"),
        (["--variants", "yat"], "unknown variant 'yat'"),
        (["--member-ids", "64"], "--member-ids"),
        (["--preset", "huge"], "--preset"),
    ],
)
def test_a_bad_option_is_refused_before_the_rerun(monkeypatch, argv, message):
    calls = capture(monkeypatch, rerun_job, "run")
    with pytest.raises(InputError, match=message):
        run(["rerun", *argv])
    assert calls == []
