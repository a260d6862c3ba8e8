"""The exit contract of every command: 0 pass, 1 a claim fails, 2 unusable input, 3 internal error, 130 Ctrl-C;
and the report folder always holds one run's set."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from bundle_tools import QK, copy_published
from report_tools import assert_consistent_set, assert_one_error_line, cli, command, environment, stray_temporaries


@pytest.fixture(scope="module")
def earlier(published_root, tmp_path_factory) -> tuple[Path, Path, dict[str, bytes]]:
    """A report folder holding a full verification, and its files' bytes."""
    tmp = tmp_path_factory.mktemp("earlier")
    out = tmp / "out"
    assert cli("--bundles", str(published_root), "--out", str(out), cwd=tmp).returncode == 1
    return tmp, out, {p.name: p.read_bytes() for p in out.iterdir()}


def _fresh_copy(earlier, tmp_path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(earlier[1], out)
    return out


def _python(code: str, cwd: Path, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=cwd,
        env=environment(**extra),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_an_internal_error_is_status_3_with_its_traceback_in_a_log(published_root, tmp_path):
    proc = _python(
        f"""
        from attngeom import verify
        def broken(*args, **kwargs):
            return {{}}["no such key"]
        verify.run_verify = broken
        from attngeom.cli import main
        raise SystemExit(main(["--bundles", {str(published_root)!r}, "--out", "out"]))
        """,
        tmp_path,
        ATTNGEOM_CACHE=str(tmp_path / "cache"),
    )
    assert_one_error_line(proc, 3, "error: internal error: KeyError: 'no such key' (traceback in ")
    log = Path(proc.stderr.split("(traceback in ")[1].rstrip().rstrip(")"))
    assert log.parent == tmp_path / "cache" / "logs" and "Traceback" in log.read_text()
    assert "broken" in log.read_text()


def test_a_crash_while_writing_the_report_keeps_the_earlier_set(earlier, published_root, tmp_path):
    """Case: the old code replaced results.json, then died before REPORT.md, report.json and index.html."""
    out = _fresh_copy(earlier, tmp_path)
    proc = _python(
        f"""
        from attngeom import html_report
        def broken(*args, **kwargs):
            raise RuntimeError("the page could not be drawn")
        html_report.write_html = broken
        from attngeom.cli import main
        raise SystemExit(main(["--bundles", {str(published_root)!r}, "--variants", "softmax,yat_b", "--out", "out"]))
        """,
        tmp_path,
        ATTNGEOM_CACHE=str(tmp_path / "cache"),
    )
    assert_one_error_line(proc, 3, "error: internal error: RuntimeError: the page could not be drawn")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == earlier[2]
    assert not stray_temporaries(tmp_path)


@pytest.mark.parametrize(
    "args",
    [
        ("--tier", "bogus"),
        ("--variants", "softmax,nope"),
        ("rerun", "--preset", "huge"),
        ("figures", "--bogus"),
        ("kaggle", "status", "--bogus"),
    ],
    ids=["verify tier", "verify variants", "rerun preset", "figures option", "kaggle option"],
)
def test_a_bad_command_line_is_one_line_without_usage(args, tmp_path):
    proc = cli(*args, cwd=tmp_path)
    assert_one_error_line(proc, 2, "error: reproduce.sh")
    assert "usage:" not in proc.stderr


def _unwritable(kind: str, tmp_path: Path) -> str:
    if kind == "an existing file":
        (tmp_path / "file").write_text("keep me")
        return str(tmp_path / "file")
    if kind == "a path under a file":
        (tmp_path / "file").write_text("keep me")
        return str(tmp_path / "file" / "out")
    if kind == "a path under /proc":
        return "/proc/attngeom/out"
    folder = tmp_path / "frozen"
    folder.mkdir()
    (folder / "REPORT.md").write_text("old")
    if kind == "an immutable folder":
        if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(folder)], check=False).returncode != 0:
            pytest.skip("chattr +i is not available here")
        return str(folder)
    if os.geteuid() == 0:
        pytest.skip("permissions do not bind root")
    folder.chmod(0o555)
    tmp_path.chmod(0o555)
    return str(folder / "out")


