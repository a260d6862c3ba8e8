"""A subcommand as the command line builds it (`attngeom.cli.build_parser`): its help, and the options
record it hands its work, captured in place of the work."""

from __future__ import annotations

import argparse
import types

import pytest

from attngeom import cli


def parse(argv: list[str]) -> argparse.Namespace:
    """`argv` parsed by the program's own parser (every registered subcommand)."""
    return cli.build_parser().parse_args(argv)


def help_of(argv: list[str], capsys) -> str:
    """What `argv ... --help` prints; it must exit 0."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as ended:
        parse([*argv, "--help"])
    assert ended.value.code == 0
    return capsys.readouterr().out


def assert_own_help(name: str, module: types.ModuleType, capsys, argv: list[str] | None = None) -> None:
    """`NAME --help` names the command in its usage, shows its module's docstring as written, and no other
    command's."""
    out = help_of(argv or [name], capsys)
    assert out.startswith(f"usage: reproduce.sh {name}"), out[:200]
    assert module.__doc__.strip() in out
    for other in cli.COMMANDS:
        if other != name:
            first = __import__(f"attngeom.commands.{other}", fromlist=["_"]).__doc__.strip().splitlines()[0]
            assert first not in out, other


def capture(monkeypatch, module: types.ModuleType, name: str, status: int = 0) -> list:
    """Replace `module.name`, a command's work, with a recorder that returns `status`: the list of the
    positional arguments of each call."""
    calls: list = []

    def record(*args, **kwargs):
        calls.append(args + tuple(kwargs.values()))
        return status

    monkeypatch.setattr(module, name, record)
    return calls


def run(argv: list[str]) -> int:
    """`argv` parsed and its command's `func` called, as `cli.main` does without the endings."""
    args = parse(argv)
    return args.func(args)
