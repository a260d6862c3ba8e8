"""The reviewer's report as one self-contained `index.html`: verdict, claims, figures, provenance.

Everything is inline (the style sheet and the live territory map's script from assets/, the
figures as base64 data URIs), so the file opens from disk with no network. The page only presents what `report.json` and
`results.json` already hold; it computes nothing that is judged.
"""

from __future__ import annotations

import base64
import re
from html import escape
from pathlib import Path

from attngeom.base import environment
from attngeom.base.files import write_atomic
from attngeom.base.records import Report, Results
from attngeom.report.markdown import TRAJECTORY_COLUMNS, comparison_text, source_note, statistics_rows, trajectory_cells

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


def math_text(value) -> str:
    """Escaped text with inline LaTeX ($1/t$, u \\cdot k, x^2) rendered as readable HTML."""
    text = re.sub(r"\$([^$]+)\$", r"\1", "" if value is None else str(value))
    text = re.sub(r"\\(?:mathrm|text|operatorname)\{([^}]*)\}", r"\1", text)
    text = re.sub(r"\\frac\{([^}]*)\}\{([^}]*)\}", r"(\1)/(\2)", text)
    text = escape(_LATEX_RE.sub(lambda m: _LATEX[m.group(0)], text))
    text = re.sub(r"\^\{([^}]*)\}|\^([\w.]+)", lambda m: f"<sup>{m.group(1) or m.group(2)}</sup>", text)
    return re.sub(r"_\{([^}]*)\}", r"<sub>\1</sub>", text)


def _verdict(report: dict) -> str:
    s = report.get("summary", {})
    verdict = s.get("verdict", "FAIL")
    failing = [c for c in report.get("claims", []) if c.get("verdict") == "FAIL"]
    links = ", ".join(f'<a href="#claim-{_e(c["id"])}">{_e(c["id"])}</a>' for c in failing)
    fail_line = f'<small class="fail-list">Failing: {links}</small>' if failing else ""
    tier = _e(report.get("tier", "published"))
    ev = report.get("evidence")
    chosen = f'<small id="evidence">Evidence: {_e(ev["line"].removeprefix("evidence: "))}.</small>' if ev else ""
    warnings = "".join(f'<small class="warning">Warning: {_e(w)}</small>' for w in report.get("warnings", []))
    return (
        f'<div class="verdict {_e(verdict)}" id="verdict">{_e(verdict)}: {s.get("passed", 0)} passed, '
        f"{s.get('failed', 0)} failed, {s.get('skipped', 0)} skipped"
        f"<small>{'' if ev else f'Evidence tier: {tier}. '}Every claim below is a number quoted in the posts, "
        f"recomputed from the bundles and judged against its tolerance.</small>{chosen}{warnings}{fail_line}</div>"
        + _preflight(report.get("preflight"))
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


def _claims(report: dict) -> str:
    rows = []
    for c in report.get("claims", []):
        v = c.get("verdict", "SKIP")
        rows.append(
            f'<tr class="{_e(v)}" id="claim-{_e(c.get("id"))}" data-claim="{_e(c.get("id"))}">'
            f"<td><code>{_e(c.get('id'))}</code></td>"
            f"<td>{math_text(c.get('claim'))}<blockquote>{math_text(c.get('quote'))}</blockquote>"
            f'<span class="source">{_e(c.get("source"))}</span> <span class="kind">{_e(c.get("kind", ""))}</span></td>'
            f'<td class="num">{_e(c.get("expected"))}</td><td class="num">{_e(c.get("measured"))}</td>'
            f'<td>{_e(c.get("tolerance_reason"))}</td><td><span class="badge {_e(v)}">{_e(v)}</span></td>'
            f"<td><code>{_e(c.get('function'))}</code></td></tr>"
        )
    head = "<tr><th>id</th><th>claim, quote and its place in the post</th><th>expected</th><th>measured</th>"
    head += "<th>tolerance</th><th>verdict</th><th>computed by</th></tr>"
    return f'<table id="claims"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'


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
        f'<table id="statistics-table"><thead>{head}</thead><tbody>{body}</tbody></table>'
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
        f'<table id="rerun-table"><thead><tr><th>claim</th><th>published</th><th>rerun</th><th>drift</th></tr></thead>'
        f"<tbody>{rows}</tbody></table>"
    )


