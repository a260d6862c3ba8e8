"""Work in blocks that fit the CPU's cache, and on every core the process may use.

Most statistics, and the census's certificates, are a few passes over float64 arrays of every
head's T x T scores: bound by memory rather than arithmetic. On blocks of heads whose arrays stay
within about BLOCK_BYTES they ran 3x faster than on every head of 16 windows at once (the paper's
24 heads of 128 x 128 keys a window: 3 MB a window, 48 MB for 16).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

from threadpoolctl import threadpool_limits

BLOCK_BYTES = 4 << 20


def spans(n: int, item_bytes: int) -> list[slice]:
    """Consecutive slices covering range(n), each of at least one item and at most BLOCK_BYTES // item_bytes."""
    per = max(1, BLOCK_BYTES // max(1, item_bytes))
    return [slice(start, min(start + per, n)) for start in range(0, n, per)]


def one_blas_thread() -> threadpool_limits:
    """BLAS on one thread while the statistics run (a context manager).

    The statistics are many small products (a head's 128 x 48 keys at a time). Beside other busy
    processes on 2 cores, a threaded BLAS made them far slower than one thread does (the hull census's
    Gram products of 360 heads: 0.68 s threaded, 0.07 s on one thread), its threads waiting on each
    other for the cores. The cores are used by `each` instead, a block of windows per core."""
    return threadpool_limits(limits=1, user_api="blas")


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


AT_ONCE = cores()  # the items of `each` that run at once, however deep they nest: one per core
_RUNNING = threading.BoundedSemaphore(AT_ONCE)  # a token per core: held by each item of `each` while it runs
_HOLDS = threading.local()  # whether this thread runs an item of `each`, and so holds a token


def each(fn: Callable, items: Iterable, workers: int | None = None) -> list:
    """[fn(item) for item in items], the items spread over `workers` threads (default one per core), at
    most one per item.

    For work that numpy, zlib and hashlib do with the interpreter lock released: inflating, hashing
    and passes over large arrays. An error of any item is raised here, as the loop would raise it.

    However deep the calls nest (the models side by side, each model's blocks of windows, each
    file's arrays), at most one item per core runs at once: an item holds a core's token while it
    runs, and lends it to its own items while it waits for them. Without the tokens the nested
    threads outnumbered the cores, and the windows pass took 15 to 20% longer (`bench verify`,
    alternate runs: 1.29 to 1.44 s against 0.99 to 1.21 s)."""
    items = list(items)
    workers = min(len(items), workers or cores())
    if workers <= 1:
        return [fn(item) for item in items]

    def run(item):
        with _RUNNING:
            _HOLDS.token = True
            try:
                return fn(item)
            finally:
                _HOLDS.token = False

    lends = getattr(_HOLDS, "token", False)
    if lends:
        _RUNNING.release()
    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(run, items))
    finally:
        if lends:
            _RUNNING.acquire()


class measured:
    """A property computed on first use and kept in the instance, as functools.cached_property, without
    its lock: before Python 3.12 that lock is one per property for every instance, so threads measuring
    different models (`each`) would wait on each other's census and scale test."""

    def __init__(self, fn: Callable) -> None:
        self.fn, self.name, self.__doc__ = fn, fn.__name__, fn.__doc__

    def __get__(self, instance: object | None, owner: type | None = None):
        if instance is None:
            return self
        value = instance.__dict__[self.name] = self.fn(instance)  # the instance's value hides this descriptor
        return value
