"""The output of a kernel that trained an ensemble (`kaggle run --members K`), pulled as a local ensemble.

The kernel leaves an ensemble folder (`ensemble.json`, `member-<m>/`, each member a rerun folder
judged on Kaggle into its own report). The pull checks that its plan is the run's (members, preset,
the kernel's variants and seed), that every member is complete, unchanged since its manifest and
made by this run's kernel, and then summarises it here (`ensemble.write_summary`, which also checks
each member against the plan and their stops against each other: `check_member`, `check_stops`),
so ensemble.json is this machine's reading of the members, not the kernel's. The folder is then
`<run>/outputs/<bundle>-s<seed>`, which `summary` and `bands` take as any local ensemble.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from attngeom.base import fetch
from attngeom.base.errors import InputError
from attngeom.base.files import shown
from attngeom.bundles.layout import list_bundles
from attngeom.jobs import ensemble

PLAN_KEYS = ("what", "members", "config", "members_mode")


def check_members(folder: Path, state: dict, kernel: dict, check_run: Callable[[Path, dict, dict], None]) -> dict:
    """The ensemble's plan, once it is found to be the run's and every member passes `check_run`; else InputError."""
    plan = {k: v for k, v in ensemble.read(folder).items() if k in PLAN_KEYS}
    config = plan["config"]
    got = (plan["members"], config["preset"], config["variants"], config["seeds"])
    want = (state["members"], state["preset"], kernel["variants"], [kernel["seed"]])
    if got != want:
        raise InputError(
            f"{folder}: an ensemble of {got[0]} members of {', '.join(got[2])} ({got[1]}, seeds {got[3]}), "
            f"where this run's kernel trains {want[0]} of {', '.join(want[2])} ({want[1]}, seed {want[3][0]})"
        )
    for m in range(plan["members"]):
        check_run(ensemble.member_dir(folder, m), state, kernel)
    return plan


def summarise(folder: Path, plan: dict) -> dict:
    """Write the ensemble's ensemble.json from its members, as a local ensemble's (`ensemble.write_summary`)."""
    return ensemble.write_summary(folder, plan, list_bundles(fetch.fetch_bundles()).folders(), {})


def judge(folders: list[Path]) -> int:
    """Each pulled ensemble's members and their verdicts (judged on Kaggle, each into its own report), and
    how to keep the spread; the exit status is the worst member's verification."""
    worst = 0
    for folder in folders:
        doc = ensemble.read(folder)
        for m, member in sorted(doc["member_runs"].items(), key=lambda item: int(item[0])):
            verdict = {0: "every claim holds", 1: "a claim fails", None: "not judged"}.get(member.get("verify_exit"))
            print(f"{shown(folder)} member {m}: {member['state']}, {verdict}", flush=True)
            worst = max(worst, member.get("verify_exit") or 0)
    listed = " ".join(shown(f) for f in folders)
    print(
        f"the spread of every statistic: ensemble.json in each; keep it with `./reproduce.sh summary {listed} --out FILE`"
    )
    return worst
