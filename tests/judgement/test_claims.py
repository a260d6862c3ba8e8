import ast
from pathlib import Path

import pytest

from attngeom.judgement import claims


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


def _model(**fields) -> dict:
    """A model's entry in results.json as results.py writes it, with binary-exact values that differ from each other."""
    base = {
        "scale_changed_rows": {"0.5": 3, "0.8": 0, "1.25": 1, "2.0": 4, "4.0": 9},
        "scale_comparisons": 15240,
        "scale_changed": {"0.5": 0.125, "0.8": 0.0, "1.25": 0.0625, "2.0": 0.25, "4.0": 0.375},
        "mean_norm_entropy_final": 0.5,
        "mean_norm_entropy_by_step": {"1200": 0.625, "6000": 0.5625},
        "occupancy_by_step": {"0": 0.25, "1200": 0.5, "11999": 0.75},
        "keys_inside_hull": 2,
        "keys_total": 3072,
        "reconstruction_max_abs": 0.00025,
        "reconstruction_room_share": 0.625,
        "scale_sweep": {"changed": [0.0, 0.25, 0.125]},
        "census_head": {"distinct_by_step": {"0": 40, "11999": 30}},
        **_setup(),
    }
    return {**base, **fields}


MATHEMATICS = {
    "wedge_random": {"moved": 3, "border_residual": 2.0**-40},
    "wedge_toy_moved": 5,
    "own_ground": {"max_rel_error": 2.0**-45, "bodies_winning_home": 6},
    "far_field": {
        "radius": [2.0, 10.0, 20.0, 45.0, 120.0],
        "agreement": [0.25, 0.5, 0.75, 1.0, 0.875],
        "correction_gap": {"100.0": 0.0625, "1000.0": 0.0078125, "10000.0": 0.0009765625},
        "exact": {"full_agreement_radius": 100.0},
    },
}


def test_each_per_model_claim_reads_its_own_field_of_the_model_it_names():
    results = {"models": {"softmax": _model(), "yat_b": _model(keys_inside_hull=0, scale_comparisons=7)}}
    assert claims.scale_moved_rows(results, "softmax") == 17  # summed over the five scales
    assert claims.scale_comparisons(results, "softmax") == 15240
    assert claims.scale_comparisons(results, "yat_b") == 7
    assert claims.scale_changed_fraction(results, "softmax", 0.5) == 0.125
    assert claims.scale_changed_fraction(results, "softmax", 4) == 0.375  # an integer scale reads the float key
    assert claims.mean_norm_entropy(results, "softmax") == 0.5
    assert claims.keys_inside_hull(results, "softmax") == 2
    assert claims.keys_inside_hull(results, "yat_b") == 0
    assert claims.keys_total(results, "softmax") == 3072
    assert claims.reconstruction_error(results, "softmax") == 0.00025
    assert claims.reconstruction_room_share(results, "softmax") == 0.625
    assert claims.sweep_max_changed(results, "softmax") == 0.25  # the largest, neither the first nor the last


def test_per_step_claims_read_the_telemetry_step_they_name():
    results = {"models": {"m": _model()}}
    assert claims.distinct_winners_at(results, "m", 1200) == 64  # occupancy 0.5 of 128 keys
    assert claims.distinct_winners_at(results, "m", 11999) == 96
    assert claims.mean_norm_entropy_at(results, "m", 1200) == 0.625
    assert claims.mean_norm_entropy_at(results, "m", 6000) == 0.5625
    assert claims.STEP_CLAIMS == {
        "distinct_winners": claims.distinct_winners_at,
        "mean_norm_entropy": claims.mean_norm_entropy_at,
    }


def test_inversion_is_false_when_the_rows_are_equally_sharp_or_the_winners_equally_many():
    same_entropy = {"s": _model(), "d": _model(occupancy_by_step={"11999": 0.5})}
    assert claims.inversion({"models": same_entropy}, "s", "d") is False
    same_winners = {"s": _model(), "d": _model(mean_norm_entropy_final=0.75)}
    assert claims.inversion({"models": same_winners}, "s", "d") is False
    both = {"s": _model(), "d": _model(mean_norm_entropy_final=0.75, occupancy_by_step={"11999": 0.5})}
    assert claims.inversion({"models": both}, "s", "d") is True


def test_census_fewer_owners_is_strict_and_reads_the_last_checkpoint():
    fewer = _model(census_head={"distinct_by_step": {"0": 20, "11999": 29}})
    results = {"models": {"f": fewer, "m": _model()}}  # m: 40 owners first, 30 last
    assert claims.census_fewer_owners(results, "f", "m") is True
    assert claims.census_fewer_owners(results, "m", "f") is False
    tied = _model(census_head={"distinct_by_step": {"0": 50, "11999": 30}})
    assert claims.census_fewer_owners({"models": {"t": tied, "m": _model()}}, "t", "m") is False


def test_setup_fact_of_a_single_model_is_its_own():
    results = {"models": {"a": _setup(heads=8)}}
    assert claims.setup_fact(results, "heads") == 8
    assert claims.setup_fact(results, "checkpoints") == [0, 1200, 6000, 12000]


def test_quality_gap_of_another_runs_file_is_a_key_error_naming_it():
    runs = {"file": "f", "mechanisms": {"a": {"mean": 1.0}, "b": {"mean": 1.25}}}
    with pytest.raises(KeyError) as caught:
        claims.companion_quality_gap({"quality": {"companion": runs}}, "g", "a", "b")
    assert caught.value.args == ("g",)


def test_the_mathematics_claims_read_their_own_fields():
    results = {"mathematics": MATHEMATICS}
    assert claims.wedge_random_moved(results) == 3
    assert claims.wedge_border_residual(results) == 2.0**-40
    assert claims.wedge_toy_moved(results) == 5
    assert claims.own_ground(results, "max_rel_error") == 2.0**-45
    assert claims.own_ground(results, "bodies_winning_home") == 6
    assert claims.far_field_gap(results, 10000) == 0.0009765625  # an integer t reads the float key
    assert claims.far_field_gap(results, 100.0) == 0.0625


def test_far_field_radii_and_agreement():
    results = {"mathematics": MATHEMATICS}
    assert claims.far_field_radius(results, 0.5) == 10.0  # reached exactly at radius 10
    assert claims.far_field_radius(results, 0.625) == 20.0
    assert claims.far_field_radius(results, 1.5) == float("inf")
    assert claims.far_field_max_agreement(results) == 1.0  # the largest, not the last
    assert claims.far_field_full_radius(results) == 100.0
    never = {**MATHEMATICS["far_field"], "exact": {"full_agreement_radius": None}}
    assert claims.far_field_full_radius({"mathematics": {"far_field": never}}) == float("inf")
