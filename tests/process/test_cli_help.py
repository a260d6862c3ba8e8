"""The command line's help: every command, those reproduce.sh runs itself included, one line each."""

import os
import re
import subprocess

from helpers import REPO

from attngeom import cli


def _reproduce(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "100"}
    return subprocess.run(
        [str(REPO / "reproduce.sh"), *args], env=env, capture_output=True, text=True, timeout=300, check=False
    )


def test_help_lists_every_command_on_one_line():
    proc = _reproduce("--help")
    assert proc.returncode == 0, proc.stderr
    registered = set(cli.build_parser()._subparsers._group_actions[0].choices)
    assert {"verify", "rerun", "kaggle", "docker", "figures", "test", "bench"} <= registered
    lines = proc.stdout.splitlines()
    block = lines[lines.index("positional arguments:") + 2 : lines.index("options:") - 1]
    assert all(re.match(r"^    \w+ {2,}\S", line) for line in block), block
    assert sorted(line.split()[0] for line in block) == sorted(registered)


def test_shell_commands_are_named_in_the_help_but_run_by_reproduce_sh(capsys):
    assert cli.main(["test"]) == 2
    assert "./reproduce.sh test" in capsys.readouterr().err
    proc = _reproduce("bench")
    assert proc.returncode == 2 and "verify, train, profile or mutation" in proc.stderr and proc.stderr.count("\n") == 1
    proc = _reproduce("bench", "verify", "--help")
    assert proc.returncode == 0 and "--runs" in proc.stdout


def test_the_version_and_the_settings_are_in_the_top_level_help():
    from attngeom import __version__

    done = subprocess.run([str(REPO / "reproduce.sh"), "--version"], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout) == (0, f"attngeom {__version__}\n")
    helped = subprocess.run([str(REPO / "reproduce.sh"), "--help"], capture_output=True, text=True, timeout=120)
    for setting in ("ATTNGEOM_MIRROR", "ATTNGEOM_CACHE", "ATTNGEOM_SYSTEM_PYTHON", "ATTNGEOM_LOCK", "XLA_FLAGS"):
        assert setting in helped.stdout, setting


def test_bench_help_prints_its_own_usage_and_exits_0():
    done = subprocess.run([str(REPO / "reproduce.sh"), "bench", "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("usage: reproduce.sh bench verify|train|profile")
