"""The locks accept Python 3.13: the CUDA lock resolves for CPython 3.13 on manylinux from wheels alone.

uv resolves offline from its cache when an earlier run filled it, else asks the package index once.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

PIN = re.compile(r"^([A-Za-z0-9._-]+)==([^\s;\\]+)", re.MULTILINE)


def pins(text: str) -> dict[str, str]:
    return {name.lower().replace("_", "-"): version for name, version in PIN.findall(text)}


@pytest.mark.slow
def test_the_cuda_lock_resolves_for_python_3_13_from_wheels(tmp_path):
    """uv resolves the image's requirements under the lock's pins, for cp313, refusing to build any sdist."""
    uv = Path(sys.executable).with_name("uv")  # pinned in the lock itself
    out = tmp_path / "py313.txt"
    cmd = [str(uv), "pip", "compile", "--quiet", "--python-version", "3.13"]
    cmd += ["--python-platform", "x86_64-manylinux_2_28", "--no-build"]
    cmd += ["--constraints", "requirements-cuda.lock", "requirements-cuda.in", "-o", str(out)]
    # From uv's cache when an earlier run filled it; from the index (PyPI) otherwise.
    done = subprocess.run([*cmd, "--offline"], cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    resolved, locked = pins(out.read_text()), pins((REPO / "requirements-cuda.lock").read_text())
    assert {"jax", "jaxlib", "jax-cuda12-plugin", "numpy", "scipy", "uv"} <= set(resolved)
    assert {name: locked.get(name) for name in resolved} == resolved  # the very versions the lock pins
