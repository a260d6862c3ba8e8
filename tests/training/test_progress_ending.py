"""Once a signal ends the command, its `interrupted` line is the last: no status line, no bar drawn again."""

from __future__ import annotations

import gc
import io

import pytest

from attngeom.base import streams
from attngeom.training.progress import StepProgress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def ending():
    streams.ENDING.clear()
    yield streams.ENDING
    streams.ENDING.clear()


@pytest.mark.parametrize("stream", [Terminal, io.StringIO], ids=["terminal", "log"])
def test_nothing_is_drawn_once_the_command_is_ending(ending, stream):
    out = stream()
    bar = StepProgress("softmax s0", 100, stream=out, every_steps=1)
    bar.steps(10, 3.0)  # compiled: the bar is drawn (terminal) or a line written (log)
    bar.steps(10, 2.9)
    before = out.getvalue()
    assert before
    ending.set()
    bar.steps(10, 2.8)
    bar.note("softmax step 30: val loss 2.7")
    del bar
    gc.collect()  # a bar collected at exit draws itself one last time, unless the command is ending
    assert out.getvalue() == before


def test_the_bar_closes_as_usual_when_no_signal_came(ending):
    out = Terminal()
    bar = StepProgress("softmax s0", 20, stream=out)
    bar.steps(10, 3.0)
    bar.steps(10, 2.9)
    drawn = out.getvalue()
    bar.close()
    assert len(out.getvalue()) > len(drawn)
