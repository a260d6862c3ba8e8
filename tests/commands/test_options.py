"""The option types the subcommands share, and the typed record a command builds from its parsed line."""

from __future__ import annotations

import argparse
import math
from dataclasses import FrozenInstanceError, dataclass
from pathlib import Path

import pytest

from attngeom.commands import options


def test_a_list_is_read_in_order_without_repeats_or_blanks():
    assert options.parse_list("b, a,,b ,c") == ("b", "a", "c")
    assert options.parse_list("3,1,3", int) == (3, 1)
    assert options.parse_list("x", choices=("x", "y")) == ("x",)


@pytest.mark.parametrize(
    ("text", "kind", "choices", "message"),
    [
        ("", str, None, "empty list"),
        (" , ,", str, None, "empty list"),
        ("1,x", int, None, "cannot read '1,x' as a comma-separated list"),
        ("a,z", str, ("a", "b"), "unknown variant 'z' \\(choose from a, b\\)"),
    ],
)
def test_a_bad_list_names_what_is_wrong(text, kind, choices, message):
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        options.parse_list(text, kind, choices, "variant")


def test_list_of_reads_with_its_kind_and_choices():
    read = options.list_of(int, (1, 2), "member")
    assert read("2,1") == (2, 1)
    with pytest.raises(argparse.ArgumentTypeError, match="unknown member 3"):
        read("3")


def test_an_integer_is_read_within_its_bounds_inclusive():
    read = options.integer(2, 5, "a count")
    assert [read(t) for t in ("2", "5", " 3 ")] == [2, 5, 3]
    for text, message in (
        ("1", "a count is from 2 to 5, got 1"),
        ("6", "from 2 to 5, got 6"),
        ("2.0", "expected a count"),
    ):
        with pytest.raises(argparse.ArgumentTypeError, match=message):
            read(text)
    assert options.integer(0)("12345678901234567890") == 12345678901234567890  # no upper bound unless given
    with pytest.raises(argparse.ArgumentTypeError, match="an integer is 0 or more, got -1"):
        options.integer(0)("-1")


def test_the_shared_integers_have_their_bounds():
    assert options.seed("0") == 0 and options.seed(str(2**31 - 1)) == 2**31 - 1
    for read, text in ((options.seed, str(2**31)), (options.seed, "-1"), (options.positive, "0")):
        with pytest.raises(argparse.ArgumentTypeError):
            read(text)
    assert options.step_count("0") == 0 and options.positive("1") == 1


def test_a_time_limit_is_a_positive_finite_number_of_seconds():
    assert options.time_limit("0.5") == 0.5 and options.time_limit("1e3") == 1000.0
    for text in ("0", "-1", "inf", "nan", "-inf"):
        with pytest.raises(argparse.ArgumentTypeError, match="a positive number of seconds"):
            options.time_limit(text)
    with pytest.raises(argparse.ArgumentTypeError, match="expected a number of seconds, got 'soon'"):
        options.time_limit("soon")
    assert not math.isinf(options.time_limit("1e308"))


@dataclass(frozen=True)
class Opts:
    out: Path
    steps: int | None = None
    tags: tuple[str, ...] = ()


def test_typed_takes_the_fields_the_line_has_and_the_values_given():
    args = argparse.Namespace(out=Path("o"), steps=3, func=print, unrelated=1)
    assert options.typed(Opts, args) == Opts(Path("o"), 3)
    assert options.typed(Opts, args, tags=("a",), steps=4) == Opts(Path("o"), 4, ("a",))  # given values win
    assert options.typed(Opts, argparse.Namespace(out=Path("p"))) == Opts(Path("p"))  # defaults for the rest
    with pytest.raises(FrozenInstanceError):
        options.typed(Opts, args).steps = 5
    with pytest.raises(TypeError):
        options.typed(Opts, argparse.Namespace(steps=1))  # a field with no default must come from somewhere


def test_a_subcommand_shows_its_doc_as_written_and_variants_option_reads_its_choices(capsys):
    parser = argparse.ArgumentParser(prog="p")
    sub = parser.add_subparsers()
    doc = "First line.\n\n    an indented block\n  kept as written"
    child = options.subcommand(sub, "one", "the one command", doc)
    options.variants_option(child, ("a", "b", "c"), ("a", "b"))
    assert parser.parse_args(["one"]).variants == ("a", "b")
    assert parser.parse_args(["one", "--variants", "c,a"]).variants == ("c", "a")
    with pytest.raises(SystemExit):
        parser.parse_args(["one", "--variants", "d"])
    assert "unknown variant 'd'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parser.parse_args(["one", "--help"])
    out = capsys.readouterr().out
    assert doc in out and "(default: a,b)" in out
