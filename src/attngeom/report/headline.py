"""What a reviewer reads first, in plain text: the verdict with its counts by kind of claim, why each
failure fails, what was skipped and why, and what a rerun leaves to the default job.

The terminal, REPORT.md and index.html say the same sentences; each quotes them its own way.
"""

from __future__ import annotations

from collections import Counter

from attngeom.base.records import ClaimRow, Report


def first_upper(text: str) -> str:
    """`text` as a sentence's opening: its first letter upper-case, the rest as it was (never `capitalize`,
    which would lower the ids and names inside it)."""
    return text[:1].upper() + text[1:]


KIND_PLURAL = {
    "theorem": "theorems",
    "setup": "setup facts",
    "statistic": "statistics",
    "comparison": "comparisons",
    "mathematics": "claims of mathematics",
}
"""Each kind of claim (expected.KINDS) as the headline counts it."""
ABOUT_MODELS = ("theorem", "setup", "statistic", "comparison")  # the kinds of claims that read a trained model


def _steps(n: object) -> str:
    return f"{n:,}" if type(n) is int else "?"


def verdict_sentence(report: Report) -> str:
    """The verdict and its counts; for a run stopped before its schedule's end, the step it reached."""
    s = report["summary"]
    judged = s["passed"] + s["failed"]
    counts = f"{s['passed']} of {judged} judged claims pass, {s['failed']} fail" + (
        f", {s['skipped']} skipped" if s["skipped"] else ""
    )
    stop = (report.get("evidence") or {}).get("stopped_after")
    if stop is None:
        return f"{s['verdict']}: {counts}."
    steps = report["evidence"].get("steps")
    return (
        f"{s['verdict']} so far: the run stopped after step {_steps(stop)}"
        + (f" of {_steps(steps)}" if steps else "")
        + f", so only what it can show is judged: {counts}."
    )


def kinds_sentence(report: Report) -> str | None:
    """How each kind of claim fared: those about the trained models first, then the toy's mathematics."""
    kinds = report["summary"].get("by_kind") or {}
    if not kinds:
        return None

    def part(kind: str) -> str:
        c = kinds[kind]
        judged = c["passed"] + c["failed"]
        return f"{KIND_PLURAL[kind]} {c['passed']} of {judged}" if judged else f"{KIND_PLURAL[kind]} none judged"

    about = [k for k in ABOUT_MODELS if k in kinds]
    parts = []
    if about:
        failing = sum(kinds[k]["failed"] for k in about)
        lead = (
            "every judged claim about the trained models passes"
            if not failing
            else f"{failing} judged claim{'s' * (failing != 1)} about the trained models fail{'s' * (failing == 1)}"
        )
        parts.append(f"{lead} ({', '.join(map(part, about))})")
    if "mathematics" in kinds:
        m = kinds["mathematics"]
        parts.append(
            f"of the claims of mathematics (the posts' toy, no model), {m['passed']} pass and {m['failed']} fail"
        )
    return first_upper("; ".join(parts)) + "."


def failure_lines(claims: list[ClaimRow]) -> list[tuple[str, str]]:
    """Each failing claim and why, in one sentence from the data: (id, sentence)."""
    return [
        (c["id"], f"{c['claim']}: {c.get('cause') or 'measured ' + c['measured'] + ', expected ' + c['expected']}.")
        for c in claims
        if c["verdict"] == "FAIL"
    ]


def skip_groups(claims: list[ClaimRow]) -> list[tuple[str, list[str]]]:
    """The skipped claims grouped by their reason, most common first: (reason, ids)."""
    reasons = Counter(c["tolerance_reason"] for c in claims if c["verdict"] == "SKIP")
    return [
        (why, [c["id"] for c in claims if c["verdict"] == "SKIP" and c["tolerance_reason"] == why])
        for why, _ in reasons.most_common()
    ]


def skip_sentence(why: str, ids: list[str], listed: int = 4) -> str:
    """A group of skipped claims (`skip_groups`) in one sentence: how many, why, and which (the first `listed`)."""
    named = ", ".join(ids[:listed]) + (f" and {len(ids) - listed} more" if len(ids) > listed else "")
    return f"{len(ids)} skipped: {why} ({named})"


def headline(report: Report) -> list[str]:
    """The report's opening sentences, plain text: the verdict, how each kind fared, and what a rerun leaves out."""
    return [
        line
        for line in (
            verdict_sentence(report),
            kinds_sentence(report),
            report.get("left_out") and report["left_out"] + ".",
        )
        if line
    ]
