"""One schema per JSON file kind the package reads, with bounds, checked before anything is used.

JSON is parsed with limits (file size, nesting depth counted without recursion, digits of an
integer); a schema then checks types, ranges and finiteness of every field the package uses.
Every violation is an InputError naming the file, the place in it and the problem. The npz files
and the arrays they hold are checked by `arrays`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from attngeom.base.errors import InputError
from attngeom.base.train_config import PRESET_NAMES
from attngeom.base.variants import VARIANTS_TABLE

MAX_JSON_BYTES = 64 << 20
MAX_DEPTH = 64
MAX_KAGGLE_SESSION_S = 12 * 3600  # Kaggle's longest GPU session (`kaggle --time-limit`)
MAX_MEMBERS = 64  # the most members an ensemble has (`rerun --members K`: from 2)
MEMBERS_MODES = ("together", "sequential")  # how an ensemble's members train (`rerun --members-mode`)
TIERS = ("published", "rerun")  # the tolerances a claim is judged with: the published value's, or a rerun's band
MAX_INT_DIGITS = 19
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


# --- JSON ------------------------------------------------------------------------------------


def nesting_depth(text: str) -> int:
    """Deepest nesting of arrays and objects in a JSON text, counted without recursion."""
    codes = np.frombuffer(_STRING.sub("", text).encode("utf-8"), np.uint8)
    step = np.isin(codes, (ord("["), ord("{"))).astype(np.int64) - np.isin(codes, (ord("]"), ord("}")))
    return int(np.cumsum(step).max(initial=0))


def _int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(digits.lstrip('-'))} digits (at most {MAX_INT_DIGITS})")
    return int(digits)


def parse_json(text: str, where: str) -> object:
    """Parse JSON text within the limits; NaN and infinities parse as floats, for the schema to refuse."""
    if nesting_depth(text) > MAX_DEPTH:
        raise InputError(f"{where}: JSON nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(text, parse_int=_int)
    except ValueError as exc:  # JSONDecodeError is a ValueError, and so are _int's refusals
        raise InputError(f"{where}: not valid JSON ({exc})") from exc


def read_json(path: Path, spec: Spec | None = None, max_bytes: int = MAX_JSON_BYTES) -> object:
    """Read a JSON file within the limits and check it against `spec`."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            raw = f.read(max_bytes + 1)
    except FileNotFoundError as exc:
        raise InputError(f"{path}: missing file") from exc
    except OSError as exc:
        raise InputError(f"{path}: unreadable ({exc.strerror or exc})") from exc
    if len(raw) > max_bytes:
        raise InputError(f"{path}: larger than {max_bytes >> 20} MiB, not a file of this kind")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not valid JSON (not UTF-8: {exc.reason} at byte {exc.start})") from exc
    doc = parse_json(text, str(path))
    if spec is not None:
        check(doc, spec, str(path))
    return doc


# --- JSON schemas ------------------------------------------------------------------------------


class Spec:
    """A rule for one JSON value: `errors(value)` yields (place, problem) for what breaks it."""

    def errors(self, value: object, place: str):  # pragma: no cover - every rule overrides it
        raise NotImplementedError


@dataclass(frozen=True)
class Any_(Spec):
    def errors(self, value, place):
        return iter(())


@dataclass(frozen=True)
class Number(Spec):
    """A finite number in [lo, hi]; `integer` also refuses floats and booleans."""

    lo: float = -math.inf
    hi: float = math.inf
    integer: bool = False

    def errors(self, value, place):
        kinds = (int,) if self.integer else (int, float)
        if isinstance(value, bool) or not isinstance(value, kinds):
            yield place, f"{_kind(value)} where {'an integer' if self.integer else 'a number'} is due"
        elif not math.isfinite(value):
            yield place, f"{value} is not a finite number"
        elif not self.lo <= value <= self.hi:
            yield place, f"{value} is outside [{self.lo:g}, {self.hi:g}]"


MAX_TEXT = 10_000  # the longest free text a file holds (a summary's `what`, a run's `note`)


