"""The reviewer's report as one self-contained `index.html`: verdict, claims, figures, provenance.

Everything is inline (the style sheet and the live territory map's script from assets/, the
figures as base64 data URIs, the strips as SVG from report/strips.py), so the file opens from disk with no
network. The page only presents what `report.json` and `results.json` already hold; it computes nothing that
is judged. Its first screen says REPORT.md's opening sentences (report/headline.py).
"""

from __future__ import annotations

import base64
import re
from html import escape
from pathlib import Path

from attngeom.base import environment
from attngeom.base.files import write_atomic
from attngeom.base.records import Report, Results
from attngeom.report import headline, strips
from attngeom.report import trajectory_words as words
from attngeom.report.markdown import source_note, statistics_rows

ASSETS = Path(__file__).with_name("assets")
INDEX = "index.html"
FIGURES_DIR = "figures"
FIGURES_JSON = "figures.json"

# The posts' inline LaTeX, as text a reader can read without a math font or script.
_LATEX = {
    r"\,": "\u2009",
    r"\;": " ",
    r"\!": "",
    r"\cdot": "·",
    r"\times": "×",
    r"\epsilon": "ε",
    r"\varepsilon": "ε",
    r"\kappa": "κ",
    r"\theta": "θ",
    r"\pi": "π",
    r"\infty": "∞",
    r"\le": "≤",
    r"\ge": "≥",
    r"\approx": "≈",
    r"\to": "→",
    r"\sum": "Σ",
    r"\sqrt": "√",
    r"\|": "‖",
}
_LATEX_RE = re.compile("|".join(re.escape(k) + (r"(?![a-zA-Z])" if k[1:].isalpha() else "") for k in _LATEX))


def _e(value) -> str:
    return escape("" if value is None else str(value))


def breakable(value: object) -> str:
    """Escaped text that may wrap only after a dot or an underscore (claim ids, function names)."""
    return re.sub(r"([._])", r"\1<wbr>", _e(value))


def number_text(value: object) -> str:
    """An escaped value that never wraps between a sign (±, =, ≤, <) and its number."""
    return re.sub(r"(±|=|≤|≥|&lt;|&gt;) ", r"\1&nbsp;", _e(value))


def _id(cid: object) -> str:
    """A claim's id as code, linked to its row of the claims table."""
    return f'<a href="#claim-{_e(cid)}"><code>{breakable(cid)}</code></a>'


def math_text(value) -> str:
    """Escaped text with inline LaTeX ($1/t$, u \\cdot k, x^2) rendered as readable HTML."""
    text = re.sub(r"\$([^$]+)\$", r"\1", "" if value is None else str(value))
    text = re.sub(r"\\(?:mathrm|text|operatorname)\{([^}]*)\}", r"\1", text)
    text = re.sub(r"\\frac\{([^}]*)\}\{([^}]*)\}", r"(\1)/(\2)", text)
    text = escape(_LATEX_RE.sub(lambda m: _LATEX[m.group(0)], text))
    text = re.sub(r"\^\{([^}]*)\}|\^([\w.]+)", lambda m: f"<sup>{m.group(1) or m.group(2)}</sup>", text)
    return re.sub(r"_\{([^}]*)\}", r"<sub>\1</sub>", text)


