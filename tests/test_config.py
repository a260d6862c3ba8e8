"""The training configuration: presets in one place, and the verification side free of jax."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from attngeom.training import config, rerun

REPO = Path(__file__).resolve().parents[1]
JAX_SIDE = ("jax", "jaxlib", "flax", "optax")


def test_preset_names_are_the_presets():
    assert rerun.PRESET_NAMES is config.PRESET_NAMES and config.PRESET_NAMES == tuple(config.PRESETS)


def test_a_configuration_survives_the_manifest():
    from dataclasses import asdict

    cfg = config.preset("smoke", steps=45, lr=1e-3, stop_after=30)
    assert config.TrainConfig.from_dict(asdict(cfg)) == cfg


@pytest.mark.parametrize(
    "code",
    [
        "import attngeom.verify",
        "import attngeom.cli; attngeom.cli.build_parser()",
        "from attngeom.training import config, data, runs, rerun",
    ],
)
def test_verification_and_the_command_line_never_load_jax(code):
    check = f"import sys; {code}; print(sorted(m for m in sys.modules if m.split('.')[0] in {JAX_SIDE!r}))"
    proc = subprocess.run(
        [sys.executable, "-c", check],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]"
