"""The training configuration: presets in one place, read below the training package."""

from __future__ import annotations

from dataclasses import asdict

from attngeom.base import train_config


def test_preset_names_are_the_presets():
    from attngeom.backends import kaggle_kernel
    from attngeom.commands import kaggle, rerun

    assert train_config.PRESET_NAMES == tuple(train_config.PRESETS) == ("paper", "smoke")
    assert rerun.PRESET_NAMES is kaggle.PRESET_NAMES is kaggle_kernel.PRESET_NAMES is train_config.PRESET_NAMES


def test_a_configuration_survives_the_manifest():
    cfg = train_config.preset("smoke", steps=45, lr=1e-3, stop_after=30)
    assert train_config.TrainConfig.from_dict(asdict(cfg)) == cfg


def test_preset_names_match_the_presets():
    assert train_config.PRESET_NAMES == tuple(train_config.PRESETS)
