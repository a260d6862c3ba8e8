"""A run folder's manifest as its readers see it: its name, the report folder beside it, its reading.

Below the training package, so that judging a run folder (what the bundles are, how far they were
trained, which segments made them) needs no training code; `training.runs` writes it.
"""

from __future__ import annotations

from pathlib import Path

from attngeom.base import json_rules, schema

MANIFEST = "manifest.json"
REPORT = "report"  # the folder of the report verify writes of a run


def read_manifest(path: Path) -> dict:
    """A run's manifest.json, checked against its schema."""
    return json_rules.read_json(path, schema.MANIFEST_JSON)
