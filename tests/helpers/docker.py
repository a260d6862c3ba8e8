"""The `docker` command in this process, as the command line builds it (`attngeom.commands.docker.register`)."""

from __future__ import annotations

import argparse

from attngeom.commands import docker as docker_command


def parse(argv: list[str]) -> argparse.Namespace:
    """`argv` (starting with "docker") parsed by the command's own parser: its options and `func`."""
    parser = argparse.ArgumentParser()
    docker_command.register(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def command(argv: list[str]) -> int:
    """`docker ...` parsed and run in process, through its command module: `args.func(args)`'s status."""
    args = parse(argv)
    return args.func(args)
