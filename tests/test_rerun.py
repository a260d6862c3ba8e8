"""`rerun --backend local`: the smoke rerun end to end, the bundle format, interruptions, bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from attngeom import cli
from attngeom.bundles import RUN_JSON, load_models
from attngeom.errors import InputError
from attngeom.training import config, rerun, runs, train

REPO = Path(__file__).resolve().parents[1]


def _restore_device_settings(monkeypatch):
    """`rerun` sets these for its process; give them back after an in-process call."""
    for name in ("XLA_FLAGS", "CUDA_VISIBLE_DEVICES", "JAX_DEFAULT_MATMUL_PRECISION"):
        if name in os.environ:
            monkeypatch.setenv(name, os.environ[name])
        else:
            monkeypatch.delenv(name, raising=False)


def test_preset_names_match_the_presets():
    assert rerun.PRESET_NAMES == tuple(config.PRESETS)


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """One smoke rerun through the command line, as CI and users run it."""
    out = tmp_path_factory.mktemp("smoke") / "run"
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    cmd = [sys.executable, "-m", "attngeom", "rerun", "--backend", "local", "--preset", "smoke", "--out", str(out)]
    cmd.append("--quiet")
    return out, subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_smoke_rerun_trains_writes_and_passes_verification(smoke_run):
    out, proc = smoke_run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    manifest = runs.require_complete(out)
    assert manifest["config"]["preset"] == "smoke" and manifest["verify_exit"] == 0
    assert {"report/REPORT.md", "report/report.json", "attngeom-qk/yat_attention.json"} <= set(manifest["files"])
    logged = [json.loads(line) for line in (out / runs.TRAIN_LOG).read_text().splitlines()]
    steps = config.PRESETS["smoke"].steps
    assert [(r["variant"], r["step"]) for r in logged] == [(v, s) for v in rerun.DEFAULT_VARIANTS for s in range(steps)]


@pytest.mark.slow
def test_rerun_bundles_have_the_original_format(smoke_run, published_root):
    out, _ = smoke_run
    ours = load_models(out, rerun.DEFAULT_VARIANTS)
    theirs = load_models(published_root, rerun.DEFAULT_VARIANTS)
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
    _restore_device_settings(monkeypatch)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(train, "train_variant", interrupted)
    out = tmp_path / "run"
    assert cli.main(["rerun", "--preset", "smoke", "--out", str(out), "--quiet"]) == 130
    manifest = json.loads((out / runs.MANIFEST).read_text())
    assert manifest["completed"] is False and "KeyboardInterrupt" in manifest["error"]
    with pytest.raises(Exception, match="did not complete"):
        runs.require_complete(out)
    assert cli.main(["rerun", "--preset", "smoke", "--out", str(out), "--quiet"]) == 2
    assert "never written over" in capsys.readouterr().err


def _interrupt_at(monkeypatch, variant: str, step: int):
    """Make training raise KeyboardInterrupt once `variant` has logged the chunk at `step`, as Ctrl-C would."""
    real = train.train_variant

    def train_variant(v, seed, cfg, corpus, on_steps, **kwargs):
        def stop(first, losses):
            on_steps(first, losses)
            if v == variant and first >= step:
                raise KeyboardInterrupt

        return real(v, seed, cfg, corpus, on_steps=stop, **kwargs)

    monkeypatch.setattr(train, "train_variant", train_variant)


def test_a_resumed_rerun_writes_the_bundles_of_an_uninterrupted_one(tmp_path, monkeypatch, capsys):
    _restore_device_settings(monkeypatch)
    opts = ["rerun", "--preset", "smoke", "--steps", "45", "--seed", "1", "--variants", "softmax,yat_b", "--quiet"]
    assert cli.main([*opts, "--out", str(tmp_path / "whole")]) == 0
    with monkeypatch.context() as m:
        _interrupt_at(m, "yat_b", 23)  # steps 23..39 logged, the last checkpoint at 20
        assert cli.main([*opts, "--out", str(tmp_path / "cut")]) == 130
    assert (tmp_path / "cut" / runs.CHECKPOINTS / "yat_b_s1.npz").is_file()
    assert cli.main(["rerun", "--resume", str(tmp_path / "cut"), "--quiet"]) == 0
    assert "yat_b seed 1: resuming after step 20" in capsys.readouterr().out

    whole, cut = runs.require_complete(tmp_path / "whole"), runs.require_complete(tmp_path / "cut")
    assert set(cut["files"]) == set(whole["files"]) and not (tmp_path / "cut" / runs.CHECKPOINTS).exists()
    for name in whole["files"]:
        a, b = tmp_path / "whole" / name, tmp_path / "cut" / name
        if name.endswith(".npz"):
            with np.load(a) as za, np.load(b) as zb:
                assert za.files == zb.files and all(np.array_equal(za[k], zb[k]) for k in za.files), name
        else:
            assert a.read_text() == b.read_text(), name  # the run JSON and the log, steps not repeated
    assert cli.main(["rerun", "--resume", str(tmp_path / "cut")]) == 2
    assert "already completed" in capsys.readouterr().err


def test_only_a_run_folder_can_be_resumed(tmp_path, monkeypatch, capsys):
    _restore_device_settings(monkeypatch)
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
    ],
)
def test_bad_options_are_one_line_errors(tmp_path, monkeypatch, capsys, args, message):
    _restore_device_settings(monkeypatch)
    assert cli.main(["rerun", "--preset", "smoke", "--out", str(tmp_path / "r"), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
    assert not (tmp_path / "r").exists()


def test_run_json_summarises_every_seed():
    def fake(seed, best):
        return train.RunResult(
            variant="yat_b", seed=seed, lr=3e-3, losses=np.zeros(2), curve=[{"step": 2, "val": best}],
            tokens_T=np.zeros(4, np.int32), prompt="abcd", maps={}, q_LHTD=None, k_LHTD=None, attn_LHTT=None,
            score_max=[1.0], b_LH=np.ones((1, 2)), eps_LH=np.ones((1, 2)), wall_s=0.0,
        )  # fmt: skip

    doc = rerun.run_json([fake(0, 1.0), fake(1, 2.0)], config.PRESETS["smoke"])
    assert doc["summary"]["yat_b"]["best_val_mean"] == 1.5 and doc["summary"]["yat_b"]["best_val_std"] == 0.5
    assert [list(r)[:6] for r in doc["runs"]][0] == ["variant", "seed", "best_val", "bpc", "curve", "score_max"]
    assert doc["runs"][1]["b_learned"] == [[1.0, 1.0]]


def test_training_without_jax_is_one_clear_error(monkeypatch):
    """Python 3.10 environments verify but cannot train: say so, no traceback."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "jax" else real(name, *a))
    with pytest.raises(InputError, match="Python 3.11 or 3.12"):
        rerun.deterministic_device()
