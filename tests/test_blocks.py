"""Blocks that fit the cache: consecutive, covering, never empty, within the byte budget."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from attngeom import blocks


@given(n=st.integers(0, 500), item_bytes=st.integers(0, 3 * blocks.BLOCK_BYTES))
def test_spans_cover_every_item_once_in_blocks_within_the_budget(n, item_bytes):
    spans = blocks.spans(n, item_bytes)
    assert [i for s in spans for i in range(n)[s]] == list(range(n))
    for s in spans:
        size = s.stop - s.start
        assert size >= 1 and (size == 1 or size * item_bytes <= blocks.BLOCK_BYTES)
