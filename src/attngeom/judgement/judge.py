"""The judgement: every claim of expected/ against the measured results, one verdict each.

A claim is PASS or FAIL against its judgement in a tier (the published values, or the rerun
bands). It is SKIP only for a stated reason decided before anything is measured: a model it
reads is absent from the evidence, or the evidence cannot show it (a smoke-sized run cannot
show the paper's statistics, a run stopped early has no final model). Anything else that goes
wrong inside a claim function (a KeyError from a typo included) is an internal error and is
raised, never counted as SKIP.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from attngeom.base.records import ClaimRow, Counts, Results
from attngeom.judgement import expected
from attngeom.judgement.causes import CAUSES
from attngeom.judgement.claims import CLAIM_FUNCTIONS, MODEL_ARGS, STEP_CLAIMS

VERDICTS = ("PASS", "FAIL", "SKIP")
# What the evidence can show: every claim, only what holds at any size, or what a run stopped early shows.
SCOPES = ("all", "smoke", "truncated")
STOPPED_RUN = "stopped run"  # the tier field of the statistics judged at the steps a stopped run reached
ROW_FIELDS = ("id", "claim", "quote", "source", "function", "unit", "tier", "kind")


@dataclass(frozen=True)
class Judgement:
    """How one claim is judged in one tier."""

    value: object
    comparison: str
    tolerance: float | None
    reason: str


def judgement_for(entry: dict, tier: str, rerun: dict[str, dict], scope: str = "all") -> Judgement | str:
    """The judgement of a claim in a tier, or the reason it is skipped on this evidence.

    A rerun band overrides the published judgement field by field (a theorem's band names only
    its reason and `smoke`); a claim without a band, or whose band says `judged: false` with its
    reason, is not judged on reruns. The scope applies in
    every tier: a tier changes the tolerances, never what the evidence can show.
    """
    if entry["tier"] == STOPPED_RUN:  # judged within its own band, in every tier
        return Judgement(entry["value"], entry["comparison"], entry["tolerance"], entry["reason"])
    band = rerun.get(entry["id"])
    if tier != "published" and band is not None and band.get("judged") is False:  # a number of the published run only
        return band["reason"]
    if entry["tier"] != "mathematics":
        if scope == "smoke" and not (band or {}).get("smoke", False):
            return "a paper-preset statistic: skipped on the smoke preset"
        if scope == "truncated" and not (band or {}).get("truncated", False):
            return "needs the final model: skipped on a run stopped before its last step"
    if tier == "published":
        return Judgement(entry["value"], entry["comparison"], entry["tolerance"], entry["reason"])
    if band is None:
        return "not judged on reruns (it does not depend on the run; the default verify judges it)"
    return Judgement(
        band.get("value", entry["value"]),
        band.get("comparison", entry["comparison"]),
        band.get("tolerance", entry["tolerance"]),
        band["reason"],
    )


def passes(measured, j: Judgement) -> bool:
    """Whether a measured value satisfies a judgement; anything non-numeric where a number is due fails."""
    if j.comparison == "exact":
        return measured == j.value and type(measured) is not str
    if isinstance(measured, bool) or not isinstance(measured, (int, float)) or math.isnan(measured):
        return False
    v = j.value
    return {
        "abs": lambda: abs(measured - v) <= j.tolerance,
        "rel": lambda: abs(measured - v) <= j.tolerance * abs(v),
        "le": lambda: measured <= v,
        "lt": lambda: measured < v,
        "ge": lambda: measured >= v,
        "gt": lambda: measured > v,
    }[j.comparison]()


def fmt(x) -> str:
    """A value as a reviewer reads it."""
    if isinstance(x, bool) or x is None or isinstance(x, (str, list)):
        return str(x)
    if isinstance(x, int):
        return f"{x:,}"
    if math.isinf(x):
        return "never (inf)"
    return f"{x:.6g}"


def tolerance_text(j: Judgement, quoted: object) -> str:
    """What `j` accepts around the `quoted` value, short: "± 0.0005", "± 30%", "exact", "at most"; the whole
    judgement (`describe`) where it is centred elsewhere (a rerun band of its own value)."""
    if j.value != quoted or type(j.value) is not type(quoted):
        return describe(j)
    words = {"exact": "exact", "le": "upper bound", "lt": "upper bound", "ge": "lower bound", "gt": "lower bound"}
    if j.comparison == "abs":
        return f"± {fmt(j.tolerance)}"
    if j.comparison == "rel":
        return f"± {j.tolerance:.0%}"
    return words[j.comparison]


def interval(j: Judgement) -> tuple[float, float] | None:
    """The values a numeric judgement accepts, as (low, high) with infinite ends for a one-sided bound
    (the strips draw it); None for an exact value that is not a number."""
    v = j.value
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    half = {"abs": lambda: j.tolerance, "rel": lambda: j.tolerance * abs(v)}.get(j.comparison, lambda: 0.0)()
    return {
        "le": (-math.inf, v),
        "lt": (-math.inf, v),
        "ge": (v, math.inf),
        "gt": (v, math.inf),
    }.get(j.comparison, (v - half, v + half))


def accepted(j: Judgement) -> list[float | None] | None:
    """`interval(j)` as JSON holds it, an unbounded end as null: what report.json's rows and trajectories give
    the strips to draw."""
    span = interval(j)
    return None if span is None else [None if math.isinf(end) else end for end in span]


def describe(j: Judgement) -> str:
    """The expected value with its comparison, e.g. '0.121 ± 0.0005' or '< 0.0004'."""
    symbol = {"exact": "= ", "le": "≤ ", "lt": "< ", "ge": "≥ ", "gt": "> "}
    if j.comparison == "abs":
        return f"{fmt(j.value)} ± {fmt(j.tolerance)}"
    if j.comparison == "rel":
        return f"{fmt(j.value)} ± {j.tolerance:.0%}"
    return symbol[j.comparison] + fmt(j.value)


def judged_in(tier: str, entries: list[dict]) -> tuple[list[dict], list[dict]]:
    """The claims a report in `tier` judges, and those it leaves out: a claim of mathematics does not
    depend on the run, so only the published tier (the default verify) judges it, the same everywhere."""
    out = [e for e in entries if tier != "published" and e["tier"] == "mathematics"]
    return [e for e in entries if e not in out], out


def left_out_line(out: list[dict]) -> str | None:
    """One line for the claims a rerun's report leaves out (`judged_in`), None when it leaves none."""
    if not out:
        return None
    return (
        f"{len(out)} claims of mathematics (the posts' toy: no model is read) are not judged here: they do not "
        "depend on the run, and ./reproduce.sh verify judges them, the same on every machine"
    )


