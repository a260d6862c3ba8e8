"""What each quoted statistic is across the measured trajectories of the same training.

A quoted number of kind "statistic" (expected.KINDS) is a statistic of one trajectory, the author's;
another trajectory of the same training, on other hardware or one float32 ulp away, gives another
value. This module gathers every trajectory of the paper's seed-0 training the package has measured:

- each run of every summary file in expected/measured/ (an ensemble's members one by one; a file
  that lands there later is read as it is, with no change here; other kinds of file are passed over),
- the author's own telemetry reruns (`fetch.TELEMETRY_BUNDLES`: maps only, so their statistics at
  each telemetry step),
- and the rerun being judged, when verify judges one of that training,

and, for each claim, shows its statistic on each trajectory measured at the claim's step: their
number, spread and where the quoted value stands (`robustness.spread`), or that none is measured there.
A comparison between models is evaluated by its own claim function on every pairing of the
models' trajectories, at the quoted step and at every later-than-first step at which each model has
one (a trajectory stopped there ends there). The verdicts are not touched: this says what a reader
may conclude from the judged numbers. A trajectory kept in two files counts twice: keep each one in
one file (a summary of a continued run replaces its stopped one under the same run name). Bundles a
summary keeps beside it (`summary --together`) add no trajectory of their own when judged: the summary
holds them.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from attngeom.base import json_rules, schema_results
from attngeom.base.files import shown
from attngeom.base.train_config import PRESETS
from attngeom.base.variants import PUBLISHED, model_of, published_run
from attngeom.bundles.layout import BundleModel, attn_file, load_telemetry
from attngeom.judgement.claims import CLAIM_FUNCTIONS
from attngeom.judgement.expected import EXPECTED_DIR
from attngeom.judgement.judge import Judgement, accepted, judgement_for, models_needed, passes
from attngeom.judgement.robustness import spread, summary
from attngeom.measures.table import TABLE, by_step, checkpoint_labels

MEASURED_DIR = EXPECTED_DIR / "measured"
PAPER_STEPS = PRESETS["paper"].steps
# The checkpoints a claim is about, as the claims count them: the first (0, before any update) and the last.
CHECKPOINT_STEP = {"first": 0, "last": PAPER_STEPS}
COMPARED_AT = "last"  # a comparison between models compares their trained models: at the last checkpoint


class NotMeasured(KeyError):
    """A statistic a trajectory does not record at the step asked."""


@dataclass(frozen=True)
class Trajectory:
    """One measured trajectory of one model: its name, the schedule's length and what it recorded, as
    `table.by_step` writes it (per-step statistics by telemetry step, `final` when it ran the whole schedule)."""

    name: str
    variant: str
    steps: int
    recorded: dict[str, dict]

    def values_at(self, step: int) -> dict[str, float]:
        """The table's statistics at `step` (counted as the claims count checkpoints): the per-step statistic
        each equals at its checkpoint, a last-checkpoint one at any step (a run stopped there ends
        there), and the final model's, at the schedule's end."""
        out = {}
        for key, s in TABLE.items():
            by_key = self.recorded.get(s.per_step or "", {})
            labels = dict(zip(checkpoint_labels(sorted(map(int, by_key)), self.steps), sorted(map(int, by_key))))
            if step in labels and (s.checkpoint == "last" or step == CHECKPOINT_STEP["first"]):
                out[key] = by_key[str(labels[step])]
        for key, v in self.recorded.get(
            "final", {}
        ).items():  # a statistic the table no longer has is quoted by no claim
            if key in TABLE and step == (CHECKPOINT_STEP["first"] if TABLE[key].checkpoint == "first" else self.steps):
                out[key] = v
        return out


def judged_runs(runs: dict[str, dict]) -> Iterator[tuple[str, dict]]:
    """Each run a summary file's `runs` keeps, an ensemble's members one by one: (who, its summary), `who`
    the run's name, or "<ensemble> member-<m>"."""
    for name, run in runs.items():
        if "members" in run:
            yield from ((f"{name} {label}", one) for label, one in run["members"].items())
        else:
            yield name, run


def from_summary(doc: dict, where: str) -> list[Trajectory]:
    """The seed-0 paper trajectories a summary file (schema_results.SUMMARY_JSON) keeps, an ensemble's members one by one."""
    out = []
    for who, run in judged_runs(doc["runs"]):
        for model, entry in run["statistics"].items():
            variant, seed = model_of(model)
            if published_run(run["preset"], seed, variant):
                out.append(Trajectory(f"{where}: {who}", variant, run["steps"], entry["run"]))
    return out


