"""`reproduce.sh rerun`: retrain the seed-0 runs on this machine (training.local_run), then judge them (verify).

The command layer joins the two, so that training never imports the judgement: the run folder
is opened (or reopened with --resume), the fidelity preflight runs on a GPU, the bundles are
trained and written, verify judges them with the rerun tolerances into `<run>/report`, and only
then is the run marked complete. The exit status is verify's. Kaggle and Docker are their own
commands (`kaggle run`, `docker run rerun`), which run this one on their machine.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import replace

from attngeom.base.errors import InputError
from attngeom.base.variants import PUBLISHED
from attngeom.jobs import ensemble
from attngeom.jobs.verify import run_verify
from attngeom.training import local_run, runs

PLANNED = ("preset", "out", "steps", "seeds", "variants", "lr", "stop_after", "windows", "members", "preflight")
"""The options that plan a run: a resume takes them from the run's manifest, so none may be given beside it."""


def judge(folder: runs.RunFolder, plan: local_run.Plan) -> tuple[int, dict]:
    """Verify the run's seed-0 bundles into `<run>/report`: verify's exit status and what the manifest records."""
    judged = tuple(v for v in PUBLISHED if v in plan.variants)
    if 0 not in plan.seeds or not judged:
        print(f"verification skipped: the claims are about seed 0 of {', '.join(PUBLISHED)}, not trained here")
        return 0, {}
    status = run_verify(folder.path, out=folder.path / runs.REPORT, variants=judged)  # the run's files say what it is
    return status, {"verify_exit": status}


def run(opts: local_run.RerunOptions) -> int:
    """One run, or an ensemble of them (`--members K`, or `--resume` of an ensemble folder)."""
    if opts.time_limit is not None and not opts.time_limit > 0:
        raise InputError("--time-limit: a positive number of seconds")
    if opts.resume is None:
        local_run.new_plan(opts)  # every option checked before the device starts or a folder is claimed
    else:
        fresh = local_run.RerunOptions()
        given = [name for name in PLANNED if getattr(opts, name) != getattr(fresh, name)]
        if given:
            flags = ", ".join("--" + name.replace("_", "-") for name in given)
            raise InputError(f"{flags}: a resumed run carries on as it was planned; give only --resume RUN there")
    opts = replace(opts, deadline=None if opts.time_limit is None else time.monotonic() + opts.time_limit)
    if opts.members is not None or (opts.resume and ensemble.is_ensemble(opts.resume)):
        return ensemble.run(opts, train_and_judge)
    for given, flag in ((opts.members_mode, "--members-mode"), (opts.member_ids, "--member-ids")):
        if given is not None:
            raise InputError(f"{flag}: only for an ensemble (--members K, or --resume of an ensemble folder)")
    local_run.prepare_device()
    return train_and_judge([(opts, None)])


def train_and_judge(jobs: list[tuple[local_run.RerunOptions, local_run.Plan | None]]) -> int:
    """Open (or reopen with --resume) each job's run folder, train them, verify each alone into its own
    folder and mark it complete; the exit status is the worst verification's.

    One job is a run (its plan from the options when None) or one ensemble member; several are ensemble
    members trained together (`training.together`). The device is prepared already (`prepare_device`).
    """
    opened: list[tuple[runs.RunFolder, local_run.Plan, object]] = []
    mode = "alone" if len(jobs) == 1 else ensemble.together_mode([p.cfg.member for _, p in jobs])
    try:
        for member_opts, member_plan in jobs:
            opened.append(local_run.open_folder(member_opts, member_plan, mode))
            print(f"run folder: {opened[-1][0].path}")
        folders, plans = [o[0] for o in opened], [o[1] for o in opened]
        if len({replace(p, cfg=replace(p.cfg, member=0)) for p in plans}) > 1:
            raise InputError("the members' runs differ in configuration; train them with --members-mode sequential")
        new = [f for (a, _), f in zip(jobs, folders) if not a.resume]
        if new:
            from attngeom.training.fidelity import FIDELITY_JSON, run_preflight

            run_preflight(new[0], plans[0].variants, jobs[0][0].preflight)  # once: the members share the device
            for folder in new[1:]:
                if (new[0].path / FIDELITY_JSON).is_file():
                    shutil.copy2(new[0].path / FIDELITY_JSON, folder.path / FIDELITY_JSON)
                folder.update(**{k: v for k, v in new[0].manifest.items() if k == "preflight"})
        members = tuple(p.cfg.member for p in plans)
        quiet, deadline = jobs[0][0].quiet, jobs[0][0].deadline
        cfg, walls = local_run.train_bundles(
            folders, plans[0].cfg, opened[0][2], plans[0].variants, plans[0].seeds, quiet, members, deadline
        )
        return max(
            _judge_and_finish(f, replace(p, cfg=replace(cfg, member=p.cfg.member)), w)
            for f, p, w in zip(folders, plans, walls)
        )
    except BaseException as exc:
        for folder, _, _ in opened:
            if not folder.manifest.get("completed"):
                folder.fail(exc)
        raise
    finally:
        for folder, _, _ in opened:
            folder.release()


def _judge_and_finish(folder: runs.RunFolder, plan: local_run.Plan, walls: dict) -> int:
    """Record the wall times, verify the trained run and mark it complete: verify's exit status."""
    folder.update(variant_wall_s=walls)
    status, verified = judge(folder, plan)
    local_run.finish(folder, plan, **verified)
    return status