def _verdict(report: dict) -> str:
    """The first screen, in REPORT.md's sentences (report.headline): the verdict and how each kind of claim
    fared, what a rerun leaves out, why each failure fails (linked to its row), what was skipped and why."""
    claims = report.get("claims", [])
    verdict = report.get("summary", {}).get("verdict", "FAIL")
    said = headline.headline(report)
    lines = [f'<p class="headline"><strong>{_e(verdict)}</strong>{_e(said[0].removeprefix(verdict))}</p>']
    lines += [f"<p>{_e(line)}</p>" for line in said[1:]]
    failures = headline.failure_lines(claims)
    if failures:
        lines.append(f"<p>Why {'each' if len(failures) > 1 else 'it'} fails:</p>")
        items = "".join(f"<li>{_id(cid)}: {math_text(why)}</li>" for cid, why in failures)
        lines.append(f'<ul class="fail-list">{items}</ul>')
    skipped = headline.skip_groups(claims)
    if skipped:
        items = "".join(f"<li>{_e(headline.skip_sentence(why, ids))}.</li>" for why, ids in skipped)
        lines.append(f'<ul class="skip-list">{items}</ul>')
    lines += [f'<small class="warning">Warning: {_e(w)}</small>' for w in report.get("warnings", [])]
    ev = report.get("evidence")
    lines.append(
        f'<small id="evidence">Evidence: {_e(ev["line"].removeprefix("evidence: "))}.</small>'
        if ev
        else f"<small>Evidence tier: {_e(report.get('tier', 'published'))}.</small>"
    )
    return f'<div class="verdict {_e(verdict)}" id="verdict">{"".join(lines)}</div>' + _preflight(
        report.get("preflight")
    )


def _preflight(preflight: dict | None) -> str:
    """The run's fidelity preflight from its manifest; anything but PASS in red."""
    if not preflight:
        return ""
    verdict = str(preflight.get("verdict", "ERROR"))
    return (
        f'<p id="preflight" class="preflight {"PASS" if verdict == "PASS" else "FAIL"}">Fidelity preflight: '
        f'<span class="badge {"PASS" if verdict == "PASS" else "FAIL"}">{_e(verdict)}</span> '
        f"({_e(preflight.get('steps', '?'))} steps on {_e(preflight.get('device', '?'))}, against the author's "
        f"training script; <code>{_e(preflight.get('file', 'fidelity.json'))}</code> in the run folder)</p>"
    )


def _claim_rows(c: dict) -> str:
    """A claim as two rows of its own tbody (a card on a phone): id, kind, quoted, measured, tolerance and
    verdict, as REPORT.md's table; below, the claim, its quote, place, judgement and why a failure fails."""
    v = c.get("verdict", "SKIP")
    cells = "".join(
        f'<td class="{css}{" list" if ", " in str(c.get(key, "-")) else ""}" data-label="{key}">'
        f"{number_text(c.get(key, '-'))}</td>"
        for key, css in (("quoted", "num"), ("measured", "num"), ("tolerance", "tol"))
    )
    judged = (
        f"Skipped: {_e(c.get('tolerance_reason'))}"
        if v == "SKIP"
        else f'Judged: <span class="num">{number_text(c.get("expected"))}</span> ({_e(c.get("tolerance_reason"))}); '
        f'measured <span class="num">{number_text(c.get("measured"))}</span>'
    )
    more = (
        (f'<p class="cause"><b>Why it fails:</b> {math_text(c["cause"])}.</p>' if c.get("cause") else "")
        + f'<blockquote>{math_text(c.get("quote"))}</blockquote><p class="source">{_e(c.get("source"))}</p>'
        + f"<p>{judged}. Computed by <code>{breakable(c.get('function', '-'))}</code>.</p>"
    )
    return (
        f'<tbody class="claim {_e(v)}"><tr class="{_e(v)}" id="claim-{_e(c.get("id"))}" data-claim="{_e(c.get("id"))}">'
        f'<td class="id"><code>{breakable(c.get("id"))}</code></td>'
        f'<td class="kind" data-label="kind">{_e(c.get("kind", "-"))}</td>{cells}'
        f'<td class="verdict"><span class="badge {_e(v)}">{_e(v)}</span></td></tr>'
        f'<tr class="more {_e(v)}"><td colspan="6"><details{" open" if v == "FAIL" else ""}>'
        f"<summary>{math_text(c.get('claim'))}</summary>{more}</details></td></tr></tbody>"
    )


def _claims(report: dict) -> str:
    """Every claim, a short row each (one card per claim on a narrow screen), its details below it."""
    head = "".join(f"<th>{h}</th>" for h in ("claim", "kind", "quoted", "measured", "tolerance", "verdict"))
    rows = "".join(_claim_rows(c) for c in report.get("claims", []))
    return f'<div class="wide"><table id="claims"><thead><tr>{head}</tr></thead>{rows}</table></div>'


