"""The error type and exit statuses every command shares, and the one-line forms of messages and paths."""

from __future__ import annotations

import errno
import os

import pytest

from attngeom.base import errors


def test_the_exit_statuses_are_the_documented_ones():
    assert (errors.EXIT_PASS, errors.EXIT_FAIL, errors.EXIT_INPUT, errors.EXIT_INTERNAL) == (0, 1, 2, 3)
    assert errors.EXIT_INTERRUPT == 128 + 2  # 128 + SIGINT
    assert issubclass(errors.InputError, Exception) and not issubclass(errors.InputError, OSError)


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("plain", "plain"),
        ("two\nlines\r\n and  tabs\there", "two lines and tabs here"),
        ("  padded  ", "padded"),
        ("bell\x07 escape\x1b[31m red", "bell\\x07 escape\\x1b[31m red"),
        ("del\x7f and c1\x85 and\u2028sep", "del\\x7f and c1 and sep"),
        (ValueError("from an exception\nof two lines"), "from an exception of two lines"),
        ("", ""),
    ],
)
def test_one_line_joins_whitespace_and_escapes_control_characters(text, line):
    assert errors.one_line(text) == line
    assert "\n" not in errors.one_line(text) and "\x1b" not in errors.one_line(text)


def test_a_path_that_is_not_utf8_is_shown_with_escapes():
    assert errors.shown("/tmp/plain") == "/tmp/plain"
    raw = os.fsdecode(b"/tmp/caf\xe9")  # a Latin-1 name: surrogate-escaped by Python
    assert errors.shown(raw) == "/tmp/caf\\xe9"
    assert errors.shown(os.fsencode(raw)) == "/tmp/caf\\xe9"  # bytes too
    "x".join([errors.shown(raw)]).encode("utf-8")  # always writable


def test_a_full_disk_is_among_the_unwritable_outputs_and_nothing_else_is_a_full_disk():
    assert set(errors.FULL_DISK) == {errno.ENOSPC, errno.EDQUOT}
    assert set(errors.FULL_DISK) < set(errors.UNWRITABLE)
    assert {errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG, errno.EISDIR, errno.ENOTDIR} <= set(errors.UNWRITABLE)
    assert errno.ENOENT not in errors.UNWRITABLE  # a missing input is not an output problem


def test_a_quoted_message_never_reaches_the_terminal_as_control_characters():
    from attngeom.base.errors import one_line

    said = one_line("kernel failed:\x1b[2J\x1b[31m red\n\tnext\x07 line\x9b")
    assert said == "kernel failed:\\x1b[2J\\x1b[31m red next\\x07 line\\x9b"
    assert all(ch.isprintable() for ch in said)
