"""The default job needs no training code: with `attngeom.training` unimportable, `./reproduce.sh` judges the
published bundles to the same results, value for value, and so does `--bundles` on a rerun's folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BLOCK = """
import importlib.abc, sys

class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "attngeom.training" or name.startswith("attngeom.training."):
            raise ImportError(f"{name} is blocked for this test")
        return None

sys.meta_path.insert(0, Blocked())
"""

pytestmark = pytest.mark.slow


def reproduce(*args: str, blocked: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if blocked is not None:
        env["PYTHONPATH"] = str(blocked)
    return subprocess.run(
        [str(REPO / "reproduce.sh"), *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=900, check=False
    )


def test_the_default_job_runs_with_the_training_package_unimportable(tmp_path):
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(BLOCK)
    probe = subprocess.run(
        [sys.executable, "-c", "import attngeom.training"],
        env={**os.environ, "PYTHONPATH": f"{blocker}:{REPO / 'src'}"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert probe.returncode != 0 and "blocked for this test" in probe.stderr, "the block must hold"
    plain = reproduce("--out", str(tmp_path / "plain"))
    without = reproduce("--out", str(tmp_path / "without"), blocked=blocker)
    assert (plain.returncode, without.returncode) == (1, 1), without.stderr[-2000:]  # the two far-field claims
    assert "internal error" not in without.stderr
    results = [json.loads((tmp_path / name / "results.json").read_text()) for name in ("plain", "without")]
    assert results[0] == results[1]
    assert without.stdout.splitlines()[-1] == plain.stdout.splitlines()[-1] == "44 passed, 2 failed"
