"""The fidelity check: the author's script against this harness on this machine, and its verdicts."""

from __future__ import annotations

import copy
import json
import os
import shutil
import time

import numpy as np
import pytest

from attngeom import cli
from attngeom.base import fetch
from attngeom.base.errors import InputError
from attngeom.base.variants import PUBLISHED, variant
from attngeom.training import fidelity


def _side(seed: int = 0) -> dict:
    attn_LHTT = np.random.default_rng(seed).random((2, 2, 4, 4)).astype(np.float16)
    return {
        "softmax": {
            "parameters": 10,
            "param_sum": 1.5,
            "param_abs_sum": 3.25,
            "tokens": [1, 2, 3],
            "losses": [4.7344, 3.7372, 3.4953],
            "attn_step0": attn_LHTT,
        }
    }


def test_identical_figures_pass_exactly():
    result = fidelity.compare(_side(), _side())
    assert result["verdict"] == "PASS" and result["exact"]


def test_a_loss_within_round_off_passes_but_is_not_exact():
    harness = _side()
    harness["softmax"]["losses"][2] *= 1 + 2e-6
    result = fidelity.compare(_side(), harness)
    assert result["verdict"] == "PASS" and not result["exact"]


@pytest.mark.parametrize(
    "change",
    [
        lambda f: f["losses"].__setitem__(1, f["losses"][1] + 1e-3),
        lambda f: f.__setitem__("parameters", 11),
        lambda f: f.__setitem__("param_sum", 1.5 + 1e-9),
        lambda f: f.__setitem__("tokens", [1, 2, 4]),
        lambda f: f["attn_step0"].__setitem__((0, 0, 1, 1), f["attn_step0"][0, 0, 1, 1] + np.float16(0.01)),
    ],
    ids=["loss", "parameters", "initial sum", "tokens", "map"],
)
def test_a_mismatch_flips_the_verdict(change):
    harness = copy.deepcopy(_side())
    change(harness["softmax"])
    result = fidelity.compare(_side(), harness)
    assert result["verdict"] == "FAIL"
    assert sum(not c["pass"] for c in result["checks"]["softmax"].values()) == 1


def test_a_map_one_float16_ulp_away_passes():
    harness = copy.deepcopy(_side())
    a = harness["softmax"]["attn_step0"]
    a[0, 0, 2, 1] = np.nextafter(a[0, 0, 2, 1], np.float16(1))
    result = fidelity.compare(_side(), harness)
    assert result["verdict"] == "PASS" and result["checks"]["softmax"]["step-0 maps"]["entries_differing"] == 1


def test_sides_of_different_lengths_are_unusable():
    harness = _side()
    harness["softmax"]["losses"] = harness["softmax"]["losses"][:2]
    with pytest.raises(InputError, match="trained 3 and 2 steps"):
        fidelity.compare(_side(), harness)


def test_table_and_summary_name_every_check():
    harness = copy.deepcopy(_side())
    harness["softmax"]["losses"][0] += 0.5
    doc = {
        **fidelity.compare(_side(), harness),
        "steps": 3,
        "device": {"platform": "cpu", "kind": "cpu"},
        "cpu": {"model": "Some CPU", "cores": 2},
    }
    lines = fidelity.table(doc).splitlines()
    assert len(lines) == 1 + 8 and "DIFFERS" in next(line for line in lines if "loss step 0" in line)
    assert fidelity.summary_line(doc) == "fidelity: FAIL (7 of 8 figures exactly equal; 3 steps on Some CPU)"


@pytest.mark.parametrize("argv", [["--steps", "0"], ["--variants", "nope"]])
def test_bad_options_exit_2(argv, tmp_path, capsys):
    assert cli.main(["fidelity", *argv, "--out", str(tmp_path / "f")]) == 2
    assert capsys.readouterr().err.startswith("error: ")
    assert not (tmp_path / "f").exists()


