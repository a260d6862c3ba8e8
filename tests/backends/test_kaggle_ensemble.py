"""A pulled ensemble is the run's: its plan (members, preset, the kernel's variants and seed) and every member checked."""

from __future__ import annotations

import json

import pytest

from attngeom.backends import kaggle_ensemble
from attngeom.base.errors import InputError
from attngeom.jobs import ensemble

STATE = {"members": 2, "preset": "smoke"}
KERNEL = {"bundle": "attngeom-goat", "seed": 0, "variants": ["goat_v"]}


def write_plan(folder, members=2, preset="smoke", variants=("goat_v",), seeds=(0,)):
    config = {"preset": preset, "variants": list(variants), "seeds": list(seeds), "train": {"steps": 60}}
    folder.mkdir(exist_ok=True)
    (folder / ensemble.SUMMARY).write_text(json.dumps({"what": "", "members": members, "config": config}))


def test_every_member_of_the_runs_plan_is_checked(tmp_path):
    write_plan(tmp_path)
    checked = []
    plan = kaggle_ensemble.check_members(tmp_path, STATE, KERNEL, lambda path, state, kernel: checked.append(path))
    assert checked == [ensemble.member_dir(tmp_path, 0), ensemble.member_dir(tmp_path, 1)]
    assert plan["members"] == 2 and plan["config"]["variants"] == ["goat_v"]


@pytest.mark.parametrize(
    ("plan", "says"),
    [
        ({"members": 3}, "an ensemble of 3 members of goat_v"),
        ({"preset": "paper"}, "(paper, seeds [0])"),
        ({"variants": ("softmax", "yat_b")}, "of softmax, yat_b"),
        ({"seeds": (1,)}, "seeds [1]"),
    ],
)
def test_an_ensemble_of_another_plan_is_refused_before_any_member_is_read(tmp_path, plan, says):
    write_plan(tmp_path, **plan)
    with pytest.raises(InputError, match="where this run's kernel trains 2 of goat_v") as raised:
        kaggle_ensemble.check_members(tmp_path, STATE, KERNEL, lambda *a: pytest.fail("a member was read"))
    assert says in str(raised.value)


def test_a_missing_ensemble_json_is_one_error(tmp_path):
    with pytest.raises(InputError, match="ensemble.json: missing file"):
        kaggle_ensemble.check_members(tmp_path, STATE, KERNEL, lambda *a: None)
