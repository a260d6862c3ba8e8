"""The reviewer's report as one self-contained `index.html`: verdict, claims, figures, provenance.

Everything is inline (the style sheet and the live territory map's script from assets/, the
figures as base64 data URIs, the strips as SVG from report/strips.py), so the file opens from disk with no
network. The page only presents what `report.json` and `results.json` already hold; it computes nothing that
is judged. Its first screen says REPORT.md's opening sentences (report/headline.py).
"""

from __future__ import annotations

import base64
import re
from pathlib import Path

from attngeom.base import environment
from attngeom.base.files import write_atomic
from attngeom.base.records import Report, Results
from attngeom.report import headline, page_spread
from attngeom.report.html_text import breakable, claim_link, esc, math_text, number_text
from attngeom.report.markdown import source_note, statistics_rows

ASSETS = Path(__file__).with_name("assets")
INDEX = "index.html"
FIGURES_DIR = "figures"
FIGURES_JSON = "figures.json"


def _verdict(report: dict) -> str:
    """The first screen, in REPORT.md's sentences (report.headline): the verdict and how each kind of claim
    fared, what a rerun leaves out, why each failure fails (linked to its row), what was skipped and why."""
    claims = report.get("claims", [])
    verdict = report.get("summary", {}).get("verdict", "FAIL")
    said = headline.headline(report)
    lines = [f'<p class="headline"><strong>{esc(verdict)}</strong>{esc(said[0].removeprefix(verdict))}</p>']
    lines += [f"<p>{esc(line)}</p>" for line in said[1:]]
    failures = headline.failure_lines(claims)
    if failures:
        lines.append(f"<p>Why {'each' if len(failures) > 1 else 'it'} fails:</p>")
        items = "".join(f"<li>{claim_link(cid)}: {math_text(why)}</li>" for cid, why in failures)
        lines.append(f'<ul class="fail-list">{items}</ul>')
    skipped = headline.skip_groups(claims)
    if skipped:
        items = "".join(f"<li>{esc(headline.skip_sentence(why, ids))}.</li>" for why, ids in skipped)
        lines.append(f'<ul class="skip-list">{items}</ul>')
    lines += [f'<small class="warning">Warning: {esc(w)}</small>' for w in report.get("warnings", [])]
    ev = report.get("evidence")
    lines.append(
        f'<small id="evidence">Evidence: {esc(ev["line"].removeprefix("evidence: "))}.</small>'
        if ev
        else f"<small>Evidence tier: {esc(report.get('tier', 'published'))}.</small>"
    )
    return f'<div class="verdict {esc(verdict)}" id="verdict">{"".join(lines)}</div>' + _preflight(
        report.get("preflight")
    )


def _preflight(preflight: dict | None) -> str:
    """The run's fidelity preflight from its manifest; anything but PASS in red."""
    if not preflight:
        return ""
    verdict = str(preflight.get("verdict", "ERROR"))
    return (
        f'<p id="preflight" class="preflight {"PASS" if verdict == "PASS" else "FAIL"}">Fidelity preflight: '
        f'<span class="badge {"PASS" if verdict == "PASS" else "FAIL"}">{esc(verdict)}</span> '
        f"({esc(preflight.get('steps', '?'))} steps on {esc(preflight.get('device', '?'))}, against the author's "
        f"training script; <code>{esc(preflight.get('file', 'fidelity.json'))}</code> in the run folder)</p>"
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
        f"Skipped: {esc(c.get('tolerance_reason'))}"
        if v == "SKIP"
        else f'Judged: <span class="num">{number_text(c.get("expected"))}</span> ({esc(c.get("tolerance_reason"))}); '
        f'measured <span class="num">{number_text(c.get("measured"))}</span>'
    )
    more = (
        (f'<p class="cause"><b>Why it fails:</b> {math_text(c["cause"])}.</p>' if c.get("cause") else "")
        + f'<blockquote>{math_text(c.get("quote"))}</blockquote><p class="source">{esc(c.get("source"))}</p>'
        + f"<p>{judged}. Computed by <code>{breakable(c.get('function', '-'))}</code>.</p>"
    )
    return (
        f'<tbody class="claim {esc(v)}"><tr class="{esc(v)}" id="claim-{esc(c.get("id"))}" data-claim="{esc(c.get("id"))}">'
        f'<td class="id"><code>{breakable(c.get("id"))}</code></td>'
        f'<td class="kind" data-label="kind">{esc(c.get("kind", "-"))}</td>{cells}'
        f'<td class="verdict"><span class="badge {esc(v)}">{esc(v)}</span></td></tr>'
        f'<tr class="more {esc(v)}"><td colspan="6"><details{" open" if v == "FAIL" else ""}>'
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
    head = "<tr><th>statistic</th>" + "".join(f"<th>{esc(m)}</th>" for m in models) + "</tr>"
    body = "".join(
        f"<tr><td>{esc(label)}</td>" + "".join(f'<td class="num">{esc(c)}</td>' for c in cells) + "</tr>"
        for label, cells in rows
    )
    return (
        '<h2 id="statistics">Statistics per model</h2><p>Every statistic of each model on the fixed window, quoted or '
        "not (all of them, per head, in <code>results.json</code>).</p>"
        f'<div class="wide"><table id="statistics-table"><thead>{head}</thead><tbody>{body}</tbody></table></div>'
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
            f'<figure id="fig-{esc(Path(e["file"]).stem)}"><h3>{esc(e["title"])}</h3>'
            f'<img alt="{esc(e["title"])}" src="data:image/gif;base64,{data}">'
            f"<figcaption>{esc(e.get('caption'))}"
            + (f'<div class="counters">{esc(counters)}</div>' if counters else "")
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
        return "<br>".join(f"{esc(k)}: {esc(v)}" for k, v in sorted(value.items()))
    return esc(value)


def _provenance(report: dict) -> str:
    p = report.get("provenance", {})
    sources = p.get("sources", {})
    inputs = "".join(
        f"<tr><td><code>{re.sub('/', '/<wbr>', esc(path))}</code></td><td>{esc(source_note(sources.get(path)).lstrip(', '))}"
        f'</td><td class="hash">{esc(sha)}</td></tr>'
        for path, sha in sorted(p.get("inputs", {}).items())
    )
    versions = ", ".join(f"{esc(k)} {esc(v)}" for k, v in sorted(p.get("versions", {}).items()))
    return f"""<h2 id="provenance">Provenance</h2>
<table id="provenance-table">
<tr><th>command</th><td><code>{esc(p.get("command"))}</code></td></tr>
<tr><th>date</th><td>{esc(p.get("date"))}</td></tr>
<tr><th>machine</th><td>{esc(p.get("machine"))}</td></tr>
<tr><th>package</th><td class="num">attngeom {esc(p.get("versions", {}).get("attngeom", "?"))}, git commit {esc(p.get("git_commit") or "not a git checkout")}</td></tr>
<tr><th>versions</th><td>{versions}</td></tr>
<tr><th>environment</th><td>{esc(environment.describe(p.get("environment")))}</td></tr>
<tr><th>bundles</th><td><code>{esc(report.get("bundles", ""))}</code></td></tr>
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
<title>attngeom: {esc(report.get("summary", {}).get("verdict"))} - the geometry of attention, verified</title>
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
{page_spread.ensemble(report)}
{page_spread.trajectories(report)}
{page_spread.robustness(results, report)}
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
