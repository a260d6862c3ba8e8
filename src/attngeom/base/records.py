"""The result and report documents, typed once: results.json (`Results`) and report.json (`Report`).

verify builds them, report/markdown.py, report/page.py and report/outputs.py write them, and `summary` and
`figures` read report.json back through schema_results.REPORT_JSON, which checks the fields they use.
They stay plain JSON objects (TypedDicts), so the files are what they were.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict


class Counts(TypedDict):
    """The verdict: how many claims passed, failed and were skipped, and PASS or FAIL overall."""

    passed: int
    failed: int
    skipped: int
    verdict: str
    by_kind: NotRequired[dict[str, dict[str, int]]]  # expected.KINDS -> passed, failed, skipped (judge.summarise)


class ClaimRow(TypedDict):
    """One judged claim (judge.judge_all)."""

    id: str
    claim: str
    quote: str
    source: str
    function: str
    unit: str
    tier: str
    kind: str  # expected.KINDS: what the claim is a property of
    measured_value: object
    measured: str
    expected: str
    quoted: str  # the quote's value, as a reviewer reads it
    tolerance: str  # what the judgement accepts around it (judge.tolerance_text), "-" when skipped
    accepted: NotRequired[list[float | None] | None]  # a judged claim's: the values it accepts (judge.accepted)
    tolerance_reason: str
    verdict: str  # judge.VERDICTS
    cause: NotRequired[str]  # a failing claim's: why, in one sentence from the data (judge.cause)
    ensemble: NotRequired[dict]  # a stopped run's statistic: the measured ensemble its band comes from (rerun.json)


class EvidenceRecord(TypedDict):
    """What the bundles are and how they were judged (evidence.Evidence, as recorded)."""

    kind: str
    why: str
    scope: str
    stopped_after: int | None
    steps: NotRequired[int | None]  # the schedule's length (cfg STEPS)
    line: str


class Provenance(TypedDict):
    """Where the judgement came from (report.provenance)."""

    inputs: dict[str, str]  # shown path -> sha256
    sources: dict[str, dict]
    expected_sha256: dict[str, str]
    versions: dict[str, str]
    environment: dict  # environment.against_lock: the versions against the lock's pins
    git_commit: str | None
    machine: str
    date: str
    command: str


class Report(TypedDict):
    """report.json."""

    summary: Counts
    tier: str
    evidence: EvidenceRecord
    warnings: list[str]
    preflight: dict | None
    bundles: str
    claims: list[ClaimRow]
    left_out: NotRequired[
        str
    ]  # a rerun's: the claims of mathematics it leaves to the default verify (judge.left_out_line)
    trajectories: NotRequired[dict]  # each trajectory statistic and comparison beside the measured trajectories
    provenance: Provenance


class ModelResults(TypedDict, total=False):
    """One model's statistics in results.json (results.model_results); the statistics of
    table.TABLE without a `read` are added under their own names."""

    variant: str
    seed: int
    setup: dict
    scale_t: list[float]
    scale_changed: dict[str, float]
    scale_changed_rows: dict[str, int]
    scale_comparisons: int
    mean_norm_entropy_final: float
    mean_norm_entropy_by_step: dict[str, float]
    occupancy_by_step: dict[str, float]
    occupancy_final_min: float
    occupancy_final_max: float
    keys_inside_hull: int
    keys_total: int
    winner_is_nearest: float
    winner_is_aligned: float
    scale_sweep: dict
    census_head: dict
    best_val: float | None  # None: stopped before its first evaluation
    bpc: float | None
    per_head: dict
    reconstruction_max_abs: float


class Results(TypedDict, total=False):
    """results.json: every model's statistics, the quality gaps, the mathematics, and (verify) the robustness section."""

    models: dict[str, ModelResults]
    quality: dict
    mathematics: dict
    robustness: dict
