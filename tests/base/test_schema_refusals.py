"""The schemas that keep a damaged file out: the measurement files the docs quote, a Kaggle state, a run's
manifest; each value at the edges its spec allows and one step past them."""

from __future__ import annotations

import json

import pytest
from helpers import REPO

from attngeom.base import schema

WHERE = {
    "date": "2026-12-03",
    "machine": "Linux (x86_64, AMD EPYC, 2 cores)",
    "command": "python bench/bench_verify.py --json=x",
    "git_commit": "0123abc",
    "load_average": [0.5, 1.0, 2.0],
}
VERIFY = {
    "measured": WHERE,
    "verify_s": 8.5,
    "runs": 3,
    "windows": 16,
    "verify_with_windows_s": 30.0,
    "census_keys": 3072,
    "census_s": 0.4,
}


def problems(doc: dict, spec: schema.Spec) -> list[str]:
    return [f"{where}: {what}" for where, what in spec.errors(doc, "")]


def test_the_committed_measurement_files_pass_their_schemas():
    results = REPO / "bench" / "results"
    assert problems(json.loads((results / "verify.json").read_text()), schema.BENCH_VERIFY_JSON) == []
    assert problems(json.loads((results / "suite.json").read_text()), schema.SUITE_JSON) == []
    for path in results.glob("train-*.json"):
        assert problems(json.loads(path.read_text()), schema.BENCH_TRAIN_JSON) == [], path


@pytest.mark.parametrize(
    "change, where",
    [
        ({"verify_s": float("nan")}, "verify_s"),
        ({"verify_s": float("inf")}, "verify_s"),
        ({"verify_s": 0}, "verify_s"),
        ({"verify_s": -1.0}, "verify_s"),
        ({"verify_s": True}, "verify_s"),
        ({"verify_s": 1e7 + 1}, "verify_s"),
        ({"runs": 0}, "runs"),
        ({"runs": 2.5}, "runs"),
        ({"census_keys": 0}, "census_keys"),
        ({"measured": {**WHERE, "machine": None}}, "measured.machine"),
        ({"measured": {**WHERE, "machine": ""}}, "measured.machine"),
        ({"measured": {**WHERE, "machine": "<img src=x onerror=alert(1)>"}}, "measured.machine"),
        ({"measured": {**WHERE, "command": "a\x1b[2Jb"}}, "measured.command"),
        ({"measured": {**WHERE, "command": "run ```x```"}}, "measured.command"),
        ({"measured": {**WHERE, "date": "03/12/2026"}}, "measured.date"),
        ({"measured": {**WHERE, "git_commit": "xyz"}}, "measured.git_commit"),
        ({"measured": {**WHERE, "load_average": [1.0, 2.0]}}, "measured.load_average"),
        ({"measured": {**WHERE, "load_average": [1.0, 2.0, -1.0]}}, "measured.load_average"),
    ],
)
def test_a_damaged_verify_measurement_is_refused_where_it_is_damaged(change, where):
    assert problems(VERIFY, schema.BENCH_VERIFY_JSON) == []
    found = problems({**VERIFY, **change}, schema.BENCH_VERIFY_JSON)
    assert found and found[0].startswith(where), found


def test_the_edges_of_a_measured_time_are_allowed():
    for seconds in (1e-6, 1e7):
        assert problems({**VERIFY, "verify_s": seconds}, schema.BENCH_VERIFY_JSON) == []
    assert problems({**VERIFY, "verify_s": 1e-7}, schema.BENCH_VERIFY_JSON)


@pytest.mark.parametrize("name", ["alice", "a", "A1.b_c-d", "a" * 64])
def test_a_kaggle_user_name_is_letters_digits_and_dots_dashes_underscores(name):
    assert list(schema.Text(64, schema.KAGGLE_USER, 1).errors(name, "u")) == []


@pytest.mark.parametrize("name", ["al ice", "al\nice", "a" * 65, "al/ice", "", "-alice", ".alice"])
def test_a_name_kaggle_cannot_have_is_refused(name):
    assert list(schema.Text(64, schema.KAGGLE_USER, 1).errors(name, "u"))


def test_a_kaggle_session_is_at_most_twelve_hours():
    assert schema.MAX_KAGGLE_SESSION_S == 43_200
    timeout = schema.KAGGLE_STATE_JSON.fields["timeout"]
    assert list(timeout.errors(43_200, "t")) == [] and list(timeout.errors(43_201, "t"))


def test_free_text_is_at_most_ten_thousand_characters():
    assert schema.MAX_TEXT == 10_000
    what = schema.SUMMARY_JSON.fields["what"]
    assert list(what.errors("w" * 10_000, "what")) == [] and list(what.errors("w" * 10_001, "what"))


@pytest.mark.parametrize("missing", ["preset", "variants", "seeds", "train"])
def test_a_manifest_names_its_preset_variants_seeds_and_training(missing):
    config = {"preset": "smoke", "variants": ["softmax"], "seeds": [0], "train": {"steps": 60}}
    manifest = {"completed": True, "config": config}
    assert problems(manifest, schema.MANIFEST_JSON) == []
    found = problems({**manifest, "config": {k: v for k, v in config.items() if k != missing}}, schema.MANIFEST_JSON)
    assert found == [f"config: missing key(s) {missing}"]
    no_steps = problems({**manifest, "config": {**config, "train": {}}}, schema.MANIFEST_JSON)
    assert no_steps == ["config.train: missing key(s) steps"]


def test_an_ensembles_plan_is_not_held_to_a_manifests_fields():
    assert schema.ENSEMBLE_JSON.fields["config"].required == ()
    assert schema.MANIFEST_JSON.fields["config"].required == ("preset", "variants", "seeds", "train")
