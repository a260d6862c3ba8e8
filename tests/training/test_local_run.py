"""`training.local_run`: the bundles a smoke rerun trains and writes in the original format, its windows,
a run stopped early or interrupted and resumed to the bundles of an uninterrupted one, and the checkpoints
and folders a resume refuses."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from helpers.runs import XLA_ISAS, interrupt_training, restore_device_settings, same_as_the_whole_run

from attngeom import cli
from attngeom.base import train_config
from attngeom.base.variants import PUBLISHED
from attngeom.bundles.layout import RUN_JSON, load_models
from attngeom.training import runs
from attngeom.training.device import COMPILATION_CACHE_DIR
from attngeom.training.progress import CompileTimes


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

    times = CompileTimes(os.environ[COMPILATION_CACHE_DIR])  # the first part recorded how long compiling took
    compiled = next(k for k in json.loads(times.path.read_text()) if k.startswith("yat_b, 1 member(s), "))
    assert times.last(compiled) > 0 and compiled.endswith(", first chunk 2")  # the steps its time includes
    assert cli.main(["rerun", "--resume", str(tmp_path / "cut")]) == 0
    said = capsys.readouterr()
    assert "yat_b seed 1: resuming after step 31" in said.out
    assert "yat_b s1: compiling the training step (the first chunk of steps includes it; " in said.err
    assert "s last time on this machine)" in said.err  # the resumed part knows how long the first part took
    cut = runs.require_complete(tmp_path / "cut")
    assert (
        cut["stopped_after"] is None and cut["config"]["train"] == runs.require_complete(smoke_run)["config"]["train"]
    )
    same_as_the_whole_run(smoke_run, tmp_path / "cut", ("yat_b",), 1)


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
