"""The command line: `python -m attngeom [verify|rerun|fidelity|kaggle|docker|figures|summary|bands|docs] ...`.

Each subcommand is a module of `attngeom.commands` that exposes `register(subparsers)`; the parser it
adds sets `func`, called with the parsed arguments and returning the exit status. `ended` is the
one place where every way a command can end becomes its exit status (see attngeom.base.errors):
unusable input is one `error:` line and 2, any other exception is one line naming it and the log
file that holds its traceback, and 3, and Ctrl-C, SIGTERM or SIGHUP is one line and 128 + the
signal (130, 143, 129) at any moment.
"""

from __future__ import annotations

import _thread
import argparse
import atexit
import contextlib
import datetime as dt
import gc
import importlib
import os
import signal
import socket
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable
from functools import partial
from pathlib import Path

from attngeom import __version__
from attngeom.base import streams
from attngeom.base.errors import EXIT_INPUT, EXIT_INTERNAL, FULL_DISK, UNWRITABLE, InputError, one_line, shown

COMMANDS = ("verify", "rerun", "fidelity", "kaggle", "docker", "figures", "summary", "bands", "docs")
"""The subcommands, each a module of `attngeom.commands` that registers its options; its work is imported
only when it runs."""
DEFAULT_SUBCOMMAND = "verify"
# Commands reproduce.sh runs itself; listed here so that --help names every command.
SHELL_COMMANDS = {
    "test": "run the test suite (arguments go to pytest)",
    "bench": "benchmarks and the mutation check: bench verify|train|profile|mutation",
}
SETTINGS = """settings read from the environment:
  ATTNGEOM_MIRROR=DIR         a local copy of the remote files, laid out as DIR/<host>/<path>
  ATTNGEOM_CACHE=DIR          the download cache (default ~/.cache/attngeom)
  ATTNGEOM_VENV=DIR           the environment reproduce.sh builds (default .venv)
  ATTNGEOM_PYTHON=PYTHON      the Python that builds it
  ATTNGEOM_LOCK=FILE          the lock it is built from (default requirements.lock)
  ATTNGEOM_SYSTEM_PYTHON=PY   run on an interpreter that holds the packages already; nothing is built
  XLA_FLAGS=...               XLA's flags (--xla_cpu_max_isa=SSE4_2: another CPU's round-off)"""
GRACE_S = 3.0  # after Ctrl-C, the time the command has to clean up before it is ended regardless
# Ctrl-C, `kill`, a closed terminal: each ends a command the same way, with status 128 + its number.
ENDING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Parser(argparse.ArgumentParser):
    """argparse, but a bad command line is one `error:` line (exit 2), not a usage block."""

    def error(self, message: str):
        raise InputError(f"{self.prog}: {message} (see {self.prog} --help)")


