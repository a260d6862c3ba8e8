"""`summary`: a rerun as a reviewer keeps it: a small JSON, and with `--together` its bundles beside it.

Reads each run folder's manifest, its bundles and the report verify wrote of it, and writes one
small JSON: what was run (command, commit, device, machine, versions, wall time over all segments, stop, the
trajectory's stamp and each segment a process trained: steps, machine, code generation, wall time), the
statistics at every telemetry and evaluation step it reached next to the published run's at the
same step (and, for a run that ran its whole schedule, the table's statistics of its final model),
how far its maps are from the published maps, and the verdicts it was given. An ensemble's summary
holds its spread and each finished member's summary, each member's bundles loaded once. With
`--together FOLDER`, the runs' bundles (not their windows) are kept in FOLDER and judged as one set
(`together`: the claims comparing models need them side by side). This is what
`expected/measured/` holds; no verdict reads it (verify shows its trajectories beside the quoted
statistics: trajectories.py).
"""

from __future__ import annotations

import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attngeom.base import blocks, fetch, json_rules, schema_results
from attngeom.base.errors import InputError
from attngeom.base.files import (
    REPO,
    apart,
    exclusive,
    is_temporary,
    remove_temporaries,
    replaced_folder,
    sha256_file,
    shown,
    write_json_atomic,
)
from attngeom.base.records import Report
from attngeom.base.variants import PUBLISHED, model_key, published_run
from attngeom.bundles.layout import BUNDLE_FILE, RUN_JSON, BundleModel, attn_file, geom_file, list_bundles, load_model
from attngeom.bundles.manifest import MANIFEST, REPORT, read_manifest
from attngeom.jobs import ensemble
from attngeom.jobs.verify import judge_bundles
from attngeom.judgement.trajectories import judged_runs
from attngeom.measures.table import by_step, published_model
from attngeom.report import outputs


def shown_command(command: str) -> str:
    """The manifest's command as a reader types it: `./reproduce.sh ...`, without the run's own --out folder,
    and with the folder a resumed run carried on named RUN (no path of the machine it ran on)."""
    words = shlex.split(command)
    if words[:3] == ["python", "-m", "attngeom"]:
        words = ["./reproduce.sh", *words[3:]]
    kept, skip = [], None
    for w in words:
        if skip is not None:
            kept += skip
            skip = None
        elif w in ("--out", "--resume"):
            skip = [] if w == "--out" else [w, "RUN"]
        elif w.startswith("--resume="):
            kept.append("--resume=RUN")
        elif not w.startswith("--out="):
            kept.append(w)
    return shlex.join(kept)


def map_differences(run: BundleModel, published: BundleModel) -> dict[str, dict[str, float]]:
    """Per telemetry step both hold: largest |difference| of the float16 maps and the share of entries that differ."""
    out = {}
    for step in sorted(set(run.maps) & set(published.maps)):
        if run.maps[step].shape != published.maps[step].shape:
            raise InputError(
                f"{shown(run.files['attn'])}: step{step} has shape {run.maps[step].shape}, the published {published.maps[step].shape}"
            )
        diff = np.abs(run.maps[step].astype(np.float32) - published.maps[step].astype(np.float32))
        out[str(step)] = {"max_abs_difference": float(diff.max()), "entries_that_differ": float((diff > 0).mean())}
    return out


def _report(run_dir: Path, models: list[BundleModel]) -> Report:
    path = run_dir / REPORT / "report.json"
    if not path.is_file():
        raise InputError(
            f"{shown(path)}: no report; judge the run first: ./reproduce.sh --bundles {shown(run_dir)} --out {shown(path.parent)}"
        )
    doc = json_rules.read_json(path, schema_results.REPORT_JSON)
    judged = set(doc["provenance"]["inputs"].values())
    for m in models:
        if not {sha256_file(m.files["attn"]), sha256_file(m.files["geom"])} <= judged:
            raise InputError(
                f"{shown(path)}: a report of other bundles than {shown(run_dir)}'s; judge the run again into it"
            )
    return doc


