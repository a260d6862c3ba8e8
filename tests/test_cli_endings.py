"""`cli.ended`, the parser, the error logs and the program's exit, in this process (mutmut sees only this
process's calls): the process-wide calls (signals, threads, exit) recorded instead of made."""

from __future__ import annotations

import os
import sys

import pytest


@pytest.fixture
def interrupt(monkeypatch):
    """A fresh `cli.INTERRUPT` whose install is recorded, not made (the handlers stay pytest's)."""
    from attngeom import cli as command_line

    it = command_line._Interrupt()
    it.installed = 0
    monkeypatch.setattr(command_line, "INTERRUPT", it)
    monkeypatch.setattr(it, "install", lambda: setattr(it, "installed", it.installed + 1))
    return it


def _ends(work, capfd) -> tuple[int, str]:
    from attngeom import cli as command_line

    status = command_line.ended(work)
    return status, capfd.readouterr().err


def _raises(exc: BaseException):
    def work() -> int:
        raise exc

    return work


def test_a_command_that_ends_by_itself_keeps_its_status_and_streams_print_escaped(interrupt, monkeypatch, capfd):
    import io

    out, err = (io.TextIOWrapper(io.BytesIO(), encoding="utf-8") for _ in range(2))
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    assert _ends(lambda: 1, capfd) == (1, "") and interrupt.installed == 1
    assert out.errors == err.errors == "backslashreplace"
    monkeypatch.setattr(sys, "stdout", io.StringIO())  # no reconfigure: left as it is
    assert _ends(lambda: 0, capfd) == (0, "")


@pytest.mark.parametrize(
    ("exc", "status", "line"),
    [
        (None, 2, "error: bundles: no such folder here"),
        (KeyboardInterrupt(), 130, "interrupted"),
        (OSError(28, "No space left on device", "/data/run/ckpt.npz"), 2, None),
        (OSError(122, "Disk quota exceeded"), 2, None),
        (OSError(30, "Read-only file system", "/data/run/ckpt.npz"), 2, None),
        (OSError(13, "Permission denied"), 2, None),
    ],
)
def test_each_ending_is_its_status_and_one_line(interrupt, capfd, exc, status, line):
    from attngeom.base.errors import InputError

    exc = InputError("bundles:\n no such folder   here") if exc is None else exc
    lines = {
        28: "error: /data/run: cannot write there (No space left on device); free some space or write elsewhere",
        122: "error: an output folder: cannot write there (Disk quota exceeded); free some space or write elsewhere",
        30: "error: /data/run/ckpt.npz: cannot be written (Read-only file system); write elsewhere",
        13: "error: an output: cannot be written (Permission denied); write elsewhere",
    }
    line = line or lines[exc.errno]
    assert _ends(_raises(exc), capfd) == (status, line + "\n")


def test_a_terminating_signal_is_its_own_status_and_named(interrupt, capfd):
    import signal

    interrupt._note(signal.SIGTERM)
    assert _ends(_raises(KeyboardInterrupt()), capfd) == (143, "interrupted (SIGTERM)\n")


def test_an_internal_error_is_3_naming_its_log_or_that_none_could_be_written(interrupt, monkeypatch, capfd, tmp_path):
    from attngeom import cli as command_line

    monkeypatch.setattr(command_line, "log_dir", lambda: tmp_path / "logs")
    status, err = _ends(_raises(KeyError("no such key")), capfd)
    logs = list((tmp_path / "logs").iterdir())
    assert status == 3 and err == f"error: internal error: KeyError: 'no such key' (traceback in {logs[0]})\n"
    assert logs[0].read_text(encoding="utf-8").endswith("\nKeyError: 'no such key'\n")  # the error's own traceback

    def unwritable(exc):
        raise OSError("no writable folder for the error log")

    monkeypatch.setattr(command_line, "write_traceback", unwritable)
    status, err = _ends(_raises(ValueError("bad\nvalue")), capfd)
    assert (status, err) == (3, "error: internal error: ValueError: bad value (no traceback log could be written)\n")


class _Clock:
    """datetime.datetime at one fixed instant, 03:04:05 UTC, in a local time two hours ahead."""

    @staticmethod
    def now(tz=None):
        import datetime as dt

        instant = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
        return instant.astimezone(tz) if tz else (instant + dt.timedelta(hours=2)).replace(tzinfo=None)