def build_parser() -> Parser:
    """The full parser, one subparser per registered subcommand module."""
    parser = Parser(
        prog="reproduce.sh",
        description="Verify the claims of 'The Geometry of Attention Is a Choice of Kernel'.",
        epilog=SETTINGS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"attngeom {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"attngeom.commands.{name}").register(sub)
    for name, text in SHELL_COMMANDS.items():
        if name not in sub.choices:
            sub.add_parser(name, help=text, add_help=False).set_defaults(func=partial(_shell_only, name))
    return parser


def _shell_only(name: str, _args: argparse.Namespace) -> int:
    raise InputError(f"{name} is run by reproduce.sh itself: ./reproduce.sh {name} ...")


class _Interrupt:
    """Ctrl-C, SIGTERM and SIGHUP as one line and exit 128 + signal (130, 143, 129), whatever the
    main thread is doing.

    Python's handler raises KeyboardInterrupt so that the command unwinds and removes what it
    half-wrote. Where a library swallows it (jax's garbage-collection callback does), the
    unraisable hook hands it back to the main thread instead of printing a traceback. The C-level
    handler also wakes a watcher thread (`signal.set_wakeup_fd`), which prints the line at once and
    ends the process after GRACE_S whatever happens, even while the main thread sits in compiled
    code such as an XLA compilation. A signal the caller ignores (`nohup`) stays ignored.

    The kernel hands a process's signal to any of its threads (a stopped process: to whichever runs
    first once continued). Taken by another thread, it leaves the main thread asleep in a wait (a
    worker pool's result) until the grace period ends it, its temporaries left behind; so the
    watcher sends it on to the main thread. The KeyboardInterrupt is raised once: a second signal
    never cuts into the cleanup the first began, which the grace period bounds.
    """

    def __init__(self) -> None:
        self.seen = threading.Event()
        self.signum = signal.SIGINT
        self._raised = False
        self._said = threading.Lock()
        self._pair: tuple[socket.socket, socket.socket] | None = None

    @property
    def status(self) -> int:
        """The exit status of the ending: 128 + the signal's number."""
        return 128 + int(self.signum)

    def install(self) -> None:
        """Take over the ending signals for this process (once; only the main thread can)."""
        if self._pair is not None or threading.current_thread() is not threading.main_thread():
            return
        taken = [s for s in ENDING_SIGNALS if signal.getsignal(s) is not signal.SIG_IGN]
        if not taken:
            return
        reader, writer = socket.socketpair()
        writer.setblocking(False)
        signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        for signum in taken:
            signal.signal(signum, self._raise)
        self._pair = (reader, writer)  # kept open for the life of the process
        self._unraisable = sys.unraisablehook
        sys.unraisablehook = self._swallowed
        threading.Thread(target=self._watch, args=(reader,), name="attngeom-interrupt", daemon=True).start()

    def _note(self, signum: int) -> None:
        if not self.seen.is_set():
            self.signum = signal.Signals(signum)
            self.seen.set()
            streams.ENDING.set()  # progress stays quiet from here on

    def _raise(self, signum, frame) -> None:
        self._note(signum)
        if not self._raised:
            self._raised = True
            raise KeyboardInterrupt

    def _swallowed(self, unraisable) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            # raised again once the hook has returned (raised inside the hook, it would be lost again):
            # the flag stays up until then, so a signal meanwhile never raises inside the hook
            threading.Timer(0.05, self._again).start()
        else:
            self._unraisable(unraisable)

    def _again(self) -> None:
        self._raised = False
        _thread.interrupt_main(signal.SIGINT)

    def _watch(self, reader: socket.socket) -> None:
        while not (got := [s for s in reader.recv(64) if s in ENDING_SIGNALS]):
            continue
        self._note(got[0])
        self.announce()
        with contextlib.suppress(OSError):  # wakes the main thread's wait; raises there unless raised already
            signal.pthread_kill(threading.main_thread().ident, got[0])
        threading.Timer(GRACE_S, lambda: os._exit(self.status)).start()  # a daemon, as this thread is

    def announce(self) -> None:
        """Print the one line, once (nowhere, when stderr has gone with the terminal)."""
        if self._said.acquire(blocking=False):
            name = "" if self.signum == signal.SIGINT else f" ({self.signum.name})"
            with contextlib.suppress(OSError):
                os.write(2, f"interrupted{name}\n".encode())


INTERRUPT = _Interrupt()


def log_dir() -> Path:
    """Where the tracebacks of internal errors are kept: the download cache's `logs/`."""
    from attngeom.base.fetch import cache_dir

    return cache_dir() / "logs"


def write_traceback(exc: BaseException) -> Path:
    """Save the full traceback of an internal error to a new log file and return its path."""
    text = "".join(traceback.format_exception(exc))
    header = f"{dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')} {' '.join(sys.argv)}\n"
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
    for where in (log_dir, tempfile.gettempdir):
        try:
            folder = Path(where())
            folder.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(prefix=f"attngeom-error-{stamp}-", suffix=".log", dir=folder)
            with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as f:
                f.write(header + text)
            return Path(name)
        except Exception:
            continue
    raise OSError("no writable folder for the error log")


def _run(argv: list[str]) -> int:
    parser = build_parser()
    commands = set(parser._subparsers._group_actions[0].choices)
    if not argv or (argv[0] not in commands and argv[0] not in ("-h", "--help", "--version")):
        argv.insert(0, DEFAULT_SUBCOMMAND)
    args = parser.parse_args(argv)
    return int(args.func(args))


def ended(work: Callable[[], int]) -> int:
    """Run `work` and turn every way it can end into its exit status (0, 1, 2, 3, or 128 + a signal)."""
    INTERRUPT.install()
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):  # paths with bytes that are not UTF-8 print escaped
            stream.reconfigure(errors="backslashreplace")
    try:
        status = work()
        if INTERRUPT.seen.is_set():  # a library swallowed the KeyboardInterrupt
            raise KeyboardInterrupt
        return status
    except InputError as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:
        INTERRUPT.announce()
        return INTERRUPT.status
    except Exception as exc:  # the contract: a crash is never read as a claim's verdict
        if INTERRUPT.seen.is_set():  # a library turned the KeyboardInterrupt into its own error
            INTERRUPT.announce()
            return INTERRUPT.status
        if isinstance(exc, OSError) and exc.errno in FULL_DISK:  # unusable output, wherever it was written
            where = shown(Path(exc.filename).parent) if exc.filename else "an output folder"
            print(
                f"error: {where}: cannot write there ({exc.strerror}); free some space or write elsewhere",
                file=sys.stderr,
            )
            return EXIT_INPUT
        if isinstance(exc, OSError) and exc.errno in UNWRITABLE:  # one mapping for every writer
            where = shown(exc.filename) if exc.filename else "an output"
            print(f"error: {where}: cannot be written ({exc.strerror}); write elsewhere", file=sys.stderr)
            return EXIT_INPUT
        try:
            where = f"traceback in {write_traceback(exc)}"
        except OSError:
            where = "no traceback log could be written"
        print(f"error: internal error: {type(exc).__name__}: {one_line(exc)} ({where})", file=sys.stderr)
        return EXIT_INTERNAL


