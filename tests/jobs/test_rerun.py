"""`rerun`: the smoke rerun end to end, the bundle format, interruptions, bad input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from trained_runs import SMOKE_SEEDS, XLA_ISAS, interrupt_training, restore_device_settings, same_as_the_whole_run

from attngeom import cli
from attngeom.base import schema, train_config
from attngeom.base.errors import InputError
from attngeom.base.variants import BUNDLES, PUBLISHED
from attngeom.bundles import layout
from attngeom.bundles.layout import RUN_JSON, load_models
from attngeom.jobs import rerun
from attngeom.training import device, runs, train

REPO = Path(__file__).resolve().parents[1]


def ctrl_c(*args, **kwargs):
    """A stand-in for a stage the user interrupts."""
    raise KeyboardInterrupt


def test_preset_names_match_the_presets():
    assert train_config.PRESET_NAMES == tuple(train_config.PRESETS)


@pytest.fixture
def smoke_run(smoke_runs) -> Path:
    """The session's smoke rerun of seeds 0-2 under the machine's own code generation (read only)."""
    return smoke_runs["default"].path


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


@pytest.mark.slow
def test_the_code_generations_round_differently(smoke_runs):
    """The second code generation is only worth its run if it changes the round-off; on a CPU whose best
    is SSE4_2 itself the two are the same machine code."""
    machine, other = (runs.require_complete(smoke_runs[isa].path)["machine"] for isa in ("default", "SSE4_2"))
    if "the CPU's best: SSE4_2" in machine:
        pytest.skip("this CPU's best code generation is SSE4_2: both runs are one")
    losses = {
        isa: [json.loads(line)["loss"] for line in (smoke_runs[isa].path / runs.TRAIN_LOG).read_text().splitlines()]
        for isa in XLA_ISAS
    }
    assert machine != other and losses["default"] != losses["SSE4_2"]


@pytest.mark.slow
def test_rerun_bundles_have_the_original_format(smoke_run, published_root):
    out = smoke_run
    ours = load_models(out, PUBLISHED)
    theirs = load_models(published_root, PUBLISHED)
    for variant, mine in ours.items():
        orig = theirs[variant]
        for name in ("attn", "geom"):
            with np.load(mine.files[name]) as a, np.load(orig.files[name]) as b:
                assert len(a.files) == len(b.files)
                assert {k: (a[k].dtype, a[k].ndim) for k in a.files if not k.startswith("step")} == {
                    k: (b[k].dtype, b[k].ndim) for k in b.files if not k.startswith("step")
                }
        mine_keys = set(mine.run) | {"mass_auroc", "mass_mean_correct", "mass_mean_wrong"}
        assert set(orig.run) <= mine_keys and set(mine.run) <= set(orig.run)
        assert mine.cfg.keys() == orig.cfg.keys()
    assert (out / "attngeom-qk" / RUN_JSON).is_file() and (out / "attngeom-goat" / RUN_JSON).is_file()
    summary = json.loads((out / "attngeom-qk" / RUN_JSON).read_text())["summary"]
    assert set(summary) == {"softmax", "yat_b"}
    assert set(summary["yat_b"]) == {"best_val_mean", "best_val_std", "bpc_mean"}


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


@pytest.mark.slow
def test_a_resumed_rerun_writes_the_bundles_of_an_uninterrupted_one(smoke_run, tmp_path, monkeypatch, capsys):
    restore_device_settings(monkeypatch)
    opts = ["rerun", "--preset", "smoke", "--seed", "1", "--variants", "softmax,yat_b", "--quiet"]
    with monkeypatch.context() as m:
        interrupt_training(m, 23, "yat_b")  # steps 23..39 logged, the last checkpoint at 20
        assert cli.main([*opts, "--out", str(tmp_path / "cut")]) == 130
    assert (tmp_path / "cut" / runs.CHECKPOINTS / "yat_b_s1.npz").is_file()
    assert cli.main(["rerun", "--resume", str(tmp_path / "cut"), "--quiet"]) == 0
    assert "yat_b seed 1: resuming after step 20" in capsys.readouterr().out
    same_as_the_whole_run(smoke_run, tmp_path / "cut", ("softmax", "yat_b"), 1)
    assert cli.main(["rerun", "--resume", str(tmp_path / "cut")]) == 2
    assert "already completed" in capsys.readouterr().err


def test_only_a_run_folder_can_be_resumed(tmp_path, monkeypatch, capsys):
    restore_device_settings(monkeypatch)
    assert cli.main(["rerun", "--resume", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "manifest" in err and err.count("\n") == 1


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


@pytest.mark.slow
def test_rerun_records_the_maps_on_more_windows(smoke_run):
    out = smoke_run
    assert runs.require_complete(out)["windows"] == 16
    cfg = train_config.PRESETS["smoke"]
    W, L, H, T, D = 16, cfg.model.layers, cfg.model.heads, cfg.model.seq_len, cfg.model.head_dim
    steps = list(cfg.telemetry_steps())
    for variant, model in load_models(out, PUBLISHED).items():
        with np.load(model.files["geom"].parent / f"windows_{variant}_s0.npz") as z:
            assert set(z.files) == {"tokens_WT", "steps", "q_WLHTD", "k_WLHTD", *(f"attn_{s}" for s in steps)}
            assert z["tokens_WT"].dtype == np.int32 and z["tokens_WT"].shape == (W, T)
            np.testing.assert_array_equal(z["tokens_WT"][0], model.tokens_T)  # the bundle's fixed window first
            assert z["steps"].dtype == np.int32 and z["steps"].tolist() == steps
            for s in steps:
                assert z[f"attn_{s}"].dtype == np.float16 and z[f"attn_{s}"].shape == (W, L, H, T, T)
                np.testing.assert_allclose(z[f"attn_{s}"][0], model.maps[s], rtol=2e-3, atol=1e-6)
            for name in ("q_WLHTD", "k_WLHTD"):
                assert z[name].dtype == np.float16 and z[name].shape == (W, L, H, T, D)


@pytest.mark.slow
def test_a_stopped_rerun_is_the_first_part_and_resume_carries_it_on(smoke_run, tmp_path, monkeypatch, capsys):
    restore_device_settings(monkeypatch)
    opts = ["rerun", "--preset", "smoke", "--seed", "1", "--variants", "yat_b", "--quiet"]
    assert cli.main([*opts, "--stop-after", "30", "--out", str(tmp_path / "cut")]) == 0
    cut = runs.require_complete(tmp_path / "cut")
    assert cut["stopped_after"] == 30 and cut["config"]["train"]["stop_after"] == 30 and cut["windows"] == 16
    assert cut["machine"] == runs.run_machine()  # the CPU model and XLA's code generation too
    qk = Path("attngeom-qk")
    with (
        np.load(tmp_path / "cut" / qk / "attn_yat_b_s1.npz") as a,
        np.load(smoke_run / qk / "attn_yat_b_s1.npz") as b,
    ):
        assert sorted(k for k in a.files if k.startswith("step")) == ["step0", "step30", "step6"]
        assert all(np.array_equal(a[k], b[k]) for k in a.files)  # the telemetry up to the stop is the full run's
    with (
        np.load(tmp_path / "cut" / qk / "windows_yat_b_s1.npz") as a,
        np.load(smoke_run / qk / "windows_yat_b_s1.npz") as b,
    ):
        assert a["steps"].tolist() == [0, 6, 30] and all(
            np.array_equal(a[f"attn_{s}"], b[f"attn_{s}"]) for s in (0, 6, 30)
        )
    logged = [json.loads(line)["step"] for line in (tmp_path / "cut" / runs.TRAIN_LOG).read_text().splitlines()]
    assert logged == list(range(31))
    assert json.loads((tmp_path / "cut" / qk / RUN_JSON).read_text())["cfg"]["STOPPED_AFTER"] == 30
    assert (tmp_path / "cut" / runs.CHECKPOINTS / "yat_b_s1.npz").is_file()
    capsys.readouterr()

    assert cli.main(["rerun", "--resume", str(tmp_path / "cut"), "--quiet"]) == 0
    assert "yat_b seed 1: resuming after step 31" in capsys.readouterr().out
    cut = runs.require_complete(tmp_path / "cut")
    assert (
        cut["stopped_after"] is None and cut["config"]["train"] == runs.require_complete(smoke_run)["config"]["train"]
    )
    same_as_the_whole_run(smoke_run, tmp_path / "cut", ("yat_b",), 1)


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


@pytest.fixture(scope="module")
def interrupted_run(tmp_path_factory) -> Path:
    """A smoke run of softmax interrupted after its checkpoint at step 20."""
    out = tmp_path_factory.mktemp("interrupted") / "run"
    with pytest.MonkeyPatch.context() as m:
        restore_device_settings(m)
        interrupt_training(m, 23, "softmax")
        opts = ["rerun", "--preset", "smoke", "--seed", "1", "--variants", "softmax", "--windows", "2", "--quiet"]
        assert cli.main([*opts, "--out", str(out)]) == 130
    assert runs.checkpoint_step(runs.checkpoint_path(out, "softmax", 1), 60) == 20
    return out


def _rewrite_done(path: Path) -> None:
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    np.savez(path, **{**arrays, "done": np.array(-5)})


def _flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


CORRUPTIONS = {
    "truncated": lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]),
    "empty": lambda p: p.write_bytes(b""),
    "flipped byte": _flip_a_byte,
    "done = -5": _rewrite_done,
    "a directory": lambda p: (p.unlink(), p.mkdir()),
}


@pytest.mark.parametrize("corrupt", sorted(CORRUPTIONS))
def test_a_damaged_checkpoint_is_one_error_and_keeps_the_runs_record(
    interrupted_run, tmp_path, monkeypatch, capsys, corrupt
):
    restore_device_settings(monkeypatch)
    out = tmp_path / "run"
    shutil.copytree(interrupted_run, out)
    before = (out / runs.MANIFEST).read_text()
    CORRUPTIONS[corrupt](runs.checkpoint_path(out, "softmax", 1))
    capsys.readouterr()
    assert cli.main(["rerun", "--resume", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "unusable checkpoint" in err and err.count("\n") == 1
    assert (out / runs.MANIFEST).read_text() == before  # the earlier error stays on record
    assert "KeyboardInterrupt" in json.loads(before)["error"]


def _result(seed: int, curve: list[dict]) -> train.RunResult:
    """What training leaves behind, reduced to what the run JSON reads."""
    return train.RunResult(
        variant="yat_b",
        seed=seed,
        lr=3e-3,
        losses=np.zeros(2),
        curve=curve,
        tokens_T=np.zeros(4, np.int32),
        prompt="abcd",
        maps={},
        windows_WT=None,
        window_maps={},
        q_WLHTD=None,
        k_WLHTD=None,
        q_LHTD=None,
        k_LHTD=None,
        attn_LHTT=None,
        score_max=[1.0] if curve else [],
        b_LH=np.ones((1, 2)),
        eps_LH=np.ones((1, 2)),
        wall_s=0.0,
    )


def test_run_json_summarises_every_seed():
    doc = layout.run_json(
        [_result(0, [{"step": 2, "val": 1.0}]), _result(1, [{"step": 2, "val": 2.0}])], train_config.PRESETS["smoke"]
    )
    assert doc["summary"]["yat_b"]["best_val_mean"] == 1.5 and doc["summary"]["yat_b"]["best_val_std"] == 0.5
    assert [list(r)[:6] for r in doc["runs"]][0] == ["variant", "seed", "best_val", "bpc", "curve", "score_max"]
    assert doc["runs"][1]["b_learned"] == [[1.0, 1.0]]


def test_a_run_stopped_before_its_first_evaluation_says_so_in_its_run_json():
    cfg = train_config.preset("paper", stop_after=2)
    doc = layout.run_json([_result(0, [])], cfg)
    assert {k: doc["runs"][0][k] for k in ("best_val", "bpc", "curve", "score_max")} == {
        "best_val": None,
        "bpc": None,
        "curve": [],
        "score_max": [],
    }
    assert doc["summary"]["yat_b"] == {"best_val_mean": None, "best_val_std": None, "bpc_mean": None}
    schema.check(json.loads(json.dumps(doc)), schema.RUN_JSON, "run JSON")  # the reader accepts it
    seeds = layout.run_json([_result(0, []), _result(1, [{"step": 500, "val": 2.0}])], cfg)["summary"]["yat_b"]
    assert seeds["best_val_mean"] == 2.0  # over the seeds that reached an evaluation


def test_training_without_jax_is_one_clear_error(monkeypatch):
    """Python 3.10 environments verify but cannot train: say so, no traceback."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "jax" else real(name, *a))
    with pytest.raises(InputError, match="Python 3.11 or 3.12"):
        device.deterministic_device()


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
