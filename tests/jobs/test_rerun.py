"""`rerun` (jobs.rerun): train, then judge the run into its report; a run whose training or judging was
interrupted stays incomplete and is never written over, resume judges it, bad options are one line, and a run
stopped before its first evaluation is judged on what it reached."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from helpers import REPO
from helpers.runs import SMOKE_SEEDS, XLA_ISAS, restore_device_settings, same_as_the_whole_run

from attngeom import cli
from attngeom.base import train_config
from attngeom.base.errors import InputError
from attngeom.base.variants import BUNDLES, PUBLISHED
from attngeom.bundles.layout import RUN_JSON
from attngeom.jobs import rerun
from attngeom.training import runs, train


def ctrl_c(*args, **kwargs):
    """A stand-in for a stage the user interrupts."""
    raise KeyboardInterrupt


@pytest.mark.slow
@pytest.mark.parametrize("isa", sorted(XLA_ISAS))
def test_smoke_reruns_train_write_and_pass_verification_on_every_seed(smoke_runs, isa):
    """Three seeds of 16 windows under two code generations: rows near an acceptance rule's edge occur on any CPU."""
    run = smoke_runs[isa]
    assert run.proc.returncode == 0, run.proc.stdout[-3000:] + run.proc.stderr[-3000:]
    manifest = runs.require_complete(run.path)
    assert manifest["config"]["preset"] == "smoke" and manifest["config"]["seeds"] == list(SMOKE_SEEDS)
    assert manifest["verify_exit"] == 0 and manifest["windows"] == 16
    isa_named = "default (the CPU's best: " if isa == "default" else f"{isa} (XLA_FLAGS --xla_cpu_max_isa)"
    assert f", XLA CPU ISA {isa_named}" in manifest["machine"]
    assert {"report/REPORT.md", "report/report.json", "attngeom-qk/yat_attention.json"} <= set(manifest["files"])
    logged = [json.loads(line) for line in (run.path / runs.TRAIN_LOG).read_text().splitlines()]
    steps = train_config.PRESETS["smoke"].steps
    assert [(r["variant"], r["seed"], r["step"]) for r in logged] == [
        (v, seed, s)
        for members in BUNDLES.values()
        for seed in SMOKE_SEEDS
        for v in members
        if v in PUBLISHED
        for s in range(steps)
    ]
    robust = json.loads((run.path / "report" / "results.json").read_text())["robustness"]
    for model in robust.values():  # every seed's bundles and windows were read, accepted and measured
        assert model["seeds"] == list(SMOKE_SEEDS) and model["windows"] == {str(s): 16 for s in SMOKE_SEEDS}


