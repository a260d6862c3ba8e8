"""robustness's pieces on tiny hand-made models, each pinned at its edges: the summary of a statistic's
values, the published value beside it, which seeds and windows are read and from which files, and the
section one model gets. The statistics themselves are replaced (`calls`) by values each window carries
in its q, so that which window each value came from can be seen; tests/judgement/test_robustness.py measures the
published bundles through the real statistics."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from helpers.bundles import write_bundle

from attngeom.bundles import layout
from attngeom.judgement import robustness
from attngeom.measures import table

L, H, T, D = 1, 2, 4, 2
STEPS = (0, 5, 9)
CFG = {"STEPS": 10}
# every telemetry step's map: row i gives 1 / (i + 1) to each key j <= i (a softmax of equal scores)
MAP_LHTT = np.broadcast_to(np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None], (L, H, T, T)).astype(np.float16)


def carrying(pair: tuple[float, float]) -> np.ndarray:
    """q (L, H, T, D), zero but for q[0, 0, 0] = `pair`: (a fraction, a count) `calls` reads back."""
    q_LHTD = np.zeros((L, H, T, D), np.float16)
    q_LHTD[0, 0, 0] = pair
    return q_LHTD


def write_model(folder: Path, variant: str, seed: int, fixed: tuple[float, float], windows=()) -> None:
    """A model's bundle files whose fixed window carries `fixed`, and, given `windows` (a pair per window,
    window 0's first), its windows file: window 0 has the fixed window's tokens, each window its pair."""
    tokens_T = write_bundle(
        folder, variant, seed, dict.fromkeys(STEPS, MAP_LHTT), carrying(fixed), carrying(fixed), CFG
    )
    if windows:
        W = len(windows)
        tokens_WT = np.stack([tokens_T, *(np.arange(T) + w for w in range(1, W))])
        maps = {s: np.repeat(MAP_LHTT[None], W, axis=0) for s in STEPS}
        q_WLHTD = np.stack([carrying(p) for p in windows])
        layout.write_windows_npz(layout.windows_file(folder, variant, seed), tokens_WT, maps, q_WLHTD, q_WLHTD)


@pytest.fixture
def calls(monkeypatch) -> list:
    """statistics.on_every_window replaced: per window, the pair (a, c) its q carries gives
    mean_norm_entropy_final = a and keys_inside_hull = c; each call's pairs are recorded, in order."""
    seen = []

    def on_every_window(measures: table.Measures) -> dict[str, np.ndarray]:
        pairs_W2 = measures.model.q_LHTD[:, 0, 0, 0].astype(np.float64)
        seen.append(pairs_W2.tolist())
        return {"mean_norm_entropy_final": pairs_W2[:, 0], "keys_inside_hull": pairs_W2[:, 1].astype(int)}

    monkeypatch.setattr(table, "on_every_window", on_every_window)
    return seen


def test_a_summary_is_population_statistics_unless_told_a_sample():
    assert robustness.summary([1.0, 3.0]) == {"n": 2, "mean": 2.0, "std": 1.0, "min": 1.0, "max": 3.0}
    assert robustness.summary([1.0, 3.0], ddof=1) == {"n": 2, "mean": 2.0, "std": math.sqrt(2), "min": 1.0, "max": 3.0}
    assert robustness.summary(np.array([3, 1])) == {"n": 2, "mean": 2.0, "std": 1.0, "min": 1.0, "max": 3.0}


def test_a_summary_of_one_value_or_equal_ones_has_no_spread_and_its_mean_within_them():
    for ddof in (0, 1):
        assert robustness.summary([2.5], ddof=ddof) == {"n": 1, "mean": 2.5, "std": 0.0, "min": 2.5, "max": 2.5}
    # no more values than ddof: no spread to measure (numpy's would divide by zero)
    assert robustness.summary([1.0, 3.0], ddof=2) == {"n": 2, "mean": 2.0, "std": 0.0, "min": 1.0, "max": 3.0}
    # numpy's mean of three 0.1 is 0.1 + 2**-56, above them, and its std is not 0; of three 0.7, below them
    assert robustness.summary([0.1] * 3) == {"n": 3, "mean": 0.1, "std": 0.0, "min": 0.1, "max": 0.1}
    assert robustness.summary([0.7] * 3, ddof=1) == {"n": 3, "mean": 0.7, "std": 0.0, "min": 0.7, "max": 0.7}
    assert robustness.summary([0.7, 0.7, 0.7, 0.75], ddof=1)["std"] > 0


