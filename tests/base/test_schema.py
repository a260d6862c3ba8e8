"""The schemas of the files read as input (the expected files, a run's manifest, an ensemble, a Kaggle
state) and of the measured statistics: each value at the edges its rule allows and one step past them."""

from __future__ import annotations

import json

import pytest
from helpers.rules import problems, refused

from attngeom.base import json_rules, schema


def test_the_shipped_expected_files_meet_their_schemas():
    from attngeom.judgement.expected import EXPECTED_DIR

    json_rules.check(json.loads((EXPECTED_DIR / "claims.json").read_text()), schema.CLAIMS_JSON, "claims.json")
    json_rules.check(json.loads((EXPECTED_DIR / "rerun.json").read_text()), schema.RERUN_JSON, "rerun.json")


# The ensemble and summary schemas are built from these rules when the module is imported; the tests
# build them afresh, so that they judge the builders themselves.
def _a_spread(**fields) -> dict:
    base = {
        "member_ids": [0, 63],
        "members": [0.25, 0.5],
        "mean": 0.375,
        "std": 0.0,
        "min": 0.25,
        "max": 0.5,
        "published": 0.5,
        "published_inside": True,
        "published_in_std": 0.5,
    }
    return {k: v for k, v in {**base, **fields}.items() if v is not None}


def test_a_spread_of_an_ensemble_needs_member_ids_of_at_most_64_members():
    rule = schema.spread(json_rules.Number(0, 1))
    json_rules.check(_a_spread(), rule, "f.json")
    json_rules.check(_a_spread(member_ids=[5], members=[0.5]), rule, "f.json")  # a single member is a spread
    refused(_a_spread(member_ids=[64]), rule, "member_ids[0]: 64 is outside [0, 63]")
    refused(_a_spread(member_ids=[1.5]), rule, "member_ids[0]: a number where an integer is due")
    refused(_a_spread(member_ids=[]), rule, "member_ids: a list of 0 items (1 to 64)")
    refused(_a_spread(member_ids=list(range(65))), rule, "member_ids: a list of 65 items (1 to 64)")
    refused(_a_spread(members=[0.5] * 65), rule, "members: a list of 65 items (1 to 64)")
    refused(_a_spread(members=[]), rule, "members: a list of 0 items (1 to 64)")
    refused(_a_spread(members=[2]), rule, "members[0]: 2 is outside [0, 1]")
    refused(_a_spread(std=-0.5), rule, "std: -0.5 is outside [0, inf]")
    refused(_a_spread(published_in_std="s"), rule, "published_in_std: a string where a number is due")
    refused(_a_spread(published_inside=1), rule, "published_inside: a number where true or false is due")
    refused(_a_spread(extra=1), rule, "the document: unexpected key 'extra'")
    refused({}, rule, "the document: missing key(s) member_ids, members, mean, std, min, max")
    for key in ("mean", "min", "max", "published"):
        refused(_a_spread(**{key: 2}), rule, f"{key}: 2 is outside [0, 1]")


def test_a_spread_without_ids_names_no_members_and_holds_up_to_100000_values():
    rule = schema.spread(json_rules.Number(), ids=False)
    json_rules.check(_a_spread(member_ids=None, members=[0.5] * 100_000), rule, "f.json")
    refused(_a_spread(member_ids=None, members=[0.5] * 100_001), rule, "members: a list of 100001 items (1 to 100000)")
    refused(_a_spread(), rule, "the document: unexpected key 'member_ids'")
    refused({}, rule, "the document: missing key(s) members, mean, std, min, max")


RUN = {
    "distinct_winners": {"1200": 64.0, "6000": 1},
    "mean_norm_entropy": {"1200": 0.5},
    "validation_loss": {"100": 3.5},
    "final": {"scale_moved_rows": -2.5},
}


def test_statistics_by_step_are_bounded_by_their_definitions():
    rule = schema.by_statistic(lambda bound: bound)
    json_rules.check(RUN, rule, "f.json")
    refused({"mean_norm_entropy": {"1200": 1.5}}, rule, "mean_norm_entropy.1200: 1.5 is outside [0, 1]")
    refused({"distinct_winners": {"1200": 0.5}}, rule, "distinct_winners.1200: 0.5 is outside [1, 65536]")
    refused({"validation_loss": {"100": -1}}, rule, "validation_loss.100: -1 is outside [0, inf]")
    refused({"distinct_winners": {"first": 64}}, rule, "distinct_winners: unexpected key 'first'")
    refused({"winners": {}}, rule, "the document: unexpected key 'winners'")
    refused({"final": {"x": "s"}}, rule, "final.x: a string where a number is due")
    json_rules.check({"final": {str(i): 0 for i in range(1000)}}, rule, "f.json")
    refused({"final": {str(i): 0 for i in range(1001)}}, rule, "final: an object of 1001 keys (at most 1000)")


def test_an_ensembles_statistics_are_spreads_of_the_same_bounds():
    rule = schema.by_statistic(schema.spread)
    spread = _a_spread(members=[0.5], member_ids=[0], min=0.5)
    json_rules.check({"mean_norm_entropy": {"1200": spread}, "final": {"x": _a_spread(mean=7)}}, rule, "f.json")
    refused(
        {"mean_norm_entropy": {"1200": {**spread, "mean": 7}}}, rule, "mean_norm_entropy.1200.mean: 7 is outside [0, 1]"
    )


@pytest.mark.parametrize("name", ["alice", "a", "A1.b_c-d", "a" * 64])
def test_a_kaggle_user_name_is_letters_digits_and_dots_dashes_underscores(name):
    assert list(json_rules.Text(64, schema.KAGGLE_USER, 1).errors(name, "u")) == []


@pytest.mark.parametrize("name", ["al ice", "al\nice", "a" * 65, "al/ice", "", "-alice", ".alice"])
def test_a_name_kaggle_cannot_have_isrefused(name):
    assert list(json_rules.Text(64, schema.KAGGLE_USER, 1).errors(name, "u"))


def test_a_kaggle_session_is_at_most_twelve_hours():
    assert schema.MAX_KAGGLE_SESSION_S == 43_200
    timeout = schema.KAGGLE_STATE_JSON.fields["timeout"]
    assert list(timeout.errors(43_200, "t")) == [] and list(timeout.errors(43_201, "t"))


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
