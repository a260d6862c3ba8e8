"""`rerun --members K`: an ensemble of K trajectories of one configuration, and its spread.

A rerun on other hardware is another trajectory of the same training: the kernel variants
amplify float32 round-off. The ensemble samples those trajectories on one machine. Member 0 is
the plain rerun; member m >= 1 starts from the same initial parameters moved by one float32 ulp
with signs drawn from m (`training.train.perturb`). Everything else is the rerun's: the batches,
schedule, telemetry steps, windows, `--stop-after`, `--resume`, locks and manifests.

    ENS/ensemble.json        the plan (members, configuration) and the spread of what has finished
    ENS/member-<m>/          one rerun folder per member: bundles, manifest, log, report

Members train one after another, each judged by verify into its own report, and ensemble.json is
rewritten after each one, so that a stopped ensemble keeps what it finished; or, with
`--members-mode together` (the default on a GPU), all at once, one vmapped step per variant and seed
(`training.together`), each then judged alone as well; `--resume ENS` starts
the members not yet begun and continues the unfinished ones (and, once every member is complete and
stopped early, carries all of them on to the full schedule).

The summary holds, per model (`<variant>_s<seed>`), statistic and step, every finished member's
value with their mean, standard deviation, min and max, the published value, whether it lies in the
members' range and how many standard deviations it lies from their mean. The statistics are those
`summary` keeps of a run (distinct winners, entropy, validation loss), plus the table's statistics
of the final model (`final`) for members that ran the whole schedule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from attngeom.base import fetch, json_rules, schema
from attngeom.base.errors import InputError
from attngeom.base.files import remove_temporaries, sha256_file, shown, write_json_atomic
from attngeom.base.variants import model_key, model_of, published_run
from attngeom.bundles.layout import list_bundles, load_model
from attngeom.judgement.robustness import spread
from attngeom.measures.table import by_step, published_model
from attngeom.training import local_run, runs
from attngeom.training.trajectory import mismatch, perturbation

SUMMARY = "ensemble.json"


def member_dir(ensemble: Path, member: int) -> Path:
    """The run folder of one member."""
    return Path(ensemble) / f"member-{member}"


def is_ensemble(path: Path) -> bool:
    """Whether `path` is an ensemble folder (it holds ensemble.json)."""
    return (Path(path) / SUMMARY).is_file()


def read(path: Path) -> dict:
    """An ensemble's ensemble.json, checked against its schema."""
    return json_rules.read_json(Path(path) / SUMMARY, schema.ENSEMBLE_JSON)


def member_statistics(run_dir: Path, manifest: dict) -> dict[str, dict[str, dict[str, float]]]:
    """One finished member's statistics per model: by name and step, plus `final` when it ran the whole schedule."""
    out = {}
    listing = list_bundles(run_dir)
    for seed in manifest["config"]["seeds"]:
        folders = listing.folders(seed)
        for variant in manifest["config"]["variants"]:
            model = load_model(folders[variant], variant, seed)
            out[model_key(variant, seed)] = by_step(model, final=manifest.get("stopped_after") is None)
    return out


def summarise(ensemble: Path, plan: dict, folders: dict[str, Path], known: dict | None = None) -> dict:
    """ensemble.json: the plan, each member's state and verdict, and the spread of the finished members.

    `known` keeps each finished member's statistics between calls (by folder and stopping step), so
    that rewriting the summary after every member measures each member once."""
    known = {} if known is None else known
    members, finished, bundles, stops = {}, {}, {}, {}
    for m in range(plan["members"]):
        path = member_dir(ensemble, m)
        state, manifest = member_state(path)
        if manifest is None:
            members[str(m)] = {"state": state}
            continue
        check_member(path, m, plan, manifest)
        stops[m] = manifest["config"].get("train", {}).get("stop_after")
        done = state != "unfinished"
        members[str(m)] = {
            "state": "complete" if done else state,
            "stopped_after": manifest.get("stopped_after"),
            "wall_s": manifest.get("wall_s"),
            "verify_exit": manifest.get("verify_exit"),
        }
        if done:
            same = bundles.setdefault(_bundle_hashes(path), m)
            if same != m:
                raise InputError(
                    f"{shown(path)}: the same bundles as member {same}'s: one trajectory counted twice; "
                    "delete the member's folder and resume the ensemble to train it"
                )
            key = (str(path), manifest.get("stopped_after"))
            finished[m] = known[key] = known.get(key) or member_statistics(path, manifest)
    check_stops(ensemble, plan, stops)
    stats: dict[str, dict] = {}
    for m, by_model in finished.items():
        for model, by_name in by_model.items():
            for name, values in by_name.items():
                for step, v in values.items():
                    stats.setdefault(model, {}).setdefault(name, {}).setdefault(step, {})[m] = v
    out = {}
    for model, by_name in stats.items():
        variant, seed = model_of(model)
        comparable = published_run(plan["config"]["preset"], seed, variant) and variant in folders
        ref = published_model(folders[variant], variant)[1] if comparable else {}
        out[model] = {
            name: {
                step: {"member_ids": sorted(by_member)}
                | spread([by_member[m] for m in sorted(by_member)], ref.get(name, {}).get(step))
                for step, by_member in members_by_step.items()
            }
            for name, members_by_step in by_name.items()
        }
    return {**plan, "member_runs": members, "statistics": out}