def test_a_summary_is_taken_in_float64():
    # float32's own mean of its 0.1 and 0.2 is 0.15000000596046448
    assert robustness.summary(np.float32([0.1, 0.2]))["mean"] == 0.15000000223517418


CLAIMS = [
    {"function": "scale_changed_fraction", "args": {"model": "softmax", "t": 0.5}, "value": 0.25},
    {"function": "scale_changed_fraction", "args": {"model": "yat_b", "t": 0.8}, "value": 0.5},
    {"function": "scale_changed_fraction", "args": {"model": "yat_b", "t": 0.5}, "value": 0.125},
    {"function": "keys_inside_hull", "args": {"model": "yat_b", "t": 0.5}, "value": 3},
    {"function": "scale_changed_fraction", "args": {"model": "yat_b", "t": 0.5}, "value": 0.75},
    {"function": "keys_inside_hull", "args": {"model": "yat_b"}, "value": 0},
]


def test_the_published_value_is_the_first_quote_of_that_function_on_exactly_those_arguments():
    assert robustness.published_value(CLAIMS, "yat_b", ("scale_changed_fraction", {"t": 0.5})) == 0.125
    assert robustness.published_value(CLAIMS, "softmax", ("scale_changed_fraction", {"t": 0.5})) == 0.25
    assert robustness.published_value(CLAIMS, "yat_b", ("keys_inside_hull", {})) == 0
    assert robustness.published_value(CLAIMS, "goat_v", ("keys_inside_hull", {})) is None
    assert robustness.published_value(CLAIMS, "softmax", ("scale_changed_fraction", {"t": 2.0})) is None
    assert robustness.published_value(CLAIMS, "yat_b", None) is None  # a statistic no claim quotes


def test_every_seed_of_a_variant_is_read_from_its_own_folder(tmp_path):
    own, other = tmp_path / "own", tmp_path / "other"
    listing = layout.Listing(
        tmp_path,
        {("softmax", 2): other / "a", ("softmax", 0): other / "b", ("plain", 1): other / "c", ("softmax", 1): own},
        (),
    )
    models = {
        "softmax": SimpleNamespace(seed=0, files={"geom": own / "geom_softmax_s0.npz"}),
        "plain": SimpleNamespace(seed=3, files={"geom": own / "geom_plain_s3.npz"}),
    }
    sources = robustness.seed_sources(listing, models)
    assert sources == {"softmax": {0: own, 1: own, 2: other / "a"}, "plain": {1: other / "c", 3: own}}
    assert [list(seeds) for seeds in sources.values()] == [[0, 1, 2], [1, 3]]  # seeds in order


def plain_of(folder: Path, variant: str = "softmax") -> tuple[layout.BundleModel, table.Measures]:
    model = layout.load_model(folder, variant, 0)
    return model, table.Measures.of(model)


def test_the_judged_seed_takes_window_0_from_the_plain_pass_and_the_rest_from_its_windows_file(tmp_path, calls):
    write_model(tmp_path, "softmax", 0, (0.5, 1), windows=[(8.0, 8), (0.25, 2), (1.5, 3)])
    model, plain = plain_of(tmp_path)
    values, windowed = robustness.seed_values(model, tmp_path, 0, plain)
    assert calls == [[[0.5, 1.0]], [[0.25, 2.0], [1.5, 3.0]]]  # the plain pass, then windows 1 and 2 at once
    assert {k: v.tolist() for k, v in values.items()} == {
        "mean_norm_entropy_final": [0.5, 0.25, 1.5],
        "keys_inside_hull": [1, 2, 3],
    }
    assert windowed.q_LHTD.shape == (3, L, H, T, D) and windowed.run is model.run  # the model given, not reread
    assert sorted(windowed.maps) == [0, 9]  # the first and last telemetry steps only: no statistic reads others
    assert windowed.files == {**model.files, "windows": tmp_path / "windows_softmax_s0.npz"}


@pytest.mark.parametrize("windows", [[], [(8.0, 8)]], ids=["no windows file", "one window"])
def test_a_judged_seed_of_one_window_is_the_plain_pass_alone(tmp_path, calls, windows):
    write_model(tmp_path, "softmax", 0, (0.5, 1), windows=windows)
    model, plain = plain_of(tmp_path)
    values, windowed = robustness.seed_values(model, tmp_path, 0, plain)
    assert calls == [[[0.5, 1.0]]]
    assert {k: v.tolist() for k, v in values.items()} == {"mean_norm_entropy_final": [0.5], "keys_inside_hull": [1]}
    assert windowed.q_LHTD.shape == (1, L, H, T, D)