@dataclass(frozen=True)
class Text(Spec):
    """A string of `min_len` to `max_len` characters, matching `pattern` as a whole when one is given."""

    max_len: int = MAX_TEXT
    pattern: str = ""
    min_len: int = 0

    def errors(self, value, place):
        if not isinstance(value, str):
            yield place, f"{_kind(value)} where a string is due"
        elif not self.min_len <= len(value) <= self.max_len:
            yield place, f"a string of {len(value)} characters ({self.min_len} to {self.max_len})"
        elif self.pattern and not re.fullmatch(self.pattern, value):
            yield place, f"{value[:80]!r} does not match {self.pattern}"


@dataclass(frozen=True)
class Flag(Spec):
    def errors(self, value, place):
        if not isinstance(value, bool):
            yield place, f"{_kind(value)} where true or false is due"


@dataclass(frozen=True)
class Maybe(Spec):
    """null or `inner`."""

    inner: Spec

    def errors(self, value, place):
        return iter(()) if value is None else self.inner.errors(value, place)


@dataclass(frozen=True)
class Either(Spec):
    """Any of `options`."""

    options: tuple[Spec, ...]

    def errors(self, value, place):
        found = [list(o.errors(value, place)) for o in self.options]
        if any(not f for f in found):
            return iter(())
        return iter(max(found, key=lambda f: f[0][0].count(".") + f[0][0].count("[")))  # the option that got furthest


@dataclass(frozen=True)
class Items(Spec):
    """A list of `min_len` to `max_len` items, each `item`."""

    item: Spec
    max_len: int = 100_000
    min_len: int = 0

    def errors(self, value, place):
        if not isinstance(value, list):
            yield place, f"{_kind(value)} where a list is due"
        elif not self.min_len <= len(value) <= self.max_len:
            yield place, f"a list of {len(value)} items ({self.min_len} to {self.max_len})"
        else:
            for i, v in enumerate(value):
                yield from self.item.errors(v, f"{place}[{i}]")


@dataclass(frozen=True)
class Record(Spec):
    """An object with `fields` (those in `required` must be present); other keys are `other`."""

    fields: dict[str, Spec] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    other: Spec | None = Any_()
    max_len: int = 10_000
    keys: str = ""  # a pattern the other keys must match as a whole

    def errors(self, value, place):
        if not isinstance(value, dict):
            yield place, f"{_kind(value)} where an object is due"
            return
        if len(value) > self.max_len:
            yield place, f"an object of {len(value)} keys (at most {self.max_len})"
            return
        missing = [k for k in self.required if k not in value]
        if missing:
            yield place, f"missing key(s) {', '.join(missing)}"
        for key, v in value.items():
            spec = self.fields.get(key, self.other)
            if spec is None or (key not in self.fields and self.keys and not re.fullmatch(self.keys, key)):
                yield place, f"unexpected key {key[:80]!r}"
            else:
                yield from spec.errors(v, f"{place}.{key}" if place else key)


def _kind(value: object) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def check(doc: object, spec: Spec, where: str) -> None:
    """Raise InputError for the first place where `doc` breaks `spec`."""
    for place, problem in spec.errors(doc, ""):
        raise InputError(f"{where}: {place or 'the document'}: {problem}")