def _summaries(folder: Path | None) -> Iterator[tuple[Path, dict]]:
    """Each summary file in `folder` (default MEASURED_DIR) and its document: those with `runs`; others, such
    as fidelity records, are passed over. A summary that breaks its schema is an InputError."""
    for path in sorted(Path(folder or MEASURED_DIR).glob("*.json")):
        doc = json_rules.read_json(path)
        if isinstance(doc, dict) and "runs" in doc:
            json_rules.check(doc, schema_results.SUMMARY_JSON, shown(path))
            yield path, doc


def read_measured(folder: Path | None = None) -> tuple[list[Trajectory], list[Path]]:
    """Every trajectory of the summary files in `folder` (default MEASURED_DIR), and the files read."""
    out, read = [], []
    for path, doc in _summaries(folder):
        out += from_summary(doc, path.name)
        read.append(path)
    return out, read


def kept_bundles(folder: Path | None = None) -> set[str]:
    """The sha256 of each file of the bundles a summary in `folder` keeps beside it (`summary --together`):
    bundles whose trajectories the summary holds already, so that judging them adds none a second time."""
    return {sha for _, doc in _summaries(folder) for sha in doc.get("together", {}).get("files", {}).values()}


def telemetry_reruns(root: Path, names: tuple[str, ...]) -> tuple[list[Trajectory], list[Path]]:
    """The author's telemetry reruns in the bundle folders `names` under `root` (fetch.fetch_bundles), and their files."""
    models = [
        load_telemetry(root / name, v) for name in names for v in PUBLISHED if attn_file(root / name, v, 0).is_file()
    ]
    return [of_model(m, f"the author's rerun {m.files['attn'].parent.name}") for m in models], [
        p for m in models for p in m.files.values()
    ]


def of_model(model: BundleModel, name: str, final: bool = False) -> Trajectory:
    """A model's trajectory (`final`: it ran its whole schedule, so its final model's statistics count)."""
    return Trajectory(name, model.variant, int(model.cfg.get("STEPS") or PAPER_STEPS), by_step(model, final=final))


def statistic_key(entry: dict) -> str | None:
    """The table's statistic a claim quotes (`Statistic.claim`), None when it quotes none (the companion's quality gap)."""
    extra = {k: v for k, v in entry["args"].items() if k != "model"}
    return next((key for key, s in TABLE.items() if s.claim == (entry["function"], extra)), None)


def statistic_spread(
    entry: dict, judged: object, trajectories: list[Trajectory], band: Judgement | None = None
) -> dict:
    """A statistic claim on every trajectory of its model measured at its step: the values, their spread and
    where the quoted value stands, how many the quote's own judgement accepts, and the bundles' judged value.
    With `band` (the claim's rerun band, `judge.judgement_for`), whether each value and the judged one lie
    inside it: the band a reviewer's rerun is judged with, against every trajectory measured."""
    key, model = statistic_key(entry), entry["args"].get("model")
    out = {"kind": "statistic", "model": model, "statistic": key, "quoted": entry["value"], "judged": judged}
    if key is None:
        return out | {"step": None, "values": [], "none": "not a statistic of a model's maps: no trajectory records it"}
    step = CHECKPOINT_STEP[TABLE[key].checkpoint]
    values = [
        {"trajectory": t.name, "value": v}
        for t in trajectories
        if t.variant == model and (v := t.values_at(step).get(key)) is not None
    ]
    out |= {"step": step, "values": values}
    if not values:
        return out | {"none": f"no trajectory of {model} measured at step {step:,}"}
    quote = Judgement(entry["value"], entry["comparison"], entry["tolerance"], entry["reason"])
    out |= {
        "spread": spread([v["value"] for v in values], entry["value"]),
        "within_quote": sum(passes(v["value"], quote) for v in values),
        "quote_interval": accepted(quote),
    }
    if band is None:
        return out
    for v in values:
        v["in_rerun_band"] = passes(v["value"], band)
    covered = {
        "value": band.value,
        "comparison": band.comparison,
        "tolerance": band.tolerance,
        "interval": accepted(band),
    }
    return out | {
        "rerun_band": covered
        | {
            "covers": sum(v["in_rerun_band"] for v in values),
            "judged_inside": judged is not None and passes(judged, band),
        }
    }


