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


def test_a_first_chunk_of_one_step_is_said_in_the_singular():
    out, clock = io.StringIO(), Clock()
    progress = StepProgress("softmax s0", 10, done=9, stream=out, clock=clock)
    clock.now = 12.0
    progress.steps(1, 1.5)
    assert out.getvalue().splitlines()[-1] == "softmax s0: compiled and ran 1 step in 12 s; loss 1.5000"


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


def test_compiling_says_how_long_it_took_last_time_and_ticks_until_the_first_chunk(tmp_path):
    """Off a terminal: the compiling line names the last time, then a line every tick with the seconds so far;
    none after the first chunk."""
    import threading

    out, clock = io.StringIO(), Clock()
    ticked = threading.Event()

    class Watched(io.StringIO):
        def write(self, text):
            if "compiling, " in text:
                ticked.set()
            return out.write(text)

        def flush(self):
            pass

    progress = StepProgress("goat_v s0", 100, stream=Watched(), clock=clock, last_compile_s=190.4, tick_s=0.01)
    clock.now = 12.0
    assert ticked.wait(5)
    clock.now = 200.0
    progress.steps(50, 2.0)
    said = out.getvalue()
    progress.close()
    lines = said.splitlines()
    assert lines[0] == (
        "goat_v s0: compiling the training step (the first chunk of steps includes it; 190 s last time on this machine)"
    )
    assert "goat_v s0: compiling, 12 s of about 190" in lines
    assert lines[-1] == "goat_v s0: compiled and ran 50 steps in 200 s; loss 2.0000" and progress.compile_s == 200.0
    assert out.getvalue() == said, "no tick after the first chunk"


def test_on_a_terminal_the_compiling_seconds_are_rewritten_in_place_and_cleared():
    import threading

    out, clock = Terminal(), Clock()
    ticked = threading.Event()
    progress = StepProgress("yat_b s0", 100, stream=out, clock=clock, tick_s=0.01)
    clock.now = 3.0
    while "\rsoftmax" not in out.getvalue() and "\ryat_b s0: compiling, 3 s" not in out.getvalue():
        ticked.wait(0.01)
    clock.now = 30.0
    progress.steps(20, 4.5)
    progress.close()
    text = out.getvalue()
    assert "\ryat_b s0: compiling, 3 s\x1b[K" in text  # one line, rewritten
    assert "\r\x1b[Kyat_b s0: compiled and ran 20 steps in 30 s" in text  # cleared before the next line
    assert "of about" not in text  # nothing known of an earlier compilation


def test_compile_times_are_kept_beside_the_compilation_cache_and_a_bad_record_is_no_record(tmp_path):
    from attngeom.training.progress import CompileTimes

    times = CompileTimes(tmp_path)
    assert times.last("yat_b") is None
    times.record("yat_b", 190.44)
    times.record("softmax", 150)
    assert times.last("yat_b") == 190.4 and CompileTimes(tmp_path).last("softmax") == 150.0
    (tmp_path / CompileTimes.FILE).write_text("{not json")
    assert times.last("yat_b") is None
    (tmp_path / CompileTimes.FILE).write_text('{"yat_b": -1, "x": "190", "y": true, "z": 1e300}')
    assert [times.last(k) for k in ("yat_b", "x", "y", "z")] == [None] * 4
    assert CompileTimes(None).last("yat_b") is None and CompileTimes("").record("yat_b", 1.0) is None
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro" / CompileTimes.FILE).mkdir()  # a folder where the record goes: left as it is
    CompileTimes(tmp_path / "ro").record("yat_b", 1.0)
    assert CompileTimes(tmp_path / "ro").last("yat_b") is None
