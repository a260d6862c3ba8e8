"""The words beside every measured trajectory (report.json's `trajectories`), in plain text: what a
trajectory and a rerun band are, each quoted statistic against the trajectories at its step, and each
comparison on every pairing of them. REPORT.md, index.html and the docs pages say these sentences.
"""

from __future__ import annotations

from attngeom.judgement.judge import fmt
from attngeom.measures.table import TABLE
from attngeom.report.headline import first_upper

MEANING = (
    "A trajectory is one training of a model: the same data, seed and settings, and so the same numbers in "
    "exact arithmetic. Float32 round-off differs from one machine to another and the kernel models amplify "
    "it, so each machine's training is another trajectory, and a statistic of one trajectory (the posts quote "
    "the published run's) moves from one to another; theorems and setup facts hold on every one. A rerun "
    "band is the range a rerun's value of a statistic is judged against (expected/rerun.json)."
)
"""What the section's words mean, said where the report first uses them."""


def intro(section: dict) -> str:
    """The section's opening: what it sets beside what, from which sources."""
    return (
        f"Here each quoted statistic is set beside every trajectory measured at its step, and each comparison is "
        f"checked on every pairing of trajectories of its two models: {len(section['trajectories'])} trajectories "
        f"from {', '.join(section['sources'])}. The verdicts above judge the author's numbers; this shows how far "
        "they move from one trajectory to another."
    )


def _stands(s: dict) -> str:
    """Where a quoted value stands among the trajectories' values (`robustness.spread`)."""
    if s["published_inside"]:
        z = s["published_in_std"]
        return "inside their range" + ("" if z is None else f" ({z:+.1f} sd from their mean)")
    return "above every one" if s["published"] > s["max"] else "below every one"


def _values(s: dict, n: int) -> str:
    """How many trajectories, and their values as a reviewer reads them (equal when they print alike)."""
    lo, hi = fmt(s["min"]), fmt(s["max"])
    if n == 1:
        return f"one, {lo}"
    return f"{n}, all {lo}" if lo == hi else f"{n}, {lo} to {hi}"


TRAJECTORY_COLUMNS = (
    "claim",
    "step",
    "quoted",
    "these bundles",
    "trajectories measured",
    "the quote against them",
    "within the quote's tolerance",
    "inside the rerun band",
)
"""The columns of the table of statistics beside the measured trajectories: the claim, then `trajectory_cells`."""


def trajectory_cells(one: dict) -> list[str]:
    """A statistic claim beside the measured trajectories (trajectories.statistic_spread), as the cells the
    page shows: step, quoted, these bundles, the trajectories, where the quote stands, how many lie within
    the quote's tolerance, and how many inside the rerun band (the judged bundles first)."""
    step = "-" if one["step"] is None else f"{one['step']:,}"
    head = [step, fmt(one["quoted"]), "-" if one["judged"] is None else fmt(one["judged"])]
    if "spread" not in one:
        return [*head, f"none: {one['none']}", "-", "-", "-"]
    s, n = one["spread"], len(one["values"])
    band = one.get("rerun_band")
    in_band = "-" if band is None else f"{band['covers']} of {n}"
    if band is not None and one["judged"] is not None:
        in_band = f"these bundles {'inside' if band['judged_inside'] else 'outside'}; {in_band}"
    return [*head, _values(s, n), _stands(s), f"{one['within_quote']} of {n}", in_band]


def statistic_sentence(one: dict) -> str:
    """A statistic claim beside the measured trajectories, in one sentence (`trajectory_cells`' facts)."""
    step, quoted, judged, values, stands, within, band = trajectory_cells(one)
    head = f"at step {step}, quoted {quoted}" + ("" if judged == "-" else f", these bundles {judged}")
    if "spread" not in one:
        return f"{head}; trajectories measured: {values}."
    return (
        f"{head}; trajectories measured: {values}; the quote is {stands}; within the quote's tolerance: {within}"
        + ("" if band == "-" else f"; inside the rerun band: {band}")
        + "."
    )


def comparison_text(one: dict) -> str:
    """A comparison beside the measured trajectories (trajectories.comparison_spread), in one sentence per step."""
    parts = []
    for row in one["steps"]:
        at = f"at step {row['step']:,}" + (" (quoted)" if row["step"] == one["step"] else "")
        if not row["pairings"]:
            counts = ", ".join(f"{m} {n}" for m, n in row["measured"].items())
            parts.append(f"{at}: no pairing of trajectories measured (trajectories there: {counts})")
            continue
        ranges = "; ".join(
            f"{m} ({max(r['n'] for r in by_key.values())}): "  # the trajectories its pairings used
            + ", ".join(
                f"{(TABLE[k].per_step or k).replace('_', ' ')} {fmt(r['min'])}"
                + ("" if r["min"] == r["max"] else f" to {fmt(r['max'])}")
                for k, r in by_key.items()
            )
            for m, by_key in row["ranges"].items()
        )
        n, held = row["pairings"], row["held"]
        verdict = (
            ("holds on the one pairing" if n == 1 else f"holds on all {n} pairings")
            if held == n
            else f"fails on {n - held} of {n} pairing{'s' * (n != 1)}"
        )
        parts.append(f"{at}: {verdict} ({ranges})")
    return ". ".join(parts[:1] + [first_upper(p) for p in parts[1:]]) + "."