MAX_STEP = 10**9  # the largest training step any file may name
# b and eps are softplus(raw) = log(1 + e^raw) per layer and head: >= 0, and exactly 0 in float32 once
# raw < -104 (e^raw below the smallest float32); the fixed-scalar yat has b = 0. Never negative, never inf.
SOFTPLUS_GRID = Items(Items(Number(lo=0), max_len=4096), max_len=4096)
# A validation loss is a mean cross-entropy -log p, so it is >= 0 and, when finite, has no upper bound:
# an extreme but NaN-free loss is a valid measurement (training stops only on a non-finite one).
LOSS = Number(lo=0)
RUN_JSON = Record(
    {
        "runs": Items(
            Record(
                {
                    "variant": Text(100),
                    "seed": Number(0, 2**31 - 1, integer=True),  # options.seed: what nnx.Rngs and numpy accept
                    "best_val": Maybe(LOSS),  # null: stopped before its first evaluation
                    "b_learned": SOFTPLUS_GRID,
                    "eps_learned": SOFTPLUS_GRID,
                    "curve": Items(
                        Record({"step": Number(0, MAX_STEP, integer=True), "val": LOSS}, required=("step", "val")),
                        max_len=100_000,
                    ),
                },
                required=("variant", "seed", "best_val"),
            ),
            max_len=10_000,
        ),
        "cfg": Record({"STEPS": Maybe(Number(1, MAX_STEP, integer=True))}),
    },
    required=("runs", "cfg"),
)
"""`yat_attention.json` of a bundle folder: the run records and the training configuration."""

_VALUE = Either((Number(), Flag(), Text(), Items(Either((Number(), Text())), max_len=1000)))
_COMPARISON = Text(16)
CLAIMS_JSON = Record(
    {
        "claims": Items(
            Record(
                {
                    **{
                        k: Text()
                        for k in ("id", "claim", "quote", "source", "function", "unit", "reason", "tier", "kind")
                    },
                    "args": Record(other=Either((Number(), Text(), Flag()))),
                    "value": _VALUE,
                    "comparison": _COMPARISON,
                    "tolerance": Maybe(Number(0)),
                }
            ),
            max_len=10_000,
        )
    },
)
"""expected/claims.json: the quoted claims (the fields each entry must have are checked on loading)."""

RERUN_JSON = Record(
    {
        "claims": Record(
            other=Record(
                {
                    "value": _VALUE,
                    "comparison": _COMPARISON,
                    "tolerance": Maybe(Number(0)),
                    "reason": Text(),
                    "smoke": Flag(),
                    "truncated": Flag(),
                    "judged": Flag(),  # false: not judged on reruns, for the reason given
                    "measured": Items(  # a final-step band's full-length trajectories (`bands --final`)
                        Record(
                            {"trajectory": Text(), "value": Number(), "covered": Flag()},
                            required=("trajectory", "value", "covered"),
                            other=None,
                        ),
                        max_len=MAX_MEMBERS,
                    ),
                },
                required=("reason",),
                other=None,
            )
        ),
        "steps": Record(
            other=Record(
                other=Record(
                    {
                        **{k: Text() for k in ("statistic", "label", "unit")},
                        "separates": Items(Items(Text(100), min_len=2, max_len=2)),  # pairs the posts compare
                        "models": Record(
                            other=Record(
                                {
                                    "published": Number(),
                                    "tolerance": Number(0),
                                    "reason": Text(),
                                    "ensemble": Record(
                                        {
                                            "source": Text(),
                                            "members": Items(Number(), min_len=2, max_len=MAX_MEMBERS),
                                            **{k: Number() for k in ("mean", "std", "min", "max")},
                                        },
                                        required=("source", "members", "mean", "std", "min", "max"),
                                        other=None,
                                    ),
                                },
                                required=("published", "tolerance", "reason"),
                                other=None,
                            )
                        ),
                    },
                    required=("statistic", "label", "unit", "models"),
                    other=None,
                )
            )
        ),
    },
)
"""expected/rerun.json: the band each claim is judged with on a rerun."""


