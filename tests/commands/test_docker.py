"""`docker`'s command: its help, and the BuildOptions and RunOptions records `docker build` and `docker run`
hand the backend."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.commands import assert_own_help, capture, run

from attngeom.backends import docker as docker_backend
from attngeom.backends.docker import BuildOptions, RunOptions
from attngeom.base.errors import InputError
from attngeom.commands import docker


def test_help_prints_the_commands_own_description(capsys):
    assert_own_help("docker", docker, capsys)


def test_build_hands_its_options_to_cmd_build(monkeypatch, tmp_path):
    calls = capture(monkeypatch, docker_backend, "cmd_build", status=1)
    assert run(["docker", "build"]) == 1
    assert run(["docker", "build", "--image", "x:1", "--base", "ubuntu:24.04", "--ca-bundle", str(tmp_path)]) == 1
    assert calls == [(BuildOptions(docker.IMAGE),), (BuildOptions("x:1", "ubuntu:24.04", tmp_path),)]


def test_run_hands_its_options_and_the_rest_of_the_line_to_cmd_run(monkeypatch, tmp_path):
    calls = capture(monkeypatch, docker_backend, "cmd_run")
    assert run(["docker", "run"]) == 0
    assert run(["docker", "run", "--out", str(tmp_path), "--gpus", "none", "rerun", "--out", "x", "--gpus", "all"]) == 0
    assert run(["docker", "run", "--output", str(tmp_path), "--", "--help"]) == 0  # the earlier spelling
    assert calls == [
        (RunOptions(docker.IMAGE, Path("docker-out")),),
        (RunOptions(docker.IMAGE, tmp_path, "none", ("rerun", "--out", "x", "--gpus", "all")),),
        (RunOptions(docker.IMAGE, tmp_path, "auto", ("--", "--help")),),
    ]
    assert isinstance(calls[1][0].args, tuple)  # a frozen record holds no list


@pytest.mark.parametrize(
    ("argv", "message"), [(["push"], "invalid choice: 'push'"), (["run", "--gpus", "2"], "--gpus"), ([], "ACTION")]
)
def test_a_bad_action_or_option_is_refused(monkeypatch, argv, message):
    calls = capture(monkeypatch, docker_backend, "cmd_run")
    with pytest.raises(InputError, match=message):
        run(["docker", *argv])
    assert calls == []