def against(measured, j: Judgement) -> str:
    """Where a measurement that fails `j` lies against what `j` accepts, in words."""
    m = fmt(measured)
    span = interval(j)
    if j.comparison == "exact" or span is None:
        return f"measured {m}, where exactly {fmt(j.value)} is expected"
    if isinstance(measured, bool) or not isinstance(measured, (int, float)) or math.isnan(measured):
        return f"measured {m}, where a number is expected"
    side = "above" if measured > span[1] or (j.comparison == "lt" and measured >= j.value) else "below"
    if j.comparison in ("abs", "rel"):
        return f"measured {m}, {side} the accepted {fmt(span[0])} to {fmt(span[1])}"
    return f"measured {m}, {side} the bound {describe(j)}"


def cause(entry: dict, measured, j: Judgement, results: Results) -> str:
    """One sentence on why a claim fails: where the measurement lies (`against`), and what in the data it
    comes from where its family says (causes.CAUSES)."""
    why = against(measured, j)
    more = CAUSES.get(entry["function"])
    return f"{why}: {more(results, entry.get('args', {}))}" if more else why


def models_needed(entry: dict) -> list[str]:
    """The models a claim reads, named by its arguments."""
    return [entry["args"][name] for name in MODEL_ARGS if name in entry["args"]]


def steps_reached(scope: str, stopped_after: int | None) -> dict[int, dict[str, dict]]:
    """rerun.json's bands (`expected.load_steps`) at the telemetry steps a run stopped early reached;
    none for any other evidence."""
    if scope != "truncated" or stopped_after is None:
        return {}
    return {step: statistics for step, statistics in expected.load_steps().items() if step <= stopped_after}


