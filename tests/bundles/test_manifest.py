"""A run folder's manifest as its readers see it: read only once its schema accepts it."""

from __future__ import annotations

import json

import pytest

from attngeom.base.errors import InputError
from attngeom.bundles import manifest
from attngeom.training import runs

GOOD = {
    "completed": True,
    "config": {"preset": "smoke", "variants": ["softmax"], "seeds": [0], "train": {"steps": 60, "stop_after": None}},
    "files": {"attngeom-qk/attn_softmax_s0.npz": "ab" * 32},
    "stopped_after": None,
    "windows": 16,
}


def test_the_names_are_the_ones_the_run_folders_use():
    assert (manifest.MANIFEST, manifest.REPORT) == ("manifest.json", "report")
    assert (runs.MANIFEST, runs.REPORT) == (manifest.MANIFEST, manifest.REPORT)  # written where it is read


def test_a_manifest_the_schema_accepts_is_read_as_written(tmp_path):
    path = tmp_path / manifest.MANIFEST
    path.write_text(json.dumps(GOOD))
    assert manifest.read_manifest(path) == GOOD


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"completed": "yes"}, "completed"),
        ({"config": {"preset": "smoke"}}, "missing key"),
        ({"stopped_after": -1}, "stopped_after"),
        ({"windows": 0}, "windows"),
        ({"files": {"a": "x" * 65}}, "files"),
        ({"segments": [{"from_steps": {"softmax_s0": 1.5}, "to_steps": {}}]}, "segments"),
    ],
)
def test_a_manifest_that_breaks_the_schema_is_refused_naming_the_field(tmp_path, change, message):
    path = tmp_path / manifest.MANIFEST
    path.write_text(json.dumps(GOOD | change))
    with pytest.raises(InputError, match=message) as refused:
        manifest.read_manifest(path)
    assert str(path) in str(refused.value)


@pytest.mark.parametrize("text", ["", "[]", "{not json", '{"completed": true}'])
def test_a_file_that_is_no_manifest_is_refused(tmp_path, text):
    path = tmp_path / manifest.MANIFEST
    path.write_text(text)
    with pytest.raises(InputError):
        manifest.read_manifest(path)


def test_a_missing_manifest_is_refused(tmp_path):
    with pytest.raises(InputError):
        manifest.read_manifest(tmp_path / manifest.MANIFEST)