def _strip_svg(
    rows: list[tuple[str, list[list[float]], float | None, float | None]], ring: str = "seed 0, fixed window"
) -> str:
    """One small inline SVG: per model a row of dots (one per window, a line per seed; or one per
    ensemble member or trajectory), the published value as a red bar and the judged value (`ring`) as a
    ring (none for a claim not judged)."""
    values = [x for _, seeds, pub, fixed in rows for x in [*(v for s in seeds for v in s), fixed, pub] if x is not None]
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.05 or abs(hi) * 0.05 or 1.0
    lo, hi = (lo - pad if lo < 0 or lo - pad >= 0 else 0.0), hi + pad  # counts and shares stay on their side of 0
    width, left, row_h = 420, 70, 26

    def x(v: float) -> float:
        return left + (v - lo) / (hi - lo) * (width - left - 10)

    parts = []
    for i, (name, seeds, pub, fixed) in enumerate(rows):
        y = 14 + i * row_h
        parts.append(f'<text x="2" y="{y + 4}" font-size="11">{_e(name)}</text>')
        parts.append(f'<line x1="{left}" x2="{width - 10}" y1="{y}" y2="{y}" stroke="#ddd"/>')
        for j, seed_values in enumerate(seeds):
            dy = (j - (len(seeds) - 1) / 2) * 4
            parts += [
                f'<circle cx="{x(v):.1f}" cy="{y + dy:.1f}" r="2.5" fill="#1565c0" fill-opacity="0.55"/>'
                for v in seed_values
            ]
        if fixed is not None:
            parts.append(
                f'<circle cx="{x(fixed):.1f}" cy="{y}" r="5" fill="none" stroke="#111"><title>{_e(ring)}: {fixed:.4g}</title></circle>'
            )
        if pub is not None:
            parts.append(
                f'<line x1="{x(pub):.1f}" x2="{x(pub):.1f}" y1="{y - 9}" y2="{y + 9}" stroke="#c62828" stroke-width="2">'
                f"<title>published: {pub:.4g}</title></line>"
            )
    height = 14 + len(rows) * row_h
    parts.append(f'<text x="{left}" y="{height + 2}" font-size="10">{lo:.4g}</text>')
    parts.append(f'<text x="{width - 10}" y="{height + 2}" font-size="10" text-anchor="end">{hi:.4g}</text>')
    return f'<svg class="dist" width="{width}" height="{height + 6}" viewBox="0 0 {width} {height + 6}">{"".join(parts)}</svg>'


def _strip_figure(kind: str, data: str, caption: str, rows: list[tuple], ring: str = "seed 0, fixed window") -> str:
    """One strip (`_strip_svg` of `rows`) as a figure of class `kind`, `data` its data attribute, with its caption."""
    return f'<figure class="{kind}" {data}><figcaption>{_e(caption)}</figcaption>{_strip_svg(rows, ring)}</figure>'


def _ensemble(report: dict) -> str:
    """A stopped run's statistics beside the measured ensemble of trajectories their bands derive from."""
    rows = [c for c in report["claims"] if "ensemble" in c and c.get("measured_value") is not None]
    if not rows:
        return ""
    plots = "".join(
        _strip_figure(
            "ensemble",
            f'data-claim="{_e(c["id"])}"',
            f"{c['claim']}: this run {c['measured']}, {len(c['ensemble']['members'])} members "
            f"{c['ensemble']['min']:.4g} to {c['ensemble']['max']:.4g}",
            [(c["id"].split(".")[1], [c["ensemble"]["members"]], c["ensemble"]["published"], c["measured_value"])],
            ring="this run",
        )
        for c in rows
    )
    source = rows[0]["ensemble"]["source"]
    return (
        '<h2 id="ensemble">Beside the ensemble of trajectories</h2><p>Each statistic this run is judged on at a '
        "step it reached, beside an ensemble of trajectories of the same training measured on one CPU (blue dots, one "
        f"per member; <code>{_e(source)}</code>), the published value (red bar) and this run (ring). The band the "
        f'statistic is judged with covers the published value and every member.</p><div class="robust-plots">{plots}</div>'
    )


