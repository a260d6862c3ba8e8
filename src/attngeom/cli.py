"""The command line: `python -m attngeom [verify|rerun|fidelity|kaggle|docker|figures] ...`.

Each subcommand lives in its own module, which exposes `register(subparsers)`; the parser it
adds sets `func`, called with the parsed arguments and returning the exit status. Unusable
input (`InputError`) becomes one line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from functools import partial

from attngeom.errors import EXIT_INPUT, InputError

SUBCOMMAND_MODULES = (
    "attngeom.verify",
    "attngeom.training.rerun",
    "attngeom.training.fidelity",
    "attngeom.backends.kaggle",
    "attngeom.backends.docker",
    "attngeom.figures",
)
DEFAULT_SUBCOMMAND = "verify"
# Commands reproduce.sh runs itself; listed here so that --help names every command.
SHELL_COMMANDS = {
    "test": "run the test suite (arguments go to pytest)",
    "bench": "time verify or the training harness: bench verify|train [args]",
}


class Parser(argparse.ArgumentParser):
    """argparse, but a bad command line is one `error:` line (exit 2), not a usage block."""

    def error(self, message: str):
        raise InputError(f"{self.prog}: {message} (see {self.prog} --help)")


def build_parser() -> Parser:
    """The full parser, one subparser per registered subcommand module."""
    parser = Parser(
        prog="reproduce.sh",
        description="Verify the claims of 'The Geometry of Attention Is a Choice of Kernel'.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(name).register(sub)
    for name, text in SHELL_COMMANDS.items():
        if name not in sub.choices:
            sub.add_parser(name, help=text, add_help=False).set_defaults(func=partial(_shell_only, name))
    return parser


def _shell_only(name: str, _args: argparse.Namespace) -> int:
    raise InputError(f"{name} is run by reproduce.sh itself: ./reproduce.sh {name} ...")


def main(argv: list[str] | None = None) -> int:
    """Parse, dispatch, and turn bad input into exit status 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    commands = set(parser._subparsers._group_actions[0].choices)  # noqa: SLF001 - argparse keeps them here
    if not argv or (argv[0] not in commands and argv[0] not in ("-h", "--help")):
        argv.insert(0, DEFAULT_SUBCOMMAND)
    try:
        args = parser.parse_args(argv)
        return int(args.func(args))
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