def _statistics(results: dict) -> str:
    """Every model's statistics, as in REPORT.md (the best validation losses behind the quality claim included)."""
    if not results.get("models") or not all("setup" in m for m in results["models"].values()):
        return ""
    models, rows = statistics_rows(results)
    head = "<tr><th>statistic</th>" + "".join(f"<th>{_e(m)}</th>" for m in models) + "</tr>"
    body = "".join(
        f"<tr><td>{_e(label)}</td>" + "".join(f'<td class="num">{_e(c)}</td>' for c in cells) + "</tr>"
        for label, cells in rows
    )
    return (
        '<h2 id="statistics">Statistics per model</h2><p>Every statistic of each model on the fixed window, quoted or '
        "not (all of them, per head, in <code>results.json</code>).</p>"
        f'<div class="wide"><table id="statistics-table"><thead>{head}</thead><tbody>{body}</tbody></table></div>'
    )


def _rerun(report: dict) -> str:
    pairs = report.get("rerun") or []
    if not pairs:
        return ""
    rows = "".join(
        f'<tr><td><code>{_e(p.get("id"))}</code></td><td class="num">{_e(p.get("published"))}</td>'
        f'<td class="num">{_e(p.get("rerun"))}</td><td class="num">{_e(p.get("drift"))}</td></tr>'
        for p in pairs
    )
    return (
        '<h2 id="rerun">Published against rerun</h2><p>The author\'s published bundles and this rerun, '
        "claim by claim, with the drift between them.</p>"
        f'<div class="wide"><table id="rerun-table"><thead><tr><th>claim</th><th>published</th><th>rerun</th>'
        f"<th>drift</th></tr></thead><tbody>{rows}</tbody></table></div>"
    )


