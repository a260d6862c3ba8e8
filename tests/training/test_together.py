"""Ensemble members trained together (one vmapped step): the losses of members trained alone within the
fidelity tolerance, members that differ, checkpoints that resume to the uninterrupted result, the time budget."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from helpers import runs as trained
from helpers.runs import restore_device_settings, same_files

from attngeom.base import train_config
from attngeom.training import runs, together, train
from attngeom.training.fidelity import LOSS_RTOL

TINY = replace(trained.TINY, windows=2)
MEMBERS = (0, 1, 2)


@pytest.fixture(scope="module")
def vmapped(corpus) -> list[train.RunResult]:
    return together.train_members("yat_b", 0, TINY, corpus, [train.Member(m) for m in MEMBERS])


def test_vmapped_members_train_as_members_alone_within_the_fidelity_tolerance(vmapped, corpus):
    for m, result in zip(MEMBERS, vmapped):
        alone = train.train_variant("yat_b", 0, replace(TINY, member=m), corpus)
        first = TINY.chunk  # the first chunk's losses: the trajectories part later, as round-off grows
        np.testing.assert_allclose(result.losses[:first], alone.losses[:first], rtol=LOSS_RTOL, atol=0)
        assert len(result.losses) == len(alone.losses) == TINY.steps
        assert [c["step"] for c in result.curve] == [c["step"] for c in alone.curve]
        assert sorted(result.maps) == sorted(alone.maps) and sorted(result.window_maps) == sorted(alone.window_maps)
        assert result.q_WLHTD.shape == alone.q_WLHTD.shape and result.b_LH.shape == alone.b_LH.shape


def test_vmapped_members_differ_from_each_other(vmapped):
    finals = [r.q_LHTD for r in vmapped]
    assert not np.array_equal(finals[0], finals[1]) and not np.array_equal(finals[1], finals[2])


def test_a_resumed_vmapped_group_gives_the_uninterrupted_result(vmapped, corpus, tmp_path):
    def stop_at_12(first, losses):
        if first >= 12:
            raise KeyboardInterrupt

    ckpts = [tmp_path / f"m{m}.npz" for m in MEMBERS]
    members = [train.Member(m, checkpoint=c) for m, c in zip(MEMBERS, ckpts)]
    with pytest.raises(KeyboardInterrupt):
        together.train_members("yat_b", 0, TINY, corpus, [replace(members[0], on_steps=stop_at_12), *members[1:]])
    assert [runs.checkpoint_step(c, TINY.steps) for c in ckpts] == [10, 10, 10]
    resumed = together.train_members("yat_b", 0, TINY, corpus, members)
    for a, b in zip(vmapped, resumed):
        np.testing.assert_array_equal(a.losses, b.losses)
        assert a.curve == b.curve and all(np.array_equal(a.maps[s], b.maps[s]) for s in a.maps)
        np.testing.assert_array_equal(a.q_WLHTD, b.q_WLHTD)


def test_a_member_behind_the_others_catches_up(corpus, tmp_path):
    ckpts = [tmp_path / f"m{m}.npz" for m in (0, 1)]
    cut = replace(TINY, stop_after=9)
    together.train_members("yat_b", 0, cut, corpus, [train.Member(0, checkpoint=ckpts[0])])
    results = together.train_members(
        "yat_b", 0, TINY, corpus, [train.Member(m, checkpoint=c) for m, c in zip((0, 1), ckpts)]
    )
    assert [len(r.losses) for r in results] == [TINY.steps, TINY.steps]
    assert all(np.isfinite(r.losses).all() and r.losses[0] > 0 for r in results)


def test_a_budget_stops_after_the_last_chunk_that_fits_and_saves_the_checkpoints(corpus, tmp_path):
    ckpts = [tmp_path / f"m{m}.npz" for m in (0, 1)]
    members = [train.Member(m, checkpoint=c) for m, c in zip((0, 1), ckpts)]
    results = together.train_members("yat_b", 0, TINY, corpus, members, budget_s=0.0)
    first = train.chunk_plan(TINY)[0][1]
    assert [len(r.losses) for r in results] == [first, first]  # the first chunk always runs
    assert [runs.checkpoint_step(c, TINY.steps) for c in ckpts] == [first, first]
    alone = train.train_variant("softmax", 0, TINY, corpus, budget_s=0.0)
    assert len(alone.losses) == train.chunk_plan(TINY)[0][1]


def _members(ensemble) -> list[dict]:
    return [runs.require_complete(ensemble / f"member-{m}") for m in (0, 1)]


@pytest.mark.slow
def test_a_time_limited_vmapped_ensemble_is_judged_and_resumes_to_the_uninterrupted_one(tmp_path, monkeypatch):

    from attngeom import cli

    restore_device_settings(monkeypatch)
    opts = ["rerun", "--preset", "smoke", "--members", "2", "--members-mode", "together", "--variants", "yat_b"]
    opts += ["--windows", "2", "--quiet"]
    assert cli.main([*opts, "--out", str(tmp_path / "whole")]) == 0
    assert cli.main([*opts, "--time-limit", "0.001", "--out", str(tmp_path / "cut")]) in (0, 1)
    first = train.chunk_plan(train_config.PRESETS["smoke"])[0][1]
    for manifest in _members(tmp_path / "cut"):  # the first chunk, judged as a run stopped there
        assert manifest["stopped_after"] == first - 1 and manifest["config"]["train"]["stop_after"] == first - 1
        assert "report/REPORT.md" in manifest["files"]
    assert cli.main(["rerun", "--resume", str(tmp_path / "cut"), "--members-mode", "together", "--quiet"]) == 0
    whole, cut = _members(tmp_path / "whole"), _members(tmp_path / "cut")
    for m, (a, b) in enumerate(zip(whole, cut)):
        assert b["stopped_after"] is None and a["config"] == b["config"] and a["config"]["train"]["member"] == m
        names = [f"{kind}_yat_b_s0.npz" for kind in ("attn", "geom", "windows")]
        same_files(
            tmp_path / "whole" / f"member-{m}" / "attngeom-qk", tmp_path / "cut" / f"member-{m}" / "attngeom-qk", names
        )
    with np.load(tmp_path / "whole" / "member-0" / "attngeom-qk" / "attn_yat_b_s0.npz") as a:
        with np.load(tmp_path / "whole" / "member-1" / "attngeom-qk" / "attn_yat_b_s0.npz") as b:
            assert not np.array_equal(a["step59"], b["step59"])  # the members are two trajectories