def test_an_interrupted_rerun_stays_incomplete_and_is_not_written_over(tmp_path, monkeypatch, capsys):
    restore_device_settings(monkeypatch)

    monkeypatch.setattr(train, "train_variant", ctrl_c)
    out = tmp_path / "run"
    assert cli.main(["rerun", "--preset", "smoke", "--out", str(out), "--quiet"]) == 130
    manifest = json.loads((out / runs.MANIFEST).read_text())
    assert manifest["completed"] is False and "KeyboardInterrupt" in manifest["error"]
    with pytest.raises(Exception, match="did not complete"):
        runs.require_complete(out)
    assert cli.main(["rerun", "--preset", "smoke", "--out", str(out), "--quiet"]) == 2
    assert "never written over" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--variants", "softmax,nope"], "unknown variant 'nope'"),
        (["--steps", "1"], "--steps"),
        (["--seeds", "0,x"], "--seeds"),
        (["--lr", "-1"], "--lr"),
        (["--seed", "-1"], "--seed"),
        (["--seed", "1e23"], "--seed"),
        (["--stop-after", "0"], "--stop-after: a step from 1 to 58"),
        (["--stop-after", "59"], "--stop-after: a step from 1 to 58"),
        (["--steps", "20", "--stop-after", "30"], "--stop-after: a step from 1 to 18"),
        (["--stop-after", "x"], "--stop-after"),
        (["--windows", "0"], "--windows"),
        (["--time-limit", "0"], "--time-limit: a positive number"),
        (["--members", "2", "--members-mode", "sequential", "--time-limit", "5"], "--time-limit: only for members"),
        (["--members-mode", "together"], "--members-mode: only for an ensemble"),
    ],
)
def test_bad_options_are_one_line_errors(tmp_path, monkeypatch, capsys, args, message):
    restore_device_settings(monkeypatch)
    assert cli.main(["rerun", "--preset", "smoke", "--out", str(tmp_path / "r"), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
    assert not (tmp_path / "r").exists()


def test_an_interrupted_verification_leaves_the_run_incomplete_and_resume_judges_it(tmp_path, monkeypatch, capsys):
    restore_device_settings(monkeypatch)
    out = tmp_path / "run"

    with monkeypatch.context() as m:
        m.setattr(rerun, "run_verify", ctrl_c)
        opts = ["rerun", "--preset", "smoke", "--variants", "softmax", "--windows", "2", "--quiet"]
        assert cli.main([*opts, "--out", str(out)]) == 130
    manifest = json.loads((out / runs.MANIFEST).read_text())
    assert manifest["completed"] is False and "KeyboardInterrupt" in manifest["error"]
    assert not (out / "report" / "REPORT.md").exists()
    with pytest.raises(InputError, match="did not complete"):
        runs.require_complete(out)
    log = (out / runs.TRAIN_LOG).read_text()
    capsys.readouterr()
    status = cli.main(["rerun", "--resume", str(out), "--quiet"])
    manifest = runs.require_complete(out)
    assert manifest["verify_exit"] == status and "report/REPORT.md" in manifest["files"]
    assert (out / runs.TRAIN_LOG).read_text() == log  # judged again, not trained again


def test_a_time_limited_run_whose_judging_failed_resumes_to_the_whole_schedule(
    smoke_run, tmp_path, monkeypatch, capsys
):
    """A time limit sets no plan: when judging the part it reached fails, `--resume` trains on to the end
    (it used to judge that part again, in a segment of no steps, and leave the run stopped there)."""
    restore_device_settings(monkeypatch)
    out = tmp_path / "cut"

    with monkeypatch.context() as m:
        m.setattr(rerun, "run_verify", ctrl_c)
        opts = ["rerun", "--preset", "smoke", "--variants", "softmax", "--quiet"]
        assert cli.main([*opts, "--time-limit", "0.001", "--out", str(out)]) == 130
    first = train.chunk_plan(train_config.PRESETS["smoke"])[0][1]
    cut = json.loads((out / runs.MANIFEST).read_text())
    assert (cut["completed"], cut["stopped_after"], cut["stopped_by"]) == (False, first - 1, "time limit")
    capsys.readouterr()
    assert cli.main(["rerun", "--resume", str(out), "--quiet"]) == 0
    assert f"softmax seed 0: resuming after step {first}" in capsys.readouterr().out
    whole = runs.require_complete(out)
    assert whole["stopped_after"] is None and whole["stopped_by"] is None
    assert [(s["from_steps"], s["to_steps"]) for s in whole["segments"]] == [
        ({"softmax_s0": 0}, {"softmax_s0": first}),
        ({"softmax_s0": first}, {"softmax_s0": train_config.PRESETS["smoke"].steps}),
    ]
    same_as_the_whole_run(smoke_run, out, ("softmax",), 0)


@pytest.mark.slow
def test_the_rerun_report_judges_seed_0_and_shows_every_window(smoke_run):
    report = smoke_run / "report"
    robust = json.loads((report / "results.json").read_text())["robustness"]
    assert set(robust) == set(PUBLISHED)
    for model in robust.values():
        assert model["seeds"] == list(SMOKE_SEEDS) and model["windows"] == {str(s): 16 for s in SMOKE_SEEDS}
        assert model["counts"]["scale_moved_rows"]["out_of"] > 0
    assert robust["softmax"]["counts"]["scale_moved_rows"]["count"] == 0  # the theorem holds on every window
    assert "## Robustness: every window and seed" in (report / "REPORT.md").read_text()
    assert '<figure class="robust"' in (report / "index.html").read_text()


@pytest.mark.slow
def test_a_paper_run_stopped_before_its_first_evaluation_is_judged_on_what_it_reached(tmp_path):
    """Three paper steps of softmax: only the step-0 maps and no validation loss, judged all the same."""
    out = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    cmd = [sys.executable, "-m", "attngeom", "rerun", "--preset", "paper", "--stop-after", "2"]
    cmd += ["--variants", "softmax", "--out", str(out), "--quiet"]
    proc = subprocess.run(cmd, check=False, env=env, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "softmax seed 0: no evaluation yet" in proc.stdout
    manifest = runs.require_complete(out)
    assert manifest["stopped_after"] == 2 and manifest["verify_exit"] == proc.returncode
    record = json.loads((out / "attngeom-qk" / RUN_JSON).read_text())["runs"][0]
    assert record["best_val"] is None and record["curve"] == []
    report = json.loads((out / "report" / "report.json").read_text())
    rows = {c["id"]: c["verdict"] for c in report["claims"]}
    assert report["evidence"]["scope"] == "truncated" and rows["occupancy.softmax.step0"] == "PASS"
    assert rows["scale.softmax.moved"] == "PASS"
    results = json.loads((out / "report" / "results.json").read_text())
    assert results["models"]["softmax"]["best_val"] is None
