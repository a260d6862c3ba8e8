"""Signals sent to a command under test that are sure to reach it alive: the command is frozen first."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path


def process_state(pid: int) -> str:
    """The process's state in /proc/PID/stat: "T" stopped, "Z" ended and not yet reaped, "X" gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "X"
    return stat.rpartition(")")[2].split()[0]  # the name before it may hold spaces and parentheses


def in_vfork(pid: int) -> bool:
    """Whether `pid` waits for a child it started with vfork to exec (subprocess's way on Linux): stopped with
    its process group, that child never execs, and the parent waits (state D) until the group goes on."""
    try:
        return Path(f"/proc/{pid}/wchan").read_text() in ("kernel_clone", "wait_for_vfork_done")
    except OSError:
        return False


def frozen(pid: int, limit_s: float = 120.0) -> bool:
    """Stop the process group of `pid` (its leader) and wait until its main process is stopped (True) or has ended (False);
    `limit_s` leaves room for a loaded machine, where a process waits on its disk (state D) for long.

    A stopped process has not begun to exit (an exit under way ends in "Z", never in "T"), and a signal
    sent to it is handled before it runs another instruction of its own once continued: so a signal
    sent while it is frozen reaches a live process, and one that finds it ended is not counted. Without
    this, a command that ended in the last moments before the signal (a zombie `wait` had not yet
    polled) read as one that ignored the Ctrl-C: `(1, '')` instead of `(130, 'interrupted\\n')`.
    """
    os.killpg(pid, signal.SIGSTOP)
    deadline = time.monotonic() + limit_s
    while (state := process_state(pid)) not in ("T", "t", "Z", "X"):
        if state == "D" and in_vfork(pid):  # frozen as well: it runs again only once its child, stopped too, goes on
            return True
        if time.monotonic() > deadline:
            raise AssertionError(f"process {pid} neither stopped nor ended within {limit_s} s (state {state})")
        time.sleep(0.001)
    return state in ("T", "t")


@contextlib.contextmanager
def held(pid: int) -> Iterator[bool]:
    """The process group of `pid` frozen (`frozen`) for the body, which learns whether its main process is
    alive and may signal it; continued after, if any of it is left."""
    live = frozen(pid)
    try:
        yield live
    finally:
        with contextlib.suppress(ProcessLookupError):  # all of the group gone already
            os.killpg(pid, signal.SIGCONT)


def in_a_terminal(cmd: list[str]) -> list[str]:
    """`cmd` as a command started from a shell prompt: with the default action of Ctrl-C, SIGTERM and
    SIGHUP, even where these tests run in the background or under nohup (a shell starts its background jobs
    with SIGINT ignored, nohup ignores SIGHUP, and the command respects an inherited ignore). GNU env restores
    them and execs the command in its place (the same pid), where a `preexec_fn` would fork this
    multithreaded test process (jax's threads) and run Python in the child."""
    return ["env", "--default-signal=INT,TERM,HUP", *cmd]