_STEP = Number(0, MAX_STEP, integer=True)
MANIFEST_JSON = Record(
    {
        "completed": Flag(),
        "config": Record(
            {
                "preset": Text(100),
                "variants": Items(Text(100), max_len=100),
                "seeds": Items(Number(0, 2**31 - 1, integer=True)),  # `--seeds`: any number of options.seed
                "train": Record({"steps": _STEP, "stop_after": Maybe(_STEP)}, required=("steps",)),
            },
            required=("preset", "variants", "seeds", "train"),  # what a resume and a summary read of every run
        ),
        "files": Record(other=Text(64), max_len=100_000),
        "stopped_after": Maybe(_STEP),
        "stopped_by": Maybe(Text(32)),  # training.local_run.TIME_LIMIT, or none: the stop was the plan
        "windows": Maybe(Number(1, 4096, integer=True)),  # `--windows`: 1 to rerun.MAX_WINDOWS (256)
        "preflight": Maybe(Record({"verdict": Text(16), "steps": Maybe(_STEP)})),
        "trajectory": Record(),  # training.trajectory.stamp: compared whole on --resume
        "segments": Items(  # one per process that trained the run (RunFolder.begin_segment)
            Record({"from_steps": Record(other=Maybe(_STEP)), "to_steps": Record(other=Maybe(_STEP))}),
            max_len=100_000,
        ),
        "error": Text(MAX_JSON_BYTES),  # an exception's message: any length (an XLA error can dump pages)
        "wall_s": Maybe(Number(0)),
    },
    required=("completed", "config"),
)
"""A run folder's manifest.json: the facts the package acts on are checked, the rest is provenance."""


def _spread(value: Spec, ids: bool = True) -> Record:
    """`robustness.spread` of members' values: with `ids`, the members it names (an ensemble's); the published
    (or quoted) value beside them, when there is one."""
    return Record(
        {
            **(
                {"member_ids": Items(Number(0, MAX_MEMBERS - 1, integer=True), min_len=1, max_len=MAX_MEMBERS)}
                if ids
                else {}
            ),
            "members": Items(value, min_len=1, max_len=100_000 if not ids else MAX_MEMBERS),
            **{k: value for k in ("mean", "min", "max", "published")},
            "std": Number(0),
            "published_inside": Flag(),
            "published_in_std": Maybe(Number()),
        },
        required=(*(("member_ids",) if ids else ()), "members", "mean", "std", "min", "max"),
        other=None,
    )