def stopped_run_entries(reached: dict[int, dict[str, dict]]) -> list[dict]:
    """Claim-shaped entries for a run stopped early: its statistics at each telemetry step it reached
    (`steps_reached`), against the published bundles' maps at that step, within the step's band."""
    return [
        {
            "id": f"step{step}.{model}.{name}",
            "claim": f"{model}: {band['label']} at step {step}, as in the published run",
            "quote": f"(not a quote: the published bundles' step{step} map of {model})",
            "source": f"the published bundles, attn_{model}_s0.npz, key step{step}",
            "function": STEP_CLAIMS[band["statistic"]].__name__,
            "args": {"model": model, "step": step},
            "value": one["published"],
            "unit": band["unit"],
            "comparison": "abs",
            "tolerance": one["tolerance"],
            "reason": one["reason"],
            "tier": STOPPED_RUN,
            "kind": "statistic",  # of the run's trajectory, at a step it reached
        }
        | ({"ensemble": {**one["ensemble"], "published": one["published"]}} if "ensemble" in one else {})
        for step, statistics in reached.items()
        for name, band in statistics.items()
        for model, one in band["models"].items()
    ]


def separation_notes(reached: dict[int, dict[str, dict]]) -> list[str]:
    """For a run stopped early: the comparisons of the posts that the bands at the steps it reached
    (`steps_reached`) do not show, because the two models' bands overlap (expected.overlaps)."""
    return [
        f"at step {step} the bands of {a} and {b} ({band['label']}) overlap: a run inside both does not "
        "tell the two apart as the posts do"
        for step, statistics in reached.items()
        for band in statistics.values()
        for a, b in expected.overlaps(band)
    ]


def _measure(entry: dict, results: dict):
    try:
        return CLAIM_FUNCTIONS[entry["function"]](results, **entry["args"])
    except Exception as exc:
        raise RuntimeError(f"claim {entry['id']}: {entry['function']} raised {type(exc).__name__}: {exc}") from exc


def judge_all(
    results: Results,
    tier: str,
    scope: str = "all",
    claims: list[dict] | None = None,
    reached: dict[int, dict[str, dict]] | None = None,
) -> list[ClaimRow]:
    """One row per claim in expected/ (`claims`: its entries, when read already), and for a run stopped
    early one per statistic at each step it reached (`reached`: `steps_reached`)."""
    entries = list(expected.load_claims() if claims is None else claims)
    rerun = expected.load_rerun(claims=entries)
    entries = judged_in(tier, entries)[0] + stopped_run_entries(reached or {})
    rows = []
    for entry in entries:
        how = judgement_for(entry, tier, rerun, scope)
        absent = [m for m in models_needed(entry) if m not in results["models"]]
        if absent and not isinstance(how, str):
            how = f"needs {absent[0]}, not in these bundles"
        # a setup fact holds at any step, so a stopped run's is measured even where its claim waits for the end
        shown = not absent and (not isinstance(how, str) or (scope == "truncated" and entry["kind"] == "setup"))
        measured = _measure(entry, results) if shown else None
        row = {k: entry[k] for k in ROW_FIELDS} | ({"ensemble": entry["ensemble"]} if "ensemble" in entry else {})
        row["measured_value"] = measured if not isinstance(measured, float) or math.isfinite(measured) else None
        row["measured"] = fmt(measured) if measured is not None else "-"
        row["quoted"] = fmt(entry["value"])
        if isinstance(how, str):
            row.update(expected="-", tolerance="-", tolerance_reason=how, verdict="SKIP")
        else:
            verdict = "PASS" if passes(measured, how) else "FAIL"
            row.update(expected=describe(how), tolerance=tolerance_text(how, entry["value"]), accepted=accepted(how))
            row.update(tolerance_reason=how.reason, verdict=verdict)
            if verdict == "FAIL":
                row["cause"] = cause(entry, measured, how, results)
        rows.append(row)
    return rows


COUNTED = {"PASS": "passed", "FAIL": "failed", "SKIP": "skipped"}


def summarise(rows: list[ClaimRow]) -> Counts:
    """Counts, the overall verdict, and the counts of each kind of claim (expected.KINDS' order)."""
    count = {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}
    kinds = [k for k in expected.KINDS if any(r["kind"] == k for r in rows)]
    return {
        "passed": count["PASS"],
        "failed": count["FAIL"],
        "skipped": count["SKIP"],
        "verdict": "PASS" if count["FAIL"] == 0 else "FAIL",
        "by_kind": {
            k: {word: sum(r["kind"] == k and r["verdict"] == v for r in rows) for v, word in COUNTED.items()}
            for k in kinds
        },
    }
