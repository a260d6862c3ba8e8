"""`./reproduce.sh kaggle build|push|status|pull|run`: retrain the original bundles on Kaggle GPUs.

`run` builds one kernel per bundle and seed (`kaggle_kernel`), pushes them with the official
`kaggle` client (at most `--concurrency` at a time), polls until each finishes, pulls every
output into the run folder, checks each file's sha256 against the manifest the kernel wrote,
and judges the seed-0 bundles with the rerun tier of `verify`. Everything the later steps need
is recorded in `<run>/kaggle-state.json` as it happens, so `status` and `pull` resume from
another shell or after a crash. A pulled bundle is only ever added, never overwritten.
Every call to Kaggle goes through `kaggle_client`. Each run has an id that its kernels stamp
into their manifests, and status, logs and outputs are asked of the version that was pushed,
so a re-used kernel slug never hands back an older run's outputs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from attngeom.backends import kaggle_budget, kaggle_ensemble
from attngeom.backends.kaggle_client import (
    MAX_LISTED_OUTPUTS,
    KaggleUnavailable,
    SessionCapReached,
    check_gpu_quota,
    connect,
    download_output,
    kernel_log,
    kernel_status,
    push_kernel,
    username_of,
)
from attngeom.backends.kaggle_kernel import OUTPUT_DIR, build_kernel, definitions, source_archive
from attngeom.backends.kaggle_state import STATE_FILE, check_state, load_state, save_state
from attngeom.base.errors import InputError
from attngeom.base.variants import PUBLISHED
from attngeom.bundles.manifest import REPORT
from attngeom.training.runs import RUNS_DIR, new_run_dir, require_complete

if TYPE_CHECKING:  # importing the client authenticates; only `kaggle_client.connect` does it, on demand
    from kaggle.api.kaggle_api_extended import KaggleApi

DEFAULT_ACCELERATOR = "NvidiaTeslaT4"  # the "GPU T4 x2" machine; a run uses one GPU, an ensemble both
DEFAULT_TIMEOUT = 6 * 3600
WAITING = ("PUSHED", "QUEUED", "RUNNING", "NEW_SCRIPT", "CANCEL_REQUESTED")
FAILED = ("ERROR", "CANCEL_ACKNOWLEDGED")


# --- the run folder ---------------------------------------------------------------------------


def latest_run(runs: Path = RUNS_DIR) -> Path:
    """The newest run folder with a Kaggle state file."""
    found = sorted(p.parent for p in runs.glob(f"*/{STATE_FILE}"))
    if not found:
        raise InputError(f"no Kaggle run under {runs}/; pass --out DIR or start one with `./reproduce.sh kaggle run`")
    return found[-1]


def build(run: Path, username: str, seeds: list[int], bundles: list[str] | None, settings: dict) -> dict:
    """Write one kernel folder per bundle (default: all) and seed under `run/kernels`, and the state.

    The state is made and checked first (against the schema `load_state` reads it with, and, for an
    ensemble, against the session and the quota): a refused build writes nothing; one that fails while
    writing its kernels removes them."""
    defs = definitions()
    bundles = bundles or list(defs)
    unknown = [b for b in bundles if b not in defs]
    if unknown:
        raise InputError(f"unknown bundle '{unknown[0]}' (kernel definitions: {', '.join(defs)})")
    run_id = uuid.uuid4().hex
    kernels = [
        {
            "bundle": name,
            "seed": kernel_seed,
            "id": defs[name].kernel_id(username, kernel_seed),
            "variants": list(defs[name].variants),
            "folder": (Path("kernels") / defs[name].slug(kernel_seed)).as_posix(),
            "state": "BUILT",
        }
        for kernel_seed in seeds
        for name in bundles
    ]
    created = datetime.now(timezone.utc).isoformat(timespec="seconds")
    state = {"username": username, "created": created, "run_id": run_id, **settings, "kernels": kernels}
    check_state(state)
    if state.get("members"):
        kaggle_budget.estimate(state)  # before anything is written: a run that cannot fit is never started
    archive = source_archive()
    try:
        for kernel in kernels:
            build_kernel(
                defs[kernel["bundle"]],
                username,
                kernel["seed"],
                run / kernel["folder"],
                settings["preset"],
                archive,
                run_id,
                settings.get("members"),
            )
        save_state(run, state)
    except BaseException:
        shutil.rmtree(run / "kernels", ignore_errors=True)
        raise
    return state


# --- push, poll, pull -------------------------------------------------------------------------


def pushed_ref(kernel: dict) -> str:
    """`owner/slug/N`: the version this run pushed, so an older version's state or output is never read."""
    return f"{kernel['id']}/{kernel['version']}" if kernel.get("version") else kernel["id"]