def write_summary(ensemble: Path, plan: dict, folders: dict[str, Path], known: dict) -> dict:
    """Recompute and write ensemble.json from the members' folders (`summarise`)."""
    doc = summarise(ensemble, plan, folders, known)
    write_json_atomic(Path(ensemble) / SUMMARY, doc)
    return doc


def new_plan(opts: local_run.RerunOptions) -> dict:
    """The plan of a new ensemble, checked like a rerun's."""
    base = local_run.new_plan(opts)
    return {
        "what": f"{opts.members} trajectories of one configuration: member 0 the plain rerun, member m >= 1 "
        "its initial parameters moved one float32 ulp with signs from m",
        "members": opts.members,
        "config": base.manifest_config(),
    }


def together_mode(members: list[int]) -> str:
    """The stamp's `members_mode` of members trained together in one vmapped step (`trajectory.stamp`):
    the group, since the round-off of a vmapped step may depend on how many it holds."""
    return "together: members " + ", ".join(map(str, members))


def members_mode(opts: local_run.RerunOptions, platform: str, recorded: str | None = None) -> str:
    """How the members train, decided once: `--members-mode`, by default together on a GPU and one after
    another on a CPU (`platform`), where `bench train --members` measures that as faster. A resumed
    ensemble keeps the mode it `recorded`: none given takes it, another is an error (its members'
    trajectories would mix)."""
    if recorded is not None and opts.members_mode not in (None, recorded):
        raise InputError(
            f"--members-mode {opts.members_mode}: this ensemble was trained {recorded}; resume it so, or start a new one"
        )
    return opts.members_mode or recorded or ("sequential" if platform == "cpu" else "together")


def check_time_limit(opts: local_run.RerunOptions, ours: tuple[int, ...]) -> None:
    """A time limit stops one training: members trained together stop at one step, and so does a lone
    member; members trained one after another would each stop somewhere else (InputError)."""
    if opts.time_limit is not None and opts.members_mode == "sequential" and len(ours) > 1:
        raise InputError(
            "--time-limit: only for members trained together (--members-mode together) or one member a process "
            "(--member-ids M)"
        )


def run(
    opts: local_run.RerunOptions,
    train_and_judge: Callable[[list[tuple[local_run.RerunOptions, local_run.Plan]]], int],
) -> int:
    """Train (or carry on) the members with `train_and_judge([(opts, plan), ...])` (the rerun command's):
    one member per call, or all of them in one call when they train together; then summarise. The
    device is prepared once, before the mode is chosen on it. The exit status is the worst of the
    complete members' verifications, those of earlier calls included."""
    platform = local_run.prepare_device()
    if opts.resume:
        plan = {k: v for k, v in read(opts.resume).items() if k in ("what", "members", "config", "members_mode")}
        opts = replace(opts, members_mode=members_mode(opts, platform, plan.get("members_mode")))
        plan["members_mode"] = opts.members_mode
    else:
        opts = replace(opts, members_mode=members_mode(opts, platform))
        plan = {**new_plan(opts), "members_mode": opts.members_mode}
    ours, at_once = chosen_members(opts, plan["members"]), opts.members_mode == "together"
    check_time_limit(opts, ours)
    # a new ensemble's folder is claimed once every option is found good
    ensemble = opts.resume or runs.new_run_dir(opts.out, f"{plan['config']['preset']}-ensemble{opts.members}")
    base = local_run.Plan.from_manifest(plan["config"], Path(ensemble) / SUMMARY)
    if opts.resume:
        settle(ensemble, base, ours)
    folders, known = list_bundles(fetch.fetch_bundles()).folders(), {}
    doc = write_summary(ensemble, plan, folders, known)
    print(f"ensemble folder: {shown(ensemble)}")
    states = [member_state(member_dir(ensemble, m))[0] for m in range(plan["members"])]
    carry_on = all(states[m] == "stopped" for m in ours)  # another process's members are its own to carry on
    jobs = [
        (
            replace(
                opts,
                out=member_dir(ensemble, m),
                resume=None if state == "not started" else member_dir(ensemble, m),
            ),
            replace(base, cfg=replace(base.cfg, member=m)),
        )
        for m, state in enumerate(states)
        if m in ours and not (state == "complete" or (state == "stopped" and not carry_on))
    ]
    status = 0
    for group in ([jobs] if jobs else []) if at_once else [[job] for job in jobs]:
        members = ", ".join(str(p.cfg.member) for _, p in group)
        print(
            f"members {members} of {plan['members']}, trained together"
            if at_once
            else f"member {members} of {plan['members']}"
        )
        try:
            status = max(status, train_and_judge(group))
        finally:
            doc = write_summary(ensemble, plan, folders, known)  # what finished is kept, whatever stops the next member
    done = [r for r in doc["member_runs"].values() if r["state"] == "complete"]
    print(f"ensemble: {len(done)} of {plan['members']} members complete: {shown(Path(ensemble) / SUMMARY)}")
    return max([status, *(r.get("verify_exit") or 0 for r in done)])  # members judged before this call count too


