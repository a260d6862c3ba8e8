"""The training configuration: presets in one place, and the verification side free of jax."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from attngeom.base import train_config

REPO = Path(__file__).resolve().parents[1]
JAX_SIDE = ("jax", "jaxlib", "flax", "optax")


def test_preset_names_are_the_presets():
    from attngeom.backends import kaggle, kaggle_kernel
    from attngeom.jobs import rerun

    assert train_config.PRESET_NAMES == tuple(train_config.PRESETS)
    assert rerun.PRESET_NAMES is kaggle.PRESET_NAMES is kaggle_kernel.PRESET_NAMES is train_config.PRESET_NAMES


def test_a_configuration_survives_the_manifest():
    from dataclasses import asdict

    cfg = train_config.preset("smoke", steps=45, lr=1e-3, stop_after=30)
    assert train_config.TrainConfig.from_dict(asdict(cfg)) == cfg


@pytest.mark.parametrize(
    "code",
    [
        "import attngeom.jobs.verify",
        "import attngeom.cli; attngeom.cli.build_parser()",
        "from attngeom.training import config, data, device, runs, rerun",
    ],
)
def test_verification_and_the_command_line_never_load_jax(code):
    assert _loaded(code, lambda m: m.split(".")[0] in JAX_SIDE) == []


def _loaded(code: str, rule) -> list[str]:
    """The modules, among those `rule` picks, that a fresh interpreter has loaded after running `code`."""
    check = f"import sys; {code}; print('\\n'.join(sorted(sys.modules)))"
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
    return [m for m in proc.stdout.split() if rule(m)]


JUDGEMENT = (
    "verify",
    "judge",
    "claims",
    "expected",
    "results",
    "statistics",
    "stats",
    "hull",
    "robustness",
    "evidence",
    "report",
    "report_set",
    "html_report",
    "summary",
    "figures",
    "rerun",
)


@pytest.mark.parametrize(
    "code",
    [
        "import attngeom.training",
        "from attngeom.training import config, data, device, fidelity, original, progress, rerun, runs",
    ],
)
def test_training_never_loads_the_judgement(code):
    """Training sits below judgement: the command layer (attngeom.jobs.rerun) runs the rerun, then verify."""
    assert _loaded(code, lambda m: m.removeprefix("attngeom.") in JUDGEMENT) == []


def test_the_judgement_check_can_fail():
    """The same check finds the judgement where it is loaded: the command layer's rerun loads verify."""
    assert "attngeom.jobs.verify" in _loaded(
        "import attngeom.jobs.rerun", lambda m: m.removeprefix("attngeom.") in JUDGEMENT
    )
