"""What a folder of bundles is, read from the files themselves, and so how verify judges it.

The published bundles are recognised by their sha256. Anything else is a rerun: its run JSON's
`cfg` says whether it has the paper's configuration and, with `STOPPED_AFTER`, whether it was
stopped early; a run folder's `manifest.json` (in the folder, under it, or up to two folders
above) names its preset, its stop and its fidelity preflight. The kind decides the tier
(published values or rerun bands) and the scope (what the evidence can show, see judge.SCOPES).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from attngeom.base.errors import InputError
from attngeom.base.fetch import BUNDLE_BASE, PUBLISHED_BUNDLES, REGISTRY
from attngeom.base.train_config import PRESETS
from attngeom.bundles.layout import BundleModel, Listing
from attngeom.bundles.manifest import MANIFEST, read_manifest

# The paper preset's cfg, except the learning rate (per variant) and dropout: what makes a run the paper's
# (tests check that it is the published runs' cfg).
PUBLISHED_KIND = "published bundles"  # the evidence of the author's own bundles, every file pinned
PAPER_CFG = {k: v for k, v in PRESETS["paper"].original_cfg().items() if k not in ("LR", "DROP")}
PAPER_TELEMETRY = PRESETS["paper"].telemetry_steps()
PUBLISHED_SHA256 = frozenset(
    sha for url, sha in REGISTRY.items() if any(url.startswith(BUNDLE_BASE + name + "/") for name in PUBLISHED_BUNDLES)
)


SAME_TRAINING = ("paper rerun", "truncated paper run")
"""The kinds of evidence that are another trajectory of the published runs' training (trajectories.py)."""


@dataclass(frozen=True)
class Evidence:
    """What the bundles are and how they are judged."""

    kind: str  # "published bundles", "paper rerun", "truncated paper run", "smoke rerun", "rerun of another configuration"
    tier: str  # the tier this evidence calls for
    scope: str  # judge.SCOPES
    why: str  # what in the files says so
    stopped_after: int | None = None
    preflight: dict | None = None
    warnings: tuple[str, ...] = field(default_factory=tuple)
    steps: int | None = None  # the schedule's length (cfg STEPS): what a run stopped early did not reach

    def line(self) -> str:
        """One line: what was chosen and why."""
        return f"evidence: {self.kind} ({self.why}): judged with the {self.tier} tier, {SCOPE_WORDS[self.scope]}"


SCOPE_WORDS = {
    "all": "every claim",
    "smoke": "only the claims that hold at any size",
    "truncated": "the claims a run stopped early can show, and its statistics at the steps it reached",
}


def find_manifests(root: Path, listing: Listing | None = None) -> dict[Path, dict]:
    """The run manifests that describe `root`: those under it (from `listing`, its files searched once
    already, when given), else the nearest one up to two folders above."""
    below = listing.named(MANIFEST) if listing is not None else sorted(Path(root).rglob(MANIFEST))
    root = Path(root).resolve()
    if below:
        return {p: read_manifest(p) for p in below}
    for parent in (root.parent, root.parent.parent):
        if (parent / MANIFEST).is_file():
            return {parent / MANIFEST: read_manifest(parent / MANIFEST)}
    return {}


def _one(values: dict[str, object], what: str):
    distinct = set(map(json.dumps, values.values()))
    if len(distinct) > 1:
        listed = ", ".join(f"{k}: {v}" for k, v in values.items())
        raise InputError(f"these bundles mix runs of different {what} ({listed}); verify one run at a time")
    return next(iter(values.values()), None)


def _stop(models: dict[str, BundleModel], manifests: dict[Path, dict]) -> int | None:
    """The step a run stopped after: one value for every model and manifest, and `--stop-after`'s range
    (a step from 1 on; the rerun writes it to both places), else InputError."""
    stops = {f"{v} cfg STOPPED_AFTER": m.cfg.get("STOPPED_AFTER") for v, m in models.items()}
    stops |= {f"{p.parent.name}/{MANIFEST} stopped_after": d.get("stopped_after") for p, d in manifests.items()}
    stop = _one(stops, "stops")
    if stop is not None and (isinstance(stop, bool) or not isinstance(stop, int) or stop < 1):
        raise InputError(f"STOPPED_AFTER = {stop!r}: expected the last step trained, a positive integer")
    return stop


def _check_reached(models: dict[str, BundleModel], stop: int) -> None:
    """A run stopped after `stop` took its maps at exactly the paper's telemetry steps up to `stop`
    (step 0 always: before any update), so any other set of maps is not what such a run writes."""
    want = [s for s in PAPER_TELEMETRY if s <= stop]
    for v, m in models.items():
        if sorted(m.maps) != want:
            raise InputError(
                f"{m.files.get('attn', v)}: maps at steps {sorted(m.maps)}, but a run stopped after step {stop} "
                f"holds those at {want}"
            )


def describe(
    models: dict[str, BundleModel], root: Path, hashes: dict[Path, str], listing: Listing | None = None
) -> Evidence:
    """What the bundles are, from their sha256, their cfg and any run manifest beside them (`listing`:
    the folder's files, searched once already).

    Recognition reads identities, not measured values: the published files are those whose sha256 the
    registry pins; the paper's configuration is equality of the integer cfg fields the rerun copies
    from the paper preset (learning rate and dropout left out); so no round-off of a valid run can
    move it from one kind to another.
    """
    if hashes and set(hashes.values()) <= PUBLISHED_SHA256:
        return Evidence(PUBLISHED_KIND, "published", "all", "every file has the sha256 of the author's bundles")
    manifests = find_manifests(root, listing)
    stop = _stop(models, manifests)
    preflight = next((d["preflight"] for d in manifests.values() if isinstance(d.get("preflight"), dict)), None)
    errors = [f"{p}: the run recorded an error ({d['error']})" for p, d in manifests.items() if d.get("error")]
    cfg = _one({v: {k: m.cfg.get(k) for k in PAPER_CFG} for v, m in models.items()}, "configurations")
    presets = {f"{p.parent.name}/{MANIFEST}": d.get("config", {}).get("preset") for p, d in manifests.items()}
    preset = _one({k: v for k, v in presets.items() if v is not None}, "presets")
    from_manifest = f"{MANIFEST}: config.preset = {preset}; " if preset else ""
    steps = cfg.get("STEPS") if type(cfg.get("STEPS")) is int else None  # any cfg may be read: a number or none
    stopped = "" if stop is None else f"; stopped after step {stop:,}" + (f" of its {steps:,}" if steps else "")
    if cfg == PAPER_CFG and stop is not None:
        _check_reached(models, stop)
        why = f"{from_manifest}cfg has the paper's configuration{stopped}"
        return Evidence("truncated paper run", "rerun", "truncated", why, stop, preflight, tuple(errors), steps)
    if cfg == PAPER_CFG:
        why = f"{from_manifest}cfg has the paper's configuration; not the published files"
        return Evidence("paper rerun", "rerun", "all", why, None, preflight, tuple(errors), steps)
    differs = [f"{k} {cfg.get(k)}, not {want}" for k, want in PAPER_CFG.items() if cfg.get(k) != want]
    kind = "smoke rerun" if preset == "smoke" else "rerun of another configuration"
    why = (
        f"{from_manifest}cfg differs from the paper's ({'; '.join(differs[:3])}{'; ...' * (len(differs) > 3)}){stopped}"
    )
    return Evidence(kind, "rerun", "smoke", why, stop, preflight, tuple(errors), steps)
