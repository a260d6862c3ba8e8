"""One schema per JSON file the package writes and reads back: a report's report.json and figures.json,
the summaries of runs and ensembles (expected/measured/), and the measurements of bench/results/.
"""

from __future__ import annotations

from attngeom.base.json_rules import Either, Flag, Items, Maybe, Number, Record, Text
from attngeom.base.schema import (
    COMPARISON,
    COUNT,
    ENSEMBLE_JSON,
    MANIFEST_JSON,
    MAX_STEP,
    MODEL_KEY,
    STEP,
    STEP_KEY,
    VALUE,
    by_statistic,
    spread,
)
from attngeom.base.train_config import PRESET_NAMES

# --- a report ---

_SUMMARY = Record({"n": COUNT, **{k: Number() for k in ("mean", "min", "max")}, "std": Number(0)}, other=None)
_INTERVAL = Items(Maybe(Number()), min_len=2, max_len=2)  # what a judgement accepts (judge.interval): null, unbounded
TRAJECTORIES = Record(
    {
        "sources": Items(Text()),
        "trajectories": Items(Text()),
        "claims": Record(
            other=Either(
                (
                    Record(
                        {
                            "kind": Text(16, "statistic"),
                            "model": Maybe(Text(100)),
                            "statistic": Maybe(Text(100)),
                            "quoted": Number(),
                            "judged": Maybe(Number()),
                            "step": Maybe(STEP),
                            "values": Items(
                                Record(
                                    {"trajectory": Text(), "value": Number(), "in_rerun_band": Flag()},
                                    required=("trajectory", "value"),
                                    other=None,
                                )
                            ),
                            "none": Text(),
                            "spread": spread(Number(), ids=False),
                            "within_quote": COUNT,
                            "quote_interval": Maybe(_INTERVAL),
                            "rerun_band": Record(
                                {
                                    "value": VALUE,
                                    "comparison": COMPARISON,
                                    "tolerance": Maybe(Number(0)),
                                    "interval": Maybe(_INTERVAL),
                                    "covers": COUNT,
                                    "judged_inside": Flag(),
                                },
                                required=("value", "comparison", "tolerance", "covers", "judged_inside"),
                                other=None,
                            ),
                        },
                        required=("kind", "quoted", "step", "values"),
                        other=None,
                    ),
                    Record(
                        {
                            "kind": Text(16, "comparison"),
                            "models": Items(Text(100), min_len=1),
                            "quoted": Flag(),
                            "judged": Maybe(Flag()),
                            "step": STEP,
                            "steps": Items(
                                Record(
                                    {
                                        "step": STEP,
                                        "pairings": COUNT,
                                        "held": COUNT,
                                        "measured": Record(other=COUNT),
                                        "ranges": Record(other=Record(other=_SUMMARY)),
                                    },
                                    required=("step", "pairings", "held", "measured"),
                                    other=None,
                                ),
                                min_len=1,
                            ),
                        },
                        required=("kind", "models", "quoted", "step", "steps"),
                        other=None,
                    ),
                )
            )
        ),
    },
    required=("sources", "trajectories", "claims"),
    other=None,
)
"""report.json's `trajectories` (trajectories.section): each trajectory statistic beside the measured
trajectories at its step (their values and `robustness.spread`), each comparison on their pairings."""

REPORT_JSON = Record(
    {
        "summary": Record(
            {k: Number(0, integer=True) for k in ("passed", "failed", "skipped")}
            | {
                "verdict": Text(16),
                "by_kind": Record(
                    other=Record({k: COUNT for k in ("passed", "failed", "skipped")}, other=None), max_len=16
                ),
            },
            required=("passed", "failed", "skipped", "verdict"),
        ),
        "tier": Text(100),
        "claims": Items(
            Record({k: Text() for k in ("id", "verdict", "measured", "expected")}, required=("id", "verdict")),
        ),
        "trajectories": TRAJECTORIES,
        "provenance": Record(
            {"inputs": Record(other=Text(64)), "machine": Text(), "git_commit": Maybe(Text(64))},
            required=("inputs",),
        ),
    },
    required=("summary", "tier", "claims", "provenance"),
)
"""A report folder's report.json (documents.Report), as `summary` and `figures` read it back."""


# --- summaries: the statistics of runs and ensembles, their verdicts ---

RUN_STATISTICS = by_statistic(lambda bound: bound)
RUN_SUMMARY = Record(
    {
        "preset": Text(100),
        "steps": STEP,
        "stopped_after": Maybe(STEP),
        "wall_s": Maybe(Number(0)),
        "trajectory": Maybe(MANIFEST_JSON.fields["trajectory"]),
        "segments": Maybe(MANIFEST_JSON.fields["segments"]),
        "statistics": Record(
            other=Record(
                {
                    "run": RUN_STATISTICS,
                    "published_seed0": RUN_STATISTICS,
                    "maps_against_published_seed0": Record(
                        other=Record(
                            {"max_abs_difference": Number(0), "entries_that_differ": Number(0, 1)},
                            required=("max_abs_difference", "entries_that_differ"),
                            other=None,
                        ),
                        keys=STEP_KEY,
                    ),
                },
                required=("run",),
                other=None,
            ),
            keys=MODEL_KEY,
        ),
        "verdict": REPORT_JSON.fields["summary"],
        "judged": Items(Record({k: Maybe(Text()) for k in ("id", "verdict", "measured", "expected")})),
    },
    required=("preset", "steps", "statistics", "verdict"),
)
"""One run of a summary file (`summary.summarise_run`): what it measured, beside the published run, and its verdicts."""