def main(argv: list[str] | None = None) -> int:
    """Parse, dispatch, and turn every ending into its exit status (see `ended`)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    return ended(partial(_run, argv))


def _ended_while_exiting(signum, frame) -> None:
    INTERRUPT._note(signum)
    INTERRUPT.announce()
    os._exit(INTERRUPT.status)


def _leave_xla_running() -> None:
    """Keep jax's exit handlers from tearing down its backends (`clean_up`, `collect_garbage`): after
    Ctrl-C a compilation or computation can still be under way on one of its threads, which the
    teardown can crash (a smoke rerun interrupted during training ended by SIGSEGV after its line),
    and the process ends at once anyway, the system taking back what they would free."""
    api, client = sys.modules.get("jax._src.api"), sys.modules.get("jaxlib.xla_client")
    if api is not None:
        atexit.unregister(api.clean_up)
    if client is not None:
        atexit.unregister(client._xla.collect_garbage)


def entry(work: Callable[[], int] | None = None) -> None:
    """The program: `main` (or `work`, a script's), then exit with its status.

    The standard streams are guarded first (`streams.guard`), so a closed or broken stream never
    changes the status. The process ends without the interpreter's shutdown: after Ctrl-C that
    shutdown can crash while compiler threads of jax are still at work, and a Ctrl-C that lands
    during it would end the process by the signal, without its line. The exit handlers (atexit) and
    finalizers still run, under a handler that turns a late ending signal into the line and its
    status; then the streams are flushed.
    """
    streams.guard()
    try:
        status = main() if work is None else ended(work)
        if not INTERRUPT.seen.is_set():
            for signum in ENDING_SIGNALS:
                if signal.getsignal(signum) is not signal.SIG_IGN:
                    signal.signal(signum, _ended_while_exiting)
    except KeyboardInterrupt:  # landed after main's own handling, before the exit handler took over
        INTERRUPT.announce()
        status = INTERRUPT.status
    gc.collect()  # finalizers of what the command left (a worker pool's semaphores) still run
    _leave_xla_running()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:  # a reader that has gone (`| head`) misses nothing it asked for
            pass
    os._exit(status)
