"""What in the data a failing claim comes from, in words a reviewer reads first.

judge.py says where a failing measurement lies against what its judgement accepts; a claim family
whose data holds more says here which part of the data the failure comes from (the far field: which
direction settles where). Nothing here decides a verdict: it explains the one judge.py gave.
"""

from __future__ import annotations

import math
from collections.abc import Callable


def far_field_settling(exact: dict) -> str:
    """Which directions of the far-field sweep settle last (`mathematics.far_field.exact` of results.json):
    each direction's radius beyond which its kernel owner and its antipode's agree for good."""
    radii = [math.inf if r is None else r for r in exact["settle_radius"]]
    order = sorted(zip(radii, exact["theta_deg"]), reverse=True)
    n, never = len(order), exact["never_agree"]
    if never:
        return f"{never} of the {n} directions lie on a far-field border and never agree with their antipode"
    (r0, t0), (r1, t1), (r2, _) = order[:3]
    return (
        f"the direction at {t0:g}° agrees with its antipode for good only from radius {r0:.1f}, the one at {t1:g}° "
        f"from {r1:.1f}, and every other of the {n} by {r2:.1f}"
    )


def sweep_heads(sweep: dict) -> str:
    """The scale sweep read on its two heads (a model's `scale_sweep` in results.json): the one judged, by its
    position (the animation's caption names it), and the one the author's export picks by its rule."""
    layer, head = sweep["head"]
    by_rule = ""
    if "sharpest_head" in sweep:
        rl, rh = sweep["sharpest_head"]
        same = " (the same head)" if [rl, rh] == [layer, head] else ""
        by_rule = (
            f"; the head the author's export animates by its rule (the sharpest: lowest mean normalised entropy), "
            f"layer {rl + 1}, head {rh + 1}{same}, re-elects up to {sweep['sharpest_max_changed']:.1%}"
        )
    return f"layer {layer + 1}, head {head + 1} (the judged head) re-elects up to {max(sweep['changed']):.1%}{by_rule}"


def _far_sweep(results: dict) -> str:
    far = results["mathematics"]["far_field"]
    n = len(far["exact"]["theta_deg"])
    top = max(far["agreement"])
    return (
        f"on the sweep (radius {min(far['radius']):g} to {max(far['radius']):g}) at most {round(top * n)} of "
        f"{n} directions agree; {far_field_settling(far['exact'])}"
    )


CAUSES: dict[str, Callable[[dict, dict], str]] = {
    "far_field_full_radius": lambda results, _: far_field_settling(results["mathematics"]["far_field"]["exact"]),
    "far_field_max_agreement": lambda results, _: _far_sweep(results),
    "sweep_max_changed": lambda results, args: sweep_heads(results["models"][args["model"]]["scale_sweep"]),
}
"""Claim function -> what in results.json (and the claim's arguments) a failure of its claims comes from (judge.cause)."""
