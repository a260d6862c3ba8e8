"""Training progress: a bar on a terminal, plain lines every N steps or seconds elsewhere, compilation apart."""

from __future__ import annotations

import io

from attngeom.training.progress import StepProgress


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_off_a_terminal_plain_lines_every_n_steps_and_no_carriage_return():
    out, clock = io.StringIO(), Clock()
    progress = StepProgress("yat_b s0", 1000, stream=out, every_steps=200, every_s=1e9, clock=clock)
    clock.now = 40.0  # compiling and the first chunk
    progress.steps(50, 4.75)
    for _ in range(19):
        clock.now += 5.0
        progress.steps(50, 3.0)
    progress.close()
    text = out.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    assert lines[0] == "yat_b s0: compiling the training step (the first chunk of steps includes it)"
    assert lines[1] == "yat_b s0: compiled and ran 50 steps in 40 s; loss 4.7500"
    # 10 steps/s measured after compilation, so 750 steps left take 75 s
    assert lines[2] == "yat_b s0: step 250/1000, loss 3.0000, 10.00 steps/s, 01:15 left"
    assert [line.split(",")[0] for line in lines[3:]] == [f"yat_b s0: step {n}/1000" for n in (450, 650, 850, 1000)]


def test_off_a_terminal_a_line_after_every_s_seconds_even_between_step_counts():
    out, clock = io.StringIO(), Clock()
    progress = StepProgress("softmax s0", 12_000, done=500, stream=out, every_steps=10_000, every_s=60, clock=clock)
    clock.now = 30.0
    progress.steps(50, 2.5)
    clock.now = 80.0
    progress.steps(50, 2.4)  # 50 s since the last line: none yet
    clock.now = 95.0
    progress.steps(50, 2.3)
    assert out.getvalue().splitlines()[-1].startswith("softmax s0: step 650/12000, loss 2.3000, 1.54 steps/s")


def test_on_a_terminal_the_bar_starts_after_compilation():
    out, clock = Terminal(), Clock()
    progress = StepProgress("goat_v s0", 100, stream=out, clock=clock)
    assert progress.bar is None
    clock.now = 30.0
    progress.steps(20, 4.5)
    assert progress.bar is not None and progress.bar.n == 20 and progress.bar.initial == 20
    progress.steps(20, 4.0)
    progress.note("goat_v step 40: val loss 4.1000")
    progress.close()
    assert "goat_v step 40: val loss 4.1000" in out.getvalue() and "40/100" in out.getvalue()


def test_quiet_writes_nothing():
    out = Terminal()
    progress = StepProgress("softmax s0", 10, quiet=True, stream=out)
    progress.steps(5, 1.0)
    progress.steps(5, 1.0)
    progress.note("x")
    progress.close()
    assert out.getvalue() == ""