def push(api: KaggleApi, run: Path, state: dict) -> bool:
    """Push built kernels while fewer than `concurrency` are waiting; False when Kaggle's session cap held one back."""
    todo = [k for k in state["kernels"] if k["state"] == "BUILT"]
    room = state["concurrency"] - sum(k["state"] in WAITING for k in state["kernels"])
    if not todo or room <= 0:
        return True
    left_s = check_gpu_quota(api)
    if state.get("members"):
        kaggle_budget.check_quota(state, todo[:room], left_s)
    for kernel in todo[:room]:
        try:
            version, url = push_kernel(
                api, kernel["id"], run / kernel["folder"], state["timeout"], state["accelerator"]
            )
        except SessionCapReached as exc:
            print(f"{exc} Waiting for one of the account's GPU sessions to end.", flush=True)
            return False
        kernel.update(state="PUSHED", pushed=time.time(), version=version, url=url)
        save_state(run, state)
        print(f"pushed {kernel['id']} (version {version}): {url}", flush=True)
    return True


def poll(api: KaggleApi, run: Path, state: dict) -> None:
    """Ask Kaggle for the state of every kernel still waiting; record it."""
    for kernel in state["kernels"]:
        if kernel["state"] not in WAITING:
            continue
        kernel["state"], message = kernel_status(api, pushed_ref(kernel))
        if message:
            kernel["message"] = message
        if kernel["state"] not in WAITING:
            kernel["finished"] = time.time()
    save_state(run, state)


def progress_line(state: dict, now: float) -> str:
    """Each kernel's state and the time since its push, on one line."""
    parts = []
    for k in state["kernels"]:
        elapsed = (k.get("finished") or now) - k["pushed"] if k.get("pushed") else None
        parts.append(
            f"{k['bundle']}-s{k['seed']} {k['state']}" + (f" {_duration(elapsed)}" if elapsed is not None else "")
        )
    return " | ".join(parts)


def report_failures(api: KaggleApi, run: Path, state: dict) -> None:
    """Raise one InputError naming each failed kernel, its failure message and its log's tail."""
    failed = [k for k in state["kernels"] if k["state"] in FAILED]
    if not failed:
        return
    lines = []
    for kernel in failed:
        log = kernel_log(api, pushed_ref(kernel))
        log_path = run / "logs" / f"{kernel['bundle']}-s{kernel['seed']}.log"
        log_path.parent.mkdir(exist_ok=True)
        log_path.write_text(log, encoding="utf-8")
        tail = " / ".join(line.strip() for line in log.strip().splitlines()[-3:])
        lines.append(
            f"{kernel['id']} ended in {kernel['state']}: {kernel.get('message') or 'no failure message'}"
            f" (log: {log_path}; last lines: {tail or 'empty'})"
        )
    raise InputError(
        "; ".join(lines) + f". Pulled bundles stay in {run}/outputs; once the cause is fixed, "
        f"`./reproduce.sh kaggle run --out {run}` pushes the failed kernels again"
    )


def check_output(folder: Path, state: dict, kernel: dict) -> dict | None:
    """The pulled folder, or each member of the pulled ensemble (`kaggle_ensemble.check_members`: its plan,
    returned), is complete, unchanged since its manifest, and made by this run's kernel."""
    if state.get("members"):
        return kaggle_ensemble.check_members(folder, state, kernel, check_run)
    check_run(folder, state, kernel)
    return None


def check_run(folder: Path, state: dict, kernel: dict) -> None:
    """One pulled run folder is complete, unchanged since its manifest, and made by this run's kernel.

    Identities only (sha256 of every file the kernel listed, the run id, bundle and seed it stamped):
    nothing here reads a measured value, so round-off on Kaggle's GPU cannot refuse a valid output;
    the bundles themselves are then read by the same rules as any other (`layout.load_model`).
    """
    stamp = require_complete(folder).get("kaggle")
    if not state.get("run_id"):  # a run started before kernels stamped their manifests
        return
    found = stamp.get("run_id") if isinstance(stamp, dict) else None
    if found != state["run_id"] or stamp.get("bundle") != kernel["bundle"] or stamp.get("seed") != kernel["seed"]:
        raise InputError(
            f"{folder}: made by another run (run id {found or 'none'}, this run's is {state['run_id']}): "
            "Kaggle served an older version's output"
        )


