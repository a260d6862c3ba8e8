"""The frozen expected values (expected/*.json) and the judgement of a measured value against one.

`claims.json` holds one entry per quoted claim, judged as published; `rerun.json` holds, per claim
id, the band a fresh rerun is judged with and whether the claim applies to the smoke preset.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from attngeom import schema
from attngeom.claims import CLAIM_FUNCTIONS
from attngeom.errors import InputError
from attngeom.files import REPO, sha256_file

EXPECTED_DIR = REPO / "expected"
COMPARISONS = ("exact", "abs", "rel", "le", "lt", "ge", "gt")
TIERS = ("published", "rerun")
_FIELDS = ("id", "claim", "quote", "source", "function", "args", "value", "unit", "comparison", "tolerance", "reason", "tier")


@dataclass(frozen=True)
class Judgement:
    """How one claim is judged in one tier."""

    value: object
    comparison: str
    tolerance: float | None
    reason: str


def _check_judgement(path: Path, cid: str, comparison: str, tolerance) -> None:
    if comparison not in COMPARISONS:
        raise InputError(f"{path}: claim {cid} has unknown comparison {comparison!r}")
    if comparison in ("abs", "rel") and not isinstance(tolerance, (int, float)):
        raise InputError(f"{path}: claim {cid} compares with {comparison} but has no numeric tolerance")


def load_claims(folder: Path | None = None) -> list[dict]:
    """Every claim entry, validated: known function, known comparison, unique ids."""
    path = (folder or EXPECTED_DIR) / "claims.json"
    entries = schema.read_json(path, schema.CLAIMS_JSON).get("claims", [])
    seen = set()
    for e in entries:
        missing = [f for f in _FIELDS if f not in e]
        if missing:
            raise InputError(f"{path}: claim {e.get('id', '?')} lacks {', '.join(missing)}")
        if e["id"] in seen:
            raise InputError(f"{path}: claim id {e['id']} appears twice")
        seen.add(e["id"])
        if e["function"] not in CLAIM_FUNCTIONS:
            raise InputError(f"{path}: claim {e['id']} names unknown function {e['function']}")
        _check_judgement(path, e["id"], e["comparison"], e["tolerance"])
    return entries


def load_rerun(folder: Path | None = None) -> dict[str, dict]:
    """The rerun tier: claim id -> {value?, comparison, tolerance, reason, smoke}."""
    path = (folder or EXPECTED_DIR) / "rerun.json"
    bands = schema.read_json(path, schema.RERUN_JSON).get("claims", {})
    claims = {e["id"]: e for e in load_claims(folder)}
    for cid, band in bands.items():
        if cid not in claims:
            raise InputError(f"{path}: band for unknown claim {cid}")
        merged = {**claims[cid], **band}
        _check_judgement(path, cid, merged["comparison"], merged["tolerance"])
    return bands


def sha256_of(folder: Path | None = None) -> dict[str, str]:
    """sha256 of each expected-values file, for the report's provenance."""
    root = folder or EXPECTED_DIR
    return {p.name: sha256_file(p) for p in sorted(root.glob("*.json"))}


def judgement_for(entry: dict, tier: str, rerun: dict[str, dict], smoke: bool) -> Judgement | str:
    """The judgement of a claim in a tier, or the reason it is not judged there.

    A rerun band overrides the published judgement field by field (a theorem's band names only
    its reason and `smoke`); a claim without a band is not judged on reruns.
    """
    if tier == "published":
        return Judgement(entry["value"], entry["comparison"], entry["tolerance"], entry["reason"])
    band = rerun.get(entry["id"])
    if band is None:
        return "not judged on reruns (it does not depend on the run; the default verify judges it)"
    if smoke and not band.get("smoke", False):
        return "a paper-preset statistic: not judged on the smoke preset"
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


def describe(j: Judgement) -> str:
    """The expected value with its comparison, e.g. '0.121 ± 0.0005' or '< 0.0004'."""
    symbol = {"exact": "= ", "le": "≤ ", "lt": "< ", "ge": "≥ ", "gt": "> "}
    if j.comparison == "abs":
        return f"{fmt(j.value)} ± {fmt(j.tolerance)}"
    if j.comparison == "rel":
        return f"{fmt(j.value)} ± {j.tolerance:.0%}"
    return symbol[j.comparison] + fmt(j.value)