def _trajectories(report: dict) -> str:
    """Each trajectory statistic beside every measured trajectory at its step (a strip where one is
    measured, as REPORT.md's table says), and each comparison on every pairing of them."""
    section = report.get("trajectories")
    if not section:
        return ""
    claims = {c["id"]: c for c in report["claims"]}
    stats = {cid: one for cid, one in section["claims"].items() if one["kind"] == "statistic"}
    cells = {cid: trajectory_cells(one) for cid, one in stats.items()}
    head = "".join(f"<th>{_e(h)}</th>" for h in TRAJECTORY_COLUMNS)
    body = "".join(
        f'<tr data-claim="{_e(cid)}"><td><a href="#claim-{_e(cid)}"><code>{_e(cid)}</code></a></td>'
        + "".join(f'<td class="num">{_e(c)}</td>' for c in cells[cid])
        + "</tr>"
        for cid in stats
    )
    plots = "".join(
        _strip_figure(
            "trajectory",
            f'data-claim="{_e(cid)}"',
            f"{claims[cid]['claim']}: step {one['step']:,}, trajectories {cells[cid][3]}, "
            f"the quote stands {cells[cid][4]}",
            [(one["model"], [[v["value"] for v in one["values"]]], one["quoted"], one["judged"])],
            ring="these bundles",
        )
        for cid, one in stats.items()
        if "spread" in one
    )
    comparisons = "".join(
        f'<li data-claim="{_e(cid)}"><code>{_e(cid)}</code>: {_e(comparison_text(one))}</li>'
        for cid, one in section["claims"].items()
        if one["kind"] == "comparison"
    )
    return (
        '<h2 id="trajectories">Beside every measured trajectory</h2><p>Each quoted statistic of one trajectory on '
        f"every trajectory of the same training measured at its step ({len(section['trajectories'])} trajectories "
        f"from {_e(', '.join(section['sources']))}): blue dots, one per trajectory; the quoted value (red bar) and "
        "these bundles' judged value (ring). The verdicts judge the author's numbers; this shows how far they move "
        f'from one trajectory to another.</p><table id="trajectory-table"><thead><tr>{head}</tr></thead>'
        f'<tbody>{body}</tbody></table><div class="robust-plots">{plots}</div>'
        f'<ul id="trajectory-comparisons">{comparisons}</ul>'
    )


def _robustness(results: dict) -> str:
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
    keys = list(dict.fromkeys(k for m in robust.values() for k in m["statistics"]))
    plots = []
    for key in keys:
        rows = [
            (v, list(st["per_seed"].values()), st["published"], st["fixed_window_seed0"])
            for v, m in robust.items()
            if (st := m["statistics"].get(key))
        ]
        label = next(m["statistics"][key]["label"] for m in robust.values() if key in m["statistics"])
        plots.append(_strip_figure("robust", f'data-stat="{_e(key)}"', label, rows))
    return (
        f"{head}<p>Seed 0's fixed window is the value judged above. Here each statistic on every window (blue dots, "
        "one line per seed) beside the published value (red bar) and seed 0's fixed window (ring). Theorem counts "
        "are summed over every window and seed.</p>"
        '<table id="robust-counts"><thead><tr><th>model</th><th>winners moved under query scaling</th>'
        f"<th>keys inside the others' hull</th></tr></thead><tbody>{counts}</tbody></table>"
        f'<div class="robust-plots">{"".join(plots)}</div>'
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
        f"<tr><td><code>{_e(path)}</code></td><td>{_e(source_note(sources.get(path)).lstrip(', ').replace('`', ''))}"
        f'</td><td class="num">{_e(sha)}</td></tr>'
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
<tr><th>expected values (sha256)</th><td class="num">{_sha_list(p.get("expected_sha256"))}</td></tr>
</table>
<table id="inputs"><thead><tr><th>input</th><th>where it came from</th><th>sha256</th></tr></thead><tbody>{inputs}</tbody></table>"""


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
{_claims(report)}
{_statistics(results)}
{_rerun(report)}
{_ensemble(report)}
{_trajectories(report)}
{_robustness(results)}
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
