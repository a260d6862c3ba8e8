"""A Kaggle build is checked whole before it writes: a user name Kaggle has no such user for, a kernel's time
past Kaggle's session, an ensemble that cannot fit; a refused build leaves no folder, and what a build writes
is a state `kaggle status` reads back."""

from __future__ import annotations

import re

import pytest

from attngeom import cli
from attngeom.backends import kaggle_state
from attngeom.base.errors import InputError


@pytest.mark.parametrize("name", ["al ice", "al\nice", "a" * 256, "al/ice", ""])
def test_a_user_name_kaggle_cannot_have_is_refused_and_nothing_is_written(tmp_path, capsys, name):
    out = tmp_path / "run"
    assert cli.main(["kaggle", "build", "--preset", "smoke", "--username", name, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "is not a Kaggle user name" in err, err
    assert not out.exists()


@pytest.mark.parametrize("seconds", ["99999999999", "43201", "0"])
def test_a_kernel_time_past_kaggles_session_is_refused(tmp_path, capsys, seconds):
    out = tmp_path / "run"
    argv = ["kaggle", "build", "--preset", "smoke", "--username", "alice", "--out", str(out), "--time-limit", seconds]
    assert cli.main(argv) == 2
    assert "a kernel's seconds is from 1 to 43200" in capsys.readouterr().err and not out.exists()
    assert cli.main([*argv[:-2], "--timeout", seconds]) == 2  # the earlier spelling, the same rule


def test_an_ensemble_that_cannot_fit_leaves_no_folder(tmp_path, capsys):
    """64 members of goat_v, 32 vmapped per GPU, are estimated at about 5.85 h (one variant's step is compiled
    to count its FLOPs): more than a 5 h session."""
    out = tmp_path / "run"
    argv = ["kaggle", "build", "--kernels", "attngeom-goat", "--members", "64", "--time-limit", "18000"]
    assert cli.main([*argv, "--username", "alice", "--out", str(out)]) == 2
    assert re.search(r"attngeom-goat-s0: estimated at 5\.\d h, more than the session's 5 h", capsys.readouterr().err)
    assert not out.exists()


def test_what_a_build_writes_its_readers_read(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["kaggle", "build", "--preset", "smoke", "--username", "alice", "--out", str(out), "--time-limit", "600"]
    assert cli.main(argv) == 0
    state = kaggle_state.load_state(out)
    assert state["username"] == "alice" and state["timeout"] == 600
    assert sorted(p.name for p in (out / "kernels").iterdir()) == ["attngeom-goat-s0", "attngeom-qk-s0"]
    with pytest.raises(InputError, match="at username,"):
        kaggle_state.save_state(out, {**state, "username": "al ice"})
    assert kaggle_state.load_state(out) == state