def test_the_traceback_log_is_new_named_by_the_time_and_holds_the_command(monkeypatch, tmp_path):
    import codecs
    import datetime as dt
    import tempfile
    import traceback
    from types import SimpleNamespace

    from attngeom import cli as command_line

    monkeypatch.setattr(command_line, "dt", SimpleNamespace(datetime=_Clock, timezone=dt.timezone))
    monkeypatch.setattr(sys, "argv", ["reproduce.sh", "verify", "--out", "o"])
    monkeypatch.setattr(command_line, "log_dir", lambda: tmp_path / "cache" / "logs")
    opened, fdopen = [], os.fdopen
    monkeypatch.setattr(os, "fdopen", lambda fd, mode, **kw: opened.append((mode, kw)) or fdopen(fd, mode, **kw))
    try:
        raise RuntimeError("a path \udcff")
    except RuntimeError as caught:
        exc = caught
    first, second = command_line.write_traceback(exc), command_line.write_traceback(exc)
    mode, kw = opened[0]
    assert (mode, codecs.lookup(kw["encoding"]).name, kw["errors"]) == ("w", "utf-8", "backslashreplace")  # any locale
    assert first != second and first.parent == tmp_path / "cache" / "logs"
    assert first.name.startswith("attngeom-error-20260102T030405-") and first.suffix == ".log"
    text = "".join(traceback.format_exception(exc)).replace("\udcff", "\\udcff")
    assert first.read_text(encoding="utf-8") == "2026-01-02T03:04:05+00:00 reproduce.sh verify --out o\n" + text
    (tmp_path / "blocked").write_text("a file where the cache should be")
    monkeypatch.setattr(command_line, "log_dir", lambda: tmp_path / "blocked" / "logs")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    assert command_line.write_traceback(exc).parent == tmp_path / "tmp"  # the system's temporary folder instead
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "blocked" / "tmp"))
    with pytest.raises(OSError, match="^no writable folder for the error log$"):
        command_line.write_traceback(exc)


def test_the_logs_are_kept_in_the_download_cache(monkeypatch, tmp_path):
    from attngeom import cli as command_line

    monkeypatch.setenv("ATTNGEOM_CACHE", str(tmp_path))
    assert command_line.log_dir() == tmp_path / "logs"


def test_the_parser_names_every_command_and_refuses_in_one_line():
    from attngeom import cli as command_line
    from attngeom.base.errors import InputError

    parser = command_line.build_parser()
    assert parser.prog == "reproduce.sh"
    assert parser.description == "Verify the claims of 'The Geometry of Attention Is a Choice of Kernel'."
    helps = {a.dest: a.help for a in parser._subparsers._group_actions[0]._choices_actions}
    assert set(helps) >= {"verify", "rerun", "fidelity", "kaggle", "docker", "figures", "summary", "bands", "docs"}
    assert helps["test"] == "run the test suite (arguments go to pytest)"
    assert helps["bench"] == "benchmarks and the mutation check: bench verify|train|profile|mutation"
    assert parser.format_usage() == "usage: reproduce.sh [-h] [--version] COMMAND ...\n"
    for name in ("test", "bench"):
        args = parser.parse_args([name])
        assert args.command == name
        with pytest.raises(InputError, match=f"^{name} is run by reproduce.sh itself: ./reproduce.sh {name} ...$"):
            args.func(args)
    with pytest.raises(InputError) as caught:
        parser.parse_args(["test", "--help"])  # no help of its own: pytest's
    assert str(caught.value) == "reproduce.sh: unrecognized arguments: --help (see reproduce.sh --help)"


def test_a_command_line_without_a_command_is_verifys(monkeypatch, capsys):
    from attngeom import cli as command_line

    ran = []

    def small_parser() -> command_line.Parser:
        parser = command_line.Parser(prog="p")
        sub = parser.add_subparsers(dest="command")
        for name, status in (("verify", 7), ("other", 8)):
            sub.add_parser(name).set_defaults(func=lambda args, s=status: ran.append(args.command) or np_int(s))
        sub.choices["verify"].add_argument("--bundles")
        return parser

    def np_int(s):
        import numpy as np

        return np.int64(s)

    monkeypatch.setattr(command_line, "build_parser", small_parser)
    assert command_line._run([]) == 7 and command_line._run(["--bundles", "b"]) == 7
    status = command_line._run(["other"])
    assert status == 8 and type(status) is int and ran == ["verify", "verify", "other"]
    for help_ in ("-h", "--help"):
        with pytest.raises(SystemExit):
            command_line._run([help_])
        assert "{verify,other}" in capsys.readouterr().out  # the whole program's help, not verify's