def summarise_run(run_dir: Path, published: dict[str, Path]) -> dict:
    """One run folder's summary (see the module docstring); `published` maps variants to their published folders."""
    manifest = read_manifest(run_dir / MANIFEST)
    if manifest["completed"] is not True:
        raise InputError(
            f"{shown(run_dir)}: the run has not completed (carry it on with ./reproduce.sh rerun --resume)"
        )
    seeds, variants = manifest["config"]["seeds"], manifest["config"]["variants"]
    models, out = [], {}
    listing = list_bundles(run_dir)
    for seed in seeds:
        folders = listing.folders(seed)
        for variant in variants:
            if variant not in folders:
                raise InputError(f"{shown(run_dir)}: no geom_{variant}_s{seed}.npz although the manifest names it")
            model = load_model(folders[variant], variant, seed)
            models.append(model)
            entry = {"run": by_step(model, final=manifest.get("stopped_after") is None)}
            if published_run(manifest["config"]["preset"], seed, variant) and variant in published:
                reference, published_stats = published_model(published[variant], variant)
                entry["published_seed0"] = {  # at the steps the run reached
                    name: {s: v for s, v in by_step.items() if s in entry["run"][name]}
                    for name, by_step in published_stats.items()
                }
                entry["maps_against_published_seed0"] = map_differences(model, reference)
            out[model_key(variant, seed)] = entry
    report = _report(run_dir, models)
    return _run_record(manifest) | {"statistics": out} | _verdicts(report)


def _verdicts(report: Report) -> dict:
    """Who judged, the tier, the verdict and each judged claim's verdict, measured and expected value."""
    return {
        "judged_by": {k: report["provenance"].get(k) for k in ("git_commit", "machine")} | {"tier": report["tier"]},
        "verdict": report["summary"],
        "judged": [
            {k: c.get(k) for k in ("id", "verdict", "measured", "expected")}
            for c in report["claims"]
            if c["verdict"] != "SKIP"
        ],
    }


def run_wall_s(manifest: dict) -> float | None:
    """A run's wall time: over all its segments when each recorded its own (a resumed run's manifest
    `wall_s` is its last process's), else the manifest's."""
    walls = [seg.get("wall_s") for seg in manifest.get("segments") or []]
    return round(sum(walls), 3) if walls and None not in walls else manifest.get("wall_s")


def _run_record(manifest: dict) -> dict:
    """What a run's manifest says of how it was run."""
    return {
        "command": shown_command(manifest.get("command", "")),
        "git_commit": manifest.get("git_commit"),
        "device": manifest.get("device"),
        "platform": manifest.get("platform"),
        "machine": manifest.get("machine"),
        "versions": manifest.get("versions"),
        "environment": manifest.get("environment"),
        "matmul_precision": manifest.get("matmul_precision"),
        "preset": manifest["config"]["preset"],
        "steps": manifest["config"]["train"]["steps"],
        "stopped_after": manifest.get("stopped_after"),
        "wall_s": run_wall_s(manifest),
        "variant_wall_s": manifest.get("variant_wall_s"),
        "trajectory": manifest.get("trajectory"),
        "segments": manifest.get("segments"),
    }


def summarise_ensemble(path: Path, published: dict[str, Path]) -> dict:
    """An ensemble folder's summary: its spread (ensemble.json, recomputed) and each complete member's summary."""
    plan = {k: v for k, v in ensemble.read(path).items() if k in ("what", "members", "config")}
    dirs = [ensemble.member_dir(path, m) for m in range(plan["members"])]
    members = {
        d.name: summarise_run(d, published) for d in dirs if ensemble.member_state(d)[0] in ("complete", "stopped")
    }
    if not members:
        raise InputError(f"{shown(path)}: no member of the ensemble has completed (carry it on with --resume)")
    known = {  # each member's statistics as its summary measured them: the spread loads no member again
        (str(path / name), s["stopped_after"]): {model: e["run"] for model, e in s["statistics"].items()}
        for name, s in members.items()
    }
    return {"ensemble": ensemble.summarise(path, plan, published, known), "members": members}


