"""The standard streams in a hostile environment, in this process: a reader that goes away turns its stream
into /dev/null, and closed descriptors are opened on /dev/null before anything can take their number."""

from __future__ import annotations

import io
import os
import subprocess
import sys

from attngeom.base import streams


class Gone(io.StringIO):
    """A text stream whose reader has gone: its first `breaks` calls raise BrokenPipeError."""

    def __init__(self, fd: int, breaks: int = 1) -> None:
        super().__init__()
        self.fd, self.breaks, self.calls = fd, breaks, 0

    def fileno(self) -> int:
        return self.fd

    def write(self, text: str) -> int:
        self.calls += 1
        if self.breaks:
            self.breaks -= 1
            raise BrokenPipeError
        return super().write(text)

    def flush(self) -> None:
        if self.breaks:
            self.breaks -= 1
            raise BrokenPipeError


def test_a_broken_pipe_sends_the_descriptor_to_dev_null_and_the_write_goes_on(tmp_path):
    with open(tmp_path / "f", "w") as f:
        fd = os.dup(f.fileno())
    try:
        stream = Gone(fd)
        forgiving = streams.Forgiving(stream)
        assert forgiving.write("hello") == 5  # retried once, after the descriptor went to /dev/null
        assert stream.getvalue() == "hello" and stream.calls == 2
        assert os.path.samestat(os.fstat(fd), os.stat(os.devnull))
        forgiving.flush()  # nothing left to raise
    finally:
        os.close(fd)


def test_a_write_that_breaks_twice_is_discarded_and_counted_as_written(tmp_path):
    fd = os.open(tmp_path / "g", os.O_WRONLY | os.O_CREAT)
    try:
        stream = Gone(fd, breaks=2)
        assert streams.Forgiving(stream).write("lost") == 4
        assert stream.getvalue() == ""
    finally:
        os.close(fd)


def test_forgiving_passes_on_what_it_does_not_guard():
    stream = io.StringIO()
    forgiving = streams.Forgiving(stream)
    forgiving.write("x")
    assert forgiving.getvalue() == "x" and forgiving.closed is False


def test_guard_opens_closed_descriptors_on_dev_null_and_wraps_the_output_streams():
    """In a child whose stdout is closed: a file opened after guard() does not get descriptor 1."""
    code = (
        "import os, sys\n"
        "from attngeom.base import streams\n"
        "streams.guard()\n"
        "assert isinstance(sys.stdout, streams.Forgiving) and isinstance(sys.stderr, streams.Forgiving)\n"
        "assert not isinstance(sys.stdin, streams.Forgiving)\n"
        "streams.guard()\n"
        "assert not isinstance(sys.stdout._stream, streams.Forgiving)  # wrapped once\n"
        "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT)\n"
        "assert fd > 2, fd\n"
        "print('to the void')\n"
        "os.write(fd, b'ok')\n"
    )
    import tempfile
    from pathlib import Path

    from helpers import REPO

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        done = subprocess.run(
            ["sh", "-c", 'exec "$@" >&-', "sh", sys.executable, "-c", code, str(out)],
            env={**os.environ, "PYTHONPATH": str(REPO / "src")},
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert out.read_bytes() == b"ok"