def chosen_members(opts: local_run.RerunOptions, members: int) -> tuple[int, ...]:
    """The members this process trains: `--member-ids` (the others are another process's, say one per
    GPU, trained into the same ensemble folder), else all of them."""
    if opts.member_ids is None:
        return tuple(range(members))
    outside = [m for m in opts.member_ids if m >= members]
    if outside:
        raise InputError(f"--member-ids: member {outside[0]} is not one of the ensemble's 0 to {members - 1}")
    return tuple(sorted(set(opts.member_ids)))


def settle(ensemble: Path, plan: local_run.Plan, members: tuple[int, ...]) -> None:
    """Before a resume: the ensemble's leftovers of a killed writer go, and the checkpoints of the
    `members` resumed that were trained together and that a kill caught mid-commit are completed or
    discarded (`runs.settle_group`); the other members' are left to the process that trains them."""
    remove_temporaries(ensemble, recursive=False)
    for seed in plan.seeds:
        for variant in plan.variants:
            paths = [runs.checkpoint_path(member_dir(ensemble, m), variant, seed) for m in members]
            done = runs.settle_group(paths, plan.cfg.steps)
            if done:
                print(f"{variant} seed {seed}: {done}")


def check_member(path: Path, member: int, plan: dict, manifest: dict) -> None:
    """A member's run is its slot's and the plan's, or InputError: its own member number (in its
    configuration and its trajectory's stamp, with that member's perturbation), the plan's configuration
    otherwise (its stop is checked with the others', `check_stops`); so that a spread never mixes runs
    of other plans and a copied member never counts as a second trajectory."""
    config, want = manifest["config"], plan["config"]
    stamp = manifest.get("trajectory") or {}
    named = config.get("train", {}).get("member", 0), stamp.get("member", member)
    for other in named:
        if other != member:
            raise InputError(f"{shown(path)}: member {other}'s run in the place of member {member}")
    if stamp.get("perturbation", perturbation(member)) != perturbation(member):
        raise InputError(f"{shown(path)}: not member {member}'s perturbation ({stamp['perturbation']})")
    differs = mismatch(_without_member(want), _without_member(config))
    if differs:
        raise InputError(f"{shown(path)}: not a run of the ensemble's plan ({differs})")


def check_stops(ensemble: Path, plan: dict, stops: dict[int, int | None]) -> None:
    """The members' stops (`stops`: member -> its configuration's stop_after) are the plan's, none
    (carried on to the full schedule), or the one step a time limit stopped them all at (members
    trained together stop together); else InputError naming the member that stops elsewhere."""
    planned = plan["config"].get("train", {}).get("stop_after")
    other = {m: s for m, s in stops.items() if s not in (None, planned)}
    if other and (len(set(other.values())) > 1 or len(other) < len(stops)):
        m, stop = max(other.items())
        where = "runs the whole schedule" if planned is None else f"stops after step {planned}"
        apart = min(set(stops) - {m})
        raise InputError(
            f"{shown(member_dir(ensemble, m))}: stopped after step {stop}, where the ensemble's plan {where} "
            f"and member {apart} stops {'nowhere' if stops[apart] is None else f'after step {stops[apart]}'}"
        )


def _without_member(config: dict) -> dict:
    """A configuration without what differs between the members of one plan: the member and the stop."""
    train = {k: v for k, v in config.get("train", {}).items() if k not in ("member", "stop_after")}
    return {**config, "train": train}


def _bundle_hashes(path: Path) -> frozenset[str]:
    """The sha256 of a run's bundle files: two members with the same are one trajectory."""
    return frozenset(sha256_file(p) for p in sorted(Path(path).rglob("*.npz")) if runs.CHECKPOINTS not in p.parts)


def member_state(path: Path) -> tuple[str, dict | None]:
    """A member folder's state (not started, unfinished, stopped: complete and stopped early, or
    complete) and its manifest."""
    if not (path / runs.MANIFEST).is_file():
        return "not started", None
    manifest = runs.read_manifest(path / runs.MANIFEST)
    if manifest["completed"] is not True:
        return "unfinished", manifest
    return ("stopped" if manifest.get("stopped_after") is not None else "complete"), manifest
