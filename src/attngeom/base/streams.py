"""The standard streams in a hostile environment: closed descriptors and readers that go away.

A command's exit status is its verdict's, so no stream may change it. A descriptor 0, 1 or 2
that the caller closed (`exec >&-`) is opened on /dev/null before anything else can take its
number (a file opened later would otherwise receive the output); a reader that goes away
(`| head -1`) turns its stream into /dev/null at the first broken pipe, and the command carries
on to its verdict.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading

ENDING = threading.Event()
"""Set once a signal ends the command (`cli`): after its one `interrupted` line, no progress is shown."""


def _to_null(fd: int) -> None:
    null = os.open(os.devnull, os.O_RDWR)
    if null != fd:
        os.dup2(null, fd)
        os.close(null)


class Forgiving:
    """A text stream that, when its reader has gone, goes on writing into /dev/null."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def _retry(self, op, *args):
        try:
            return op(*args)
        except BrokenPipeError:
            _to_null(self._stream.fileno())
            with contextlib.suppress(BrokenPipeError):  # what the failed call left buffered, now discarded
                return op(*args)

    def write(self, text: str) -> int:
        """Write, or discard once the reader has gone."""
        return self._retry(self._stream.write, text) or len(text)

    def flush(self) -> None:
        """Flush, or discard once the reader has gone."""
        self._retry(self._stream.flush)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def guard() -> None:
    """Open closed standard descriptors on /dev/null; make stdout and stderr survive a gone reader."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            _to_null(fd)
    for name, fd, mode in (("stdin", 0, "r"), ("stdout", 1, "w"), ("stderr", 2, "w")):
        stream = getattr(sys, name)
        if stream is None:  # closed when Python started
            stream = open(fd, mode, encoding="utf-8", errors="backslashreplace", closefd=False)
        setattr(sys, name, stream if mode == "r" or isinstance(stream, Forgiving) else Forgiving(stream))