def training_of(entry: dict) -> str:
    """What a summary's run or ensemble trained, in words: a run of a name replaces a kept one only when
    both trained this (a continued run its stopped segment, a run summarised again), never another
    training that happens to share its folder's name (the members 1 of two ensembles, say)."""
    if "ensemble" in entry:
        c = entry["ensemble"]["config"]
        models = [f"{v}_s{s}" for v in c.get("variants", []) for s in c.get("seeds", [])]
        return f"an ensemble of {entry['ensemble']['members']} of {', '.join(models)} ({c.get('preset')})"
    member = (entry.get("trajectory") or {}).get("member") or 0
    one = f", member {member}" if member else ""
    return f"{', '.join(sorted(entry['statistics']))}{one} ({entry['preset']}, {entry['steps']:,} steps)"


def _no_other_training(kept: dict, runs: dict, out: Path) -> None:
    """Refuse a run that would replace a kept run of its name but of another training (`training_of`)."""
    for name, run in runs.items():
        if name in kept and training_of(kept[name]) != training_of(run):
            raise InputError(
                f"{shown(out)}: already keeps {name!r}, a run of {training_of(kept[name])}, where this one is of "
                f"{training_of(run)}; a run replaces only one of its own training: give its folder another name "
                "or write another file"
            )


def keep_bundles(run_dir: Path, folder: Path) -> None:
    """Copy what a reviewer keeps of a run's models into `folder`, in the run's own layout: each model's
    attn_* and geom_* files and its bundle folder's yat_attention.json (not the windows files, which
    only add windows to the report)."""
    models = list_bundles(run_dir).models
    for source in set(models.values()):
        (folder / source.relative_to(run_dir)).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / RUN_JSON, folder / source.relative_to(run_dir) / RUN_JSON)
    for (variant, seed), source in models.items():
        for path in (attn_file(source, variant, seed), geom_file(source, variant, seed)):
            shutil.copyfile(path, folder / path.relative_to(run_dir))


def judge_together(folder: Path, runs: dict[str, Path]) -> dict:
    """Keep each run's bundles in folder/<run name>/ (other runs already there are kept) and judge the
    folder as one set of bundles, every variant it holds: the claims that compare models (the inversion,
    the census) need them side by side, which no single-variant run's report has.
    Returns the judgement as `./reproduce.sh --bundles FOLDER --variants ...` gives it, with each
    file's sha256, so that the kept folder can be judged again and compared."""
    try:
        with replaced_folder(folder, set(runs)) as new:
            for name, run_dir in runs.items():
                (new / name).mkdir()
                keep_bundles(run_dir, new / name)
            listing = list_bundles(new)
            variants = tuple(v for v in PUBLISHED if v in listing.folders(0)) + tuple(
                sorted(set(listing.folders(0)) - set(PUBLISHED))
            )
            if not variants:
                raise InputError(f"{shown(folder)}: no seed-0 bundle to judge together")
            report, _ = judge_bundles(new, variants=variants)
            files = {str(p.relative_to(new)): sha256_file(p) for p in listing.files if p.is_file()}
    except OSError as exc:
        raise InputError(f"{shown(folder)}: cannot write the bundles there ({exc.strerror or exc})") from exc
    where = folder.resolve()
    named = str(where.relative_to(REPO)) if where.is_relative_to(REPO) else shown(folder)
    return {
        "bundles": named,
        "command": f"./reproduce.sh --bundles {shlex.quote(named)} --variants {','.join(variants)}",
        "files": files,
    } | _verdicts(report)


@dataclass(frozen=True)
class SummaryOptions:
    """What `summary` was asked (`commands/summary.py`)."""

    runs: tuple[Path, ...]
    out: Path
    what: str = ""
    note: str = ""
    together: Path | None = None


