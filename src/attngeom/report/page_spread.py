"""The page's sections that set each value beside others: a stopped run's statistics beside its ensemble,
each quoted statistic beside every measured trajectory, every window and seed beside the judged one.
Each draws its strips with report/strips.py and says REPORT.md's words (report/trajectory_words.py).
"""

from __future__ import annotations

from attngeom.report import strips
from attngeom.report import trajectory_words as words
from attngeom.report.headline import first_upper
from attngeom.report.html_text import claim_link, esc, math_text, number_text


def ensemble(report: dict) -> str:
    """A stopped run's statistics beside the measured ensemble of trajectories their bands derive from."""
    rows = [c for c in report["claims"] if "ensemble" in c and c.get("measured_value") is not None]
    if not rows:
        return ""
    plots = "".join(
        strips.figure(
            "ensemble",
            f'data-claim="{esc(c["id"])}"',
            f"{claim_link(c['id'])}: {math_text(c['claim'])}: this run {esc(c['measured'])}, "
            f"{len(c['ensemble']['members'])} members {c['ensemble']['min']:.4g} to {c['ensemble']['max']:.4g}",
            [
                strips.Row(
                    "",
                    [c["ensemble"]["members"]],
                    c["ensemble"]["published"],
                    c["measured_value"],
                    band=strips.interval(c.get("accepted")),
                )
            ],
            strips.Words(
                value="an ensemble member", judged="this run", quote="published", band="the band it is judged with"
            ),
        )
        for c in rows
    )
    source = rows[0]["ensemble"]["source"]
    return (
        '<h2 id="ensemble">Beside the ensemble of trajectories</h2><p>Each statistic this run is judged on at a '
        "step it reached, beside an ensemble of trajectories of the same training measured on one CPU "
        f"(<code>{esc(source)}</code>). The band the statistic is judged with covers the published value and every "
        f'member.</p><div class="strips">{plots}</div>'
    )


def _trajectory_row(one: dict) -> strips.Row:
    """A statistic claim's strip beside the measured trajectories: their values, the quote with its
    tolerance, the rerun band, and these bundles' judged value."""
    return strips.Row(
        "",
        [[v["value"] for v in one["values"]]],
        one["quoted"],
        one["judged"],
        strips.interval(one.get("quote_interval")),
        strips.interval((one.get("rerun_band") or {}).get("interval")),
    )


def trajectories(report: dict) -> str:
    """Each trajectory statistic beside every measured trajectory at its step (a strip where one is
    measured, as REPORT.md's section says), and each comparison on every pairing of them."""
    section = report.get("trajectories")
    if not section:
        return ""
    claims = {c["id"]: c for c in report["claims"]}
    stats = {cid: one for cid, one in section["claims"].items() if one["kind"] == "statistic"}
    head = "".join(f"<th>{esc(h)}</th>" for h in words.TRAJECTORY_COLUMNS)
    body = "".join(
        f'<tr data-claim="{esc(cid)}"><td>{claim_link(cid)}</td>'
        + "".join(  # step, quoted, these bundles: numbers; then sentences that wrap
            f'<td class="{"num" if i < 3 else "text"}">{number_text(c)}</td>'
            for i, c in enumerate(words.trajectory_cells(one))
        )
        + "</tr>"
        for cid, one in stats.items()
    )
    plots = "".join(
        strips.figure(
            "trajectory",
            f'data-claim="{esc(cid)}"',
            f"{claim_link(cid)}: {math_text(claims[cid]['claim'])}",
            [_trajectory_row(one)],
            note=esc(first_upper(words.statistic_sentence(one))),
        )
        for cid, one in stats.items()
        if "spread" in one
    )
    comparisons = "".join(
        f'<li data-claim="{esc(cid)}">{claim_link(cid)}: {esc(words.comparison_text(one))}</li>'
        for cid, one in section["claims"].items()
        if one["kind"] == "comparison"
    )
    return (
        f'<h2 id="trajectories">Beside every measured trajectory</h2><p>{esc(words.MEANING)}</p>'
        f"<p>{esc(words.intro(section))} Each strip draws one statistic on an axis that holds the quote (red bar), "
        "its tolerance (green), the rerun band (orange), every trajectory (a blue dot each) and these bundles' "
        f'value (ring).</p><div class="wide"><table id="trajectory-table"><thead><tr>{head}</tr></thead>'
        f'<tbody>{body}</tbody></table></div><div class="strips">{plots}</div>'
        f'<ul id="trajectory-comparisons">{comparisons}</ul>'
    )


def _quoted_statistics(report: dict) -> dict[tuple[str, str], dict]:
    """Each (model, statistic of measures.table) a claim quotes, to the first such claim's entry in the
    trajectories section (its quote, tolerance and rerun band): what a robustness strip is drawn against."""
    out: dict[tuple[str, str], dict] = {}
    for one in (report.get("trajectories") or {}).get("claims", {}).values():
        if one.get("kind") == "statistic" and one.get("statistic"):
            out.setdefault((one["model"], one["statistic"]), one)
    return out


def robustness(results: dict, report: dict) -> str:
    robust = results.get("robustness")
    if robust is None:
        return ""
    head = '<h2 id="robustness">Robustness: every window and seed</h2>'
    if not robust:
        return head + (
            "<p>These bundles hold one window of one seed: the judged values are all there is. A rerun with extra "
            "windows or seeds adds their distributions here.</p>"
        )
    counts = "".join(
        f"<tr><td>{esc(v)}</td>"
        + "".join(f'<td class="num">{c["count"]:,} of {c["out_of"]:,}</td>' for c in m["counts"].values())
        + "</tr>"
        for v, m in robust.items()
    )
    quoted = _quoted_statistics(report)
    keys = list(dict.fromkeys(k for m in robust.values() for k in m["statistics"]))
    plots = []
    for key in keys:
        rows = []
        for v, m in robust.items():
            if (st := m["statistics"].get(key)) is None:
                continue
            one = quoted.get((v, key), {})
            band = (one.get("rerun_band") or {}).get("interval")
            rows.append(
                strips.Row(
                    v,
                    list(st["per_seed"].values()),
                    st["published"],
                    st["fixed_window_seed0"],
                    strips.interval(one.get("quote_interval")),
                    strips.interval(band),
                )
            )
        label = next(m["statistics"][key]["label"] for m in robust.values() if key in m["statistics"])
        words_here = strips.Words(value="a window (a line per seed)", judged="seed 0, fixed window", quote="published")
        plots.append(strips.figure("robust", f'data-stat="{esc(key)}"', esc(label), rows, words_here))
    return (
        f"{head}<p>Seed 0's fixed window is the value judged above. Here each statistic on every window, a line "
        "of dots per seed, beside the published value, its tolerance and rerun band where a claim quotes it, and seed "
        "0's fixed window. Theorem counts are summed over every window and seed.</p>"
        '<div class="wide"><table id="robust-counts"><thead><tr><th>model</th><th>winners moved under query scaling</th>'
        f"<th>keys inside the others' hull</th></tr></thead><tbody>{counts}</tbody></table></div>"
        f'<div class="strips">{"".join(plots)}</div>'
    )