def pulled_root(dest: Path, state: dict) -> Path:
    """Where a pulled kernel's run lies: `dest/attngeom-run`, or `dest` itself for an ensemble (so that
    each bundle's ensemble folder has a name of its own for `summary`)."""
    return dest if state.get("members") else dest / OUTPUT_DIR


def pull_one(api: KaggleApi, run: Path, state: dict, kernel: dict) -> Path:
    """Download one finished kernel's output, check it against its manifest and run, move it to `run/outputs`
    (an ensemble's with its ensemble.json written here: `kaggle_ensemble.summarise`)."""
    dest = run / "outputs" / f"{kernel['bundle']}-s{kernel['seed']}"
    if dest.is_dir():
        try:
            check_output(pulled_root(dest, state), state, kernel)
            return dest  # a good bundle is never overwritten
        except InputError:
            (run / "rejected").mkdir(exist_ok=True)  # a damaged copy: set aside, not deleted
            os.replace(dest, run / "rejected" / f"{dest.name}-{int(time.time())}")
    incoming = run / ".incoming" / dest.name
    shutil.rmtree(incoming, ignore_errors=True)  # only ever an earlier download that failed its check
    listed = download_output(api, pushed_ref(kernel), incoming)
    try:
        plan = check_output(incoming / OUTPUT_DIR, state, kernel)
        if plan is not None:
            kaggle_ensemble.summarise(incoming / OUTPUT_DIR, plan)
    except InputError as exc:
        note = f" (Kaggle lists at most {MAX_LISTED_OUTPUTS} output files)" if len(listed) >= MAX_LISTED_OUTPUTS else ""
        raise InputError(
            f"{kernel['id']}: output rejected and kept in {incoming} for inspection: {exc}{note}; "
            f"pull again with `./reproduce.sh kaggle pull --out {run}`"
        ) from exc
    dest.parent.mkdir(exist_ok=True)
    os.replace(incoming / OUTPUT_DIR if state.get("members") else incoming, dest)
    shutil.rmtree(incoming, ignore_errors=True)  # what else Kaggle kept beside an ensemble
    return dest


def pull(api: KaggleApi, run: Path, state: dict) -> None:
    """Pull every finished kernel not pulled yet, and re-check those that were."""
    for kernel in state["kernels"]:
        if kernel["state"] in ("COMPLETE", "PULLED"):
            dest = pull_one(api, run, state, kernel)
            if kernel["state"] != "PULLED":
                kernel["state"] = "PULLED"
                save_state(run, state)
                print(f"pulled {kernel['id']} into {dest}", flush=True)


def judge(run: Path, state: dict) -> int:
    """Verify the seed-0 bundles with the rerun tier; the report goes to `run/report`. An ensemble's members
    were judged on Kaggle, each into its own report: their verdicts are shown (`kaggle_ensemble.judge`)."""
    if state.get("members"):
        return kaggle_ensemble.judge([run / "outputs" / f"{k['bundle']}-s{k['seed']}" for k in state["kernels"]])
    variants = tuple(v for v in PUBLISHED if any(k["seed"] == 0 and v in k["variants"] for k in state["kernels"]))
    if not variants:
        print("no seed-0 kernels in this run: the bundles are pulled and checked, nothing to judge", flush=True)
        return 0
    from attngeom.jobs.verify import run_verify

    return run_verify(run / "outputs", run / REPORT, variants=variants)  # the pulled manifests say what they are


def finish(api: KaggleApi, run: Path, state: dict) -> int:
    """Pull what finished; fail on failed or unfinished kernels; judge when everything is in."""
    pull(api, run, state)
    report_failures(api, run, state)
    pending = [k["id"] for k in state["kernels"] if k["state"] != "PULLED"]
    if pending:
        raise InputError(
            f"not finished yet: {', '.join(pending)}; run `./reproduce.sh kaggle run --out {run}` to push "
            f"and wait, or `kaggle pull --out {run}` later"
        )
    return judge(run, state)