def test_a_tampered_author_script_exits_2_before_any_training(tmp_path, monkeypatch, capsys):
    mirror = tmp_path / "mirror"
    for url in (fetch.CORPUS_URL, fetch.AUTHOR_SCRIPT_URL):
        (mirror / fetch.url_path(url)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(fetch.mirror_dir() / fetch.url_path(url), mirror / fetch.url_path(url))
    with open(mirror / fetch.url_path(fetch.AUTHOR_SCRIPT_URL), "a", encoding="utf-8") as f:
        f.write("\nLR_OVERRIDE['softmax'] = 1.0\n")
    monkeypatch.setenv("ATTNGEOM_MIRROR", str(mirror))
    monkeypatch.setenv("ATTNGEOM_CACHE", str(tmp_path / "cache"))
    assert cli.main(["fidelity", "--out", str(tmp_path / "f")]) == 2
    assert "sha256 mismatch" in capsys.readouterr().err


def test_a_failing_author_script_is_one_error(tmp_path, monkeypatch):
    broken = tmp_path / "yat_attention.py"
    broken.write_text("raise RuntimeError('no such layer')\n", encoding="utf-8")
    monkeypatch.setattr(fetch, "fetch_author_script", lambda: broken)
    with pytest.raises(InputError, match="author's training script failed .*no such layer"):
        with fidelity.original_side(("softmax",), 1) as finished:
            finished()


def test_leaving_the_block_stops_the_authors_script(tmp_path, monkeypatch):
    """A harness side that fails ends the check at once: the script running beside it is stopped, not orphaned."""
    pid_file = tmp_path / "pid"
    slow = tmp_path / "yat_attention.py"
    slow.write_text(f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(600)\n")
    monkeypatch.setattr(fetch, "fetch_author_script", lambda: slow)
    with pytest.raises(RuntimeError, match="harness failed"), fidelity.original_side(("softmax",), 1):
        deadline = time.monotonic() + 120
        while not pid_file.is_file() or not pid_file.read_text():
            assert time.monotonic() < deadline, "the script never started"
            time.sleep(0.1)
        raise RuntimeError("harness failed")
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)


KERNEL_VARIANTS = tuple(v for v in PUBLISHED if variant(v).kernel)  # yat_b, goat_v


@pytest.mark.slow
def test_the_harness_trains_as_the_author_script_on_this_machine(tmp_path):
    """Three paper-preset steps of each kernel variant, both sides, on whatever machine runs the tests.
    softmax's check passes in two other tests, with the same code path: the preflight of a rerun (below)
    and the GPU check's rehearsal (tests/process/test_gpu_check.py)."""
    doc = fidelity.check(KERNEL_VARIANTS, 3, tmp_path / fidelity.FIDELITY_JSON)
    failed = {v: [name for name, c in checks.items() if not c["pass"]] for v, checks in doc["checks"].items()}
    assert doc["verdict"] == "PASS", failed
    assert all(len(doc["original"][v]["losses"]) == len(doc["harness"][v]["losses"]) == 3 for v in failed)
    assert (tmp_path / fidelity.FIDELITY_JSON).is_file()


@pytest.fixture()
def run_folder(tmp_path):
    from attngeom.training import runs

    return runs.RunFolder(runs.new_run_dir(tmp_path / "run", "smoke"), config={"preset": "smoke"})


def test_no_preflight_on_a_cpu_unless_asked(run_folder, monkeypatch):
    monkeypatch.setattr(fidelity, "check", lambda *a: pytest.fail("the check ran"))
    fidelity.run_preflight(run_folder, ("softmax",), None)
    fidelity.run_preflight(run_folder, ("softmax",), 0)
    assert "preflight" not in run_folder.manifest


def test_a_failed_preflight_is_recorded_and_training_goes_on(run_folder, monkeypatch, capsys):
    def failing(variants, steps, out_file):
        doc = {
            **fidelity.compare(_side(), {"softmax": {**_side()["softmax"], "parameters": 9}}),
            "steps": steps,
            "device": {"platform": "cpu", "kind": "cpu"},
            "cpu": {"model": "Some CPU", "cores": 2},
        }
        out_file.write_text("{}", encoding="utf-8")
        return doc

    monkeypatch.setattr(fidelity, "check", failing)
    fidelity.run_preflight(run_folder, ("softmax", "yat_b"), 2)
    record = json.loads((run_folder.path / "manifest.json").read_text())["preflight"]
    assert record == {"verdict": "FAIL", "steps": 2, "device": "cpu", "file": "fidelity.json"}
    assert "warning: preflight fidelity FAIL" in capsys.readouterr().err


def test_a_preflight_that_cannot_run_is_an_error_record(run_folder, monkeypatch):
    def unusable(variants, steps, out_file):
        raise InputError("download failed")

    monkeypatch.setattr(fidelity, "check", unusable)
    fidelity.run_preflight(run_folder, ("softmax",), 1)
    assert run_folder.manifest["preflight"]["verdict"] == "ERROR"
    assert "download failed" in run_folder.manifest["preflight"]["error"]


def test_a_negative_preflight_is_refused(tmp_path, capsys):
    assert cli.main(["rerun", "--preset", "smoke", "--preflight", "-1", "--out", str(tmp_path / "r")]) == 2
    assert "--preflight" in capsys.readouterr().err and not (tmp_path / "r").exists()


@pytest.mark.slow
def test_a_rerun_with_a_preflight_keeps_its_fidelity_file(tmp_path):
    from attngeom.training.runs import require_complete

    run = tmp_path / "run"
    status = cli.main(
        ["rerun", "--preset", "smoke", "--variants", "softmax", "--preflight", "1", "--quiet", "--out", str(run)]
    )
    assert status in (0, 1)  # a softmax-only smoke run judges few claims; the preflight is what is tested
    manifest = require_complete(run)
    assert manifest["preflight"] == {"verdict": "PASS", "steps": 1, "device": "cpu", "file": "fidelity.json"}
    assert "fidelity.json" in manifest["files"]
    assert json.loads((run / "fidelity.json").read_text())["variants"] == ["softmax"]
