"""One function per claim family: each reads the statistic a quoted claim is about from results.

The expected file (expected/claims.json) names, for every quoted claim, the function here that
computes it and the arguments; judge.py judges the returned value against the quote.
A function returns a number or a boolean; the arguments named in MODEL_ARGS name the models it reads.
A per-model statistic is read through its entry in table.TABLE, the one place that says
where results.json holds it. Every public function here is a claim function (CLAIM_FUNCTIONS).
"""

from __future__ import annotations

from collections.abc import Callable

from attngeom.bundles import companion
from attngeom.geometry import toy
from attngeom.measures.table import checkpoint_labels, value

MODEL_ARGS = ("model", "sharp", "diffuse", "fewer", "more", "a", "b")
SetupValue = int | list[int] | None


def scale_moved_rows(results: dict, model: str) -> int:
    """Winners that move when every query is rescaled, summed over all five scales and heads."""
    return value(results, model, "scale_moved_rows")


def scale_comparisons(results: dict, model: str) -> int:
    """How many winner comparisons the scale test makes (heads x scorable rows x scales)."""
    return results["models"][model]["scale_comparisons"]


def scale_changed_fraction(results: dict, model: str, t: float) -> float:
    """Fraction of scorable rows whose winner changes when the queries are scaled by t."""
    return value(results, model, f"scale_changed@{float(t):g}")


def mean_norm_entropy(results: dict, model: str) -> float:
    """Mean normalised entropy of the final maps' scorable rows."""
    return value(results, model, "mean_norm_entropy_final")


def distinct_winners(results: dict, model: str, step: str) -> float:
    """Mean over heads of the distinct winners among 128 keys at a checkpoint ('first' or 'last')."""
    return value(results, model, f"distinct_winners_{step}")


def distinct_winners_at(results: dict, model: str, step: int) -> float:
    """Mean over heads of the distinct winners among 128 keys at a telemetry step."""
    m = results["models"][model]
    return m["occupancy_by_step"][str(step)] * m["setup"]["window"]


def mean_norm_entropy_at(results: dict, model: str, step: int) -> float:
    """Mean normalised entropy of the scorable rows of the maps at a telemetry step."""
    return results["models"][model]["mean_norm_entropy_by_step"][str(step)]


STEP_CLAIMS: dict[str, Callable] = {"distinct_winners": distinct_winners_at, "mean_norm_entropy": mean_norm_entropy_at}
"""The claim function that reads each per-step statistic (table.STEP_STATISTICS) back from results.json:
a band of rerun.json's `steps` names its statistic, and is judged by this function."""


def inversion(results: dict, sharp: str, diffuse: str) -> bool:
    """The model with sharper rows (lower entropy) crowns more distinct winners at the end."""
    sharper = value(results, sharp, "mean_norm_entropy_final") < value(results, diffuse, "mean_norm_entropy_final")
    return sharper and value(results, sharp, "distinct_winners_last") > value(results, diffuse, "distinct_winners_last")


def keys_inside_hull(results: dict, model: str) -> int:
    """Keys that are convex combinations of their head's other keys (linear programming census)."""
    return value(results, model, "keys_inside_hull")


def keys_total(results: dict, model: str) -> int:
    """Keys in the hull census (layers x heads x window)."""
    return results["models"][model]["keys_total"]


def reconstruction_error(results: dict, model: str) -> float:
    """Largest |weights recomputed from exported q, k, b, eps - exported maps| over all heads."""
    return value(results, model, "reconstruction_max_abs")


def reconstruction_room_share(results: dict, model: str) -> float:
    """Largest reconstruction gap as a share of the room float16 export and float32 arithmetic leave it
    (export_rounding): at most 1 wherever the export identity holds."""
    return value(results, model, "reconstruction_room_share")


def sweep_max_changed(results: dict, model: str) -> float:
    """Largest changed fraction over the scale animation's 41 scales (its one head)."""
    return value(results, model, "sweep_max_changed")


def census_fewer_owners(results: dict, fewer: str, more: str) -> bool:
    """At the last checkpoint the census head of `fewer` has fewer distinct owners than `more`'s."""
    return value(results, fewer, "census_distinct_final") < value(results, more, "census_distinct_final")


def setup_fact(results: dict, fact: str) -> SetupValue | str:
    """A setup fact read from the bundles; it must agree across every model, else 'disagree: ...',
    a string that never passes. 'checkpoints' are counted as checkpoint_labels does."""
    values = []
    for m in results["models"].values():
        setup = m["setup"]
        values.append(checkpoint_labels(setup["checkpoints"], setup["steps"]) if fact == "checkpoints" else setup[fact])
    if any(v != values[0] for v in values):
        return f"disagree: {values}"
    return values[0]


def companion_quality_gap(results: dict, runs_json: str, first: str, second: str) -> float:
    """Relative gap |first - second| / min(first, second) of two mechanisms' mean best validation
    loss over the seeds of the companion's runs file `runs_json` (the means recomputed from each
    seed); the mechanisms are the companion's, not models of the bundles."""
    runs = results["quality"]["companion"]
    if runs["file"] != runs_json:
        raise KeyError(runs_json)
    return companion.relative_gap(runs["mechanisms"][first]["mean"], runs["mechanisms"][second]["mean"])


def wedge_random_moved(results: dict) -> int:
    """Random keys in 2, 3, 8 and 48 dimensions: dot-law owners that move under query scaling."""
    return results["mathematics"]["wedge_random"]["moved"]


def wedge_border_residual(results: dict) -> float:
    """Largest relative tie gap along rays through dot-law border points (0 on a cone)."""
    return results["mathematics"]["wedge_random"]["border_residual"]


def wedge_toy_moved(results: dict) -> int:
    """The orbiting six toy bodies: dot-law owners that move under query scaling, every frame."""
    return results["mathematics"]["wedge_toy_moved"]


def hull_walk_share(results: dict, law: str, where: str, reduce: str) -> float:
    """The walking body's share of the view, min or max over the frames inside/outside the hull."""
    walk = results["mathematics"]["hull_walk"]
    picked = [
        s for s, inside in zip(walk[f"share_{law}"], walk["inside"]) if where == "all" or inside == (where == "inside")
    ]
    return min(picked) if reduce == "min" else max(picked)


def own_ground(results: dict, field: str) -> float | int | bool:
    """kappa(k, k) against its formula, and how many toy bodies win at their own position."""
    return results["mathematics"]["own_ground"][field]


def far_field_gap(results: dict, t: float) -> float:
    """Relative gap between t (kappa(t u, k) - (u.k)^2) and 2 (u.k)((u.k)^2 + b) at large t."""
    return results["mathematics"]["far_field"]["correction_gap"][str(float(t))]


def far_field_radius(results: dict, level: float) -> float:
    """First radius of the far-field sweep whose antipodal agreement reaches `level` (inf: never)."""
    return toy.first_radius_reaching(results["mathematics"]["far_field"], level)


def far_field_full_radius(results: dict) -> float:
    """Exact radius from which every direction's kernel owner agrees with its antipode's for good
    (the counter at 100 %; inf when some direction never agrees)."""
    full = results["mathematics"]["far_field"]["exact"]["full_agreement_radius"]
    return float("inf") if full is None else full


def far_field_max_agreement(results: dict) -> float:
    """Largest antipodal agreement over the far-field sweep (radius 2 to 120)."""
    return max(results["mathematics"]["far_field"]["agreement"])


CLAIM_FUNCTIONS: dict[str, Callable] = {
    name: fn for name, fn in globals().items() if callable(fn) and getattr(fn, "__module__", None) == __name__
}
