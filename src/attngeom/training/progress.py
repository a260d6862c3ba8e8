"""Training progress that fits where it runs: a tqdm bar on a terminal, plain lines elsewhere.

The first chunk of a run includes compiling its step function (tens of seconds on a CPU), so it
is its own phase: one line says so, and the rate and the time left are measured from the end of
that chunk, never counting compilation. Not on a terminal (CI, logs, Kaggle) there is no bar
and no carriage return: one line every `every_steps` steps or `every_s` seconds, whichever
comes first, and one at the end.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

from tqdm import tqdm

from attngeom.base import streams


class _Bar(tqdm):
    """tqdm's bar, silent once a signal ends the command (`streams.ENDING`): closed or collected after the
    command's `interrupted` line, it draws nothing more."""

    def close(self) -> None:
        if streams.ENDING.is_set():
            self.disable = True
        super().close()


class StepProgress:
    """Progress of one training run of `total` steps, `done` of them already (a resumed run)."""

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
        self._line(f"{label}: compiling the training step (the first chunk of steps includes it)")

    def _line(self, text: str) -> None:
        if self.quiet or streams.ENDING.is_set():  # a signal ends the command: its line is the last
            return
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
            self.measured_from = self.last_line = (now, self.done)
            self._line(f"{self.label}: compiled and ran {n} steps in {now - self.started:.0f} s; loss {loss:.4f}")
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
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        elif self.measured_from is not None and self.last_line[1] != self.done:
            self._status(self.clock())
