"""The wrapper around the official `kaggle` client: its import trap and its one-line errors."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import REPO

from attngeom.backends.kaggle_client import connect, push_kernel
from attngeom.backends.kaggle_kernel import build_kernel, definitions, source_archive
from attngeom.base.errors import InputError


def test_wrong_credentials(fake_kaggle, monkeypatch, tmp_path):
    fake = fake_kaggle
    monkeypatch.setenv("KAGGLE_KEY", "wrong")
    defn = definitions()["attngeom-goat"]
    folder = build_kernel(defn, fake.username, 0, tmp_path / "k", "smoke", source_archive())
    with pytest.raises(InputError, match=r"refused the credentials \(HTTP 401\)"):
        push_kernel(connect(), defn.kernel_id(fake.username, 0), folder, 60, "NvidiaTeslaT4")
    assert fake.requests and not fake.kernels  # the fake refused it


def test_missing_six_is_explained(tmp_path):
    """kaggle imports `six` without declaring it: without it, say so instead of a traceback."""
    code = (
        "import sys; sys.modules['six'] = None; from attngeom.cli import main; "
        "sys.exit(main(['kaggle', 'status', '--run', 'x']))"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), HOME=str(tmp_path))
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 2 and "cannot import the kaggle client" in done.stderr and "six" in done.stderr
    assert "Traceback" not in done.stderr