def run_summary(args: SummaryOptions) -> int:
    """`summary`: write the summary of the given run folders into --out (other runs already there are kept).

    Every refusal comes before any work: an output inside, above or equal to a run it reads, a folder
    for --together that holds anything but the bundles of earlier --together calls, text the summary's
    schema would refuse; but a run named as a kept run of another training (`training_of`) is found
    once the file is read under its lock, and refused there, before anything is written. The outputs are read, changed and written under a lock (`files.exclusive`), so
    that two summaries writing one file or folder take turns and each keeps its runs; the file is
    checked against its schema before it replaces the old one."""
    names = [run_dir.resolve().name for run_dir in args.runs]
    if len(set(names)) < len(names):
        raise InputError(f"two run folders with the same name among {', '.join(map(shown, args.runs))}")
    for text, flag in ((args.what, "--what"), (args.note, "--note")):
        if len(text) > json_rules.MAX_TEXT:
            raise InputError(f"{flag}: at most {json_rules.MAX_TEXT:,} characters, got {len(text):,}")
    apart(args.out, args.runs, "the summary")
    if args.together is not None:
        if any(ensemble.is_ensemble(run_dir) for run_dir in args.runs):
            raise InputError("--together keeps runs, not ensembles: summarise the ensemble without it")
        apart(args.together, args.runs, "the bundles kept together")
        if args.together.resolve() == args.out.resolve().parent or args.out.resolve().is_relative_to(
            args.together.resolve()
        ):
            raise InputError(f"{shown(args.out)}: inside the --together folder; write the summary beside it")
        kept_together(args.together)
        outputs.check_out(args.together, "the bundles")
    published = list_bundles(fetch.fetch_bundles()).folders()
    with blocks.one_blas_thread():
        runs = {
            name: summarise_ensemble(run_dir, published)
            if ensemble.is_ensemble(run_dir)
            else summarise_run(run_dir, published)
            for name, run_dir in zip(names, args.runs)
        }
    if args.note:
        for run in runs.values():
            run["note"] = args.note
    with exclusive(args.out, *([args.together] if args.together is not None else [])):
        doc = (
            json_rules.read_json(args.out, schema_results.SUMMARY_JSON)
            if args.out.exists()
            else {"what": "", "runs": {}}
        )
        _no_other_training(doc["runs"], runs, args.out)
        doc["what"] = args.what or doc.get("what", "")
        doc["runs"] = {**doc["runs"], **runs}
        if args.together is not None:
            kept_together(args.together)  # again, under the lock
            remove_temporaries(args.together.parent, recursive=False, of=args.together.name)
            doc["together"] = judge_together(args.together, dict(zip(names, args.runs)))
        json_rules.check(doc, schema_results.SUMMARY_JSON, shown(args.out))
        write_json_atomic(args.out, doc)
    for who, one in [*judged_runs(runs), *([("together", doc["together"])] if args.together else [])]:
        v = one["verdict"]
        print(f"{who}: {v['passed']} passed, {v['failed']} failed, {v['skipped']} skipped: {v['verdict']}")
    print(f"summary: {shown(args.out)}")
    return 0


def kept_together(folder: Path) -> None:
    """Refuse a --together folder this command does not own: one that holds anything but what earlier
    --together calls kept (run folders of bundle folders of bundle files), a killed call's leftovers aside."""
    if not folder.exists():
        return
    if not folder.is_dir():
        raise InputError(f"{shown(folder)}: exists and is not a folder; name a folder for the bundles kept together")
    for path in sorted(folder.rglob("*")):
        parts = path.relative_to(folder).parts
        if any(is_temporary(part) for part in parts):
            continue
        kept = (len(parts) <= 2 and path.is_dir() and not path.is_symlink()) or (
            len(parts) == 3 and path.is_file() and BUNDLE_FILE.fullmatch(parts[-1])
        )
        if not kept:
            raise InputError(
                f"{shown(folder)}: holds {shown(path.relative_to(folder))}, which no --together wrote; "
                "name a new or empty folder for the bundles kept together"
            )