_COUNT = Number(0, integer=True)
_SUMMARY = Record({"n": _COUNT, **{k: Number() for k in ("mean", "min", "max")}, "std": Number(0)}, other=None)
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
                            "step": Maybe(_STEP),
                            "values": Items(
                                Record(
                                    {"trajectory": Text(), "value": Number(), "in_rerun_band": Flag()},
                                    required=("trajectory", "value"),
                                    other=None,
                                )
                            ),
                            "none": Text(),
                            "spread": _spread(Number(), ids=False),
                            "within_quote": _COUNT,
                            "quote_interval": Maybe(_INTERVAL),
                            "rerun_band": Record(
                                {
                                    "value": _VALUE,
                                    "comparison": _COMPARISON,
                                    "tolerance": Maybe(Number(0)),
                                    "interval": Maybe(_INTERVAL),
                                    "covers": _COUNT,
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
                            "step": _STEP,
                            "steps": Items(
                                Record(
                                    {
                                        "step": _STEP,
                                        "pairings": _COUNT,
                                        "held": _COUNT,
                                        "measured": Record(other=_COUNT),
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
                    other=Record({k: _COUNT for k in ("passed", "failed", "skipped")}, other=None), max_len=16
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

# --- summaries: the statistics of runs and ensembles (table.by_step), bounded by their laws ---

MAX_KEYS = 1 << 16  # the longest window a map may have (a paper window has 128 keys)
STATISTIC_VALUE = {
    # a row's winner is one of its keys: each head has 1 to T distinct winners, and so has their mean
    "distinct_winners": Number(1, MAX_KEYS),
    # a row renormalised over its n keys has an entropy in [0, log n]; divided by log n, in [0, 1]
    "mean_norm_entropy": Number(0, 1),
    "validation_loss": Number(0),  # a cross-entropy: non-negative, without an upper bound
}
"""The per-step statistics a summary keeps (`table.by_step`), each within what its definition allows."""
_STEP_KEY = r"\d{1,10}"
_MODEL_KEY = "(" + "|".join(v.name for v in VARIANTS_TABLE) + r")_s\d{1,10}"


def _by_statistic(value: Callable[[Spec], Spec]) -> Record:
    """name -> step -> `value(the statistic's bound)`, and `final` -> table statistic -> `value(any number)`."""
    steps = {name: Record(other=value(bound), keys=_STEP_KEY) for name, bound in STATISTIC_VALUE.items()}
    return Record({**steps, "final": Record(other=value(Number()), max_len=1000)}, other=None)


RUN_STATISTICS = _by_statistic(lambda bound: bound)
RUN_SUMMARY = Record(
    {
        "preset": Text(100),
        "steps": _STEP,
        "stopped_after": Maybe(_STEP),
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
                        keys=_STEP_KEY,
                    ),
                },
                required=("run",),
                other=None,
            ),
            keys=_MODEL_KEY,
        ),
        "verdict": REPORT_JSON.fields["summary"],
        "judged": Items(Record({k: Maybe(Text()) for k in ("id", "verdict", "measured", "expected")})),
    },
    required=("preset", "steps", "statistics", "verdict"),
)
"""One run of a summary file (`summary.summarise_run`): what it measured, beside the published run, and its verdicts."""


ENSEMBLE_JSON = Record(
    {
        "what": Text(),
        "members": Number(2, MAX_MEMBERS, integer=True),
        "members_mode": Maybe(Text(16, "|".join(MEMBERS_MODES))),  # kept on --resume (ensemble.members_mode)
        "config": replace(MANIFEST_JSON.fields["config"], required=()),  # a plan: checked whole where it is made
        "member_runs": Record(other=Record({"state": Text(32)}, required=("state",)), keys=r"\d{1,2}"),
        "statistics": Record(other=_by_statistic(_spread), keys=_MODEL_KEY),
    },
    required=("members", "config"),
)
"""An ensemble's ensemble.json: its plan, its members' states and the spread of what they measured
(model -> statistic -> step -> members' values and their spread)."""

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

_KAGGLE_NAME = "[A-Za-z0-9._-]+"
KAGGLE_USER = "[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"  # a Kaggle user name: no space, slash or control character
_KAGGLE_TIME = Maybe(Number(0))
KAGGLE_KERNEL_JSON = Record(
    {
        "bundle": Text(256, _KAGGLE_NAME),
        "seed": Number(0, 2**32 - 1, integer=True),
        "id": Text(512, rf"{KAGGLE_USER}/{_KAGGLE_NAME}"),
        "variants": Items(Text(64), max_len=64),
        "folder": Text(512, rf"kernels/{_KAGGLE_NAME}"),
        "state": Text(64, "[A-Z_]+"),
        "pushed": _KAGGLE_TIME,
        "finished": _KAGGLE_TIME,
        "version": Maybe(Number(1, 2**31 - 1, integer=True)),
        "url": Text(65536),
        "message": Maybe(Text(65536)),
        "estimated_s": Maybe(Number(0)),  # the session's estimated seconds (backends.kaggle_budget)
    },
    required=("bundle", "seed", "id", "variants", "folder", "state"),
    other=None,
)
"""One kernel of a Kaggle run's state file."""

KAGGLE_STATE_JSON = Record(
    {
        "username": Text(64, KAGGLE_USER, 1),
        "created": Text(65536),
        "run_id": Text(32, "[0-9a-f]{32}"),
        "preset": Text(64, "|".join(PRESET_NAMES)),
        "accelerator": Text(256, min_len=1),
        "timeout": Number(1, MAX_KAGGLE_SESSION_S, integer=True),
        "concurrency": Number(1, 1000, integer=True),
        "members": Maybe(Number(2, MAX_MEMBERS, integer=True)),  # each kernel an ensemble (`kaggle run --members`)
        "kernels": Items(KAGGLE_KERNEL_JSON, max_len=10_000, min_len=1),
    },
    required=("username", "created", "preset", "accelerator", "timeout", "concurrency", "kernels"),
    other=None,
)
"""`<run>/kaggle-state.json`: what a Kaggle run has recorded so far (backends.kaggle_state)."""


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
