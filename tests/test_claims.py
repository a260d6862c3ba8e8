import ast
from pathlib import Path

import pytest

from attngeom import claims


def _setup(**fields) -> dict:
    base = {
        "layers": 6,
        "heads": 4,
        "head_dim": 48,
        "window": 128,
        "steps": 12000,
        "checkpoints": [0, 1200, 6000, 11999],
    }
    return {"setup": {**base, **fields}}


def test_setup_fact_agrees_across_models_and_counts_the_last_update():
    results = {"models": {"a": _setup(), "b": _setup()}}
    assert claims.setup_fact(results, "layers") == 6
    assert claims.setup_fact(results, "checkpoints") == [0, 1200, 6000, 12000]


def test_setup_fact_disagreement_is_a_string_that_names_both_values():
    value = claims.setup_fact({"models": {"a": _setup(), "b": _setup(heads=8)}}, "heads")
    assert isinstance(value, str) and value.startswith("disagree") and "8" in value


def test_distinct_winners_reads_the_first_and_last_checkpoint():
    model = {"occupancy_by_step": {"0": 0.25, "1200": 0.5, "11999": 0.75}, "setup": {"window": 128}}
    results = {"models": {"m": model}}
    assert claims.distinct_winners(results, "m", "first") == 32
    assert claims.distinct_winners(results, "m", "last") == 96


def test_quality_gap_is_relative_to_the_better_mechanism():
    runs = {"file": "f", "mechanisms": {"a": {"mean": 1.0}, "b": {"mean": 1.1}}}
    results = {"quality": {"companion": runs}}
    assert claims.companion_quality_gap(results, "f", "a", "b") == pytest.approx(0.1)
    assert claims.companion_quality_gap(results, "f", "b", "a") == pytest.approx(0.1)


def test_inversion_needs_both_sharper_rows_and_more_winners():
    sharp = {"mean_norm_entropy_final": 0.5, "occupancy_by_step": {"11999": 0.6}, "setup": {"window": 128}}
    diffuse = {"mean_norm_entropy_final": 0.7, "occupancy_by_step": {"11999": 0.4}, "setup": {"window": 128}}
    assert claims.inversion({"models": {"s": sharp, "d": diffuse}}, "s", "d") is True
    assert (
        claims.inversion({"models": {"s": sharp, "d": {**diffuse, "occupancy_by_step": {"11999": 0.7}}}}, "s", "d")
        is False
    )


def test_hull_walk_share_picks_frames_inside_or_outside():
    walk = {"inside": [True, False, True], "share_dot": [0.0, 0.2, 0.1], "share_kernel": [0.3, 0.4, 0.5]}
    results = {"mathematics": {"hull_walk": walk}}
    assert claims.hull_walk_share(results, "dot", "inside", "max") == 0.1
    assert claims.hull_walk_share(results, "dot", "outside", "min") == 0.2
    assert claims.hull_walk_share(results, "kernel", "all", "min") == 0.3


def test_every_claim_function_is_registered_and_nothing_else():
    """The registry is exactly the public functions claims.py defines (read from its source), each under its name."""
    tree = ast.parse(Path(claims.__file__).read_text(encoding="utf-8"))
    public = {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")}
    assert {"setup_fact", "scale_moved_rows", "far_field_gap"} <= public
    assert set(claims.CLAIM_FUNCTIONS) == public
    assert all(claims.CLAIM_FUNCTIONS[name] is getattr(claims, name) for name in public)
