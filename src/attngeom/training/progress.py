"""Training progress that fits where it runs: a tqdm bar on a terminal, plain lines elsewhere.

The first chunk of a run includes compiling its step function (minutes for the paper's model on a CPU), so
it is its own phase: a line says so, with the time it took the last time this machine compiled the same
training (`CompileTimes`), and the seconds it has taken so far tick on (one line rewritten in place on a
terminal, one line every `every_s` seconds elsewhere). The rate and the time left are measured from the end
of that chunk, never counting compilation. Not on a terminal (CI, logs, Kaggle) there is no bar and no
carriage return: one line every `every_steps` steps or `every_s` seconds, whichever comes first, and one at
the end.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from tqdm import tqdm

from attngeom.base import streams
from attngeom.base.errors import InputError
from attngeom.base.files import write_json_atomic


class _Bar(tqdm):
    """tqdm's bar, silent once a signal ends the command (`streams.ENDING`): closed or collected after the
    command's `interrupted` line, it draws nothing more."""

    def close(self) -> None:
        if streams.ENDING.is_set():
            self.disable = True
        super().close()


class CompileTimes:
    """How long compiling a training and running its first chunk took on this machine, by what was compiled:
    a small JSON file beside jax's compilation cache (a cache elsewhere, or none, keeps its own or none).

    A record is a hint for a progress line and nothing else: an unreadable file reads as empty, and one that
    cannot be written is left as it was."""

    FILE = "attngeom-compile-times.json"

    def __init__(self, folder: str | os.PathLike | None) -> None:
        self.path = Path(folder) / self.FILE if folder else None

    def _all(self) -> dict:
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8")) if self.path else {}
        except (OSError, ValueError):
            return {}
        return doc if isinstance(doc, dict) else {}

    def last(self, key: str) -> float | None:
        """The seconds recorded for `key`, None when none (or none that is a positive number)."""
        value = self._all().get(key)
        return float(value) if type(value) in (int, float) and 0 < value < 1e7 else None

    def record(self, key: str, seconds: float) -> None:
        """Keep `seconds` for `key`."""
        if self.path is None:
            return
        try:
            write_json_atomic(self.path, {**self._all(), key: round(seconds, 1)})
        except (
            OSError,
            ValueError,
            InputError,
        ):  # a hint unrecorded (a folder in its place, a full disk): the run goes on
            pass


class StepProgress:
    """Progress of one training run of `total` steps, `done` of them already (a resumed run); `last_compile_s`:
    how long compiling and the first chunk took last time on this machine (`CompileTimes`), if known."""

    def __init__(
        self,
        label: str,
        total: int,
        done: int = 0,
        quiet: bool = False,
        stream: TextIO | None = None,
        every_steps: int = 500,
        every_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        last_compile_s: float | None = None,
        tick_s: float | None = None,
    ):
        self.label, self.total, self.done, self.quiet = label, total, done, quiet
        self.stream = stream if stream is not None else sys.stderr
        self.terminal = self.stream.isatty()
        self.every_steps, self.every_s, self.clock = every_steps, every_s, clock
        self.bar: tqdm | None = None
        self.started = self.clock()
        self.measured_from: tuple[float, int] | None = None  # (time, steps) at the end of the compiling chunk
        self.last_line: tuple[float, int] = (self.started, done)
        self.loss = float("nan")
        self.last_compile_s = last_compile_s
        self.compile_s: float | None = None  # how long compiling and the first chunk took this time
        self._lock = threading.Lock()  # the ticker and the training write to one stream
        self._compiled = threading.Event()
        self._ticking = False  # a terminal's compiling line is being rewritten in place
        last = "" if last_compile_s is None else f"; {last_compile_s:.0f} s last time on this machine"
        self._line(f"{label}: compiling the training step (the first chunk of steps includes it{last})")
        tick = tick_s if tick_s is not None else (1.0 if self.terminal else every_s)
        if not quiet and tick > 0:
            threading.Thread(target=self._tick, args=(tick,), daemon=True, name=f"progress {label}").start()

    def _tick(self, every: float) -> None:
        """While compiling, the seconds it has taken so far: rewritten in place on a terminal, a line elsewhere."""
        while not self._compiled.wait(every):
            with self._lock:
                if self._compiled.is_set() or streams.ENDING.is_set():
                    return
                so_far = f"{self.label}: compiling, {self.clock() - self.started:.0f} s" + (
                    "" if self.last_compile_s is None else f" of about {self.last_compile_s:.0f}"
                )
                if self.terminal:
                    self.stream.write(f"\r{so_far}\x1b[K")
                    self.stream.flush()
                    self._ticking = True
                else:
                    print(so_far, file=self.stream, flush=True)

    def _line(self, text: str) -> None:
        if self.quiet or streams.ENDING.is_set():  # a signal ends the command: its line is the last
            return
        with self._lock:
            if self._ticking:  # the compiling line written in place ends before any other
                self.stream.write("\r\x1b[K")
                self._ticking = False
            if self.bar is not None:
                self.bar.write(text, file=self.stream)
            else:
                print(text, file=self.stream, flush=True)

    def steps(self, n: int, loss: float) -> None:
        """`n` more steps done, the last with training loss `loss`."""
        self.done += n
        self.loss = float(loss)
        now = self.clock()
        if self.measured_from is None:
            self._compiled.set()
            self.measured_from = self.last_line = (now, self.done)
            self.compile_s = now - self.started
            ran = f"{n} step" + ("" if n == 1 else "s")
            self._line(f"{self.label}: compiled and ran {ran} in {now - self.started:.0f} s; loss {loss:.4f}")
            if self.terminal and not self.quiet:
                self.bar = _Bar(
                    total=self.total,
                    initial=self.done,
                    desc=self.label,
                    unit="step",
                    file=self.stream,
                    dynamic_ncols=True,
                    mininterval=1.0,
                )
            return
        if streams.ENDING.is_set():
            return
        if self.bar is not None:
            self.bar.set_postfix(loss=f"{loss:.4f}", refresh=False)
            self.bar.update(n)
        elif now - self.last_line[0] >= self.every_s or self.done - self.last_line[1] >= self.every_steps:
            self._status(now)

    def _status(self, now: float) -> None:
        t0, n0 = self.measured_from
        rate = (self.done - n0) / (now - t0) if now > t0 else float("nan")
        left = tqdm.format_interval((self.total - self.done) / rate) if rate > 0 else "?"
        where = f"{self.label}: step {self.done}/{self.total}, loss {self.loss:.4f}"
        self._line(f"{where}, {rate:.2f} steps/s, {left} left")
        self.last_line = (now, self.done)

    def note(self, text: str) -> None:
        """A line of its own (an evaluation), above the bar on a terminal."""
        self._line(text)

    def close(self) -> None:
        """End the bar; off a terminal, the last status line if the last steps have none yet."""
        self._compiled.set()  # the ticker, if the run ended before its first chunk, stops
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        elif self.measured_from is not None and self.last_line[1] != self.done:
            self._status(self.clock())
