"""The expected files as the repository holds them."""

from __future__ import annotations

from attngeom.base import json_rules, schema
from attngeom.judgement import expected


def current_rerun() -> dict:
    """expected/rerun.json, the rerun tier's bands, read as the program reads it (a fresh copy each call)."""
    return json_rules.read_json(expected.EXPECTED_DIR / "rerun.json", schema.RERUN_JSON)
