"""The default job: evidence -> numbers -> judgement -> report.

Loads the bundles (the author's published ones unless a folder is given), computes every
statistic, judges every claim in expected/ against it, writes the report and prints one line
per claim and a closing `N passed, M failed` line. Exit status: 0 all judged claims pass,
1 a claim fails, 2 unusable input (raised as InputError before anything is written); the
report's files are replaced together or not at all.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from attngeom import expected, fetch, report, stats
from attngeom.bundles import VARIANTS, load_models
from attngeom.claims import CLAIM_FUNCTIONS
from attngeom.errors import EXIT_FAIL, EXIT_PASS
from attngeom.files import shown
from attngeom.options import list_of
from attngeom.results import compute_results


def judge_all(results: dict, tier: str, smoke: bool = False) -> list[dict]:
    """One row per claim in expected/: measured value, expected value, verdict."""
    rerun = expected.load_rerun() if tier == "rerun" else {}
    rows = []
    for entry in expected.load_claims():
        how = expected.judgement_for(entry, tier, rerun, smoke)
        try:
            measured = CLAIM_FUNCTIONS[entry["function"]](results, **entry["args"])
        except KeyError as exc:  # a model these bundles do not hold
            measured, how = None, how if isinstance(how, str) else f"needs {exc.args[0]}, not in these bundles"
        row = {k: entry[k] for k in ("id", "claim", "quote", "source", "function", "unit", "tier")}
        row["measured_value"] = measured if not isinstance(measured, float) or math.isfinite(measured) else None
        row["measured"] = expected.fmt(measured) if measured is not None else "-"
        if isinstance(how, str):
            row.update(expected="-", tolerance_reason=how, verdict="SKIP")
        else:
            row.update(
                expected=expected.describe(how),
                tolerance_reason=how.reason,
                verdict="PASS" if expected.passes(measured, how) else "FAIL",
            )
        rows.append(row)
    return rows


def summarise(rows: list[dict]) -> dict:
    """Counts and the overall verdict."""
    count = {v: sum(r["verdict"] == v for r in rows) for v in ("PASS", "FAIL", "SKIP")}
    return {
        "passed": count["PASS"],
        "failed": count["FAIL"],
        "skipped": count["SKIP"],
        "verdict": "PASS" if count["FAIL"] == 0 else "FAIL",
    }


def run_verify(
    bundles_root: Path | None,
    out: Path,
    tier: str = "published",
    variants: tuple[str, ...] = VARIANTS,
    smoke: bool = False,
) -> int:
    """Verify a folder of bundles (None: the author's published bundles) and write the report."""
    report.check_out(Path(out))
    root = Path(bundles_root) if bundles_root is not None else fetch.fetch_bundles()
    models = load_models(root, variants, heads=stats.FIXED_HEADS)
    results = compute_results(models)
    rows = judge_all(results, tier, smoke)
    inputs = [path for m in models.values() for path in dict.fromkeys(m.files.values())]
    doc = {
        "summary": summarise(rows),
        "tier": tier,
        "preset": "smoke" if smoke else "paper",
        "bundles": shown(root),
        "claims": rows,
        "provenance": report.provenance(sorted(set(inputs)), expected.sha256_of()),
    }
    report.write_verified(Path(out), doc, results)
    width = max(len(r["id"]) for r in rows)
    for r in rows:
        print(f"{r['verdict']:4}  {r['id']:<{width}}  measured {r['measured']:<14} expected {r['expected']}")
    s = doc["summary"]
    print(f"report: {shown(Path(out) / 'REPORT.md')}")
    print(f"{s['passed']} passed, {s['failed']} failed" + (f", {s['skipped']} skipped" if s["skipped"] else ""))
    return EXIT_PASS if s["failed"] == 0 else EXIT_FAIL


def register(sub: argparse._SubParsersAction) -> None:
    """`verify`: the default subcommand."""
    p = sub.add_parser("verify", help="judge every quoted number (default)")
    p.add_argument("--bundles", type=Path, help="a folder of bundles in the original format (default: the author's)")
    p.add_argument("--out", type=Path, default=Path("report"), help="report folder (default: report/)")
    p.add_argument("--tier", choices=expected.TIERS, default="published", help="which tolerances to judge with")
    p.add_argument("--smoke", action="store_true", help="the bundles come from the smoke preset")
    p.add_argument("--variants", type=list_of(str, VARIANTS, "variant"), default=VARIANTS, help="comma-separated variants to load")
    p.set_defaults(func=lambda a: run_verify(a.bundles, a.out, a.tier, a.variants, a.smoke))


