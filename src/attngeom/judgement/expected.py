"""The frozen expected values (expected/*.json): read and validated; judge.py judges against them.

`claims.json` holds one entry per quoted claim, judged as published; `rerun.json` holds, per claim
id, the band a fresh rerun is judged with and whether the claim applies to the smoke preset and to a
run stopped early, and, per telemetry step, the published statistics a run stopped early is judged
against.
"""

from __future__ import annotations

from pathlib import Path

from attngeom.base import json_rules, schema
from attngeom.base.errors import InputError
from attngeom.base.files import REPO, sha256_file
from attngeom.judgement.claims import CLAIM_FUNCTIONS, STEP_CLAIMS
from attngeom.measures.table import STEP_STATISTICS

EXPECTED_DIR = REPO / "expected"
COMPARISONS = ("exact", "abs", "rel", "le", "lt", "ge", "gt")
_FIELDS = (
    "id",
    "claim",
    "quote",
    "source",
    "function",
    "args",
    "value",
    "unit",
    "comparison",
    "tolerance",
    "reason",
    "tier",
    "kind",
)
KINDS = {
    "theorem": "exact in any trained model: a count the mathematics fixes (0 winners moved, 0 keys inside the hull)",
    "setup": "a fact of the setup: fixed by the shapes and the run config, whatever was trained (15,240 comparisons, 3,072 keys, 6 layers)",
    "statistic": "a statistic of one trajectory: another trajectory of the same training may give another value (distinct winners, entropy, re-elected shares, the quality gap)",
    "comparison": "a comparison between models: whether it holds, of one trajectory of each",
    "mathematics": "an exact computation on the posts' toy (six bodies, random keys): no model is read, so it is the same on every machine and every run",
}
"""What a claim is a property of: `kind` in expected/claims.json, the one place a claim says it."""


def _check_judgement(path: Path, cid: str, comparison: str, tolerance) -> None:
    if comparison not in COMPARISONS:
        raise InputError(f"{path}: claim {cid} has unknown comparison {comparison!r}")
    if comparison in ("abs", "rel") and not isinstance(tolerance, (int, float)):
        raise InputError(f"{path}: claim {cid} compares with {comparison} but has no numeric tolerance")


def load_claims(folder: Path | None = None) -> list[dict]:
    """Every claim entry, validated: known function, known comparison, unique ids."""
    path = (folder or EXPECTED_DIR) / "claims.json"
    entries = json_rules.read_json(path, schema.CLAIMS_JSON).get("claims", [])
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
        if e["kind"] not in KINDS:
            raise InputError(f"{path}: claim {e['id']} has unknown kind {e['kind']!r} (one of {', '.join(KINDS)})")
        if (e["kind"] == "mathematics") != (e["tier"] == "mathematics"):  # one fact, said twice: they agree
            raise InputError(
                f"{path}: claim {e['id']} is of kind {e['kind']} in tier {e['tier']}: mathematics is both or neither"
            )
    return entries


def load_rerun(folder: Path | None = None, claims: list[dict] | None = None) -> dict[str, dict]:
    """The rerun tier: claim id -> {value?, comparison, tolerance, reason, smoke}; `claims`: the claim
    entries when read already (else claims.json is read)."""
    path = (folder or EXPECTED_DIR) / "rerun.json"
    bands = json_rules.read_json(path, schema.RERUN_JSON).get("claims", {})
    claims = {e["id"]: e for e in (load_claims(folder) if claims is None else claims)}
    for cid, band in bands.items():
        if cid not in claims:
            raise InputError(f"{path}: band for unknown claim {cid}")
        if claims[cid]["tier"] == "mathematics":  # judge.judged_in: the default verify judges it, alone
            raise InputError(f"{path}: band for {cid}, a claim of mathematics, which no rerun judges")
        merged = {**claims[cid], **band}
        _check_judgement(path, cid, merged["comparison"], merged["tolerance"])
    return bands


def load_steps(folder: Path | None = None) -> dict[int, dict[str, dict]]:
    """rerun.json's `steps`: step -> band name -> {statistic, label, unit, separates?, models}, where
    `models` holds each model's band: model -> {published, tolerance, reason, ensemble?}. The statistic
    is one of table.STEP_STATISTICS, judged by its claim function (claims.STEP_CLAIMS)."""
    path = (folder or EXPECTED_DIR) / "rerun.json"
    steps = json_rules.read_json(path, schema.RERUN_JSON).get("steps", {})
    for step, statistics in steps.items():
        for name, band in statistics.items():
            if not step.isdigit() or band["statistic"] not in STEP_STATISTICS.keys() & STEP_CLAIMS.keys():
                raise InputError(f"{path}: steps.{step}.{name} names an unknown step or statistic")
    return {int(step): statistics for step, statistics in steps.items()}


def sha256_of(folder: Path | None = None) -> dict[str, str]:
    """sha256 of each expected-values file, for the report's provenance."""
    root = folder or EXPECTED_DIR
    return {p.name: sha256_file(p) for p in sorted(root.glob("*.json"))}


def overlaps(band: dict) -> list[tuple[str, str]]:
    """The pairs of models the posts compare (the band's `separates`) whose bands overlap: a run inside
    both could not tell the two apart, so the comparison is not shown by the bands."""
    spans = {m: (b["published"] - b["tolerance"], b["published"] + b["tolerance"]) for m, b in band["models"].items()}
    return [
        (a, b)
        for a, b in band.get("separates", [])
        if a in spans and b in spans and spans[a][0] <= spans[b][1] and spans[b][0] <= spans[a][1]
    ]
