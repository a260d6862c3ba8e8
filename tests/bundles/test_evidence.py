import json
from pathlib import Path

import pytest
from helpers.bundles import QK, copy_published, stop_after

from attngeom.base.errors import InputError
from attngeom.base.fetch import PUBLISHED_BUNDLES
from attngeom.base.variants import PUBLISHED
from attngeom.bundles import evidence, layout
from attngeom.jobs import verify


def _describe(root: Path, variants: tuple[str, ...] = PUBLISHED) -> evidence.Evidence:
    models = layout.load_models(root, variants)
    ev, _, _, _ = verify.judge_evidence(root, models)
    return ev


def _set_cfg(root: Path, **fields) -> None:
    for path in root.rglob(layout.RUN_JSON):
        data = json.loads(path.read_text())
        data["cfg"].update(fields)
        path.write_text(json.dumps(data, indent=1))


def test_the_published_bundles_are_known_by_their_sha256(published_root):
    ev = _describe(published_root)
    assert (ev.kind, ev.tier, ev.scope) == ("published bundles", "published", "all")
    assert ev.line().startswith("evidence: published bundles (")


def test_paper_cfg_is_the_published_runs(published_root):
    for m in layout.load_models(published_root).values():
        assert {k: m.cfg[k] for k in evidence.PAPER_CFG} == evidence.PAPER_CFG


def test_a_copy_that_is_not_byte_identical_is_a_paper_rerun(published_root, tmp_path):
    root = copy_published(published_root, tmp_path / "b")
    _set_cfg(root)  # the same values, other bytes
    ev = _describe(root)
    assert (ev.kind, ev.tier, ev.scope) == ("paper rerun", "rerun", "all")


def test_a_stopped_run_is_judged_on_what_it_reached(published_root, tmp_path):
    root = copy_published(published_root, tmp_path / "b")
    stop_after(root, 1200)
    ev = _describe(root)
    assert (ev.kind, ev.tier, ev.scope, ev.stopped_after) == ("truncated paper run", "rerun", "truncated", 1200)
    assert "stopped after step 1,200 of its 12,000" in ev.line() and ev.steps == 12000


def test_a_stopped_run_missing_a_step_it_reached_is_refused(published_root, tmp_path):
    root = copy_published(published_root, tmp_path / "b")
    stop_after(root, 1200)
    _set_cfg(root, STOPPED_AFTER=6000)
    with pytest.raises(InputError, match="stopped after step 6000 holds those at"):
        _describe(root)


def test_the_manifest_names_the_preset_and_must_agree(published_root, tmp_path):
    root = copy_published(published_root, tmp_path / "run")
    _set_cfg(root, D=32, T=32)
    manifest = {
        "config": {"preset": "smoke", "variants": ["softmax", "yat_b"], "seeds": [0], "train": {"steps": 60}},
        "stopped_after": None,
        "completed": True,
        "preflight": {"verdict": "FAIL", "steps": 3, "device": "cpu", "file": "fidelity.json"},
    }
    (root / "manifest.json").write_text(json.dumps(manifest))
    ev = _describe(root / QK, ("softmax", "yat_b"))  # the manifest one folder above the bundle
    assert (ev.kind, ev.tier, ev.scope) == ("smoke rerun", "rerun", "smoke")
    assert "config.preset = smoke" in ev.why and ev.preflight["verdict"] == "FAIL"
    (root / "manifest.json").write_text(json.dumps({**manifest, "stopped_after": 30}))
    with pytest.raises(InputError, match="mix runs of different stops"):
        _describe(root)


def test_another_configuration_without_manifest_judges_only_what_holds_at_any_size(published_root, tmp_path):
    root = copy_published(published_root, tmp_path / "b")
    _set_cfg(root, STEPS=24000)  # longer: the maps' steps stay inside the schedule
    ev = _describe(root)
    assert (ev.kind, ev.scope) == ("rerun of another configuration", "smoke") and "STEPS 24000, not 12000" in ev.why


def test_an_explicit_tier_that_disagrees_is_a_warning(published_root):
    models = layout.load_models(published_root)
    _, tier, warnings, hashes = verify.judge_evidence(published_root, models, "rerun")
    assert tier == "rerun" and len(hashes) == 2 * len(PUBLISHED) + len(PUBLISHED_BUNDLES)  # attn, geom; run JSONs
    assert len(warnings) == 1 and warnings[0].startswith("--tier rerun overrides the published tier")
    assert verify.judge_evidence(published_root, models, "published")[2] == []


def test_a_run_stopped_before_its_second_telemetry_step_is_judged_on_step_0(published_root, tmp_path):
    """`--stop-after 2` leaves only the step-0 maps (taken before any update): a valid run, judged on what it
    reached (exit 0 or 1), not refused for holding one map."""
    root = copy_published(published_root, tmp_path / "b")
    stop_after(root, 2)
    ev = _describe(root)
    assert (ev.kind, ev.scope, ev.stopped_after) == ("truncated paper run", "truncated", 2)
    assert verify.run_verify(root, tmp_path / "out") in (0, 1)
    rows = {c["id"]: c["verdict"] for c in json.loads((tmp_path / "out" / "report.json").read_text())["claims"]}
    assert rows["occupancy.yat_b.step0"] == "PASS" and rows["entropy.yat_b"] == "SKIP"