ENSEMBLE_SUMMARY = Record(
    {"ensemble": ENSEMBLE_JSON, "members": Record(other=RUN_SUMMARY, keys=r"member-\d{1,2}"), "note": Text()},
    required=("ensemble", "members"),
    other=None,
)
"""An ensemble of a summary file (`summary.summarise_ensemble`): its spread and each finished member's summary."""

TOGETHER_SUMMARY = Record(
    {
        "bundles": Text(1000),
        "command": Text(),
        "files": Record(other=Text(64, "[0-9a-f]{64}")),
        "verdict": REPORT_JSON.fields["summary"],
        "judged": RUN_SUMMARY.fields["judged"],
    },
    required=("bundles", "files", "verdict", "judged"),
)
"""The runs' kept bundles judged as one set (`summary --together`): the folder, each file's sha256, the verdicts."""

SUMMARY_JSON = Record(
    {"what": Text(), "runs": Record(other=Either((RUN_SUMMARY, ENSEMBLE_SUMMARY))), "together": TOGETHER_SUMMARY},
    required=("runs",),
)
"""`summary`'s output (expected/measured/*.json): runs already in it are kept when others are added."""

# --- a report's figures ---

FIGURES_JSON = Record(
    {
        "figures": Items(
            Record({"file": Text(256, r"[^/\\]+"), "title": Text(), "caption": Text()}, required=("file",))
        ),
        "inputs": Items(Text(64)),
    },
    required=("figures",),
)
"""A report's figures/figures.json: each figure's file, title and caption, and the sha256 of the bundles drawn
(none listed: drawn from unknown bundles)."""


# The measurement files of bench/results/ that the docs quote (docs.bench): every figure finite and in range,
# the machine and command plain text (they go into Markdown as they are), so a damaged file is refused.
_PLAIN = r"[^<>\x00-\x1f`]*"  # no markup, no control characters, no code fence
_SECONDS = Number(1e-6, 1e7)  # a measured time: more than nothing, less than four months
_DATE = Text(10, r"\d{4}-\d{2}-\d{2}")
_COMMIT = Maybe(Text(40, r"[0-9a-f]{7,40}"))
_LOAD = Items(Number(0, 1e4), max_len=3, min_len=3)
_WHERE = {"date": _DATE, "machine": Text(500, _PLAIN, 1), "command": Text(2000, _PLAIN, 1), "git_commit": _COMMIT}
BENCH_MEASURED = Record({**_WHERE, "load_average": _LOAD}, required=("date", "machine", "command", "load_average"))
BENCH_VERIFY_JSON = Record(
    {
        "measured": BENCH_MEASURED,
        "verify_s": _SECONDS,
        "runs": Number(1, 10_000, integer=True),
        "windows": Number(0, 4096, integer=True),
        "verify_with_windows_s": _SECONDS,
        "census_keys": Number(1, 1e9, integer=True),
        "census_s": _SECONDS,
        "census_baseline_s": _SECONDS,
        "census_speedup": Number(0, 1e9),
    },
    required=("measured", "verify_s", "runs", "windows", "verify_with_windows_s", "census_keys", "census_s"),
)
"""bench/results/verify.json (`bench verify`)."""
BENCH_TRAIN_JSON = Record(
    {
        "measured": BENCH_MEASURED,
        "preset": Text(100, "|".join(PRESET_NAMES)),
        "steps": Number(1, MAX_STEP, integer=True),
        "repeats": Number(1, 10_000, integer=True),
        "variants": Record(
            other=Record(
                {
                    "baseline_steps_per_s": Number(0, 1e9),
                    "harness_steps_per_s": Number(1e-9, 1e9),
                    "ratio": Number(0, 1e9),
                    "identical_losses": Flag(),
                    "matmul_rate_share": Number(0, 1e3),
                    "matmul_gflop_per_step": Number(0, 1e9),
                }
            ),
            max_len=100,
        ),
    },
    required=("measured", "preset", "steps", "variants"),
)
"""bench/results/train-*.json (`bench train`)."""
SUITE_JSON = Record(
    {
        **_WHERE,
        "outcomes": Record(other=Number(0, 1e6, integer=True), max_len=20),
        "exit_status": Number(0, 255, integer=True),
        "wall_s": _SECONDS,
        "load_average": _LOAD,
    },
    required=("outcomes", "wall_s", "command", "machine", "date", "load_average"),
)
"""bench/results/suite.json (the whole suite's record, ATTNGEOM_SUITE_JSON)."""
