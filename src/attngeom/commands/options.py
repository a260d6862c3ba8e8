"""Command-line option values shared by the subcommands, and the typed options record each command builds."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Collection
from dataclasses import fields
from pathlib import Path
from typing import TypeVar

from attngeom.base.errors import InputError, shown

T = TypeVar("T")


def parse_list(text: str, kind: Callable = str, choices: Collection | None = None, what: str = "value") -> tuple:
    """`"a,b"` -> (a, b), each converted by `kind` and, with `choices`, one of them.

    An `argparse.ArgumentTypeError` names what is wrong, so argparse reports it against the option.
    """
    try:
        items = tuple(dict.fromkeys(kind(s.strip()) for s in text.split(",") if s.strip()))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"cannot read {text!r} as a comma-separated list ({exc})") from None
    if not items:
        raise argparse.ArgumentTypeError("empty list")
    unknown = [x for x in items if choices is not None and x not in choices]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown {what} {unknown[0]!r} (choose from {', '.join(map(str, choices))})")
    return items


def integer(lo: int, hi: int | None = None, what: str = "an integer") -> Callable[[str], int]:
    """An argparse `type=`: an integer from `lo` (to `hi`), named `what` in the error."""

    def read(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if value < lo or (hi is not None and value > hi):
            bounds = f"from {lo} to {hi}" if hi is not None else f"{lo} or more"
            raise argparse.ArgumentTypeError(f"{what} is {bounds}, got {value}")
        return value

    return read


def time_limit(text: str) -> float:
    """An argparse `type=`: a time limit, a positive finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"a positive number of seconds, got {text}")
    return value


def utf8(*paths: Path | None) -> None:
    """Refuse a path that is not UTF-8 where the command records what it was given (a manifest, a summary):
    those files are UTF-8 JSON, and a name they cannot hold would leave a run no command can read."""
    for path in paths:
        if path is not None:
            try:
                str(path).encode("utf-8")
            except UnicodeEncodeError:
                raise InputError(f"{shown(path)}: not UTF-8; name files and folders in UTF-8") from None


def typed(kind: type[T], args: argparse.Namespace, /, **values) -> T:
    """The command's options record `kind` (a frozen dataclass), built once from the parsed command line:
    each field the command line has, `values` for those it computes."""
    return kind(**{f.name: getattr(args, f.name) for f in fields(kind) if hasattr(args, f.name)} | values)


seed = integer(0, 2**31 - 1, "a seed")  # what every random generator here accepts
step_count = integer(0, what="a number of steps")
positive = integer(1, what="a positive integer")


def list_of(kind: Callable = str, choices: Collection | None = None, what: str = "value") -> Callable[[str], tuple]:
    """An argparse `type=` that reads a comma-separated list with `parse_list`."""
    return lambda text: parse_list(text, kind, choices, what)


def subcommand(subparsers, name: str, text: str, doc: str) -> argparse.ArgumentParser:
    """A subcommand's parser whose --help shows `doc` (its module's docstring) as written."""
    return subparsers.add_parser(name, help=text, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)


def variants_option(parser: argparse.ArgumentParser, choices: Collection, default: tuple[str, ...]) -> None:
    """--variants: comma-separated names among `choices`, `default` when not given."""
    parser.add_argument(
        "--variants",
        type=list_of(str, choices, "variant"),
        default=default,
        help=f"comma-separated (default: {','.join(default)})",
    )