@pytest.mark.parametrize(
    "kind",
    ["an existing file", "a path under a file", "a path under /proc", "an immutable folder", "a read-only folder"],
)
@pytest.mark.parametrize("subcommand", ["verify", "figures"])
def test_an_unwritable_out_is_one_line(kind, subcommand, published_root, tmp_path):
    out = _unwritable(kind, tmp_path)
    try:
        args = ("--variants", "softmax,yat_b") if subcommand == "verify" else ()
        proc = cli(subcommand, "--bundles", str(published_root / QK), *args, "--out", out, cwd=tmp_path)
    finally:
        if kind == "an immutable folder":
            subprocess.run(["chattr", "-i", out], check=False)
        tmp_path.chmod(0o755)
    assert_one_error_line(proc, 2, "error: ")
    assert "cannot write the report there" in proc.stderr
    if kind in ("an existing file", "a path under a file"):
        assert (tmp_path / "file").read_text() == "keep me"
    assert not stray_temporaries(tmp_path)


@pytest.mark.parametrize("where", ["--out", "--bundles"])
def test_a_path_that_is_not_utf8_gives_one_consistent_set(where, earlier, published_root, tmp_path):
    """Case: a byte that is not UTF-8 in a path left new results beside the old report and a temporary file."""
    out = _fresh_copy(earlier, tmp_path)
    bundles = str(published_root / QK).encode()
    if where == "--bundles":
        bundles = os.fsencode(tmp_path) + b"/bundles-\xff"
        shutil.copytree(published_root / QK, os.fsdecode(bundles))
    else:
        out = Path(os.fsdecode(os.fsencode(out) + b"-\xff"))
    proc = subprocess.run(
        command("--bundles", bundles, "--variants", "softmax,yat_b", "--out", os.fsencode(out)),
        cwd=tmp_path,
        env=environment(),
        capture_output=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr.decode(errors="replace")
    assert not proc.stderr and (where == "--bundles" or b"-\\xff/REPORT.md" in proc.stdout)
    report = assert_consistent_set(out)
    assert "\\xff" in (report["bundles"] if where == "--bundles" else report["provenance"]["command"])
    assert not stray_temporaries(tmp_path)


def test_two_verifies_into_one_folder_both_leave_a_consistent_set(published_root, tmp_path):
    """Case: a shared temporary name killed one of them; in others report.json named one bundle, results.json held the other's."""
    out = tmp_path / "out"
    for _ in range(2):
        procs = [
            subprocess.Popen(
                command("--bundles", str(published_root), "--out", str(out)),
                cwd=tmp_path,
                env=environment(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            ),
            subprocess.Popen(
                command("--bundles", str(published_root / QK), "--variants", "softmax,yat_b", "--out", str(out)),
                cwd=tmp_path,
                env=environment(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            ),
        ]
        for proc, status in zip(procs, (1, 1)):
            _, err = proc.communicate(timeout=600)
            assert proc.returncode == status and not err, err
        assert_consistent_set(out)
    assert not stray_temporaries(tmp_path)


def test_figures_of_a_two_layer_bundle_write_nothing(published_root, tmp_path):
    """Case: five GIFs were written, then an IndexError at the census head, and no figures.json."""
    root = copy_published(published_root, tmp_path / "b")
    from test_bundles import hostile

    hostile(root, "2 layers")
    proc = cli("figures", "--bundles", str(root), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert_one_error_line(proc, 2, "error: ")
    assert "census head is layer 4" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_verify_of_a_two_layer_bundle_is_one_line(published_root, tmp_path):
    root = copy_published(published_root, tmp_path / "b")
    from test_bundles import hostile

    hostile(root, "2 layers")
    proc = cli("--bundles", str(root), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert_one_error_line(proc, 2, "error: ")
    assert not (tmp_path / "out").exists()


def test_hostile_run_json_through_the_command_line(published_root, tmp_path):
    """Case: 1e400, a string STEPS, deep nesting, a 5,000-digit integer: tracebacks with exit 1."""
    from test_bundles import hostile

    for how in ("best_val 1e400", "STEPS a string", "nested 200,000 deep", "a 5,000-digit integer"):
        root = copy_published(published_root, tmp_path / how)
        hostile(root, how)
        proc = cli("--bundles", str(root), "--out", str(tmp_path / "out"), cwd=tmp_path)
        assert_one_error_line(proc, 2, "error: ")
        assert "yat_attention.json" in proc.stderr


def test_two_verifies_in_the_worst_interleaving_leave_the_last_set(published_root, tmp_path, monkeypatch):
    """Case 6 made deterministic: one verify stops just before its page while another writes a whole report."""
    from attngeom import html_report, verify

    real, paused, other_done = html_report.write_html, threading.Event(), threading.Event()

    def write_html(out_dir, report, results, figures):
        if report["bundles"] == str(published_root):
            paused.set()
            assert other_done.wait(600)
        return real(out_dir, report, results, figures)

    monkeypatch.setattr(html_report, "write_html", write_html)
    out = tmp_path / "out"
    first = threading.Thread(target=verify.run_verify, args=(published_root, out))
    first.start()
    assert paused.wait(600)
    verify.run_verify(published_root / QK, out, variants=("softmax", "yat_b"))
    other_done.set()
    first.join(600)
    assert assert_consistent_set(out)["bundles"] == str(published_root)
    assert not stray_temporaries(tmp_path)


def _raised_once(it, signum: int) -> None:
    """The handler called again: a KeyboardInterrupt now fails the test (escaping, it would end the session)."""
    try:
        it._raise(signum, None)
    except KeyboardInterrupt:
        pytest.fail("a second signal raised KeyboardInterrupt again")


def test_a_signal_while_a_swallowed_interrupt_is_handled_never_raises_inside_the_hook(monkeypatch):
    """A KeyboardInterrupt lost in a callback (jax's GC callback) is raised again after the hook returns; a
    signal arriving while the hook runs only notes itself (raised inside the hook, it was printed as an
    "Exception ignored in sys.unraisablehook" traceback)."""
    import _thread
    import signal
    import threading
    from types import SimpleNamespace

    from attngeom import cli as command_line

    again = threading.Event()
    monkeypatch.setattr(_thread, "interrupt_main", lambda signum: again.set())
    it = command_line._Interrupt()
    it._raised = True  # the first KeyboardInterrupt, the one swallowed
    it._swallowed(SimpleNamespace(exc_value=KeyboardInterrupt()))
    _raised_once(it, signal.SIGINT)  # no raise here
    assert again.wait(5) and it._raised is False  # raised again, from the main thread's next bytecode


@pytest.mark.parametrize("after", ["returns 0", "raises its own error"])
def test_an_interrupt_a_library_swallows_still_ends_the_command_with_130(monkeypatch, capfd, after):
    """A library that catches the KeyboardInterrupt of Ctrl-C (and returns, or raises its own error) does not
    end the command with its status: the signal was noted, so the command ends as interrupted."""
    import signal

    from attngeom import cli as command_line

    it = command_line._Interrupt()
    monkeypatch.setattr(command_line, "INTERRUPT", it)
    monkeypatch.setattr(it, "install", lambda: None)  # the handler is called below as the signal would call it

    def work() -> int:
        try:
            it._raise(signal.SIGINT, None)  # Ctrl-C lands inside the library
        except KeyboardInterrupt:
            if after != "returns 0":
                raise RuntimeError("the library's own error") from None
        return 0

    assert command_line.ended(work) == 130
    assert capfd.readouterr().err == "interrupted\n"


# In this process (mutmut sees only this process's calls): every ending of `ended`, the parser, the
# interrupt's parts with the process-wide calls (signals, threads, exit) recorded instead of made.


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
    from attngeom.errors import InputError

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
    from attngeom.errors import InputError

    parser = command_line.build_parser()
    assert parser.prog == "reproduce.sh"
    assert parser.description == "Verify the claims of 'The Geometry of Attention Is a Choice of Kernel'."
    helps = {a.dest: a.help for a in parser._subparsers._group_actions[0]._choices_actions}
    assert set(helps) >= {"verify", "rerun", "fidelity", "kaggle", "docker", "figures", "summary", "bands", "docs"}
    assert helps["test"] == "run the test suite (arguments go to pytest)"
    assert helps["bench"] == "benchmarks and the mutation check: bench verify|train|profile|mutation"
    assert parser.format_usage() == "usage: reproduce.sh [-h] COMMAND ...\n"
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


def test_a_fresh_interrupt_has_seen_nothing_and_notes_the_first_signal_only():
    import signal

    from attngeom import cli as command_line

    it = command_line._Interrupt()
    assert not it.seen.is_set() and it.signum == signal.SIGINT and it.status == 130 and it._pair is None
    assert it._raised is False
    it._note(1)
    it._note(15)
    assert it.seen.is_set() and it.signum is signal.SIGHUP and it.status == 129
    with pytest.raises(KeyboardInterrupt):
        it._raise(15, None)
    _raised_once(it, 2)  # once only: a second signal never cuts into the cleanup
    assert it._raised is True and it.signum is signal.SIGHUP


def test_the_interrupt_line_is_printed_once_and_never_fails(monkeypatch, capfd):
    import signal

    from attngeom import cli as command_line

    it = command_line._Interrupt()
    it.announce()
    it.announce()
    assert capfd.readouterr().err == "interrupted\n"
    it = command_line._Interrupt()
    it._note(signal.SIGHUP)
    monkeypatch.setattr(command_line.os, "write", lambda fd, data: (_ for _ in ()).throw(OSError(5, "I/O error")))
    it.announce()  # stderr gone with the terminal: nowhere, and no error


def _timers(monkeypatch) -> list:
    """cli's threading.Timer recorded, never started: (seconds, function) as made, then "started"."""
    from attngeom import cli as command_line

    timers: list = []

    class Timer:
        def __init__(self, seconds, function):
            timers.append((seconds, function))

        def start(self):
            timers.append("started")

    monkeypatch.setattr(command_line.threading, "Timer", Timer)
    return timers


def test_a_swallowed_interrupt_is_raised_again_and_any_other_unraisable_passed_on(monkeypatch):
    import _thread
    import signal
    from types import SimpleNamespace

    from attngeom import cli as command_line

    timers, interrupted, passed = _timers(monkeypatch), [], []
    monkeypatch.setattr(_thread, "interrupt_main", interrupted.append)
    it = command_line._Interrupt()
    it._unraisable = passed.append
    it._raised = True
    it._swallowed(SimpleNamespace(exc_value=KeyboardInterrupt()))
    assert timers == [(0.05, it._again), "started"] and passed == []
    timers[0][1]()
    assert it._raised is False and interrupted == [signal.SIGINT]
    other = SimpleNamespace(exc_value=ValueError("x"))
    it._swallowed(other)
    assert passed == [other] and len(timers) == 2


def test_install_takes_the_signals_not_ignored_once_and_watches_them(monkeypatch):
    import signal
    import threading

    from attngeom import cli as command_line

    handlers, wakeups, threads, real_thread = {}, [], [], threading.Thread
    ignored = {signal.SIGHUP}
    monkeypatch.setattr(signal, "getsignal", lambda s: signal.SIG_IGN if s in ignored else signal.SIG_DFL)
    monkeypatch.setattr(signal, "signal", lambda s, h: handlers.__setitem__(s, h))
    monkeypatch.setattr(signal, "set_wakeup_fd", lambda fd, **kw: wakeups.append((fd, kw)))

    class Thread:
        def __init__(self, **kw):
            threads.append(kw)

        def start(self):
            threads.append("started")

    monkeypatch.setattr(command_line.threading, "Thread", Thread)
    monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)  # put back afterwards
    before = sys.unraisablehook
    it = command_line._Interrupt()
    it.install()
    reader, writer = it._pair
    try:
        assert handlers == {signal.SIGINT: it._raise, signal.SIGTERM: it._raise}
        assert wakeups == [(writer.fileno(), {"warn_on_full_buffer": False})] and writer.getblocking() is False
        assert sys.unraisablehook == it._swallowed and it._unraisable is before
        assert threads == [
            {"target": it._watch, "args": (reader,), "name": "attngeom-interrupt", "daemon": True},
            "started",
        ]
        it.install()
        assert len(wakeups) == 1 and len(threads) == 2  # once
    finally:
        reader.close()
        writer.close()
    ignored |= {signal.SIGINT, signal.SIGTERM}
    nohup = command_line._Interrupt()
    nohup.install()  # every ending signal ignored (nohup and more): nothing to take
    assert nohup._pair is None and len(wakeups) == 1
    elsewhere = command_line._Interrupt()
    worker = real_thread(target=elsewhere.install)
    ignored.clear()
    worker.start()
    worker.join()
    assert elsewhere._pair is None and len(wakeups) == 1  # only the main thread can


def test_the_watcher_prints_the_line_wakes_the_main_thread_and_ends_after_the_grace(monkeypatch, capfd):
    import signal
    import threading

    from attngeom import cli as command_line

    sent, timers, exits = [], _timers(monkeypatch), []

    class Reader:
        chunks = iter([bytes([10]), bytes([15, 2])])  # SIGUSR1 first: not an ending signal

        def recv(self, size):
            assert size == 64
            return next(self.chunks)

    monkeypatch.setattr(signal, "pthread_kill", lambda ident, s: sent.append((ident, s)))
    monkeypatch.setattr(command_line.os, "_exit", exits.append)
    it = command_line._Interrupt()
    it._watch(Reader())
    assert it.signum is signal.SIGTERM and capfd.readouterr().err == "interrupted (SIGTERM)\n"
    assert sent == [(threading.main_thread().ident, 15)] and timers[0][0] == 3.0 and timers[1] == "started"
    timers[0][1]()
    assert exits == [143]
    monkeypatch.setattr(signal, "pthread_kill", lambda ident, s: (_ for _ in ()).throw(OSError(3, "No such process")))
    Reader.chunks = iter([bytes([1])])
    command_line._Interrupt()._watch(Reader())  # the main thread has gone: the grace period still ends it
    assert timers[-1] == "started" and len(timers) == 4


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