def wait(api: KaggleApi, run: Path, state: dict, poll_s: float) -> None:
    """Push and poll, with backoff, until every kernel has finished or the time for all rounds passes."""
    start, interval = time.time(), poll_s
    rounds = -(-sum(k["state"] in WAITING + ("BUILT",) for k in state["kernels"]) // state["concurrency"])
    while True:
        push(api, run, state)
        poll(api, run, state)
        now = time.time()
        print(f"[{_duration(now - start)}] {progress_line(state, now)}", flush=True)
        if all(k["state"] not in WAITING + ("BUILT",) for k in state["kernels"]):
            return
        if now - start > state["timeout"] * rounds:
            raise InputError(
                f"timed out after {_duration(now - start)}; the kernels keep running on Kaggle: "
                f"`./reproduce.sh kaggle status --out {run}` and `kaggle pull --out {run}` pick them up later"
            )
        time.sleep(interval)
        interval = min(interval * 1.5, 10 * poll_s)


# --- the command line -------------------------------------------------------------------------


def _duration(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m // 60}h{m % 60:02d}m" if m >= 60 else f"{m}m{s:02d}s"


@dataclass(frozen=True)
class KaggleOptions:
    """What `kaggle` was asked (`commands/kaggle.py`)."""

    action: str
    out: Path | None = None  # the run folder
    seeds: tuple[int, ...] = (0,)
    kernels: tuple[str, ...] | None = None  # kernel definitions in kaggle/ (None: all)
    preset: str = "paper"
    members: int | None = None
    accelerator: str | None = None
    time_limit: int | None = None  # seconds a kernel may run
    concurrency: int | None = None
    poll: float = 30.0
    username: str | None = None


def main(args: KaggleOptions) -> int:
    """Start a new run (build, run) or continue the one named or the latest (push, status, pull, run)."""
    new = args.action in ("build", "run") and (
        args.action == "build" or args.out is None or not (args.out / STATE_FILE).exists()
    )
    run = args.out if args.out is not None or new else latest_run()
    overrides = {"accelerator": args.accelerator, "timeout": args.time_limit, "concurrency": args.concurrency}
    api = None if args.action == "build" and args.username else connect()
    if new:
        run = new_run_dir(run, "kaggle")
        settings = {
            "preset": args.preset,
            "accelerator": DEFAULT_ACCELERATOR,
            "timeout": kaggle_budget.MAX_SESSION_S if args.members else DEFAULT_TIMEOUT,
            "concurrency": 2,
        }
        settings.update({k: v for k, v in overrides.items() if v is not None})
        if args.members:
            settings["members"] = args.members
        kernels = list(args.kernels) if args.kernels else None
        try:
            state = build(run, args.username or username_of(api), sorted(args.seeds), kernels, settings)
        except BaseException:
            with contextlib.suppress(OSError):
                run.rmdir()  # the run folder it made, empty again: a refused build leaves nothing
            raise
        print(f"built {len(state['kernels'])} kernel(s) in {run}/kernels", flush=True)
        if args.action == "build":
            return 0
    else:
        state = load_state(run)
        if args.members not in (None, state.get("members")):
            raise InputError(f"--members {args.members}: {run} was built with {state.get('members') or 'no'} members")
        state.update({k: v for k, v in overrides.items() if v is not None})
        if args.action == "run":  # continuing a run retries the kernels that failed
            for kernel in state["kernels"]:
                if kernel["state"] in FAILED:
                    kernel.update(state="BUILT", pushed=None, finished=None, message=None)
    try:
        return act(api, run, state, args)
    except KaggleUnavailable as exc:
        raise InputError(
            f"{exc}; the run is saved: `./reproduce.sh kaggle status --out {run}` and "
            f"`kaggle pull --out {run}` continue it"
        ) from exc


def act(api: KaggleApi, run: Path, state: dict, args: KaggleOptions) -> int:
    """Push, report the status of, pull or run the kernels of `run`."""
    if args.action == "push":
        if not push(api, run, state):
            raise InputError(
                f"not every kernel is pushed: the account runs as many GPU sessions as Kaggle allows; "
                f"`./reproduce.sh kaggle run --out {run}` pushes the rest as sessions end"
            )
        return 0
    if args.action == "status":
        poll(api, run, state)
        print(progress_line(state, time.time()), flush=True)
        report_failures(api, run, state)
        return 0
    if args.action == "run":
        wait(api, run, state, args.poll)
    else:
        poll(api, run, state)
    return finish(api, run, state)
