"""`bands`: the intermediate-step bands of expected/rerun.json grounded in a measured ensemble.

A rerun on other hardware is another trajectory of the same training, so the band a stopped run is
judged with at a telemetry step must hold the spread of such trajectories. An ensemble
(`rerun --members K`, kept by `summary` in expected/measured/) measures it; this command derives,
for every model the ensemble covers at that step, the band centred on the published value that

    covers the published value and every member, plus a margin of one standard deviation of the
    members (ddof 1), rounded up to two significant digits,

and prints it beside the band in force; `--judge SUMMARY` judges the runs a summary file keeps again
with the derived bands (on the statistics the summary holds); `--write FILE` writes the rerun.json
with the derived bands.
A model without an ensemble of at least MIN_MEMBERS members keeps its band: two members of yat_b at
step 1200 derived an entropy band of ±0.012 that a third CPU trajectory (the plain rerun kept in
expected/measured/paper-step1200.json) lies outside; the spread of two says too little. The ensemble's values go into the band
(`ensemble`: members, mean, std, min, max, source), so that the report shows a run beside them
without reading expected/measured/.

    ./reproduce.sh bands expected/measured/ensemble-step1200.json --step 1200 [--write expected/rerun.json]

`--final REPORT_JSON` does the same for the bands of the final step, from the published bundles' report
(whose `trajectories` section holds every full-length trajectory measured: the author's telemetry
reruns, the full-length reruns in expected/measured/): each band's `measured` lists them, the published
bundles first, with whether the band covers each; a band is re-derived once MIN_MEMBERS of them exist.
Trajectories that do not part (softmax's: equal to the float16 rounding the bundles keep, `part`) measure
no spread, at any step: their band keeps its tolerance and says so.

    ./reproduce.sh --out report && ./reproduce.sh bands --final report/report.json [--write expected/rerun.json]
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from pathlib import Path

import numpy as np

from attngeom.base import json_rules, schema, schema_results
from attngeom.base.errors import InputError
from attngeom.base.files import shown, write_json_atomic
from attngeom.base.variants import model_of, published_run
from attngeom.bundles.evidence import PUBLISHED_KIND
from attngeom.geometry.export_rounding import U16
from attngeom.judgement import expected
from attngeom.judgement.judge import Judgement, judgement_for, passes
from attngeom.judgement.robustness import spread
from attngeom.judgement.trajectories import PAPER_STEPS, judged_runs
from attngeom.measures.table import TABLE, possible

MARGIN = "one standard deviation of the members"
MIN_MEMBERS = 4  # the fewest members a band is derived from
DEFAULT_STEP = 1200  # the telemetry step `bands SUMMARY` derives the bands of, unless --step names another


def round_up(x: float, digits: int = 2) -> float:
    """`x` rounded up to `digits` significant digits (0 stays 0), in decimal so that it is never below `x`."""
    if x <= 0:
        return 0.0
    d = Decimal(x)  # the float's exact value
    return float(d.quantize(Decimal(1).scaleb(d.adjusted() - digits + 1), rounding=ROUND_CEILING))


def tolerance(members: list[float], published: float, std: float) -> float:
    """The half-width of the band: the farthest member from the published value, plus one standard
    deviation of the members (`std`, the ensemble's, ddof 1). Values too far apart for any band (a width
    past the largest float) are unusable input."""
    width = max(abs(v - published) for v in members) + std
    if not math.isfinite(width):
        raise InputError(f"values from {min(members):g} to {max(members):g}: too far apart to derive a band from")
    return round_up(width)


def ensembles_at(doc: dict, step: int, where: str = "the summary file") -> dict[str, dict[str, dict]]:
    """The spread of every model's ensemble at `step` in a summary file (read through its schema):
    model -> statistic -> spread.

    A spread that is not its members' (`robustness.spread` of them) is refused, and so is a model two
    ensembles cover: their members 0 are the same trajectory."""
    out: dict[str, dict[str, dict]] = {}
    for name, run in doc["runs"].items():
        preset = run.get("ensemble", {}).get("config", {}).get("preset")
        for model, by_statistic in run.get("ensemble", {}).get("statistics", {}).items():
            variant, seed = model_of(model)
            if not published_run(preset, seed, variant):
                continue
            if variant in out:
                raise InputError(f"{where}: two ensembles of {variant}, one of them {name}: keep one per model")
            out[variant] = {s: by_step[str(step)] for s, by_step in by_statistic.items() if str(step) in by_step}
            for statistic, one in out[variant].items():
                if not _is_spread_of_members(one):
                    raise InputError(
                        f"{where}: {name} {model} {statistic} at step {step}: the spread is not that of its members"
                    )
    return out


def _is_spread_of_members(one: dict) -> bool:
    """Whether a recorded spread names each member once and holds their mean, std, min and max."""
    again = spread(one["members"], None)
    return len(set(one["member_ids"])) == len(one["member_ids"]) == len(one["members"]) and all(
        math.isclose(one[k], again[k], rel_tol=1e-9, abs_tol=1e-12) for k in ("mean", "std", "min", "max")
    )


def derive(rerun_doc: dict, summary_doc: dict, step: int, source: str) -> dict:
    """rerun.json with the bands at `step` of every model the ensembles cover with MIN_MEMBERS members or
    more re-derived, where they and the published value part (`part`); a band of members that do not keeps
    its tolerance."""
    doc = copy.deepcopy(rerun_doc)
    bands = doc["steps"].get(str(step))
    if bands is None:
        raise InputError(f"rerun.json has no bands at step {step}")
    spreads = ensembles_at(summary_doc, step, source)
    for band in bands.values():
        for model, one in band["models"].items():
            spread = spreads.get(model, {}).get(band["statistic"])
            if (
                spread is None
                or len(spread["members"]) < MIN_MEMBERS
                or not part([*spread["members"], one["published"]])
            ):
                continue
            members, published = spread["members"], one["published"]
            t = tolerance(members, published, spread["std"])
            one["tolerance"] = t
            one["ensemble"] = {"source": source, "members": members} | {
                k: spread[k] for k in ("mean", "std", "min", "max")
            }
            one["reason"] = (
                f"the spread of {len(members)} trajectories of this run on one CPU ({source}: members "
                f"{min(members):g} to {max(members):g}, published {published:g}): the band covers the published value "
                f"and every member, plus {MARGIN} ({spread['std']:.2g}), rounded up to two significant digits"
            )
    return doc


def judge_summaries(doc: dict, rerun_doc: dict, step: int) -> list[tuple[str, str, str, float, float, float, bool]]:
    """The runs a summary file keeps (ensembles' members included), judged again on their statistics at
    `step` with the bands of `rerun_doc` (as verify judges a stopped run: `judge.passes`): (run, model,
    statistic, value, published, tolerance, inside)."""
    out = []
    bands = rerun_doc["steps"].get(str(step), {})
    for who, one in judged_runs(doc["runs"]):
        for model, entry in one.get("statistics", {}).items():
            variant, seed = model_of(model)
            for statistic, band in bands.items():
                value = entry["run"].get(band["statistic"], {}).get(str(step))
                if (
                    not published_run(one.get("preset"), seed, variant)
                    or variant not in band["models"]
                    or value is None
                ):
                    continue
                b = band["models"][variant]
                inside = passes(value, Judgement(b["published"], "abs", b["tolerance"], b["reason"]))
                out.append((who, variant, statistic, value, b["published"], b["tolerance"], inside))
    return out


PUBLISHED_BUNDLES = "the published bundles"
APART = "equal to float16's rounding: no spread to derive a band from"  # how `part` is said when they do not
# How a final-step band's reason ends: the full-length trajectories it was checked against (rewritten by each `--final`).
CHECKED = "; checked against every full-length trajectory measured: "


def part(values: list[float]) -> bool:
    """Whether full-length trajectories of one model part, by their values of one statistic.

    The bundles keep every map, q and k rounded to float16: each number to within half a spacing, U16 =
    2**-11 of it. Values of a statistic closer than that share of their size are the same model at the
    precision the bundles keep, so trajectories that close do not part (softmax's: its round-off does not
    grow), and their differences are round-off, no spread of the training a band could be derived from.
    Trajectories that part (the kernel models') differ by about a hundredth of the value."""
    lo, hi = min(values), max(values)
    return hi - lo > U16 * max(abs(lo), abs(hi))


def checked(measured: list[dict]) -> str:
    """A final-step band's `measured` in words: each trajectory, its value, inside the band or OUTSIDE."""
    return "; ".join(f"{m['trajectory']} {m['value']:g} {'inside' if m['covered'] else 'OUTSIDE'}" for m in measured)


def final_measured(rerun_doc: dict, section: dict, claims: list[dict]) -> tuple[dict, dict[str, str]]:
    """rerun.json with each final-step band's `measured`: every full-length trajectory measured of its
    claim's model, as the published bundles' report shows them (report.json's `trajectories`): the
    published bundles first, then the others, each with its value and whether the band covers it
    (`judge.passes`), named again at the end of its reason (after CHECKED). A band of `abs` with
    MIN_MEMBERS full-length trajectories or more is re-derived by the rule of `tolerance`, centred on its
    value, when they part (`part`); before that, or when they do not, it is kept, and its reason says
    which. Also one line per band the section measures, by claim id (a band it does not measure keeps
    what it had)."""
    doc, lines = copy.deepcopy(rerun_doc), {}
    entries = {e["id"]: e for e in claims}
    for cid, band in doc["claims"].items():
        one = section["claims"].get(cid, {})
        if (
            band.get("truncated")
            or band.get("judged") is False
            or one.get("kind") != "statistic"
            or one.get("step") != PAPER_STEPS
        ):
            continue
        how = judgement_for(entries[cid], "rerun", doc["claims"])
        values = [(PUBLISHED_BUNDLES, one["judged"])] * (one["judged"] is not None)
        values += [(v["trajectory"], v["value"]) for v in one["values"]]
        numbers = [v for _, v in values]
        alike = len(values) >= 2 and not part(numbers)
        if len(values) >= MIN_MEMBERS and how.comparison == "abs" and not alike:
            with np.errstate(all="ignore"):  # an overflowing spread is refused by `tolerance`, not warned of
                std = spread(numbers, None)["std"]
            band["tolerance"] = tolerance(numbers, how.value, std)
            band["reason"] = (
                f"the spread of {len(values)} full-length trajectories (band `measured`): the band covers every one, "
                f"plus {MARGIN}, rounded up to two significant digits"
            )
            how = judgement_for(entries[cid], "rerun", doc["claims"])
            kept = "re-derived"
        elif alike:
            kept = f"kept: its {len(values)} full-length trajectories do not part, {APART}"
        else:
            kept = f"kept: {len(values)} of the {MIN_MEMBERS} full-length trajectories a band is derived from"
        band["measured"] = [{"trajectory": t, "value": v, "covered": passes(v, how)} for t, v in values]
        shown_values = checked(band["measured"])
        alone = f" (they do not part, {APART}; the tolerance is kept)" if alike else ""
        band["reason"] = f"{band['reason'].split(CHECKED)[0]}{CHECKED}{shown_values or 'none yet'}{alone}"
        lines[cid] = f"{cid:28} {how.comparison} {how.tolerance}: {shown_values or 'none measured'} ({kept})"
    return doc, lines


@dataclass(frozen=True)
class BandsOptions:
    """What `bands` was asked (`commands/bands.py`)."""

    ensemble: Path | None = None
    final: Path | None = None
    step: int | None = None  # the telemetry step whose bands are derived (None: DEFAULT_STEP)
    source: str | None = None
    judge: tuple[Path, ...] = ()
    write: Path | None = None


def run_final(args: BandsOptions) -> int:
    """`bands --final REPORT_JSON`: each final-step band beside the full-length trajectories; 1 when one the
    report measures lies outside. The report must be the published bundles' (whose value the section
    names as theirs), every value one its statistic can take, and what --write writes valid for the
    schema every later verify reads it with."""
    given = [
        flag for flag, value in (("SUMMARY", args.ensemble), ("--judge", args.judge), ("--step", args.step)) if value
    ]
    if given:
        raise InputError(f"--final: alone; {', '.join(given)} belong to the bands of an ensemble's step")
    doc = json_rules.read_json(args.final, schema_results.REPORT_JSON)
    section, kind = doc.get("trajectories"), doc.get("evidence", {}).get("kind")
    if section is None:
        raise InputError(f"{shown(args.final)}: no `trajectories` section (a report of this version's verify)")
    if kind != PUBLISHED_KIND:
        raise InputError(
            f"{shown(args.final)}: a report of {kind or 'unnamed bundles'}; --final reads the report of the "
            "author's published bundles (./reproduce.sh --out DIR, then DIR/report.json)"
        )
    for cid, one in section["claims"].items():
        for v in [{"value": one.get("judged")}, *one.get("values", [])]:
            statistic = one.get("statistic")
            if v["value"] is not None and statistic in TABLE and not possible(statistic, v["value"]):
                raise InputError(f"{shown(args.final)}: {cid}: {v['value']!r} is no value of {statistic}")
    current = json_rules.read_json(expected.EXPECTED_DIR / "rerun.json", schema.RERUN_JSON)
    new, lines = final_measured(current, section, expected.load_claims())
    print("\n".join(lines.values()))
    if args.write:
        json_rules.check(new, schema.RERUN_JSON, f"the rerun.json for {shown(args.write)}")
        write_json_atomic(args.write, new)
        print(f"written: {shown(args.write)}")
    return 1 if any(not m["covered"] for cid in lines for m in new["claims"][cid]["measured"]) else 0


def run_bands(args: BandsOptions) -> int:
    """Print the derived bands beside those in force; write them with --write. The exit status is 1 when
    a run --judge judges again lies outside its band (every file read first, so that a bad one writes nothing)."""
    if args.final is not None:
        return run_final(args)
    if args.ensemble is None:
        raise InputError("bands: give a summary file holding ensembles, or --final REPORT_JSON")
    step = DEFAULT_STEP if args.step is None else args.step
    summary_doc = json_rules.read_json(args.ensemble, schema_results.SUMMARY_JSON)
    path = expected.EXPECTED_DIR / "rerun.json"
    current = json_rules.read_json(path, schema.RERUN_JSON)
    source = shown(args.source or args.ensemble)
    new = derive(current, summary_doc, step, source)
    spreads = ensembles_at(summary_doc, step, source)
    for name, band in new["steps"][str(step)].items():
        for model, one in band["models"].items():
            before = current["steps"][str(step)][name]["models"][model]["tolerance"]
            members = spreads.get(model, {}).get(band["statistic"], {}).get("members", [])
            n = len(members)
            how = (
                "ensemble"
                if "ensemble" in one
                else f"kept (its {n} member{'s' * (n != 1)} and the published run do not part, {APART})"
                if n and not part([*members, one["published"]])
                else f"kept ({n} member{'s' * (n != 1)}, fewer than {MIN_MEMBERS})"
                if n
                else "kept (no ensemble)"
            )
            print(
                f"step {step} {name:10} {model:8} published {one['published']:<10g} ± {before:g} -> ± {one['tolerance']:g} ({how})"
            )
        for a, b in expected.overlaps(band):
            print(f"step {step} {name}: the bands of {a} and {b} overlap")
    judged = [
        (file, row)
        for file in args.judge
        for row in judge_summaries(json_rules.read_json(file, schema_results.SUMMARY_JSON), new, step)
    ]
    for file, (who, model, name, value, published, t, inside) in judged:
        verdict = "PASS" if inside else "FAIL"
        print(f"{shown(file)}: {who} {model} {name} at {step}: {value:g} against {published:g} ± {t:g}: {verdict}")
    if args.write:
        write_json_atomic(args.write, new)
        print(f"written: {shown(args.write)}")
    return 1 if any(not row[-1] for _, row in judged) else 0  # as verify: 1 when a judged value fails
