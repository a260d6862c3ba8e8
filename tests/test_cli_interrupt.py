"""`cli._Interrupt`: the first ending signal noted once, a KeyboardInterrupt a library swallows raised again, the
watcher thread and its grace period; in this process, the process-wide calls recorded instead of made."""

from __future__ import annotations

import sys

import pytest


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