def test_main_runs_the_command_line_it_is_given_or_the_programs(interrupt, monkeypatch):
    from attngeom import cli as command_line

    seen = []
    monkeypatch.setattr(command_line, "_run", lambda argv: seen.append(argv) or argv.insert(0, "x") or 5)
    given = ["summary", "run"]
    assert command_line.main(given) == 5 and seen == [["x", "summary", "run"]] and given == ["summary", "run"]
    monkeypatch.setattr(sys, "argv", ["attngeom", "bands"])
    assert command_line.main() == 5 and seen[-1] == ["x", "bands"] and interrupt.installed == 2


class _Exit(BaseException):
    pass


def _exit_raises(status: int):
    raise _Exit(status)


def test_the_program_exits_with_the_status_after_the_exit_handlers(interrupt, monkeypatch, capfd):
    import atexit
    import signal

    from attngeom import cli as command_line

    calls, handlers = [], {}
    monkeypatch.setattr(command_line.streams, "guard", lambda: calls.append("guard"))
    monkeypatch.setattr(command_line, "_leave_xla_running", lambda: calls.append("xla"))
    monkeypatch.setattr(atexit, "_run_exitfuncs", lambda: calls.append("atexit"))
    monkeypatch.setattr(command_line.os, "_exit", _exit_raises)
    monkeypatch.setattr(signal, "getsignal", lambda s: signal.SIG_IGN if s == signal.SIGHUP else signal.SIG_DFL)
    monkeypatch.setattr(signal, "signal", lambda s, h: handlers.__setitem__(s, h))

    class Gone:
        def flush(self):
            calls.append("flush")
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", Gone())
    with pytest.raises(_Exit) as caught:
        command_line.entry(lambda: 4)
    assert caught.value.args == (4,) and calls == ["guard", "xla", "atexit", "flush"]
    assert handlers == {
        signal.SIGINT: command_line._ended_while_exiting,
        signal.SIGTERM: command_line._ended_while_exiting,
    }
    monkeypatch.setattr(command_line, "main", lambda: 6)
    interrupt._note(signal.SIGTERM)  # seen: the ending is under way, no handler is changed
    handlers.clear()
    with pytest.raises(_Exit) as caught:
        command_line.entry()
    assert caught.value.args == (6,) and handlers == {}
    monkeypatch.setattr(command_line, "ended", lambda work: _raises(KeyboardInterrupt())())
    with pytest.raises(_Exit) as caught:
        command_line.entry(lambda: 0)
    assert caught.value.args == (143,) and capfd.readouterr().err == "interrupted (SIGTERM)\n"


def test_a_signal_while_exiting_is_its_line_and_status(interrupt, monkeypatch, capfd):
    from attngeom import cli as command_line

    monkeypatch.setattr(command_line.os, "_exit", _exit_raises)
    with pytest.raises(_Exit) as caught:
        command_line._ended_while_exiting(1, None)
    assert caught.value.args == (129,) and capfd.readouterr().err == "interrupted (SIGHUP)\n"


def test_jax_exit_handlers_are_taken_off_when_jax_is_loaded(monkeypatch):
    import atexit
    from types import SimpleNamespace

    from attngeom import cli as command_line

    off = []
    monkeypatch.setattr(atexit, "unregister", off.append)
    api, client = SimpleNamespace(clean_up="clean_up"), SimpleNamespace(_xla=SimpleNamespace(collect_garbage="gc"))
    monkeypatch.setitem(sys.modules, "jax._src.api", api)
    monkeypatch.setitem(sys.modules, "jaxlib.xla_client", client)
    command_line._leave_xla_running()
    assert off == ["clean_up", "gc"]
    monkeypatch.delitem(sys.modules, "jax._src.api")
    monkeypatch.delitem(sys.modules, "jaxlib.xla_client")
    command_line._leave_xla_running()
    assert off == ["clean_up", "gc"]
