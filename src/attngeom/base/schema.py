"""One schema per JSON file kind the package reads as input: bundles, the expected files, run folders,
ensembles and Kaggle runs. The rules are `json_rules`'; what the package writes and reads back (reports,
summaries, figures, measurements) is checked by `schema_results`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from attngeom.base.json_rules import MAX_JSON_BYTES, Either, Flag, Items, Maybe, Number, Record, Spec, Text
from attngeom.base.train_config import PRESET_NAMES
from attngeom.base.variants import VARIANTS_TABLE

MAX_KAGGLE_SESSION_S = 12 * 3600  # Kaggle's longest GPU session (`kaggle --time-limit`)
MAX_MEMBERS = 64  # the most members an ensemble has (`rerun --members K`: from 2)
MEMBERS_MODES = ("together", "sequential")  # how an ensemble's members train (`rerun --members-mode`)
TIERS = ("published", "rerun")  # the tolerances a claim is judged with: the published value's, or a rerun's band

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

VALUE = Either((Number(), Flag(), Text(), Items(Either((Number(), Text())), max_len=1000)))
COMPARISON = Text(16)
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
                    "value": VALUE,
                    "comparison": COMPARISON,
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
                    "value": VALUE,
                    "comparison": COMPARISON,
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


STEP = Number(0, MAX_STEP, integer=True)
COUNT = Number(0, integer=True)
MANIFEST_JSON = Record(
    {
        "completed": Flag(),
        "config": Record(
            {
                "preset": Text(100),
                "variants": Items(Text(100), max_len=100),
                "seeds": Items(Number(0, 2**31 - 1, integer=True)),  # `--seeds`: any number of options.seed
                "train": Record({"steps": STEP, "stop_after": Maybe(STEP)}, required=("steps",)),
            },
            required=("preset", "variants", "seeds", "train"),  # what a resume and a summary read of every run
        ),
        "files": Record(other=Text(64), max_len=100_000),
        "stopped_after": Maybe(STEP),
        "stopped_by": Maybe(Text(32)),  # training.local_run.TIME_LIMIT, or none: the stop was the plan
        "windows": Maybe(Number(1, 4096, integer=True)),  # `--windows`: 1 to rerun.MAX_WINDOWS (256)
        "preflight": Maybe(Record({"verdict": Text(16), "steps": Maybe(STEP)})),
        "trajectory": Record(),  # training.trajectory.stamp: compared whole on --resume
        "segments": Items(  # one per process that trained the run (RunFolder.begin_segment)
            Record({"from_steps": Record(other=Maybe(STEP)), "to_steps": Record(other=Maybe(STEP))}),
            max_len=100_000,
        ),
        "error": Text(MAX_JSON_BYTES),  # an exception's message: any length (an XLA error can dump pages)
        "wall_s": Maybe(Number(0)),
    },
    required=("completed", "config"),
)
"""A run folder's manifest.json: the facts the package acts on are checked, the rest is provenance."""


def spread(value: Spec, ids: bool = True) -> Record:
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


# --- the statistics of runs and ensembles (table.by_step), bounded by their laws ---

MAX_KEYS = 1 << 16  # the longest window a map may have (a paper window has 128 keys)
STATISTIC_VALUE = {
    # a row's winner is one of its keys: each head has 1 to T distinct winners, and so has their mean
    "distinct_winners": Number(1, MAX_KEYS),
    # a row renormalised over its n keys has an entropy in [0, log n]; divided by log n, in [0, 1]
    "mean_norm_entropy": Number(0, 1),
    "validation_loss": Number(0),  # a cross-entropy: non-negative, without an upper bound
}
"""The per-step statistics a summary keeps (`table.by_step`), each within what its definition allows."""
STEP_KEY = r"\d{1,10}"
MODEL_KEY = "(" + "|".join(v.name for v in VARIANTS_TABLE) + r")_s\d{1,10}"


def by_statistic(value: Callable[[Spec], Spec]) -> Record:
    """name -> step -> `value(the statistic's bound)`, and `final` -> table statistic -> `value(any number)`."""
    steps = {name: Record(other=value(bound), keys=STEP_KEY) for name, bound in STATISTIC_VALUE.items()}
    return Record({**steps, "final": Record(other=value(Number()), max_len=1000)}, other=None)


ENSEMBLE_JSON = Record(
    {
        "what": Text(),
        "members": Number(2, MAX_MEMBERS, integer=True),
        "members_mode": Maybe(Text(16, "|".join(MEMBERS_MODES))),  # kept on --resume (ensemble.members_mode)
        "config": replace(MANIFEST_JSON.fields["config"], required=()),  # a plan: checked whole where it is made
        "member_runs": Record(other=Record({"state": Text(32)}, required=("state",)), keys=r"\d{1,2}"),
        "statistics": Record(other=by_statistic(spread), keys=MODEL_KEY),
    },
    required=("members", "config"),
)
"""An ensemble's ensemble.json: its plan, its members' states and the spread of what they measured
(model -> statistic -> step -> members' values and their spread)."""

# --- Kaggle runs ---

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
