"""The report page in headless Chromium: loads from disk cleanly, lists every claim, and its live
territory map draws the same owners as the Python toy and reacts to dragging."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import REPO

from attngeom.geometry import toy
from attngeom.report import headline
from attngeom.report import page as html_report

pytestmark = pytest.mark.browser
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--window-size=1280,1600",
)


def _binaries() -> tuple[str, str]:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver):
        if os.environ.get("CI"):
            pytest.fail("chromium and chromedriver are missing: .ci/tools.sh installs them")
        pytest.skip("needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)")
    return chromium, driver


@pytest.fixture(scope="module")
def page(published_root, tmp_path_factory) -> tuple[Path, dict]:
    """The report page of a real `verify` run on the published bundles."""
    out = tmp_path_factory.mktemp("report")
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run(
        [sys.executable, "-m", "attngeom", "--bundles", str(published_root), "--out", str(out)],
        cwd=out,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stderr
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    return html_report.write_html(out, report, results, []), report


@pytest.fixture(scope="module")
def browser(page):
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    chromium, driver_path = _binaries()
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in FLAGS:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    driver.get(page[0].resolve().as_uri())
    yield driver
    driver.quit()


def _errors(driver) -> list[dict]:
    return [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]


def _panel(driver) -> dict:
    return driver.execute_script(
        "const c = document.querySelector('canvas[data-law=kernel]');"
        "const d = document.querySelector('canvas[data-law=dot]');"
        "return {kernel: c.toDataURL(), dot: d.toDataURL(), shares: window.attngeomTerritory.state.shares,"
        " text: Array.from(document.querySelectorAll('[data-share]')).map((e) => e.textContent),"
        " bodies: window.attngeomTerritory.state.bodies};"
    )


def test_loads_without_console_errors(browser):
    assert browser.title.startswith("attngeom: PASS") or browser.title.startswith("attngeom: FAIL")
    assert browser.execute_script("return document.readyState") == "complete"
    assert browser.execute_script("return window.attngeomTerritory.state.redraws") >= 1
    assert _errors(browser) == []


def test_table_holds_every_claim(browser, page):
    from selenium.webdriver.common.by import By

    claims = json.loads((REPO / "expected" / "claims.json").read_text(encoding="utf-8"))["claims"]
    rows = browser.find_elements(By.CSS_SELECTOR, "#claims tr[data-claim]")
    assert [row.get_attribute("data-claim") for row in rows] == [c["id"] for c in claims]
    s = page[1]["summary"]
    assert headline.verdict_sentence(page[1]) in browser.find_element(By.ID, "verdict").text
    failing = [row for row in rows if row.get_attribute("class") == "FAIL"]
    assert len(failing) == s["failed"]
    passing = [row for row in rows if row.get_attribute("class") == "PASS"]
    red = "rgba(253, 232, 232, 1)"
    assert all(r.find_element(By.TAG_NAME, "td").value_of_css_property("background-color") == red for r in failing)
    assert all(r.find_element(By.TAG_NAME, "td").value_of_css_property("background-color") != red for r in passing)


def test_sliders_redraw_only_the_kernel_map(browser):
    before = _panel(browser)
    browser.execute_script(
        "const s = document.querySelector('input[name=eps]'); s.value = '1.5';"
        "s.dispatchEvent(new Event('input', {bubbles: true}));"
    )
    browser.execute_script("return new Promise((done) => requestAnimationFrame(() => done()));")
    after = _panel(browser)
    assert browser.execute_script("return window.attngeomTerritory.state.eps") == 1.5
    assert after["kernel"] != before["kernel"]
    assert after["dot"] == before["dot"]
    browser.execute_script("document.querySelector('button[data-action=reset]').click();")
    assert _panel(browser)["kernel"] == before["kernel"]


@pytest.mark.parametrize(
    ("law", "b", "eps", "moved"),
    [
        ("dot", toy.B, toy.EPS, False),
        ("kernel", toy.B, toy.EPS, False),
        ("kernel", 1.7, 0.05, True),
        ("dot", 0, 1, True),
    ],
)
def test_js_owner_maps_equal_python(browser, law, b, eps, moved):
    n, radius = 121, 2.0
    bodies = toy.orbit_bodies(56)[17] if moved else toy.BODIES
    js = np.array(
        browser.execute_script(
            "return Array.from(window.attngeomTerritory.ownerGrid(arguments[0], arguments[1], arguments[2], arguments[3],"
            " arguments[4], arguments[5]));",
            radius,
            n,
            bodies.tolist(),
            law,
            b,
            eps,
        )
    )
    grid = toy.view_grid(radius, n)
    py = toy.owners(grid, bodies, law, b, eps)
    differ = np.flatnonzero(js != py)
    # Float64 in both; a pixel may only differ where two bodies tie to round-off.
    score = grid @ bodies.T if law == "dot" else toy.laws.kernel_points(grid, bodies, b, eps)
    gap = np.abs(score[differ, js[differ]] - score[differ, py[differ]]) / np.abs(score[differ]).max(-1)
    assert differ.size <= 2 and (gap < 1e-12).all()
    assert np.unique(py).size > 1


def test_drag_changes_maps_and_shares(browser, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    canvas = browser.find_element(By.CSS_SELECTOR, "canvas[data-law=kernel]")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", canvas)
    before = _panel(browser)
    px, py = browser.execute_script(
        "return window.attngeomTerritory.toPixel(window.attngeomTerritory.state.bodies[3], arguments[0].width);", canvas
    )
    scale = canvas.size["width"] / 300
    cx, cy = canvas.size["width"] / 2, canvas.size["height"] / 2
    start = (round(px * scale - cx), round(py * scale - cy))
    ActionChains(browser).move_to_element_with_offset(canvas, *start).click_and_hold().move_by_offset(
        -60, -40
    ).move_by_offset(-60, -40).release().perform()
    browser.execute_script("return new Promise((done) => requestAnimationFrame(() => done()));")
    after = _panel(browser)
    assert after["bodies"][3] != before["bodies"][3] and after["bodies"][0] == before["bodies"][0]
    assert after["kernel"] != before["kernel"] and after["dot"] != before["dot"]
    assert after["text"] != before["text"]
    assert after["shares"]["kernel"][3] != pytest.approx(before["shares"]["kernel"][3])
    assert sum(after["shares"]["dot"]) == pytest.approx(1.0)
    assert _errors(browser) == []
    shots = [tmp_path / "report_top.png", tmp_path / "territory_panel.png"]
    browser.find_element(By.ID, "territory").screenshot(str(shots[1]))
    browser.execute_script("window.scrollTo(0, 0);")
    browser.save_screenshot(str(shots[0]))
    assert all(s.stat().st_size > 5000 for s in shots)
    _keep(shots)


def _keep(shots: list[Path]) -> None:
    """Copy screenshots into $ATTNGEOM_ARTIFACTS where it is set (the test's own tmp_path keeps them anyway)."""
    if os.environ.get("ATTNGEOM_ARTIFACTS"):
        dest = Path(os.environ["ATTNGEOM_ARTIFACTS"])
        dest.mkdir(parents=True, exist_ok=True)
        for s in shots:
            shutil.copy(s, dest / s.name)


def test_statistics_table_and_readable_math(browser, page):
    from selenium.webdriver.common.by import By

    table = browser.find_element(By.ID, "statistics-table")
    heads = [th.text for th in table.find_elements(By.CSS_SELECTOR, "thead th")]
    assert heads == ["statistic", "softmax", "yat_b", "goat_v"]
    labels = [row.find_element(By.TAG_NAME, "td").text for row in table.find_elements(By.CSS_SELECTOR, "tbody tr")]
    loss = next(i for i, label in enumerate(labels) if label.startswith("best validation loss"))
    cells = table.find_elements(By.CSS_SELECTOR, "tbody tr")[loss].find_elements(By.TAG_NAME, "td")
    assert cells[1].text.startswith("1.4838") and cells[2].text.startswith("1.5169")
    quote = browser.find_element(By.CSS_SELECTOR, "tr[data-claim='toy.far.reaches_100'] + tr.more blockquote").text
    assert "the 1/t correction sets" in quote and "$" not in quote  # a failing claim's details are open
    formula = browser.find_element(By.CSS_SELECTOR, "tr[data-claim='toy.far.correction'] + tr.more blockquote")
    assert not formula.is_displayed()  # a passing claim's details are closed until asked for
    browser.execute_script("arguments[0].closest('details').open = true;", formula)
    try:
        assert "\\" not in formula.text and "·" in formula.text
        assert formula.find_element(By.TAG_NAME, "sup").text == "2"
    finally:
        browser.execute_script("arguments[0].closest('details').open = false;", formula)


@pytest.mark.parametrize("width", [900, 1280])
def test_controls_and_panel_are_not_clipped(browser, width):
    from selenium.webdriver.common.by import By

    browser.set_window_size(width, 1600)
    try:
        for control in browser.find_elements(By.CSS_SELECTOR, "#territory button, #territory label, #territory table"):
            fits = browser.execute_script(
                "const e = arguments[0], r = e.getBoundingClientRect(), p = e.closest('#territory');"
                "const box = p.getBoundingClientRect(), scroller = e.closest('.maps > div');"
                "const inside = r.right <= box.right + 0.5 || (scroller && scroller.scrollWidth > scroller.clientWidth);"
                "return e.scrollWidth <= e.clientWidth + 1 && inside && r.width > 0 && r.left >= box.left - 0.5;",
                control,
            )
            assert fits, (width, control.text[:40])
        assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
    finally:
        browser.set_window_size(1280, 1600)


def test_a_stopped_run_is_drawn_beside_its_ensemble(browser, page, tmp_path):
    """The page of a run stopped early whose bands come from an ensemble: one strip per statistic, with
    a dot per member, the published bar and the run's ring, inside the page's width."""
    from selenium.webdriver.common.by import By

    report = json.loads(json.dumps(page[1]))
    ensemble = {"source": "expected/measured/e.json", "members": [47.4, 49.1, 50.2, 52.6], "mean": 49.8, "std": 2.2}
    report["claims"].append(
        {
            **report["claims"][0],
            "id": "step1200.yat_b.occupancy",
            "claim": "yat_b: distinct winners of 128 at step 1200",
            "measured": "47.42",
            "measured_value": 47.42,
            "verdict": "PASS",
            "ensemble": ensemble | {"min": 47.4, "max": 52.6, "published": 51.0417},
        }
    )
    results = json.loads((page[0].parent / "results.json").read_text(encoding="utf-8"))
    path = html_report.write_html(tmp_path, report, results, [])
    try:
        browser.get(path.resolve().as_uri())
        figure = browser.find_element(
            By.CSS_SELECTOR, "#ensemble ~ div figure.ensemble[data-claim='step1200.yat_b.occupancy']"
        )
        assert len(figure.find_elements(By.CSS_SELECTOR, "svg circle")) == 5  # four members and the run
        assert figure.find_element(By.CSS_SELECTOR, "svg line[stroke='#c62828']").is_displayed()
        assert "4 members 47.4 to 52.6" in figure.text
        assert browser.execute_script(
            "const r = arguments[0].getBoundingClientRect(); return r.width > 100 && r.right <= window.innerWidth",
            figure,
        )
        assert _errors(browser) == []
    finally:
        browser.get(page[0].resolve().as_uri())


def test_every_trajectory_statistic_is_shown_beside_the_measured_trajectories(browser, page):
    """The published page's section beside every measured trajectory: a row per statistic claim, a strip
    with a dot per trajectory wherever one is measured at the claim's step, none said so, and each
    comparison on the pairings of the trajectories."""
    from selenium.webdriver.common.by import By

    section = page[1]["trajectories"]["claims"]
    statistics = {cid: one for cid, one in section.items() if one["kind"] == "statistic"}
    rows = browser.find_elements(By.CSS_SELECTOR, "#trajectory-table tbody tr")
    assert [r.get_attribute("data-claim") for r in rows] == list(statistics)
    for row in rows:
        one = statistics[row.get_attribute("data-claim")]
        cells = [td.text for td in row.find_elements(By.TAG_NAME, "td")]
        n = len(one["values"])
        assert cells[4].startswith("none: " if "spread" not in one else "one, " if n == 1 else f"{n}, "), cells
    measured = [cid for cid, one in statistics.items() if "spread" in one]
    assert measured and len(measured) < len(statistics)  # the quality gap is no statistic of the maps
    assert (
        "none: not a statistic of a model's maps"
        in browser.find_element(By.CSS_SELECTOR, "#trajectory-table tr[data-claim='quality.within_percent']").text
    )
    for cid in measured:
        figure = browser.find_element(By.CSS_SELECTOR, f"#trajectories ~ div figure.trajectory[data-claim='{cid}']")
        dots = figure.find_elements(By.CSS_SELECTOR, "svg circle.value")
        assert len(dots) == len(statistics[cid]["values"]) and figure.find_element(By.CSS_SELECTOR, "svg line.quote")
        assert browser.execute_script(
            "const r = arguments[0].getBoundingClientRect(); return r.width > 100 && r.right <= window.innerWidth",
            figure,
        )
    inversion = browser.find_element(By.CSS_SELECTOR, "#trajectory-comparisons li[data-claim='inversion']").text
    at1200 = next(r for r in section["inversion"]["steps"] if r["step"] == 1200)
    assert at1200["held"] == at1200["pairings"] > 0, "the sharper-rowed softmax crowns more winners on every pairing"
    assert f"At step 1,200: holds on all {at1200['pairings']} pairings" in inversion


_OVERFLOWING_CELLS = """
return Array.from(document.querySelectorAll('#claims td')).filter((td) => td.getClientRects().length
  && td.scrollWidth > td.clientWidth + 1).map((td) => td.closest('tbody').querySelector('tr').dataset.claim
  + ': ' + td.className + ' ' + td.scrollWidth + ' > ' + td.clientWidth);"""

_STRIPS = """
const inside = (e, vb) => { const b = e.getBBox(); return b.x >= vb.x - 0.5 && b.y >= vb.y - 0.5
  && b.x + b.width <= vb.x + vb.width + 0.5 && b.y + b.height <= vb.y + vb.height + 0.5; };
return Array.from(document.querySelectorAll('figure.trajectory')).map((f) => {
  const svg = f.querySelector('svg'), vb = svg.viewBox.baseVal, box = (e) => ({x: +e.getAttribute('x'),
    width: +e.getAttribute('width')});
  const marks = Array.from(svg.querySelectorAll('rect.band, rect.tolerance, circle.value, circle.judged, line.quote'));
  return {claim: f.dataset.claim, inside: marks.every((e) => inside(e, vb)), right: f.getBoundingClientRect().right,
    band: Array.from(svg.querySelectorAll('rect.band')).map(box),
    tolerance: Array.from(svg.querySelectorAll('rect.tolerance')).map(box),
    dots: Array.from(svg.querySelectorAll('circle.value')).map((c) => +c.getAttribute('cx')),
    legend: (f.querySelector('.legend') || {}).textContent};
});"""


@pytest.mark.parametrize("width", [400, 1400])
def test_the_page_reads_on_a_phone_and_a_desktop(browser, page, width, tmp_path):
    """At 400 and 1400 px: the page never scrolls sideways, no claims-table cell overflows (every detail
    open), PASS badges stay on one line, and each trajectory strip holds its tolerance, its rerun band and
    every trajectory inside its drawing, with its legend on it; the screenshots are kept."""
    from selenium.webdriver.common.by import By

    browser.set_window_size(width, 1200)
    try:
        assert browser.execute_script("return window.innerWidth") == width
        browser.execute_script("window.scrollTo(0, 0);")
        top = tmp_path / f"page_{width}.png"
        browser.save_screenshot(str(top))
        assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
        heights = browser.execute_script(
            "return Array.from(document.querySelectorAll('#claims .badge.PASS')).map((b) =>"
            " [b.getBoundingClientRect().height, parseFloat(getComputedStyle(b).fontSize)]);"
        )
        assert heights and all(h < 1.9 * size for h, size in heights), "a PASS badge wraps"
        section = page[1]["trajectories"]["claims"]
        drawn = browser.execute_script(_STRIPS)
        assert [d["claim"] for d in drawn] == [c for c, one in section.items() if "spread" in one]
        for d in drawn:
            one = section[d["claim"]]
            assert d["inside"] and d["right"] <= width, d
            assert len(d["band"]) == (one.get("rerun_band") is not None) and len(d["tolerance"]) == 1, d
            assert "quoted" in d["legend"] and "the quote's tolerance" in d["legend"]
            lo, hi = one["quote_interval"]
            (t,) = d["tolerance"]
            for value, x in zip((v["value"] for v in one["values"]), d["dots"]):
                if (lo is None or lo <= value) and (hi is None or value <= hi):  # inside the tolerance: drawn inside
                    assert t["x"] - 0.5 <= x <= t["x"] + t["width"] + 0.5, (d["claim"], value)
        strip = tmp_path / f"strips_{width}.png"
        browser.find_element(By.CSS_SELECTOR, "#trajectories ~ div.strips").screenshot(str(strip))
        browser.execute_script("document.querySelectorAll('#claims details').forEach((d) => { d.open = true; });")
        assert browser.execute_script(_OVERFLOWING_CELLS) == []
        assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
        assert all(s.stat().st_size > 5000 for s in (top, strip))
        _keep([top, strip])
    finally:
        browser.execute_script(
            "document.querySelectorAll('#claims details').forEach((d) => { d.open = d.closest('tbody.FAIL') !== null; });"
        )
        browser.set_window_size(1280, 1600)