def test_a_judged_seed_of_two_windows_reads_its_second(tmp_path, calls):
    write_model(tmp_path, "softmax", 0, (0.5, 1), windows=[(8.0, 8), (0.25, 2)])
    model, plain = plain_of(tmp_path)
    values, _ = robustness.seed_values(model, tmp_path, 0, plain)
    assert calls == [[[0.5, 1.0]], [[0.25, 2.0]]]
    assert values["mean_norm_entropy_final"].tolist() == [0.5, 0.25]


def test_another_seed_is_read_whole_from_its_own_files(tmp_path, calls):
    write_model(tmp_path, "softmax", 0, (0.5, 1))
    write_model(tmp_path, "softmax", 1, (0.75, 4), windows=[(8.0, 8), (0.25, 2), (1.5, 3)])
    model, plain = plain_of(tmp_path)
    values, windowed = robustness.seed_values(model, tmp_path, 1, plain)
    assert calls == [[[8.0, 8.0], [0.25, 2.0], [1.5, 3.0]]]  # every window of seed 1's file, its window 0 too
    assert values["keys_inside_hull"].tolist() == [8, 2, 3]
    assert windowed.seed == 1 and windowed.run["seed"] == 1 and sorted(windowed.maps) == [0, 9]
    assert windowed.files["geom"] == tmp_path / "geom_softmax_s1.npz"


def test_one_models_section_counts_and_summarises_every_window_of_every_seed(tmp_path):
    write_model(tmp_path, "softmax", 0, (0.5, 1), windows=[(0.5, 1), (1.5, 3)])
    write_model(tmp_path, "softmax", 2, (1.0, 0))
    per_seed = {2: layout.load_windowed(tmp_path, "softmax", 2), 0: layout.load_windowed(tmp_path, "softmax", 0)}
    values = {  # seed 2 first: the section orders them
        2: {k: np.array(v) for k, v in (("scale_moved_rows", [2]), ("keys_inside_hull", [0]))}
        | {"mean_norm_entropy_final": np.array([1.0]), "winner_is_nearest": np.array([0.5])},
        0: {k: np.array(v) for k, v in (("scale_moved_rows", [3, 1]), ("keys_inside_hull", [0, 1]))}
        | {"mean_norm_entropy_final": np.array([0.5, 1.5]), "winner_is_nearest": np.array([0.25, 0.75])},
    }
    claims = [
        {"function": "scale_moved_rows", "args": {"model": "softmax"}, "value": 7},
        {"function": "keys_inside_hull", "args": {"model": "yat_b"}, "value": 5},
        {"function": "mean_norm_entropy", "args": {"model": "softmax"}, "value": 0.49},
    ]
    section = robustness.model_robustness("softmax", values, per_seed, claims)
    assert section == {
        "seeds": [0, 2],
        "windows": {"2": 1, "0": 2},
        "files": {"2": "geom_softmax_s2.npz", "0": "windows_softmax_s0.npz"},
        "counts": {
            "scale_moved_rows": {  # out of 2 heads x 3 rows x 5 scales per window, 3 windows
                "count": 6,
                "out_of": 90,
                "per_seed": {"2": [2], "0": [3, 1]},
                "published": 7,
            },
            "keys_inside_hull": {"count": 1, "out_of": 24, "per_seed": {"2": [0], "0": [0, 1]}, "published": None},
        },
        "statistics": {
            "mean_norm_entropy_final": {
                "label": "mean normalised entropy, final map",
                "published": 0.49,
                "fixed_window_seed0": 0.5,
                "per_seed": {"2": [1.0], "0": [0.5, 1.5]},
                "over_windows": {
                    "2": {"n": 1, "mean": 1.0, "std": 0.0, "min": 1.0, "max": 1.0},
                    "0": {"n": 2, "mean": 1.0, "std": 0.5, "min": 0.5, "max": 1.5},
                },
                "all_windows": {"n": 3, "mean": 1.0, "std": math.sqrt(0.5 / 3), "min": 0.5, "max": 1.5},
                "over_seeds": {"n": 2, "mean": 0.75, "std": 0.25, "min": 0.5, "max": 1.0},
            },
            "winner_is_nearest": {
                "label": "winner is the nearest key",
                "published": None,
                "fixed_window_seed0": 0.25,
                "per_seed": {"2": [0.5], "0": [0.25, 0.75]},
                "over_windows": {
                    "2": {"n": 1, "mean": 0.5, "std": 0.0, "min": 0.5, "max": 0.5},
                    "0": {"n": 2, "mean": 0.5, "std": 0.25, "min": 0.25, "max": 0.75},
                },
                "all_windows": {"n": 3, "mean": 0.5, "std": math.sqrt(0.125 / 3), "min": 0.25, "max": 0.75},
                "over_seeds": {"n": 2, "mean": 0.375, "std": 0.125, "min": 0.25, "max": 0.5},
            },
        },
    }


