import inspect
from pathlib import Path

import pytest

from attngeom import claims, expected

SEEDS = Path(__file__).resolve().parents[2] / "shared" / "seeds"


def test_every_claim_has_one_function_and_the_fields():
    entries = expected.load_claims()
    assert len({e["id"] for e in entries}) == len(entries) >= 40
    for e in entries:
        fn = claims.CLAIM_FUNCTIONS[e["function"]]
        inspect.signature(fn).bind({}, **e["args"])
        assert e["reason"] and e["quote"] and e["source"]
        assert e["tier"] in ("published bundles", "mathematics")


@pytest.mark.skipif(not SEEDS.is_dir(), reason="the posts' text is not beside this checkout")
def test_quotes_are_verbatim():
    text = " ".join(p.read_text() for p in SEEDS.glob("*.txt"))
    for e in expected.load_claims():
        assert e["quote"] in text, e["id"]


def test_every_published_claim_has_a_rerun_band():
    bands = expected.load_rerun()
    published = {e["id"] for e in expected.load_claims() if e["tier"] == "published bundles"}
    assert published <= set(bands)
    assert all(b["smoke"] for cid, b in bands.items() if cid.startswith("toy."))
