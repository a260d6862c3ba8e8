"""Blocks that fit the cache (consecutive, covering, never empty, within the byte budget), and work on the
cores: in order, within its workers, errors raised as a loop raises them, the same values as one core."""

from __future__ import annotations

import threading
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from attngeom.base import blocks


@given(n=st.integers(0, 500), item_bytes=st.integers(0, 3 * blocks.BLOCK_BYTES))
def test_spans_cover_every_item_once_in_blocks_within_the_budget(n, item_bytes):
    spans = blocks.spans(n, item_bytes)
    assert [i for s in spans for i in range(n)[s]] == list(range(n))
    for s in spans:
        size = s.stop - s.start
        assert size >= 1 and (size == 1 or size * item_bytes <= blocks.BLOCK_BYTES)


class Counted:
    """fn, counting how many of its calls run at once: `most` is the largest count seen."""

    def __init__(self, fn, pause: float) -> None:
        self.fn, self.pause, self.running, self.most, self.lock = fn, pause, 0, 0, threading.Lock()

    def __call__(self, x: int) -> int:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        time.sleep(self.pause)
        with self.lock:
            self.running -= 1
        return self.fn(x)


def test_each_keeps_the_order_and_uses_at_most_its_workers(monkeypatch):
    monkeypatch.setattr(blocks, "cores", lambda: 2)
    slow_square = Counted(lambda x: x * x, 0.02)
    assert blocks.each(slow_square, range(8)) == [x * x for x in range(8)]
    assert slow_square.most == min(2, blocks.AT_ONCE)  # two workers
    slow_square.most = 0
    assert blocks.each(slow_square, range(5), workers=5) == [x * x for x in range(5)]
    assert slow_square.most == min(5, blocks.AT_ONCE)  # five threads, one running item per core's token


def test_nested_work_runs_one_item_per_core_and_gives_its_tokens_back():
    """Items that spread work of their own lend their core while they wait: however deep the nesting,
    at most one item per core computes at once, nothing waits forever, and an error returns every token."""
    from attngeom.base.errors import InputError

    def refuse_negatives(x: int) -> int:
        if x < 0:
            raise InputError("a bad leaf")
        return x

    leaf = Counted(refuse_negatives, 0.01)

    def middle(x: int) -> int:
        return sum(blocks.each(leaf, range(x, x + 4), workers=4))

    def top(x: int) -> int:
        return sum(blocks.each(middle, range(x, x + 3), workers=3))

    expected = [sum(sum(range(x + m, x + m + 4)) for m in range(3)) for x in range(3)]
    assert blocks.each(top, range(3), workers=3) == expected
    assert leaf.most <= blocks.AT_ONCE
    with pytest.raises(InputError, match="a bad leaf"):
        blocks.each(middle, [-2, 5], workers=2)
    leaf.most = 0
    assert blocks.each(leaf, range(6), workers=6) == list(range(6))  # every token came back
    assert leaf.most == min(6, blocks.AT_ONCE)


def test_each_raises_an_items_error_as_the_loop_would():
    from attngeom.base.errors import InputError

    def refuse_three(x: int) -> int:
        if x == 3:
            raise InputError("item 3 is bad")
        return x

    with pytest.raises(InputError, match="item 3 is bad"):
        blocks.each(refuse_three, range(6), workers=3)


def test_the_windows_pass_on_the_cores_gives_the_values_of_one_core(monkeypatch, tmp_path, published_root):
    """Threads change where the work runs, never a value: results.json's robustness section is the same."""
    from helpers.bundles import add_windows, copy_published

    from attngeom.bundles import layout
    from attngeom.judgement import robustness

    folder = copy_published(published_root, tmp_path / "w")
    for model in layout.load_models(folder, ("yat_b", "goat_v")).values():
        add_windows(model, 3)
    listing = layout.list_bundles(folder)
    models = layout.load_models(folder, ("yat_b", "goat_v"), listing=listing)
    together, _ = robustness.measure(listing, models)
    monkeypatch.setattr(blocks, "cores", lambda: 1)
    monkeypatch.setattr(blocks, "each", lambda fn, items, workers=None: [fn(item) for item in items])
    alone, _ = robustness.measure(listing, models)
    assert together == alone