def measured(root: Path, variants: tuple[str, ...] = ("softmax",), **given) -> tuple[dict, list[Path]]:
    return robustness.measure(layout.list_bundles(root), layout.load_models(root, variants), **given)


def test_one_window_of_one_seed_measures_nothing(tmp_path, calls):
    write_model(tmp_path / "a", "softmax", 0, (0.5, 1))
    write_model(tmp_path / "b", "plain", 0, (0.5, 1))
    assert measured(tmp_path, ("softmax", "plain"), claims=[]) == ({}, [])
    assert calls == []


def test_a_windows_file_alone_or_a_second_seed_alone_is_measured(tmp_path, calls):
    write_model(tmp_path / "a", "softmax", 0, (0.5, 1), windows=[(0.5, 1), (1.5, 3)])
    section, _ = measured(tmp_path, claims=[])
    assert section["softmax"]["seeds"] == [0] and section["softmax"]["windows"] == {"0": 2}
    write_model(tmp_path / "b", "softmax", 1, (0.25, 2))
    (tmp_path / "a" / "windows_softmax_s0.npz").unlink()
    section, _ = measured(tmp_path, claims=[])
    assert section["softmax"]["seeds"] == [0, 1] and section["softmax"]["windows"] == {"0": 1, "1": 1}


def test_every_model_and_seed_measured_and_every_file_read_listed_once(tmp_path, calls):
    a, b = tmp_path / "a", tmp_path / "b"
    write_model(a, "softmax", 0, (0.5, 1), windows=[(0.5, 1), (1.5, 3), (0.25, 2)])
    write_model(a, "softmax", 1, (0.75, 4))
    write_model(b, "softmax", 2, (1.0, 0))
    write_model(b, "plain", 0, (0.125, 5), windows=[(0.125, 5), (2.0, 6)])
    section, files = measured(tmp_path, ("softmax", "plain"), claims=[])
    assert list(section) == ["softmax", "plain"]
    assert section["softmax"]["statistics"]["mean_norm_entropy_final"]["per_seed"] == {
        "0": [0.5, 1.5, 0.25],
        "1": [0.75],
        "2": [1.0],
    }
    assert section["softmax"]["counts"]["keys_inside_hull"]["per_seed"] == {"0": [1, 3, 2], "1": [4], "2": [0]}
    assert section["softmax"]["files"] == {
        "0": "windows_softmax_s0.npz",
        "1": "geom_softmax_s1.npz",
        "2": "geom_softmax_s2.npz",
    }
    assert section["plain"]["counts"]["keys_inside_hull"]["per_seed"] == {"0": [5, 6]}
    assert section["plain"]["statistics"]["mean_norm_entropy_final"]["published"] is None
    assert files == [
        a / "attn_softmax_s0.npz",
        a / "geom_softmax_s0.npz",
        a / "yat_attention.json",
        a / "windows_softmax_s0.npz",
        a / "attn_softmax_s1.npz",
        a / "geom_softmax_s1.npz",
        b / "attn_softmax_s2.npz",
        b / "geom_softmax_s2.npz",
        b / "yat_attention.json",
        b / "attn_plain_s0.npz",
        b / "geom_plain_s0.npz",
        b / "windows_plain_s0.npz",
    ]


def test_the_plain_pass_given_is_the_judged_window_and_the_claims_file_is_read_when_none_are_given(tmp_path, calls):
    write_model(tmp_path, "softmax", 0, (0.5, 1), windows=[(0.5, 1), (1.5, 3)])
    model = layout.load_model(tmp_path, "softmax", 0)
    given = table.Measures.of(replace(model, q_LHTD=carrying((0.25, 7))))  # another fixed window's
    section, _ = measured(tmp_path, plain={"softmax": given}, claims=[])
    assert section["softmax"]["counts"]["keys_inside_hull"]["per_seed"] == {"0": [7, 3]}
    assert section["softmax"]["statistics"]["mean_norm_entropy_final"]["published"] is None
    section, _ = measured(tmp_path)  # the plain pass made here, the claims read from expected/claims.json
    assert section["softmax"]["counts"]["keys_inside_hull"]["per_seed"] == {"0": [1, 3]}
    assert section["softmax"]["counts"]["keys_inside_hull"]["published"] == 0
    assert section["softmax"]["statistics"]["mean_norm_entropy_final"]["published"] == 0.49