class _Values(dict):
    """One trajectory's statistics at one step as a model entry of results.json, for a claim function;
    a statistic it does not hold raises NotMeasured, and each one read is added to `read`."""

    def __init__(self, values: dict, read: set) -> None:
        super().__init__(values)
        self.read = read

    def __getitem__(self, key):
        if key not in self:
            raise NotMeasured(key)
        self.read.add(key)
        return super().__getitem__(key)


def comparison_at(entry: dict, step: int, trajectories: list[Trajectory]) -> dict:
    """A comparison evaluated by its claim function on every pairing of its models' trajectories measured at
    `step`: how many pairings it holds on, and per model the range of each statistic it read."""
    models = models_needed(entry)
    at = {m: [v for t in trajectories if t.variant == m and (v := t.values_at(step))] for m in models}
    held = pairings = 0
    read: dict[str, set] = {m: set() for m in models}
    used: dict[str, set] = {m: set() for m in models}
    for combo in itertools.product(*(range(len(at[m])) for m in models)):
        keys = {m: set() for m in models}
        try:
            holds = CLAIM_FUNCTIONS[entry["function"]](
                {"models": {m: _Values(at[m][i], keys[m]) for m, i in zip(models, combo)}}, **entry["args"]
            )
        except NotMeasured:
            continue
        pairings, held = pairings + 1, held + bool(holds)
        for m, i in zip(models, combo):
            read[m] |= keys[m]
            used[m].add(i)
    ranges = {m: {k: summary([at[m][i][k] for i in sorted(used[m])]) for k in sorted(read[m])} for m in models}
    return {"step": step, "pairings": pairings, "held": held, "measured": {m: len(at[m]) for m in models}} | (
        {"ranges": ranges} if pairings else {}
    )


def comparison_spread(entry: dict, judged: object, trajectories: list[Trajectory]) -> dict:
    """A comparison at its quoted step and at each later-than-first step where every model it compares has a
    measured trajectory (shown only where some pairing was measured)."""
    models, quoted = models_needed(entry), CHECKPOINT_STEP[COMPARED_AT]
    per_step = {s.per_step for s in TABLE.values() if s.per_step is not None}
    steps = {
        s
        for t in trajectories
        for name in per_step
        for s in checkpoint_labels(sorted(map(int, t.recorded.get(name, {}))), t.steps)
        if s > CHECKPOINT_STEP["first"]
    }
    rows = [comparison_at(entry, s, trajectories) for s in sorted(steps - {quoted}, reverse=True)]
    return {
        "kind": "comparison",
        "models": models,
        "quoted": entry["value"],
        "judged": judged,
        "step": quoted,
        "steps": [comparison_at(entry, quoted, trajectories), *(r for r in rows if r["pairings"])],
    }


def rerun_band(entry: dict, rerun: dict[str, dict]) -> Judgement | None:
    """The band a rerun's value of a statistic claim is judged with (rerun.json), None where it has none."""
    band = judgement_for(entry, "rerun", rerun)
    return band if isinstance(band, Judgement) else None


def section(
    claims: list[dict], rows: list[dict], trajectories: list[Trajectory], sources: list[str], rerun: dict[str, dict]
) -> dict:
    """report.json's `trajectories`: every statistic and comparison of `claims` (expected/claims.json's entries)
    beside the measured trajectories; `rows`: the judged rows (their measured values are shown beside);
    `sources`: where the trajectories were read; `rerun`: rerun.json's bands (`expected.load_rerun`)."""
    judged = {r["id"]: r["measured_value"] for r in rows}
    build = {
        "statistic": lambda e, j, t: statistic_spread(e, j, t, rerun_band(e, rerun)),
        "comparison": comparison_spread,
    }
    return {
        "sources": sources,
        "trajectories": sorted({t.name for t in trajectories}),
        "claims": {
            e["id"]: build[e["kind"]](e, judged.get(e["id"]), trajectories) for e in claims if e["kind"] in build
        },
    }


def reached(section_: dict, stop: int) -> dict:
    """The section (`section`) of a run stopped after step `stop`: only what is measured at the steps it
    reached, so that nothing of a step it never trained stands beside it."""
    kept = {}
    for cid, one in section_["claims"].items():
        if one["kind"] == "statistic" and one["step"] is not None and one["step"] <= stop:
            kept[cid] = one
        elif one["kind"] == "comparison" and (steps := [r for r in one["steps"] if r["step"] <= stop]):
            kept[cid] = {**one, "steps": steps}
    return {**section_, "claims": kept}
