"""The exit contract when the process itself is used hostilely: closed and broken streams, terminating
signals, and a working folder that holds code."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO
from helpers.reports import (
    assert_consistent_set,
    assert_one_error_line,
    cli,
    command,
    environment,
    run,
    stray_temporaries,
)
from helpers.signals import held, in_a_terminal


def _shell(script: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """`script` in bash with the command line as "$@" (to close descriptors before it runs)."""
    return run(["bash", "-c", script, "bash", *command(*args)], cwd)


# 1. Streams: a closed or broken stream never changes the status.


def test_a_refused_input_with_stdout_closed_is_2(tmp_path):
    proc = _shell(
        'exec >&-; exec "$@"', "--bundles", str(tmp_path / "none"), "--out", str(tmp_path / "o"), cwd=tmp_path
    )
    assert_one_error_line(proc, 2)


def test_a_refused_input_with_stderr_closed_is_2(tmp_path):
    proc = _shell(
        'exec 2>&-; exec "$@"', "--bundles", str(tmp_path / "none"), "--out", str(tmp_path / "o"), cwd=tmp_path
    )
    assert proc.returncode == 2 and proc.stdout == "", (proc.returncode, proc.stdout)


def test_a_verdict_with_stdout_closed_keeps_its_status(published_root, tmp_path):
    proc = _shell('exec >&-; exec "$@"', "--bundles", str(published_root), "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert proc.returncode == 1 and proc.stderr == "", proc.stderr[-2000:]
    assert_consistent_set(tmp_path / "o")


def _verify_at_work(published_root: Path, out: Path, act) -> tuple[int, str]:
    """Verify into `out`; once it has printed its first line, `act(proc)`; its status and stderr."""
    with subprocess.Popen(
        in_a_terminal(command("--bundles", str(published_root), "--out", str(out))),
        cwd=out.parent,
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group, which `frozen` stops
    ) as proc:
        assert proc.stdout.readline().startswith(b"evidence:")  # at work
        act(proc)
        err = proc.stderr.read().decode()
        return proc.wait(timeout=600), err


def test_a_reader_that_goes_away_leaves_the_verdict(published_root, tmp_path):
    status, err = _verify_at_work(published_root, tmp_path / "o", lambda proc: proc.stdout.close())  # `| head -1`
    assert status == 1 and "error" not in err, err
    assert_consistent_set(tmp_path / "o")


def _on_null(fd: int) -> bool:
    return os.path.samestat(os.fstat(fd), os.stat(os.devnull))


def _open_fds() -> list[str]:
    return sorted(os.listdir("/proc/self/fd"))


def test_a_descriptor_moved_to_null_leaves_no_other_open():
    """streams._to_null, in this process: an open descriptor (a pipe's end) now writes to /dev/null, a
    closed one is reopened there under its own number, and the descriptor /dev/null came on is closed."""
    from attngeom.base import streams

    read, write = os.pipe()
    try:
        before = _open_fds()
        streams._to_null(write)
        assert _on_null(write) and _open_fds() == before
        os.write(write, b"gone")
        os.close(write)
        streams._to_null(write)  # closed: /dev/null opens on the lowest free number, this one
        assert _on_null(write) and _open_fds() == before
        assert os.read(read, 16) == b""  # the end: nothing reached the pipe, and no writer holds it
    finally:
        os.close(read)
        os.close(write)


class _Reader:
    """A text stream on a pipe whose reader goes away after `lasting` calls: then each call is a broken pipe."""

    def __init__(self, fd: int, lasting: int, returns=None) -> None:
        self.fd, self.lasting, self.returns, self.calls, self.encoding = fd, lasting, returns, [], "utf-8"

    def fileno(self) -> int:
        return self.fd

    def _call(self, *args):
        self.calls.append(args)
        if not _on_null(self.fd) and len(self.calls) > self.lasting:
            raise BrokenPipeError(32, "Broken pipe")
        return self.returns

    def write(self, text: str):
        return self._call(text)

    def flush(self) -> None:
        self._call()


def test_a_stream_whose_reader_goes_away_writes_on_into_null():
    from attngeom.base import streams

    read, write = os.pipe()
    try:
        stream = streams.Forgiving(_Reader(write, lasting=1, returns=3))
        assert stream.write("abc") == 3 and not _on_null(write)  # the stream's own count
        assert stream.write("de") == 3 and _on_null(write)  # broken: moved to /dev/null, written again
        assert stream.encoding == "utf-8"  # everything else is the stream's
        stream.flush()
        assert stream._stream.calls == [("abc",), ("de",), ("de",), ()]
        counting = streams.Forgiving(_Reader(write, lasting=5))
        assert counting.write("abcd") == 4  # a stream that counts nothing: the text's length
    finally:
        os.close(read)
        os.close(write)


def test_a_stream_still_broken_on_null_discards_what_was_left():
    from attngeom.base import streams

    class Broken(_Reader):
        def _call(self, *args):
            self.calls.append(args)
            raise BrokenPipeError(32, "Broken pipe")

    read, write = os.pipe()
    try:
        stream = streams.Forgiving(Broken(write, lasting=0))
        assert stream.write("abc") == 3 and _on_null(write)
        stream.flush()
        assert stream._stream.calls == [("abc",), ("abc",), (), ()]
    finally:
        os.close(read)
        os.close(write)


def test_the_guard_opens_closed_descriptors_on_null_and_wraps_the_output_streams(monkeypatch):
    """streams.guard, in this process, with descriptors 0 and 2 closed: only those go to /dev/null; stdout
    is wrapped (once: a wrapped stream is kept as it is), stdin never; a stream Python started without
    (closed then) is opened on its descriptor, UTF-8 with escapes, never closing the descriptor."""
    import io

    from attngeom.base import streams

    closed, moved = {0, 2}, []

    def fstat(fd):
        if fd in closed:
            raise OSError(9, "Bad file descriptor")
        return os.stat(os.devnull)

    monkeypatch.setattr(streams.os, "fstat", fstat)
    monkeypatch.setattr(streams, "_to_null", moved.append)
    stdin, stdout, stderr = io.StringIO(), io.StringIO(), io.StringIO()
    for name, stream in (("stdin", stdin), ("stdout", stdout), ("stderr", stderr)):
        monkeypatch.setattr(sys, name, stream)
    streams.guard()
    assert moved == [0, 2] and sys.stdin is stdin
    assert isinstance(sys.stdout, streams.Forgiving) and sys.stdout._stream is stdout
    assert isinstance(sys.stderr, streams.Forgiving) and sys.stderr._stream is stderr
    wrapped = sys.stdout
    streams.guard()
    assert sys.stdout is wrapped and sys.stdout._stream is stdout
    for name in ("stdin", "stdout", "stderr"):
        monkeypatch.setattr(sys, name, None)
    streams.guard()
    opened = {name: getattr(sys, name) for name in ("stdin", "stdout", "stderr")}
    opened = {name: getattr(s, "_stream", s) for name, s in opened.items()}
    assert not isinstance(sys.stdin, streams.Forgiving) and isinstance(sys.stderr, streams.Forgiving)
    assert {name: (s.fileno(), s.mode) for name, s in opened.items()} == {
        "stdin": (0, "r"),
        "stdout": (1, "w"),
        "stderr": (2, "w"),
    }
    for s in opened.values():
        assert (s.encoding, s.errors, s.buffer.raw.closefd) == ("utf-8", "backslashreplace", False)


# 2. No code from the working folder.


def test_a_subprocess_started_as_the_tests_do_ignores_the_working_folder(tmp_path):
    (tmp_path / "random.py").write_text('print("my dice script")\n')
    proc = cli("--help", cwd=tmp_path)
    assert proc.returncode == 0 and "dice" not in proc.stdout + proc.stderr, proc.stderr[-2000:]


def test_the_image_runs_python_without_the_working_folder():
    env = (REPO / "Dockerfile").read_text()
    assert "PYTHONSAFEPATH=1" in env and 'ENTRYPOINT ["/opt/attngeom/reproduce.sh"]' in env


# 8. SIGTERM and SIGHUP end like Ctrl-C, with their own statuses.


def _signalled_at_work(published_root: Path, out: Path, sig: int, tries: int = 5) -> tuple[int, str]:
    """`sig` sent to a verify at work (it has printed its first line), frozen first so that the signal reaches
    it alive; a verify that ended before it was frozen (a loaded machine can starve the test that long) does
    not count, and another try starts. Its status and stderr."""
    live: list[bool] = []

    def act(proc):
        with held(proc.pid) as alive:
            live.append(alive)
            if alive:
                proc.send_signal(sig)

    for _ in range(tries):
        status, err = _verify_at_work(published_root, out, act)
        if live[-1]:
            return status, err
    raise AssertionError(f"verify ended before the signal {tries} times in a row")


@pytest.mark.parametrize("sig, status", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)], ids=["SIGTERM", "SIGHUP"])
def test_a_terminating_signal_is_one_line_and_its_status(sig, status, published_root, tmp_path):
    out = tmp_path / "o"
    assert cli("--bundles", str(published_root), "--out", str(out), cwd=tmp_path).returncode == 1
    assert _signalled_at_work(published_root, out, sig) == (status, f"interrupted ({sig.name})\n")
    assert_consistent_set(out)
    assert not stray_temporaries(tmp_path)


def _python(script: str, cwd: Path) -> subprocess.CompletedProcess:
    """`script` run by Python as a command started from a terminal."""
    return subprocess.run(
        in_a_terminal([sys.executable, "-c", script]),
        cwd=cwd,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=120,
    )


_WAITS_FOR_A_POOL = """
import signal, sys, threading, time
from attngeom.cli import entry

def work():
    poke = lambda: signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # taken by this thread
    threading.Thread(target=lambda: (time.sleep(0.5), poke())).start()
    try:
        threading.Event().wait()  # the main thread asleep, as it is waiting on a pool's result
    finally:
        print("cleaned up", flush=True)
    return 0

entry(work)
"""


def test_a_signal_taken_by_another_thread_unwinds_the_main_one(tmp_path):
    """Case: a Ctrl-C that reached a stopped `figures` was taken, once it went on, by one of the pool's threads;
    the main thread slept on in its wait until the grace period ended the process with its report's
    temporary folder left behind."""
    proc = _python(_WAITS_FOR_A_POOL, tmp_path)
    assert (proc.returncode, proc.stdout, proc.stderr) == (130, "cleaned up\n", "interrupted\n")


_TEARS_DOWN_XLA = """
import jax, jax.numpy as jnp
from jax._src import api
from attngeom.cli import entry

api.clear_backends = lambda **kw: print("backends torn down", flush=True)  # what jax's exit handler calls
entry(lambda: int(jnp.ones(3).sum()) - 3)
"""


def test_the_exit_leaves_jax_backends_alone(tmp_path):
    """Case: a smoke rerun interrupted during training printed its line, then ended by SIGSEGV: jax's exit
    handler tore down the backends while one of its threads was still at work."""
    proc = _python(_TEARS_DOWN_XLA, tmp_path)
    assert (proc.returncode, proc.stdout) == (0, ""), proc.stderr[-2000:]


def test_the_kaggle_kernel_starts_its_pythons_without_the_working_folder(monkeypatch, tmp_path):
    from attngeom.backends import kernel_main

    monkeypatch.delenv("PYTHONSAFEPATH", raising=False)  # restored afterwards, as main sets it
    monkeypatch.delenv("KAGGLE_KERNEL_RUN_TYPE", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(kernel_main.tempfile, "mkdtemp", lambda prefix: str(tmp_path / "scratch"))
    monkeypatch.setattr(kernel_main, "unpack", lambda source, sha, repo: None)
    monkeypatch.setattr(kernel_main, "interpreter", lambda scratch, repo: sys.executable)
    started = []

    def training(cmd, **kwargs):  # the rerun, as the kernel starts it: here it fails at once
        started.append(kwargs["env"])
        return subprocess.CompletedProcess(cmd, 2)

    monkeypatch.setattr(kernel_main.subprocess, "run", training)
    settings = {"PRESET": "smoke", "OUTPUT_DIR": "out", "VARIANTS": "softmax", "SEED": "0", "BUNDLE": "b"}
    with pytest.raises(SystemExit, match="failed"):
        kernel_main.main({**settings, "SOURCE_SHA256": "0" * 64, "RUN_ID": "r"}, "")
    assert [env.get("PYTHONSAFEPATH") for env in started] == ["1"]
    assert os.environ["PYTHONSAFEPATH"] == "1"  # and so every Python those start