def _ensemble(report: dict) -> str:
    """A stopped run's statistics beside the measured ensemble of trajectories their bands derive from."""
    rows = [c for c in report["claims"] if "ensemble" in c and c.get("measured_value") is not None]
    if not rows:
        return ""
    plots = "".join(
        strips.figure(
            "ensemble",
            f'data-claim="{_e(c["id"])}"',
            f"{_id(c['id'])}: {math_text(c['claim'])}: this run {_e(c['measured'])}, "
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
        f"(<code>{_e(source)}</code>). The band the statistic is judged with covers the published value and every "
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


def _trajectories(report: dict) -> str:
    """Each trajectory statistic beside every measured trajectory at its step (a strip where one is
    measured, as REPORT.md's section says), and each comparison on every pairing of them."""
    section = report.get("trajectories")
    if not section:
        return ""
    claims = {c["id"]: c for c in report["claims"]}
    stats = {cid: one for cid, one in section["claims"].items() if one["kind"] == "statistic"}
    head = "".join(f"<th>{_e(h)}</th>" for h in words.TRAJECTORY_COLUMNS)
    body = "".join(
        f'<tr data-claim="{_e(cid)}"><td>{_id(cid)}</td>'
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
            f'data-claim="{_e(cid)}"',
            f"{_id(cid)}: {math_text(claims[cid]['claim'])}",
            [_trajectory_row(one)],
            note=_e(words.statistic_sentence(one)[0].upper() + words.statistic_sentence(one)[1:]),
        )
        for cid, one in stats.items()
        if "spread" in one
    )
    comparisons = "".join(
        f'<li data-claim="{_e(cid)}">{_id(cid)}: {_e(words.comparison_text(one))}</li>'
        for cid, one in section["claims"].items()
        if one["kind"] == "comparison"
    )
    return (
        f'<h2 id="trajectories">Beside every measured trajectory</h2><p>{_e(words.MEANING)}</p>'
        f"<p>{_e(words.intro(section))} Each strip draws one statistic on an axis that holds the quote (red bar), "
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


def _robustness(results: dict, report: dict) -> str:
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
        f"<tr><td>{_e(v)}</td>"
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
        plots.append(strips.figure("robust", f'data-stat="{_e(key)}"', _e(label), rows, words_here))
    return (
        f"{head}<p>Seed 0's fixed window is the value judged above. Here each statistic on every window, a line "
        "of dots per seed, beside the published value, its tolerance and rerun band where a claim quotes it, and seed "
        "0's fixed window. Theorem counts are summed over every window and seed.</p>"
        '<div class="wide"><table id="robust-counts"><thead><tr><th>model</th><th>winners moved under query scaling</th>'
        f"<th>keys inside the others' hull</th></tr></thead><tbody>{counts}</tbody></table></div>"
        f'<div class="strips">{"".join(plots)}</div>'
    )


def _figures(out_dir: Path, figures: list[dict]) -> str:
    folder = out_dir / FIGURES_DIR
    entries = [e for e in figures if (folder / e["file"]).is_file()]
    if not entries:
        return (
            '<h2 id="figures">Figures</h2><p>No figures in this folder yet: '
            "<code>./reproduce.sh figures --out DIR</code> renders them and adds them to this page.</p>"
        )
    parts = [
        (
            '<h2 id="figures">Figures</h2><p>Every frame recomputed from the two laws and the bundles; '
            "each counter is computed by the function that judges the matching claim.</p>"
        )
    ]
    for e in entries:
        data = base64.b64encode((folder / e["file"]).read_bytes()).decode("ascii")
        counters = e.get("counters_text", "")
        parts.append(
            f'<figure id="fig-{_e(Path(e["file"]).stem)}"><h3>{_e(e["title"])}</h3>'
            f'<img alt="{_e(e["title"])}" src="data:image/gif;base64,{data}">'
            f"<figcaption>{_e(e.get('caption'))}"
            + (f'<div class="counters">{_e(counters)}</div>' if counters else "")
            + "</figcaption></figure>"
        )
    return "".join(parts)


def _territory() -> str:
    script = (ASSETS / "territory.js").read_text(encoding="utf-8")
    rows = "".join(
        f'<tr><td><span class="swatch" data-swatch="{j}"></span> {j + 1}</td><td class="num" data-pos="{j}"></td>'
        f'<td class="num" data-share="dot-{j}"></td><td class="num" data-share="kernel-{j}"></td></tr>'
        for j in range(6)
    )
    return f"""<h2 id="live">Live territory map</h2>
<div id="territory">
<p>Drag a body (the numbered discs) on either map. Each pixel of the view [-2, 2]&sup2; takes the colour of
the body with the top score there: left, the dot product q&middot;k of softmax attention (its owner is
the same at every length of q, so every border is a ray from the origin); right, the Yat kernel
(q&middot;k + b)&sup2; / (|q &minus; k|&sup2; + &epsilon;). Both maps are recomputed from these formulas on
every move, with the formulas of <code>attngeom.geometry.laws</code>.</p>
<div class="maps">
<div><b>softmax (dot product) owners</b><br><canvas data-law="dot" width="300" height="300"></canvas></div>
<div><b>Yat kernel owners</b><br><canvas data-law="kernel" width="300" height="300"></canvas></div>
<div><table><thead><tr><th>body</th><th>position</th><th>share, softmax</th><th>share, kernel</th></tr></thead>
<tbody>{rows}</tbody></table>
<p><label>b = <span data-value="b"></span><br><input type="range" name="b" min="0" max="3" step="0.01"
value="0.6931471805599453"></label>
<label>&epsilon; = <span data-value="eps"></span><br><input type="range" name="eps" min="0.01" max="2" step="0.01"
value="0.25"></label></p>
<p><button type="button" data-action="reset">Reset bodies, b and &epsilon;</button></p>
<p class="source">Shares are fractions of the view's pixels each body owns. Start: the posts' six bodies,
b = ln 2, &epsilon; = 0.25.</p></div>
</div></div>
<script>{script}</script>
<script>document.querySelectorAll("[data-swatch]").forEach((el) => {{
  el.style.background = window.attngeomTerritory.COLORS[+el.dataset.swatch]; }});</script>"""


def _sha_list(value) -> str:
    """A sha256, or several under their names."""
    if isinstance(value, dict):
        return "<br>".join(f"{_e(k)}: {_e(v)}" for k, v in sorted(value.items()))
    return _e(value)


def _provenance(report: dict) -> str:
    p = report.get("provenance", {})
    sources = p.get("sources", {})
    inputs = "".join(
        f"<tr><td><code>{re.sub('/', '/<wbr>', _e(path))}</code></td><td>{_e(source_note(sources.get(path)).lstrip(', '))}"
        f'</td><td class="hash">{_e(sha)}</td></tr>'
        for path, sha in sorted(p.get("inputs", {}).items())
    )
    versions = ", ".join(f"{_e(k)} {_e(v)}" for k, v in sorted(p.get("versions", {}).items()))
    return f"""<h2 id="provenance">Provenance</h2>
<table id="provenance-table">
<tr><th>command</th><td><code>{_e(p.get("command"))}</code></td></tr>
<tr><th>date</th><td>{_e(p.get("date"))}</td></tr>
<tr><th>machine</th><td>{_e(p.get("machine"))}</td></tr>
<tr><th>package</th><td class="num">attngeom {_e(p.get("versions", {}).get("attngeom", "?"))}, git commit {_e(p.get("git_commit") or "not a git checkout")}</td></tr>
<tr><th>versions</th><td>{versions}</td></tr>
<tr><th>environment</th><td>{_e(environment.describe(p.get("environment")))}</td></tr>
<tr><th>bundles</th><td><code>{_e(report.get("bundles", ""))}</code></td></tr>
<tr><th>expected values (sha256)</th><td class="hash">{_sha_list(p.get("expected_sha256"))}</td></tr>
</table>
<details id="inputs-list"><summary>The {len(p.get("inputs", {}))} inputs: where each came from, and its sha256 (each matched its
pinned sha256)</summary><div class="wide"><table id="inputs"><thead><tr><th>input</th><th>where it came from</th>
<th>sha256</th></tr></thead><tbody>{inputs}</tbody></table></div></details>"""


def render(out_dir: Path, report: Report, results: Results, figures: list[dict]) -> str:
    """The whole page as a string; `figures`: the entries of `out_dir/figures/figures.json`, read by the
    caller (`outputs.drawn_figures`; a figure whose GIF is absent is left out)."""
    n_models = len(results.get("models", {}))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>attngeom: {_e(report.get("summary", {}).get("verdict"))} - the geometry of attention, verified</title>
<style>{(ASSETS / "report.css").read_text(encoding="utf-8")}</style></head>
<body>
<h1>The Geometry of Attention Is a Choice of Kernel: verification report</h1>
{_verdict(report)}
<p>Models judged: {n_models}. Sections: <a href="#claims-h">claims</a> &middot;
<a href="#statistics">statistics</a> &middot; <a href="#trajectories">trajectories</a> &middot; <a href="#figures">figures</a>
&middot; <a href="#live">live territory map</a> &middot; <a href="#provenance">provenance</a></p>
<h2 id="claims-h">Claims</h2>
<p>Each claim is a number quoted in the posts, recomputed from the bundles and judged against its tolerance. Open a
claim for its quote, its place in the post and how it is judged.</p>
{_claims(report)}
{_statistics(results)}
{_rerun(report)}
{_ensemble(report)}
{_trajectories(report)}
{_robustness(results, report)}
{_figures(Path(out_dir), figures)}
{_territory()}
{_provenance(report)}
</body></html>
"""


def write_html(out_dir: Path, report: Report, results: Results, figures: list[dict]) -> Path:
    """Write `out_dir/index.html` (figures embedded when `out_dir/figures/` holds them; `figures` as `render`)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / INDEX
    write_atomic(path, render(out_dir, report, results, figures))
    return path
